import { describe, expect, it } from 'vitest';
import { buildTestApp, call } from './helpers/build-test-app.js';

type Operation = { operationId: string; security?: Array<Record<string, string[]>> };

/**
 * The security a route declares in the OpenAPI document is the security it enforces: every operation that
 * requires a bearer token answers an anonymous caller 401 first, even when its path id is malformed and its body
 * is not JSON at all (no 400 or 415 that would tell an anonymous caller anything about the request).
 */
describe('routes that require a bearer token', () => {
  it('answer 401 with WWW-Authenticate before anything else, for every such operation in the document', async () => {
    const app = await buildTestApp();
    const paths = app.swagger().paths as Record<string, Record<string, Operation>>;
    const checked: string[] = [];
    for (const [path, item] of Object.entries(paths)) {
      for (const [method, op] of Object.entries(item)) {
        const required = op.security?.length && op.security.every((r) => 'bearerAuth' in r);
        if (!required) continue;
        const url = path.replace(/\{[^}]+\}/g, 'not-an-id');
        const board = url.startsWith('/boards');
        const res = await app.inject({
          method: method.toUpperCase() as 'POST',
          url,
          payload: 'not json',
          headers: { 'content-type': 'text/plain' },
        });
        expect(res.statusCode, `${method.toUpperCase()} ${path}`).toBe(401);
        expect(res.headers['www-authenticate'], `${method.toUpperCase()} ${path}`).toMatch(/^Bearer/);
        expect(res.json(), `${method.toUpperCase()} ${path}`).toMatchObject(board ? { code: '401', data: null } : { status: 401 });
        checked.push(op.operationId);
      }
    }
    // Every write of the contract, and the feed, is among them.
    expect(checked.sort()).toEqual(
      [
        'changePassword', 'createBoard', 'createFollower', 'createPost', 'createRecommend', 'createReply',
        'deleteAllUsers', 'deleteBoard', 'deleteFollower', 'deletePost', 'deleteRecommend', 'deleteReply',
        'deleteToken', 'deleteUser', 'getFeed', 'replaceBoard', 'replacePost', 'replaceReply', 'replaceUser',
      ].sort(),
    );
  });

  it('accept the request once the token is valid (the hook does not get in the way)', async () => {
    const app = await buildTestApp();
    const created = await call(app, 'POST', '/users', { body: { username: 'hook_user', password: 'password 123' } });
    const token = (await call(app, 'POST', '/tokens', { body: { username: 'hook_user', password: 'password 123' } })).json().token;
    const res = await call(app, 'POST', `/users/${created.json().id}/posts`, { token, body: { title: 't', content: 'c' } });
    expect(res.statusCode).toBe(201);
  });
});
