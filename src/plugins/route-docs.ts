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
 * What each operation answers. A route lists every status it can answer in its own `schema.response`, built with
 * `responses()` below: its success bodies and its particular errors (a 404, a 409) by hand, and the error statuses
 * that every route of its kind can answer (CONTRACT §5, §6: 400, 401, 408, 412, 413, 415, 422, 429, 500, 503, and a
 * GET's 304) spread in by the helper, so reading a route tells everything it answers. The response schema also
 * serializes the error body (problem details, or the envelope under /boards).
 *
 * The helper learns the route's kind from a small object in the call (`responses({ method: 'POST', bearer: true,
 * idempotent: true }, {...})`), not from a wrapper around the route: the route's options stay as Fastify takes them,
 * and the call sits where the statuses are read. That repeats what the method, `schema.security` and `config`
 * already say, so the onRoute hook below checks, as each route is declared, that the kind given to `responses()` is
 * the route's own: a route (hidden ones aside) whose responses were not built by the helper, or were built for
 * another kind (a write told `database: false`, which would drop its 503; an idempotent create not told
 * `idempotent`, which would drop its 409 and 422), stops start-up.
 *
 * The response headers (X-Request-Id, ETag, RateLimit, Retry-After, …) stay added by that hook, in one place: they
 * follow from the status and the kind alone, and listing them would double every route. They are documentation
 * only, turned into header objects by @fastify/swagger and into `$ref`s to `components.headers` by the document
 * transform (openapi.ts).
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
  /** A request that may carry a body: 408, 413 and 415. */
  body: boolean;
  bearer: boolean;
}

type RouteConfig = { rateLimit?: unknown; preconditions?: true; database?: false; idempotent?: boolean };

/** The traits from the plain facts: the method, whether the path is under /boards, whether security names a token. */
function traitsOf(method: string, board: boolean, bearer: boolean, config: RouteConfig = {}): RouteTraits {
  const m = method.toUpperCase();
  return {
    board,
    database: config.database !== false,
    rateLimited: config.rateLimit !== false,
    conditionalGet: m === 'GET',
    conditionalWrite: (m === 'PUT' || m === 'DELETE') && config.preconditions === true,
    idempotentCreate: m === 'POST' && config.idempotent === true,
    body: BODY_METHODS.has(m),
    bearer,
  };
}

/** What a route's own options (`config`, `schema.security`) and its method say about it; see FastifyContextConfig above. */
export function routeTraits(method: string, url: string, options: { security?: unknown; config?: RouteConfig }): RouteTraits {
  const security = Array.isArray(options.security) ? (options.security as Array<Record<string, unknown>>) : [];
  return traitsOf(method, isBoardRequest(url), security.some((requirement) => 'bearerAuth' in requirement), options.config);
}

/**
 * A route's kind as `responses()` is told it: its method, and each option of the route that changes what it can
 * answer, written as the route writes it (`idempotent: true` for `config: { idempotent: true }`).
 */
export interface RouteKind {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Under /boards: errors in the envelope (`{code, message, data}`), not problem details. */
  board?: true;
  /** `schema.security` names bearerAuth, required or optional. */
  bearer?: true;
  idempotent?: true;
  preconditions?: true;
  rateLimit?: false;
  database?: false;
}

/** The traits each response map of `responses()` was built for, for the check in the onRoute hook. */
const declaredTraits = new WeakMap<object, RouteTraits>();

/**
 * The route's `schema.response`: its own entries, and the error statuses (and a GET's 304) every route of its kind
 * can answer. An own entry wins over the standard one of its status (a DELETE's 400 that says "no such post"); an
 * idempotent create's own 409 gets the idempotency case added to its words. Typed as the route's own entries, so
 * that the type provider types the handler's answers as before.
 */
export function responses<const R extends Record<number, unknown>>(kind: RouteKind, own: R): R {
  const t = traitsOf(kind.method, kind.board === true, kind.bearer === true, kind);
  const response: Record<number, ResponseEntry> = { ...(own as Record<number, ResponseEntry>) };
  const add = (status: number, description: string) => {
    if (response[status] !== undefined) return;
    response[status] = t.board
      ? { description, ...EnvelopeErrorSchema }
      : { description, content: { 'application/problem+json': { schema: ProblemSchema } } };
  };
  // Every route takes a query, closed when it declares none (http-hygiene.ts): an unknown parameter is a 400.
  add(400, 'Malformed request (a field, or a header such as If-Match or Idempotency-Key): named in `errors`');
  // Every route answers an Authorization header that is no bearer credential (another scheme) 401 (auth.ts).
  add(
    401,
    t.bearer
      ? 'The bearer token is missing, invalid, expired or revoked, or the Authorization header is not `Bearer <token>` (see WWW-Authenticate)'
      : 'The Authorization header is not a bearer credential (`Bearer <token>`); without one no token is needed (see WWW-Authenticate)',
  );
  if (t.idempotentCreate) {
    const running = 'a request with this Idempotency-Key is still running (retry after Retry-After)';
    const mine = response[409];
    // The route's own 409 (a taken username, a follow twice) keeps its words; the idempotency case is added.
    if (mine !== undefined && typeof mine.description === 'string' && !mine.description.includes(running)) {
      response[409] = { ...mine, description: `${mine.description}; or ${running}` };
    }
    add(409, running.charAt(0).toUpperCase() + running.slice(1));
    add(422, 'This Idempotency-Key was used with a different body');
  }
  if (t.conditionalWrite) add(412, 'If-Match names no current entity-tag of the resource, or If-None-Match names it: nothing changed');
  if (t.body) {
    // Any request that sends a body may stall while sending it (CONTRACT §5); errors/framework.ts answers it.
    add(408, 'The request body did not fully arrive within REQUEST_TIMEOUT_MS; the connection is closed');
    add(413, 'Request body too large');
    add(415, 'Request body is not JSON in UTF-8 (Content-Type: application/json), or is sent with a Content-Encoding');
  }
  if (t.rateLimited) add(429, 'Too many requests; see Retry-After');
  add(500, 'Unexpected failure; the body carries a request id that is also in the log');
  if (t.database) add(503, 'The database is unavailable or too slow; retry after Retry-After');
  if (t.conditionalGet && response[304] === undefined) {
    response[304] = { description: 'Not modified: If-None-Match matched the current ETag; no body', type: 'null' };
  }
  declaredTraits.set(response, t);
  return response as R;
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

/**
 * Checks that the route's responses were built by `responses()` for the route's own kind (see the comment at the top),
 * then declares the response headers of each status, and the request headers the route reads.
 */
function documentRoute(route: RouteOptions): void {
  const schema = route.schema;
  if (!schema || schema.hide) return;
  const config = route.config ?? {};
  const own = (schema.response ?? {}) as Record<string, ResponseEntry>;
  const declared = declaredTraits.get(own);
  // The response map may be shared between routes (a spread listSchema), so it is copied, entries too, not mutated.
  const response: Record<string, ResponseEntry> = { ...own };
  for (const method of [route.method].flat()) {
    // Fastify's HEAD twin of a GET shares the GET's schema, already documented.
    if (method.toUpperCase() === 'HEAD') return;
    const t = routeTraits(method, route.url, { security: schema.security, config });
    if (declared === undefined) throw new Error(`${method} ${route.url}: build schema.response with responses() (plugins/route-docs.ts)`);
    const differ = (Object.keys(t) as Array<keyof RouteTraits>).filter((trait) => t[trait] !== declared[trait]);
    if (differ.length > 0) {
      throw new Error(`${method} ${route.url}: responses() was given another kind than the route's options say (${differ.join(', ')})`);
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
