import { describe, expect, it } from 'vitest';
import { buildTestApp } from '../../test/helpers/build-test-app.js';

const PROBLEM = 'application/problem+json; charset=utf-8';
const ENVELOPE = 'application/json; charset=utf-8';

/**
 * What Fastify's router rejects before any route or hook runs still answers in the service's shapes, with a
 * request id: a path that is not valid percent-encoded UTF-8, and a path segment longer than any id.
 */
describe('errors raised by the router itself', () => {
  it.each([
    ['/users/%zz', 'problem'],
    ['/posts/1/replies/%E0%A4%A', 'problem'],
    ['/boards/%zz', 'envelope'],
    [`/users/${'1'.repeat(201)}`, 'problem'],
    [`/posts/1/replies/${'9'.repeat(300)}`, 'problem'],
    [`/boards/${'1'.repeat(201)}`, 'envelope'],
  ])('GET %s: 400 in the %s shape, with X-Request-Id', async (url, shape) => {
    const app = await buildTestApp();
    const res = await app.inject({ method: 'GET', url, headers: { origin: 'https://app.example', 'x-request-id': 'trace-42' } });
    expect(res.statusCode).toBe(400);
    expect(res.headers['x-request-id']).toBe('trace-42');
    expect(res.headers['access-control-allow-origin']).toBe('https://app.example');
    // Like every answer to a GET (CONTRACT §6.1).
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.headers.vary).toBe('Origin, Authorization');
    if (shape === 'problem') {
      expect(res.headers['content-type']).toBe(PROBLEM);
      expect(res.json()).toEqual({
        type: 'about:blank',
        title: 'Bad Request',
        status: 400,
        detail: expect.any(String),
        instance: url,
        errors: [{ field: 'path', message: 'is malformed' }],
      });
    } else {
      expect(res.headers['content-type']).toBe(ENVELOPE);
      expect(res.json()).toEqual({ code: '400', message: expect.any(String), data: null, errors: [{ field: 'path', message: 'is malformed' }] });
    }
  });

  it.each([
    ['GET', '/nope/%zz', 404],
    ['GET', `/users/${'1'.repeat(201)}/nope`, 404],
    ['PATCH', '/users/%zz', 405],
    ['PATCH', `/boards/${'1'.repeat(201)}`, 405],
  ])('%s %s: a path or method no route takes is answered %i as usual', async (method, url, status) => {
    const app = await buildTestApp();
    const res = await app.inject({ method: method as 'GET', url });
    expect(res.statusCode).toBe(status);
    expect(res.headers['x-request-id']).toEqual(expect.any(String));
    if (status === 405) expect(res.headers.allow).toContain('GET');
    expect(res.json()).toMatchObject(url.startsWith('/boards') ? { code: String(status), data: null } : { status });
  });
});

/**
 * A method no route takes on a path is 405 with Allow (404 on an unknown path) before any body is read, even one
 * Fastify reads bodies for: QUERY without a Content-Type was a 400 ("must provide a 'Content-Type' header").
 */
describe('methods no route takes', () => {
  it.each([
    ['QUERY', '/users', 405, undefined],
    ['QUERY', '/users', 405, 'text/plain'],
    ['QUERY', '/boards/list', 405, undefined],
    ['QUERY', '/nope', 404, undefined],
    ['PATCH', '/posts/1', 405, 'application/json'],
    // These reach PUT and DELETE /boards/:board_id: the body's type or JSON fails before the id would.
    ['PUT', '/boards/list', 405, 'text/plain'],
    ['PUT', '/boards/list', 405, 'application/json'],
    ['DELETE', '/boards/list', 405, 'application/json'],
  ])('%s %s: %i, whatever the body (Content-Type %s)', async (method, url, status, type) => {
    const app = await buildTestApp();
    const res = await app.inject({
      method: method as 'GET',
      url,
      headers: { 'x-request-id': 'trace-7', ...(type ? { 'content-type': type } : {}) },
      ...(type ? { payload: '{not json' } : {}),
    });
    expect(res.statusCode, res.body).toBe(status);
    expect(res.headers['x-request-id']).toBe('trace-7');
    if (status === 405) expect(res.headers.allow).toMatch(/GET/);
    expect(res.json()).toMatchObject(url.startsWith('/boards') ? { code: String(status), data: null } : { status });
  });
});
