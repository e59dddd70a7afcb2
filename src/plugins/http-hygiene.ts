import fp from 'fastify-plugin';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../shared/errors.js';
import { earlyAnswerHeaders, hasBody, NOSNIFF } from './errors/framework.js';
import { sendError } from './errors/reply.js';

/** The querystring of a route that defines none: no parameter at all is allowed. */
const NO_QUERY = { type: 'object', properties: {}, additionalProperties: false } as const;

/**
 * Requests the HTTP layer refuses before any route runs, and the query rule of CONTRACT §1.
 *
 * - Every answer carries `X-Content-Type-Options: nosniff` (CONTRACT §5): a browser takes each body as the type it
 *   is sent with, never as a script or a page it guessed from the bytes (a post's text that looks like HTML).
 * - A query parameter that the operation does not define is a 400 naming it, as an unknown body field is, on
 *   every route: a route without a querystring schema gets an empty, closed one, and a route's own querystring
 *   schema is closed (`additionalProperties: false`) if it was not. This runs before the error handler's onRoute
 *   hook, so the OpenAPI document lists the 400 these routes can now answer.
 * - A request target in absolute form (`GET http://host/posts HTTP/1.1`) is refused with 400: Fastify would route
 *   its path but keep the whole target as `request.url`, which ends up in Link headers and `instance`. Proxies
 *   send that form; clients of an origin server send a path (RFC 9112 §3.2.1). `*` (OPTIONS) is left to routing.
 * - A query parameter whose name or value is not valid percent-encoded UTF-8 is a 400 naming it.
 * - Two Host headers are a 400 (RFC 9112 §3.2: "more than one Host header line"); Node keeps only the first,
 *   so which host the request meant is ambiguous. No Host in an HTTP/1.1 request is a 400 too (§3.2: "lacks a
 *   Host header field"); Node's own check (`requireHostHeader`, off in app.ts) would answer it with an empty 400
 *   without a request id.
 */
export default fp(
  async (app) => {
    app.addHook('onRoute', (route) => {
      const schema = (route.schema ??= {}) as { querystring?: Record<string, unknown>; hide?: boolean };
      if (schema.querystring === undefined) {
        schema.querystring = { ...NO_QUERY };
      } else if (schema.querystring.additionalProperties === undefined) {
        schema.querystring = { ...schema.querystring, additionalProperties: false };
      }
    });

    app.addHook('onRequest', (request, reply, done) => {
      // The first hook of every request: whatever answers it from here on (a route, an error, a 404, a stream, a
      // 304, a /docs asset) carries the field. Answers given before any hook have it from earlyAnswerHeaders and
      // writeRawError (errors/).
      reply.header('x-content-type-options', NOSNIFF);
      const problem = malformedTarget(request);
      // No route takes this method on this path: 404 or 405 at once, before any body is read. Fastify would
      // otherwise parse one first for its not-found handler, and a method it reads bodies for (QUERY) without a
      // Content-Type would be a 400 instead of the 405 every other unknown method gets. OPTIONS is security.ts's
      // (a CORS preflight is answered on any path).
      const refused = problem === undefined && request.is404 && request.method !== 'OPTIONS';
      if (problem === undefined && !refused) {
        done();
        return;
      }
      earlyAnswerHeaders(request, reply);
      if (problem === undefined) {
        // The body is not read: close rather than wait for it (one that never fully comes would time out with a
        // stray 408 on this connection after the answer).
        if (hasBody(request)) reply.header('connection', 'close');
        void app.refuseRequest(request, reply);
        return;
      }
      request.log.info({ status: 400, detail: problem.message }, 'request rejected');
      void sendError(request, reply, { status: 400, detail: problem.message, errors: problem.errors });
    });
  },
  { name: 'http-hygiene' },
);

/** Why the request line or Host is unacceptable, or undefined when it is fine. */
function malformedTarget(request: FastifyRequest): AppError | undefined {
  const raw = request.raw.url ?? '';
  if (raw.charCodeAt(0) !== 47 /* / */ && raw !== '*') {
    // `request.url` is the absolute target: answer with its path only, never the client's host.
    overrideUrl(request, '/');
    return AppError.badRequest('target', 'must be a path (origin form), not an absolute URL');
  }
  const query = raw.indexOf('?');
  if (query !== -1 && raw.indexOf('%', query) !== -1) {
    const badEscape = malformedEscape(raw.slice(query + 1));
    if (badEscape !== undefined) return AppError.badRequest(badEscape, 'is not valid percent-encoded UTF-8');
  }
  const headers = request.raw.rawHeaders;
  let hosts = 0;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host' && ++hosts > 1) return AppError.badRequest('host', 'must be sent once');
  }
  if (hosts === 0 && request.raw.httpVersion === '1.1') return AppError.badRequest('host', 'is required in an HTTP/1.1 request');
  return undefined;
}

/**
 * The name (its first 100 characters) of the first query parameter whose name or value is not valid percent-encoded
 * UTF-8, or undefined. The query parser keeps such an escape as literal text, so `?username=%FF` would search for
 * the four characters `%FF`; a malformed path is a 400 (errors/framework.ts), and so is this.
 */
function malformedEscape(query: string): string | undefined {
  for (const pair of query.split('&')) {
    try {
      decodeURIComponent(pair);
    } catch {
      const equals = pair.indexOf('=');
      return (equals === -1 ? pair : pair.slice(0, equals)).slice(0, 100);
    }
  }
  return undefined;
}

/** The error answer's `instance` and shape come from `request.url`: for an absolute target, use `/`. */
function overrideUrl(request: FastifyRequest, url: string): void {
  Object.defineProperty(request, 'url', { value: url, configurable: true });
}

