import fp from 'fastify-plugin';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { RATE_LIMIT_FIELDS } from './rate-limit/index.js';

/** Response headers a browser script may read on a cross-origin response (CORS). */
const EXPOSED_HEADERS = ['Location', 'Link', 'X-Request-Id', 'Retry-After', 'WWW-Authenticate', 'ETag', 'Idempotent-Replayed', ...RATE_LIMIT_FIELDS].join(', ');
/** The interface's methods (seed §1), for CORS preflights. */
const ALLOWED_METHODS = 'GET, HEAD, POST, PUT, DELETE';
/** How long a browser may cache a preflight answer, in seconds. */
const PREFLIGHT_MAX_AGE = '600';

/** CORS for an actual (non-preflight) request: a browser may read the answer, and the API's headers on it. */
export function allowOrigin(request: FastifyRequest, reply: FastifyReply): void {
  const { origin } = request.headers;
  if (origin !== undefined) reply.header('access-control-allow-origin', origin).header('access-control-expose-headers', EXPOSED_HEADERS);
}

/**
 * Cross-cutting protections: the request id on every response and CORS for browser clients. Rate limits are
 * their own plugin (rate-limit/index.ts).
 *
 * CORS is written here rather than with @fastify/cors. The policy is the plugin's `origin: true` (reflect the
 * caller's origin; the API is public and authenticates with bearer tokens, not cookies), but the contract's method
 * rules are not the plugin's: a plain OPTIONS (no Access-Control-Request-Method) is an ordinary method, answered
 * 405 with Allow, and a preflight is answered on any path. It is a few header writes in the hook every request
 * runs anyway; requests without an Origin get only `Vary: Origin` (so shared caches keep origins apart).
 * @see https://fetch.spec.whatwg.org/#http-cors-protocol
 */
export default fp(
  async (app) => {
    // One hook for what every request needs first: its id on the
    // response, CORS, and the OPTIONS rule. Only a CORS preflight (OPTIONS with Access-Control-Request-Method)
    // is protocol-level; a plain OPTIONS is just another method, answered 405 with Allow like any other.
    app.addHook('onRequest', (request, reply, done) => {
      reply.header('x-request-id', request.id);
      const { origin } = request.headers;
      // An OPTIONS that passes this check is a preflight: a browser (Origin) asking whether it may send a method.
      const isOptions = request.method === 'OPTIONS';
      if (isOptions && (origin === undefined || request.headers['access-control-request-method'] === undefined)) {
        app.refuseRequest(request, reply);
        return;
      }
      reply.header('vary', isOptions ? 'Origin, Access-Control-Request-Headers' : 'Origin');
      allowOrigin(request, reply);
      if (!isOptions) {
        done();
        return;
      }
      // Allow the interface's methods and whatever headers the browser asks to send (the bearer token's
      // Authorization, Content-Type, Idempotency-Key, ...), for any origin.
      reply.header('access-control-allow-methods', ALLOWED_METHODS).header('access-control-max-age', PREFLIGHT_MAX_AGE);
      const requestedHeaders = request.headers['access-control-request-headers'];
      if (requestedHeaders !== undefined) reply.header('access-control-allow-headers', requestedHeaders);
      reply.code(204).header('content-length', '0').send();
    });

  },
  { name: 'security', dependencies: ['error-handler'] },
);
