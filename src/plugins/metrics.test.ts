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
