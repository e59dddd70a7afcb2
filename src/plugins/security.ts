import fp from 'fastify-plugin';
import cors from '@fastify/cors';
import rateLimit from '@fastify/rate-limit';
import { AppError } from '../shared/errors.js';

/**
 * Cross-cutting protections: the request id on every response, CORS for browser clients, and rate limits.
 * Rate-limit counters live in each process's memory: behind a load balancer each process enforces the limit on
 * its own share of the traffic (documented in the README), which keeps correctness independent of them.
 * @see https://github.com/fastify/fastify-rate-limit
 */
export default fp(
  async (app) => {
    // One callback-style hook (no promise per request) for what every request needs first: its id on the
    // response, and the OPTIONS rule. Only a CORS preflight (OPTIONS with Access-Control-Request-Method) is
    // protocol-level; a plain OPTIONS is just another method, answered 405 with Allow like any other (the CORS
    // plugin would answer a text/plain 400).
    app.addHook('onRequest', (request, reply, done) => {
      reply.header('x-request-id', request.id);
      if (request.method === 'OPTIONS' && request.headers['access-control-request-method'] === undefined) {
        app.refuseRequest(request, reply);
        return;
      }
      done();
    });

    await app.register(cors, {
      origin: true,
      methods: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE'],
      // One string, not a list: the plugin joins a list anew on every response.
      exposedHeaders: ['Location', 'Link', 'X-Request-Id', 'Retry-After', 'WWW-Authenticate', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'].join(', '),
      maxAge: 600,
    });

    const { rateLimit: limits } = app.config;
    if (limits.enabled) {
      await app.register(rateLimit, {
        global: true,
        max: limits.max,
        timeWindow: limits.windowMs,
        // Standard draft headers (RateLimit-*) rather than the legacy X-RateLimit-* ones.
        enableDraftSpec: true,
        // Thrown, so the one error handler renders it as problem+json or as the board envelope.
        errorResponseBuilder: (_request, context) =>
          new AppError(429, `Too many requests; retry after ${Math.ceil(context.ttl / 1000)} seconds`),
      });
    }
  },
  { name: 'security', dependencies: ['error-handler'] },
);
