import { describe, expect, it } from 'vitest';
import { Registry, type Metric } from 'prom-client';
import { DurationHistogram } from './metrics.js';
import { buildTestApp, call } from '../../test/helpers/build-test-app.js';
import { signUp } from '../../test/helpers/factories.js';

async function exposition(observations: Array<[string, string, number, number]>) {
  const registry = new Registry();
  const histogram = new DurationHistogram('t_duration_seconds', 'Test durations');
  registry.registerMetric(histogram as unknown as Metric);
  for (const [method, route, status, seconds] of observations) histogram.forRoute(route)(method, status, seconds);
  return { registry, histogram, text: await registry.metrics() };
}

describe('DurationHistogram', () => {
  it('renders cumulative buckets, +Inf, sum and count per label set, as Prometheus expects', async () => {
    const { text } = await exposition([
      ['GET', '/posts/:post_id', 200, 0.0004],
      ['GET', '/posts/:post_id', 200, 0.001], // on a bound: counted in le="0.001" (upper bounds are inclusive)
      ['GET', '/posts/:post_id', 200, 3], // above every bound: only in +Inf
      ['POST', '/users/:user_id/posts', 201, 0.02],
    ]);
    const lines = text.split('\n');
    expect(lines.slice(0, 2)).toEqual(['# HELP t_duration_seconds Test durations', '# TYPE t_duration_seconds histogram']);
    const get = '{method="GET",route="/posts/:post_id",status_code="200"';
    expect(lines).toContain(`t_duration_seconds_bucket${get},le="0.0005"} 1`);
    expect(lines).toContain(`t_duration_seconds_bucket${get},le="0.001"} 2`);
    expect(lines).toContain(`t_duration_seconds_bucket${get},le="2.5"} 2`);
    expect(lines).toContain(`t_duration_seconds_bucket${get},le="+Inf"} 3`);
    expect(lines).toContain(`t_duration_seconds_sum${get}} 3.0014`);
    expect(lines).toContain(`t_duration_seconds_count${get}} 3`);
    const post = '{method="POST",route="/users/:user_id/posts",status_code="201"';
    expect(lines).toContain(`t_duration_seconds_bucket${post},le="0.01"} 0`);
    expect(lines).toContain(`t_duration_seconds_bucket${post},le="0.025"} 1`);
    expect(lines).toContain(`t_duration_seconds_count${post}} 1`);
    // 12 bounds + +Inf + sum + count per series, after the two header lines.
    expect(lines.filter((l) => l.startsWith('t_duration_seconds'))).toHaveLength(2 * 15);
  });

  it('is empty before any request and after a registry reset', async () => {
    const { registry, histogram, text } = await exposition([['GET', '/health', 200, 0.001]]);
    expect(text).toContain('t_duration_seconds_count{method="GET",route="/health",status_code="200"} 1');
    const routeHook = histogram.forRoute('/health'); // what a route's hook holds from start-up on
    registry.resetMetrics();
    expect(await registry.metrics()).not.toContain('t_duration_seconds_count');
    // An observer made before the reset counts into fresh series that are rendered.
    routeHook('GET', 200, 0.001);
    expect(await registry.metrics()).toContain('t_duration_seconds_count{method="GET",route="/health",status_code="200"} 1');
    expect((await exposition([])).text.trim().split('\n')).toEqual(['# HELP t_duration_seconds Test durations', '# TYPE t_duration_seconds histogram']);
  });
});

describe('request metrics of the app', () => {
  const count = (text: string, method: string, route: string, status: number) =>
    Number(new RegExp(`^corkboard_http_request_duration_seconds_count\\{method="${method}",route="${route.replace(/[/:]/g, (c) => `\\${c}`)}",status_code="${status}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);

  it('counts each request once under its route pattern, HEAD and unmatched requests included', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    for (let i = 0; i < 3; i++) expect((await call(app, 'GET', `/users/${a.id}`)).statusCode).toBe(200);
    expect((await call(app, 'GET', '/users/999999')).statusCode).toBe(404);
    expect((await call(app, 'HEAD', `/users/${a.id}`)).statusCode).toBe(200);
    expect((await call(app, 'GET', '/nowhere')).statusCode).toBe(404);
    expect((await call(app, 'PATCH', `/users/${a.id}`)).statusCode).toBe(405);
    const text = await app.metrics.metrics();
    expect(count(text, 'GET', '/users/:user_id', 200)).toBe(3);
    expect(count(text, 'GET', '/users/:user_id', 404)).toBe(1);
    expect(count(text, 'HEAD', '/users/:user_id', 200)).toBe(1);
    expect(count(text, 'GET', 'unmatched', 404)).toBe(1);
    expect(count(text, 'PATCH', 'unmatched', 405)).toBe(1);
    expect(count(text, 'POST', '/users', 201)).toBe(1);
  });
});
