import { describe, expect, it } from 'vitest';
import { buildTestApp, call } from '../../test/helpers/build-test-app.js';
import { signUp } from '../../test/helpers/factories.js';

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

describe('stream metrics of a fresh process', () => {
  it('shows every series from the start, each reason of a dropped subscriber at 0', async () => {
    const app = await buildTestApp();
    const text = (await call(app, 'GET', '/metrics')).body;
    expect(text).toMatch(/^corkboard_streams_open 0$/m);
    expect(text).toMatch(/^corkboard_stream_events_sent_total 0$/m);
    expect(text).toMatch(/^corkboard_stream_subscribers_dropped_total\{reason="slow"\} 0$/m);
    expect(text).toMatch(/^corkboard_stream_subscribers_dropped_total\{reason="revoked"\} 0$/m);
  });
});

describe('METRICS_TOKEN', () => {
  const METRICS_TOKEN = 'metrics-3f9c0a1b2c3d4e5f';

  it('unset: /metrics is open to anyone', async () => {
    const app = await buildTestApp();
    const res = await call(app, 'GET', '/metrics');
    expect(res.statusCode).toBe(200);
    expect(res.body).toMatch(/^corkboard_process_cpu_user_seconds_total /m);
  });

  it('set: /metrics needs it as the bearer token; no token, a wrong one, a user\'s token or another scheme is 401 with a Bearer challenge', async () => {
    const app = await buildTestApp({ metricsToken: METRICS_TOKEN });
    const user = await signUp(app);
    const refusals: Array<[string, Record<string, string>, string]> = [
      ['no token', {}, 'Bearer realm="corkboard"'],
      ['a wrong token', { authorization: 'Bearer metrics-0000000000000000' }, 'Bearer realm="corkboard", error="invalid_token"'],
      ['a prefix of it', { authorization: `Bearer ${METRICS_TOKEN.slice(0, -1)}` }, 'Bearer realm="corkboard", error="invalid_token"'],
      ["a user's token", { authorization: `Bearer ${user.token}` }, 'Bearer realm="corkboard", error="invalid_token"'],
      ['another scheme', { authorization: `token ${METRICS_TOKEN}` }, 'Bearer realm="corkboard"'],
      ['Basic', { authorization: `Basic ${Buffer.from(`x:${METRICS_TOKEN}`).toString('base64')}` }, 'Bearer realm="corkboard"'],
    ];
    for (const [what, headers, challenge] of refusals) {
      for (const method of ['GET', 'HEAD'] as const) {
        const res = await call(app, method, '/metrics', { headers });
        expect(res.statusCode, `${method} ${what}`).toBe(401);
        expect(res.headers['www-authenticate'], `${method} ${what}`).toBe(challenge);
        expect(res.body, `${method} ${what}`).not.toMatch(/corkboard_/);
      }
    }
    const ok = await call(app, 'GET', '/metrics', { token: METRICS_TOKEN });
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['content-type']).toMatch(/^text\/plain/);
    expect(ok.body).toMatch(/^corkboard_http_request_duration_seconds_count\{method="GET",route="\/metrics",status_code="401"\} 6$/m);
    // The metrics token is no API credential: the API answers it as any unknown token.
    expect((await call(app, 'GET', '/posts', { token: METRICS_TOKEN })).statusCode).toBe(401);
  });
});
