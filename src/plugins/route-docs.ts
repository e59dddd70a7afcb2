import fp from 'fastify-plugin';
import type { RouteOptions } from 'fastify';
import { EnvelopeErrorSchema, ProblemSchema } from '../shared/schemas.js';
import { BODY_METHODS, isBoardRequest } from './error-handler.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * A PUT or DELETE that checks If-Match and If-None-Match against the resource's current entity-tag inside its
     * write transaction (shared/conditional.ts `ifMatch`): the document lists both headers and the 412.
     */
    preconditions?: true;
    /** `false` on a route that never touches the database (/metrics, /openapi.json): it cannot answer 503. */
    database?: false;
  }
}

/**
 * What the OpenAPI document says about each operation beyond its own route schema: the error statuses every route
 * of a kind can answer, and the response headers each answer carries. Routes declare what is particular to them
 * (their success bodies, their 404 and 409); the rest is added here, in one place, so that no route forgets 503
 * or `X-Request-Id`. Error statuses are added to the route's response schema, which also serializes the error
 * body (problem details, or the envelope under /boards); headers are documentation only, turned into header
 * objects by @fastify/swagger and into `$ref`s to `components.headers` by the document transform (openapi.ts).
 */

/** The kinds of operations the contract treats alike (CONTRACT §5, §6). */
export interface RouteTraits {
  board: boolean;
  /** Uses the database, so may answer 503 with Retry-After. */
  database: boolean;
  rateLimited: boolean;
  /**
   * A GET: every answer says Cache-Control, and every 200 has an ETag and is a 304 when If-None-Match matches it
   * (CONTRACT §6.1; shared/conditional.ts), the operational routes' included.
   */
  conditionalGet: boolean;
  /** A PUT or DELETE declared with `config: { preconditions: true }`: If-Match and 412. */
  conditionalWrite: boolean;
  /**
   * A POST that creates, declared by the route's `config: { idempotent: true }` (plugins/idempotency):
   * Idempotency-Key, Idempotent-Replayed, 409 and 422 (CONTRACT §6.2).
   */
  idempotentCreate: boolean;
  /** A request that may carry a body: 413 and 415. */
  body: boolean;
  bearer: boolean;
}

/** Paths in OpenAPI form (`{id}`); Fastify's `:id` is converted first. */

/** What a route's own options (`config`, `schema.security`) and its method say about it; see FastifyContextConfig above. */
export function routeTraits(
  method: string,
  url: string,
  options: { security?: unknown; config?: { rateLimit?: unknown; preconditions?: true; database?: false; idempotent?: boolean } },
): RouteTraits {
  const m = method.toUpperCase();
  const security = Array.isArray(options.security) ? (options.security as Array<Record<string, unknown>>) : [];
  return {
    board: isBoardRequest(url),
    database: options.config?.database !== false,
    rateLimited: options.config?.rateLimit !== false,
    conditionalGet: m === 'GET',
    conditionalWrite: (m === 'PUT' || m === 'DELETE') && options.config?.preconditions === true,
    idempotentCreate: m === 'POST' && options.config?.idempotent === true,
    body: m === 'POST' || m === 'PUT' || m === 'DELETE',
    bearer: security.some((requirement) => 'bearerAuth' in requirement),
  };
}

/**
 * Response header schemas by their canonical name; openapi.ts turns each into a `components.headers` entry. The
 * headers every answer may carry (Vary, the CORS pair) are declared on every response below. The CORS preflight's
 * headers and the 405's Allow belong to no operation (the document has no OPTIONS operations, see
 * openapi-transform.ts); the document's description names them.
 */
export const RESPONSE_HEADERS = {
  'X-Request-Id': {
    type: 'string',
    description: 'The request id: a sane incoming X-Request-Id echoed, else one generated. Also in the log line.',
  },
  'X-Content-Type-Options': {
    type: 'string',
    enum: ['nosniff'],
    description: 'On every answer: a browser takes the body as its Content-Type says, never as a type it guessed',
  },
  Location: { type: 'string', format: 'uri', description: 'Absolute URL of the created resource' },
  Link: { type: 'string', description: 'RFC 8288 `<url>; rel="next"` while more items follow' },
  ETag: { type: 'string', description: 'Strong entity-tag of this representation; send it in If-None-Match or If-Match' },
  'Cache-Control': {
    type: 'string',
    description:
      'On every answer to a GET, errors included: `no-cache`, with `private` when the request carried a token; ' +
      '`no-store` on a live event stream',
  },
  Vary: {
    type: 'string',
    description:
      'The request headers this answer depends on, for caches, e.g. `Origin, Authorization, accept-encoding`: ' +
      'names among `Origin`, `Authorization`, `Accept`, `Accept-Encoding` and `Access-Control-Request-Headers`',
  },
  'Access-Control-Allow-Origin': {
    type: 'string',
    description: "CORS: the request's Origin, echoed when the request had one (any origin may call the API)",
  },
  'Access-Control-Expose-Headers': {
    type: 'string',
    description: 'CORS, when the request had an Origin: the response headers a browser script may read (Location, Link, ETag, RateLimit, …)',
  },
  'X-Accel-Buffering': {
    type: 'string',
    enum: ['no'],
    description: 'On a live event stream: tells a buffering reverse proxy (nginx) to pass each event on at once',
  },
  'Retry-After': { type: 'integer', minimum: 0, description: 'Seconds to wait before trying again' },
  'Accept-Encoding': {
    type: 'string',
    enum: ['identity'],
    description: 'On a 415 for a request body sent with a Content-Encoding: bodies are taken uncompressed only',
  },
  'WWW-Authenticate': { type: 'string', description: 'The Bearer challenge (RFC 6750), with the error when a token was sent' },
  'Idempotent-Replayed': {
    type: 'string',
    enum: ['true'],
    description: 'Present when this is the kept answer to an earlier request with the same Idempotency-Key',
  },
  RateLimit: {
    type: 'string',
    description: 'Remaining quota of the policy and seconds until it resets (draft-ietf-httpapi-ratelimit-headers), e.g. `"default";r=599;t=60`',
  },
  'RateLimit-Policy': {
    type: 'string',
    description: 'The quota policy of this route (draft-ietf-httpapi-ratelimit-headers), e.g. `"default";q=600;w=60`',
  },
} as const;
export type ResponseHeader = keyof typeof RESPONSE_HEADERS;

type ResponseEntry = Record<string, unknown> & { headers?: Record<string, unknown> };

/** A route's own `headers` (a TypeBox object or a plain map), as a map from canonical header names to schemas. */
function headerMap(headers: unknown): Record<string, unknown> {
  if (!headers || typeof headers !== 'object') return {};
  const h = headers as Record<string, unknown>;
  const entries =
    h.type === 'object' && h.properties && typeof h.properties === 'object'
      ? (h.properties as Record<string, unknown>)
      : h;
  const canonical = new Map(Object.keys(RESPONSE_HEADERS).map((name) => [name.toLowerCase(), name]));
  return Object.fromEntries(Object.entries(entries).map(([name, schema]) => [canonical.get(name.toLowerCase()) ?? name, schema]));
}

function documentRoute(route: RouteOptions): void {
  const schema = route.schema;
  if (!schema || schema.hide) return;
  const config = route.config ?? {};
  // The response map may be shared between routes (a spread listSchema), so it is copied, entries too, not mutated.
  const response: Record<string, ResponseEntry> = { ...((schema.response ?? {}) as Record<string, ResponseEntry>) };
  for (const method of [route.method].flat()) {
    const t = routeTraits(method, route.url, { security: schema.security, config });
    const add = (status: number, description: string) => {
      if (response[status] !== undefined) return;
      response[status] = t.board
        ? { description, ...EnvelopeErrorSchema }
        : { description, content: { 'application/problem+json': { schema: ProblemSchema } } };
    };
    if (schema.body || schema.params || schema.querystring || t.conditionalGet || t.conditionalWrite || t.idempotentCreate) {
      add(400, 'Malformed request (a field, or a header such as If-Match or Idempotency-Key): named in `errors`');
    }
    // Every route answers an Authorization header that is no bearer credential (another scheme) 401 (auth.ts).
    add(
      401,
      t.bearer
        ? 'The bearer token is missing, invalid, expired or revoked, or the Authorization header is not `Bearer <token>` (see WWW-Authenticate)'
        : 'The Authorization header is not a bearer credential (`Bearer <token>`); without one no token is needed (see WWW-Authenticate)',
    );
    if (t.idempotentCreate) {
      const running = 'a request with this Idempotency-Key is still running (retry after Retry-After)';
      const own = response[409];
      // The route's own 409 (a taken username, a follow twice) keeps its words; the idempotency case is added.
      if (own !== undefined && typeof own.description === 'string' && !own.description.includes(running)) {
        response[409] = { ...own, description: `${own.description}; or ${running}` };
      }
      add(409, running.charAt(0).toUpperCase() + running.slice(1));
      add(422, 'This Idempotency-Key was used with a different body');
    }
    if (t.conditionalWrite) add(412, 'If-Match names no current entity-tag of the resource, or If-None-Match names it: nothing changed');
    // Any request that sends a body may stall while sending it (CONTRACT §5); errors/framework.ts answers it.
    if (BODY_METHODS.has(method.toUpperCase())) {
      add(408, 'The request body did not fully arrive within REQUEST_TIMEOUT_MS; the connection is closed');
    }
    if (t.body) {
      add(413, 'Request body too large');
      add(415, 'Request body is not JSON in UTF-8 (Content-Type: application/json), or is sent with a Content-Encoding');
    }
    if (t.rateLimited) add(429, 'Too many requests; see Retry-After');
    add(500, 'Unexpected failure; the body carries a request id that is also in the log');
    if (t.database) add(503, 'The database is unavailable or too slow; retry after Retry-After');
    if (t.conditionalGet && response[304] === undefined) {
      response[304] = { description: 'Not modified: If-None-Match matched the current ETag; no body', type: 'null' };
    }

    for (const [status, entry] of Object.entries(response)) {
      const code = Number(status);
      const headers: Record<string, unknown> = { ...headerMap(entry.headers) };
      const declare = (name: ResponseHeader) => (headers[name] ??= RESPONSE_HEADERS[name]);
      declare('X-Request-Id');
      declare('X-Content-Type-Options');
      declare('Vary');
      declare('Access-Control-Allow-Origin');
      declare('Access-Control-Expose-Headers');
      if (t.conditionalGet) declare('Cache-Control');
      if (t.rateLimited) {
        declare('RateLimit');
        declare('RateLimit-Policy');
      }
      if (code === 429 || code === 503 || (code === 409 && t.idempotentCreate)) declare('Retry-After');
      if (code === 401) declare('WWW-Authenticate');
      if (code === 415) declare('Accept-Encoding');
      if (code === 201) declare('Location');
      if (code === 201 && t.idempotentCreate) {
        declare('ETag');
        declare('Idempotent-Replayed');
      }
      // The handler's own 4xx answers are kept and replayed too (plugins/idempotency); 401 and 429 never are, and
      // 413, 415 and 422 are answered before the create runs.
      if (t.idempotentCreate && code >= 400 && code < 500 && ![401, 413, 415, 422, 429].includes(code)) declare('Idempotent-Replayed');
      if (t.conditionalGet && (code === 200 || code === 304)) declare('ETag');
      // A 304 of a collection page carries the page's `next` link too, as its 200 would (the headers a cache
      // refreshes its stored copy with).
      if (code === 304 && 'Link' in headerMap(response[200]?.headers)) declare('Link');
      if (t.conditionalWrite && method.toUpperCase() === 'PUT' && code === 200) declare('ETag');
      response[status] = { ...entry, headers };
    }
    // The request headers the route reads, for the document transform to list as parameters (openapi-transform.ts).
    const parameters = [
      ...(t.conditionalGet ? ['IfNoneMatch'] : []),
      ...(t.conditionalWrite ? ['IfMatch', 'IfNoneMatchWrite'] : []),
      ...(t.idempotentCreate ? ['IdempotencyKey'] : []),
    ];
    if (parameters.length > 0) Object.assign(schema, { [HEADER_PARAMETERS]: parameters });
  }
  schema.response = response;
}

/** An extension key @fastify/swagger copies from a route schema onto its operation; the transform removes it. */
export const HEADER_PARAMETERS = 'x-header-parameters';

export default fp(
  async (app) => {
    app.addHook('onRoute', documentRoute);
  },
  { name: 'route-docs' },
);
