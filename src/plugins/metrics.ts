import fp from 'fastify-plugin';
import { Histogram, Registry, collectDefaultMetrics } from 'prom-client';

declare module 'fastify' {
  interface FastifyInstance {
    metrics: Registry;
  }
}

/**
 * Prometheus metrics: process defaults plus one request-duration histogram labelled by route pattern (never by
 * raw URL, which would create a series per id). Each app has its own registry, so tests can build many apps.
 * @see https://github.com/siimon/prom-client
 */
export default fp(
  async (app) => {
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
    // prom-client hashes the label set on every observe; the few combinations that occur are looked up once.
    const series = new Map<string, ReturnType<typeof duration.labels>>();
    app.addHook('onResponse', (request, reply, done) => {
      const route = request.routeOptions.url ?? 'unmatched';
      const key = `${request.method} ${route} ${reply.statusCode}`;
      let child = series.get(key);
      if (!child) {
        child = duration.labels({ method: request.method, route, status_code: reply.statusCode });
        series.set(key, child);
      }
      child.observe(reply.elapsedTime / 1000);
      done();
    });
  },
  { name: 'metrics' },
);
