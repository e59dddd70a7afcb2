import fp from 'fastify-plugin';
import type { onSendHookHandler } from 'fastify';
import { Registry, collectDefaultMetrics, type Metric } from 'prom-client';
import { elapsedMs } from './logging.js';

/** Marks a route's duration observer, so that the HEAD copy of a GET route does not get a second one. */
const OBSERVER = Symbol('corkboard.metrics.observer');

declare module 'fastify' {
  interface FastifyInstance {
    metrics: Registry;
  }
}

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** One line of the exposition, in the shape prom-client's registry renders (`metricName{labels} value`). */
interface Sample {
  metricName: string;
  labels: Record<string, string | number>;
  value: number;
}

interface Series {
  labels: { method: string; route: string; status_code: number };
  /** Observations per bucket (not cumulative); those above the largest bound are only in `count` (+Inf). */
  counts: number[];
  sum: number;
  count: number;
}

/**
 * The request-duration histogram, kept as plain counters and rendered by prom-client's registry at scrape time.
 * Why not prom-client's Histogram: its observe() re-validates and re-hashes the label set on every call, even
 * through a labels() child; profiled under load that was ~3.5 µs of every request (as much as routing the
 * request). Here a request costs two small Map lookups and three additions; the exposition is the same (cumulative
 * `_bucket` series with `le`, then `_sum` and `_count`), produced through the registry's documented metric shape.
 */
export class DurationHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  /** Every series of every route, for rendering; each route's observer finds its own by method and status. */
  private readonly series = new Set<Series>();
  /** Per route pattern: its observer and its series by method and status (a reset empties those; hooks keep the observer). */
  private readonly routes = new Map<string, { observe: (method: string, statusCode: number, seconds: number) => void; byMethod: Map<string, Map<number, Series>> }>();

  constructor(
    readonly name: string,
    readonly help: string,
  ) {}

  /**
   * The observer for one route pattern: its series are found by method and status code in small maps, so a
   * request builds no label key (no string concatenation or hashing on the hot path).
   */
  forRoute(route: string): (method: string, statusCode: number, seconds: number) => void {
    // One observer per pattern: routes that share a pattern (GET and PUT /users/:user_id) share its series.
    const existing = this.routes.get(route);
    if (existing) return existing.observe;
    const byMethod = new Map<string, Map<number, Series>>();
    const observe = (method: string, statusCode: number, seconds: number) => {
      let byStatus = byMethod.get(method);
      if (!byStatus) byMethod.set(method, (byStatus = new Map()));
      let s = byStatus.get(statusCode);
      if (!s) {
        s = { labels: { method, route, status_code: statusCode }, counts: new Array<number>(BUCKETS.length).fill(0), sum: 0, count: 0 };
        byStatus.set(statusCode, s);
        this.series.add(s);
      }
      let i = 0;
      while (i < BUCKETS.length && seconds > (BUCKETS[i] as number)) i++;
      if (i < BUCKETS.length) s.counts[i] = (s.counts[i] as number) + 1;
      s.sum += seconds;
      s.count += 1;
    };
    this.routes.set(route, { observe, byMethod });
    return observe;
  }

  get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }> {
    const values: Sample[] = [];
    for (const { labels, counts, sum, count } of this.series) {
      let cumulative = 0;
      BUCKETS.forEach((le, i) => {
        cumulative += counts[i] as number;
        values.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le }, value: cumulative });
      });
      values.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: '+Inf' }, value: count });
      values.push({ metricName: `${this.name}_sum`, labels, value: sum });
      values.push({ metricName: `${this.name}_count`, labels, value: count });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }

  reset(): void {
    this.series.clear();
    for (const { byMethod } of this.routes.values()) byMethod.clear();
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
    const duration = new DurationHistogram(
      'corkboard_http_request_duration_seconds',
      'HTTP request duration in seconds, by method, route pattern and status code',
    );
    // The registry takes any object with a name, help, type and get(); prom-client types that as its Metric class.
    registry.registerMetric(duration as unknown as Metric);
    app.decorate('metrics', registry);
    // Each route observes into its own series from a hook that knows its pattern. A global hook would have to ask
    // Fastify for the pattern on every request (`request.routeOptions` builds a new object each time: ~2,000
    // instructions a request in callgrind). Fastify copies a GET route's options for its HEAD route, observer
    // included, so a route that already has one is left alone. The duration runs until the response is handed
    // to the socket (onSend): an onResponse hook would make Fastify listen on every response (see logging.ts).
    app.addHook('onRoute', (route) => {
      const hooks = [route.onSend ?? []].flat();
      if (hooks.some((hook) => OBSERVER in hook)) return;
      const observe = duration.forRoute(route.url);
      const observer: onSendHookHandler = (request, reply, payload, done) => {
        observe(request.method, reply.statusCode, elapsedMs(request) / 1000);
        done(null, payload);
      };
      route.onSend = [...hooks, Object.assign(observer, { [OBSERVER]: true })];
    });
    // Requests no route takes (404 and 405 answers) run only the not-found handler's hooks, which are the global ones.
    const unmatched = duration.forRoute('unmatched');
    app.addHook('onSend', (request, reply, payload, done) => {
      if (request.is404) unmatched(request.method, reply.statusCode, elapsedMs(request) / 1000);
      done(null, payload);
    });
  },
  { name: 'metrics', dependencies: ['logging'] },
);
