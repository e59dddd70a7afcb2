import { ID_PATTERN } from '../shared/schemas.js';
import { documentEventStream } from '../modules/streams/streams.openapi.js';
import { IDEMPOTENT_MARK, RESPONSE_HEADERS, routeTraits } from './route-docs.js';

/**
 * Post-processing of the document @fastify/swagger generates from the route schemas, to make it a contract a
 * client generator can use (CONTRACT §5). The route schemas stay inline (the TypeBox type provider does not
 * infer through `$ref`), so the document's shape is fixed here instead, where only the document sees it:
 *
 * - every schema carrying a `title` (User, Post, Problem, Link, the board envelopes…) becomes a named component
 *   under `components.schemas`, each occurrence a `$ref`, so a generated client has types to import;
 * - path ids are integers: validation takes them as strings (`007`, `-3` and `1.5` are 400, and 64-bit values do
 *   not fit a JS number), but a client passes the number it read from a body's `id`;
 * - response headers are `$ref`s to `components.headers`, request validators and idempotency keys are header
 *   parameters, and operations that need no token say `security: []`, those where one is optional included;
 * - no OPTIONS operations: a CORS preflight is protocol-level (CONTRACT §1), like HEAD, and a generated client or
 *   a fuzzer would call it as an API operation. The preflight and the 405 with Allow of a method a path does not
 *   take are described once, in the document's description (plugins/openapi.ts).
 *
 * Runtime validation and serialization are untouched: the route schemas are not changed here.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;

/** Visible ASCII entity-tags (RFC 9110 §8.8.3), a comma-separated list of them, or `*`. */
const ENTITY_TAGS = String.raw`^(?:\*|(?:W/)?"[\x21\x23-\x7E]*"(?:[ \t]*,[ \t]*(?:W/)?"[\x21\x23-\x7E]*")*)$`;
/**
 * A structured-field string (`\"` and `\\` escaped) or a bare value not opening with a quote, 1–255 visible ASCII
 * characters (CONTRACT §6.2; plugins/idempotency/key.ts).
 */
const IDEMPOTENCY_KEY = String.raw`^(?:"(?:[\x21\x23-\x5B\x5D-\x7E]|\\["\\]){1,255}"|[\x21\x23-\x7E][\x21-\x7E]{0,254})$`;

const PARAMETERS: Record<string, JsonObject> = {
  IfNoneMatch: {
    name: 'If-None-Match',
    in: 'header',
    required: false,
    description: 'ETags of representations the client holds: when one matches, the answer is 304 without a body',
    schema: { type: 'string', pattern: ENTITY_TAGS, examples: ['"2c-x0aBc"'] },
  },
  IfMatch: {
    name: 'If-Match',
    in: 'header',
    required: false,
    description: 'Change only if the resource still has one of these ETags (`*`: if it exists); else 412 and nothing changes',
    schema: { type: 'string', pattern: ENTITY_TAGS, examples: ['"2c-x0aBc"'] },
  },
  IfNoneMatchWrite: {
    name: 'If-None-Match',
    in: 'header',
    required: false,
    description: 'Change only if the resource has none of these ETags (weak comparison; `*`: only if it does not exist); else 412 and nothing changes',
    schema: { type: 'string', pattern: ENTITY_TAGS, examples: ['"2c-x0aBc"'] },
  },
  IdempotencyKey: {
    name: 'Idempotency-Key',
    in: 'header',
    required: false,
    description:
      'Makes the create safe to retry: a repeat with the same key and body, by the same caller to the same path ' +
      'within IDEMPOTENCY_TTL_SECONDS, gets the kept answer again (with Idempotent-Replayed: true); the same key ' +
      'with another body is 422, and 409 while its first request still runs',
    schema: { type: 'string', pattern: IDEMPOTENCY_KEY, examples: ['"4f8c2a7e-signup"'] },
  },
};

/** Keywords whose values are data, not schemas: a `title` inside them names nothing. */
const DATA_KEYWORDS = new Set(['examples', 'example', 'default', 'const', 'enum']);

const isObject = (value: unknown): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value);

/** JSON with sorted keys, to tell whether two schemas of one title are the same schema. */
function canonical(value: Json): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (isObject(value)) {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical(value[key]!)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Replaces, bottom-up, every schema with a `title` by a `$ref` to `schemas[title]`. */
function hoist(value: Json, schemas: Map<string, JsonObject>): Json {
  if (Array.isArray(value)) return value.map((item) => hoist(item, schemas));
  if (!isObject(value)) return value;
  const out: JsonObject = {};
  for (const [key, child] of Object.entries(value)) out[key] = DATA_KEYWORDS.has(key) ? child : hoist(child, schemas);
  if (typeof out.title !== 'string' || !('type' in out || 'properties' in out || 'anyOf' in out || 'oneOf' in out)) return out;
  const { description, ...schema } = out;
  const name = out.title;
  const known = schemas.get(name);
  if (known === undefined) schemas.set(name, schema);
  else if (canonical(known) !== canonical(schema)) {
    throw new Error(`OpenAPI: two different schemas are titled ${name}; give one another title`);
  }
  return description === undefined ? { $ref: `#/components/schemas/${name}` } : { $ref: `#/components/schemas/${name}`, description };
}

function integerIds(parameters: Json | undefined): void {
  if (!Array.isArray(parameters)) return;
  for (const parameter of parameters) {
    if (!isObject(parameter) || parameter.in !== 'path' || !isObject(parameter.schema)) continue;
    if (parameter.schema.pattern !== ID_PATTERN) continue;
    const { description } = parameter.schema;
    // @fastify/swagger copies the schema's first example up as the parameter's `example`: the string "1".
    delete parameter.example;
    parameter.schema = {
      type: 'integer',
      format: 'int64',
      minimum: 0,
      ...(description === undefined ? {} : { description }),
      examples: [1],
    };
  }
}

const OPTIONAL_TOKEN =
  'No token is needed. A bearer token may be sent: the answer is then what that user may see (their own and ' +
  'followers-only posts, counters that include them), and a token that is invalid, expired or revoked is a 401.';

function operation(op: JsonObject, method: string, path: string): void {
  const traits = routeTraits(method, path, { security: op.security, idempotent: op[IDEMPOTENT_MARK] });
  delete op[IDEMPOTENT_MARK];
  // No requirement at all means "no token needed"; saying so lets a client generator and a linter know.
  op.security ??= [];
  // Public operations say `security: []` (CONTRACT §5), also the reads where a token is optional (the route's own
  // `[{}, bearer]`, which the auth plugin enforces). That the token changes what the caller sees, and is checked
  // when sent, is said in words; the 401 it can bring is among the responses.
  // (/metrics names its own optional scheme, METRICS_TOKEN, and keeps its requirements as they are.)
  if (Array.isArray(op.security) && traits.bearer && op.security.some((r) => isObject(r) && Object.keys(r).length === 0)) {
    op.security = [];
    op.description = [op.description, OPTIONAL_TOKEN].filter((text) => typeof text === 'string' && text !== '').join('\n\n');
  }
  integerIds(op.parameters);

  const headerParameters = [
    ...(traits.conditionalGet ? ['IfNoneMatch'] : []),
    ...(traits.conditionalWrite ? ['IfMatch', 'IfNoneMatchWrite'] : []),
    ...(traits.idempotentCreate ? ['IdempotencyKey'] : []),
  ];
  if (headerParameters.length > 0) {
    const parameters = Array.isArray(op.parameters) ? op.parameters : [];
    op.parameters = [...parameters, ...headerParameters.map((name) => ({ $ref: `#/components/parameters/${name}` }))];
  }

  for (const response of Object.values(isObject(op.responses) ? op.responses : {})) {
    if (!isObject(response)) continue;
    if (isObject(response.headers)) {
      const headers: JsonObject = {};
      for (const [name, header] of Object.entries(response.headers)) {
        headers[name] = name in RESPONSE_HEADERS ? { $ref: `#/components/headers/${name}` } : header;
      }
      response.headers = headers;
    }
    // @fastify/swagger repeats the response's description on its schema; the schema is then a named component.
    for (const media of Object.values(isObject(response.content) ? response.content : {})) {
      if (isObject(media) && isObject(media.schema) && media.schema.description === response.description) {
        delete media.schema.description;
      }
    }
  }
}

export function transformDocument(generated: unknown): Record<string, unknown> {
  const document = JSON.parse(JSON.stringify(generated)) as JsonObject;
  const paths = isObject(document.paths) ? document.paths : {};
  for (const [path, item] of Object.entries(paths)) {
    if (!isObject(item)) continue;
    for (const method of METHODS) {
      const op = item[method];
      if (isObject(op)) operation(op, method, path);
      if (isObject(op)) documentEventStream(op);
    }
  }

  const schemas = new Map<string, JsonObject>();
  document.paths = hoist(paths, schemas);
  const components = isObject(document.components) ? document.components : {};
  const existing = isObject(components.schemas) ? components.schemas : {};
  const sorted = (entries: Array<[string, Json]>) => Object.fromEntries(entries.sort(([a], [b]) => (a < b ? -1 : 1)));
  components.schemas = sorted([...Object.entries(existing), ...schemas.entries()]);
  components.headers = sorted(
    Object.entries(RESPONSE_HEADERS).map(([name, { description, ...schema }]) => [name, { description, schema: { ...schema } as JsonObject }]),
  );
  components.parameters = PARAMETERS;
  document.components = components;
  return document;
}
