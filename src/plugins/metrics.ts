import fp from 'fastify-plugin';
import { Histogram, Registry, collectDefaultMetrics } from 'prom-client';
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
