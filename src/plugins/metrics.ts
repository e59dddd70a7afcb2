import { createHash, timingSafeEqual } from 'node:crypto';
import fp from 'fastify-plugin';
import type { FastifyRequest } from 'fastify';
import { Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { AppError } from '../shared/errors.js';
import { bearerToken } from './auth.js';
import type { AccessLog } from './logging.js';

declare module 'fastify' {
  interface FastifyInstance {
    metrics: Registry;
  }
}

export interface MetricsOptions {
  /** Where completed requests are heard of (app.ts: the access log Fastify was built with). */
  completions: AccessLog;
}

/**
 * Prometheus metrics: process defaults plus one request-duration histogram labelled by route pattern (never by
 * raw URL, which would create a series per id). Each app has its own registry, so tests can build many apps;
 * other plugins register their own metrics on `app.metrics`.
 * @see https://github.com/siimon/prom-client
 */
export default fp<MetricsOptions>(
  async (app, { completions }) => {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry, prefix: 'corkboard_' });
    const duration = new Histogram({
      name: 'corkboard_http_request_duration_seconds',
      help: 'HTTP request duration in seconds, by method, route pattern and status code',
      labelNames: ['method', 'route', 'status_code'] as const,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    });
    app.decorate('metrics', registry);
    // Requests no route takes (404 and 405 answers) are counted under one label, not under their raw URL.
    completions.observe((request, reply) => {
      const route = request.is404 ? 'unmatched' : (request.routeOptions.url ?? 'unmatched');
      duration.observe({ method: request.method, route, status_code: reply.statusCode }, reply.elapsedTime / 1000);
    });
  },
  { name: 'metrics' },
);

const digest = (text: string) => createHash('sha256').update(text).digest();

/**
 * Who may read GET /metrics: anyone, or with METRICS_TOKEN set only a request carrying it as its bearer token (401
 * with a Bearer challenge otherwise; an API user's token is no substitute). Compared in constant time, over
 * digests so that neither the content nor the length of the expected token shows in the time taken.
 */
export function metricsAccess(metricsToken: string | undefined): ((request: FastifyRequest) => Promise<void>) | undefined {
  if (metricsToken === undefined) return undefined;
  const expected = digest(metricsToken);
  return async (request) => {
    const token = bearerToken(request);
    if (token === undefined) throw AppError.unauthorized('The metrics need a bearer token: Authorization: Bearer <METRICS_TOKEN>');
    if (!timingSafeEqual(digest(token), expected)) throw AppError.invalidToken();
  };
}
