import type { FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { buildTestApp, call } from './helpers/build-test-app.js';

type Operation = { operationId: string; description?: string; security?: Array<Record<string, string[]>> };

/** Every operation of the app's OpenAPI document whose security requirements satisfy `wanted`. */
function operations(app: FastifyInstance, wanted: (security: Array<Record<string, string[]>>) => boolean) {
  const paths = app.swagger().paths as Record<string, Record<string, Operation>>;
  return Object.entries(paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([, op]) => op.security !== undefined && wanted(op.security))
      .map(([method, op]) => ({ path, method: method.toUpperCase() as 'GET', op })),
  );
}

/** A well-formed body for each operation that takes one, so that only the missing token is wrong. */
const VALID_BODIES: Record<string, object> = {
  changePassword: { currentPassword: 'password 123', newPassword: 'password 456' },
  createBlock: { id: 1 },
  createBoard: { title: 'T', content: 'C' },
  createMute: { id: 1 },
  createFollower: { id: 1 },
  createPost: { title: 'T', content: 'C' },
  createRecommend: { id: 1 },
  createReply: { content: 'C' },
  createReport: { subject: { type: 'user', id: 1 }, reason: 'spam' },
  replaceReport: { status: 'resolved', resolution: '' },
  replaceNotificationMarker: { lastReadId: 0 },
  replaceBoard: { title: 'T', content: 'C' },
  replacePost: { title: 'T', content: 'C', visibility: 'public' },
  replaceReply: { content: 'C' },
  replaceUser: { username: 'someone', displayName: '', bio: '' },
  suspendUser: { reason: 'spam' },
};

/**
 * The security a route declares in the OpenAPI document is the security it enforces, in the contract's order of
 * answers (CONTRACT §6.1): a malformed request is 400 (or 415) whoever sends it, then a well-formed one without a
 * token is 401, before anything is looked up (the ids here name nothing).
 */
describe('routes that require a bearer token', () => {
  it('answer a malformed request 400 or 415 and a well-formed one without a token 401, for every such operation in the document', async () => {
    const app = await buildTestApp();
    const checked: string[] = [];
    for (const { path, method, op } of operations(app, (security) => security.length > 0 && security.every((r) => 'bearerAuth' in r))) {
      const board = path.startsWith('/boards');
      const malformed = await app.inject({
        method,
        // A read with no path id (GET /reports) is malformed by its query instead.
        url: path.replace(/\{[^}]+\}/g, 'not-an-id') + (method === 'GET' && !path.includes('{') ? '?limit=0' : ''),
        payload: 'not json',
        headers: { 'content-type': 'text/plain' },
      });
      expect([400, 415], `${method} ${path}: ${malformed.body}`).toContain(malformed.statusCode);
      expect(malformed.headers['www-authenticate'], `${method} ${path}`).toBeUndefined();

      const body = VALID_BODIES[op.operationId];
      const url = path.replace(/\{[^}]+\}/g, '424242');
      const res = await app.inject(body ? { method, url, payload: body } : { method, url });
      expect(res.statusCode, `${method} ${path}: ${res.body}`).toBe(401);
      expect(res.headers['www-authenticate'], `${method} ${path}`).toMatch(/^Bearer/);
      expect(res.json(), `${method} ${path}`).toMatchObject(board ? { code: '401', data: null } : { status: 401 });
      checked.push(op.operationId);
    }
    // Every write of the contract, the feed and the token reads are among them.
    expect(checked.sort()).toEqual(
      [
        'changePassword', 'createBoard', 'createFollower', 'createPost', 'createRecommend', 'createReply',
        'deleteAllUsers', 'deleteBoard', 'deleteFollower', 'deletePost', 'deleteRecommend', 'deleteReply',
        'deleteToken', 'deleteUser', 'getFeed', 'getToken', 'listUserTokens', 'replaceBoard', 'replacePost', 'replaceReply', 'replaceUser',
        'createReport', 'listReports', 'getReport', 'replaceReport',
        'listNotifications', 'getNotification', 'getNotificationMarker', 'replaceNotificationMarker',
        // CONTRACT §9
        'createBlock', 'listBlocks', 'getBlock', 'deleteBlock', 'createMute', 'listMutes', 'getMute', 'deleteMute',
        'suspendUser', 'getSuspension', 'liftSuspension',
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

/**
 * Public reads take a token optionally (it may change what the caller sees). A token that is there but invalid,
 * expired or revoked is a 401 on every one of them, so a client learns at once that its token is dead, whether or
 * not that route's answer depends on the caller. Sign-up and sign-in take no token and ignore a stale one.
 */
describe('routes where a bearer token is optional', () => {
  it('answer an invalid token 401 invalid_token, for every such operation in the document', async () => {
    const app = await buildTestApp();
    const checked: string[] = [];
    // The document says `security: []` on them (CONTRACT §5: public operations) and the optional token in words.
    const optional = operations(app, (security) => security.length === 0).filter(({ op }) => /bearer token may be sent/.test(op.description ?? ''));
    for (const { path, method, op } of optional) {
      const where = `${method} ${path}`;
      const res = await app.inject({
        method,
        url: path.replace(/\{[^}]+\}/g, '1'),
        headers: { authorization: 'Bearer cb_not-a-token-anyone-was-given' },
      });
      expect(res.statusCode, where).toBe(401);
      expect(res.headers['www-authenticate'], where).toContain('error="invalid_token"');
      expect(res.json(), where).toMatchObject(path.startsWith('/boards') ? { code: '401', data: null } : { status: 401 });
      checked.push(op.operationId);
    }
    expect(checked.sort()).toEqual(
      [
        'getBoard', 'getFollower', 'getPost', 'getRecommend', 'getReply', 'getUser', 'listBoards', 'listBoardsAtRoot',
        'listFollowers', 'listFollowing', 'listPosts', 'listRecommends', 'listReplies', 'listUserPosts', 'listUsers',
      ].sort(),
    );
  });

  it('answer a revoked token 401 where the same request without it is a 200', async () => {
    const app = await buildTestApp();
    const created = await call(app, 'POST', '/users', { body: { username: 'revoked_user', password: 'password 123' } });
    const id = created.json().id;
    const signedIn = (await call(app, 'POST', '/tokens', { body: { username: 'revoked_user', password: 'password 123' } })).json();
    expect((await call(app, 'GET', `/users/${id}`, { token: signedIn.token })).statusCode).toBe(200);
    expect((await call(app, 'DELETE', `/tokens/${signedIn.id}`, { token: signedIn.token })).statusCode).toBe(200);
    const res = await call(app, 'GET', `/users/${id}`, { token: signedIn.token });
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toContain('error="invalid_token"');
    expect((await call(app, 'GET', `/users/${id}`)).statusCode).toBe(200);
  });

  it('answer `Bearer` without a token, or a malformed one, 401 invalid_token', async () => {
    const app = await buildTestApp();
    for (const authorization of ['Bearer', 'Bearer two words', 'Bearer {curly}']) {
      const res = await call(app, 'GET', '/users', { headers: { authorization } });
      expect(res.statusCode, authorization).toBe(401);
      expect(res.headers['www-authenticate'], authorization).toBe('Bearer realm="corkboard", error="invalid_token"');
    }
  });
});

/**
 * CONTRACT §2: an Authorization header that is there but is no bearer credential (another scheme, nothing at all)
 * is a 401 with a Bearer challenge on every route, reads, sign-up, sign-in and the operational routes included: a
 * client's mistake never silently turns into an anonymous request.
 */
describe('an Authorization header in another scheme', () => {
  const SCHEMES = ['token cb_abc', `Basic ${Buffer.from('someone:password 123').toString('base64')}`, 'Digest username="someone"', '', 'cb_abc'];
  const BODIES: Record<string, object> = {
    ...VALID_BODIES,
    createUser: { username: 'scheme_user', password: 'password 123' },
    createToken: { username: 'scheme_user', password: 'password 123' },
  };

  it('is 401 with WWW-Authenticate: Bearer on every operation of the document, and on /docs', async () => {
    const app = await buildTestApp();
    const checked: string[] = [];
    for (const { path, method, op } of operations(app, () => true)) {
      if (method === ('OPTIONS' as string)) continue;
      const url = path.replace(/\{[^}]+\}/g, '1');
      const body = BODIES[op.operationId];
      for (const authorization of SCHEMES) {
        const where = `${method} ${path} with "${authorization}"`;
        const res = await app.inject({ method, url, headers: { authorization }, ...(body ? { payload: body } : {}) });
        expect(res.statusCode, `${where}: ${res.body}`).toBe(401);
        expect(res.headers['www-authenticate'], where).toBe('Bearer realm="corkboard"');
        if (method !== ('HEAD' as string)) expect(res.json(), where).toMatchObject(path.startsWith('/boards') ? { code: '401', data: null } : { status: 401 });
      }
      checked.push(op.operationId);
    }
    for (const operationId of ['createUser', 'createToken', 'listUsers', 'getPost', 'getHealth', 'getMetrics', 'getOpenApi', 'createPost']) {
      expect(checked).toContain(operationId);
    }
    // Nothing was created by any of them.
    expect(await app.db.selectFrom('users').select('id').execute()).toEqual([]);
    for (const url of ['/docs', '/docs/static/swagger-ui.css']) {
      const res = await app.inject({ method: 'GET', url, headers: { authorization: 'token cb_abc' } });
      expect(res.statusCode, url).toBe(401);
      expect(res.headers['www-authenticate'], url).toBe('Bearer realm="corkboard"');
    }
  });

  it('is 401 on a public read where the same request without it is a 200, and on HEAD', async () => {
    const app = await buildTestApp();
    const created = await call(app, 'POST', '/users', { body: { username: 'basic_user', password: 'password 123' } });
    const url = `/users/${created.json().id}`;
    expect((await call(app, 'GET', url)).statusCode).toBe(200);
    const read = await call(app, 'GET', url, { headers: { authorization: 'token cb_abc' } });
    expect(read.statusCode).toBe(401);
    expect(read.headers['www-authenticate']).toBe('Bearer realm="corkboard"');
    expect(read.json()).toMatchObject({ status: 401, detail: 'The Authorization header must be a bearer token: Authorization: Bearer <token>' });
    expect((await app.inject({ method: 'HEAD', url, headers: { authorization: 'token cb_abc' } })).statusCode).toBe(401);
  });

  it('a malformed request is still 400 first (CONTRACT §6.1 order)', async () => {
    const app = await buildTestApp();
    const res = await call(app, 'GET', '/users/abc', { headers: { authorization: 'token cb_abc' } });
    expect(res.statusCode).toBe(400);
  });
});

describe('sign-up and sign-in', () => {
  it('ignore a stale bearer token: it does not stop a client signing up or in again', async () => {
    const app = await buildTestApp();
    const stale = { authorization: 'Bearer cb_expired-long-ago' };
    const created = await call(app, 'POST', '/users', { body: { username: 'stale_header', password: 'password 123' }, headers: stale });
    expect(created.statusCode).toBe(201);
    const signedIn = await call(app, 'POST', '/tokens', { body: { username: 'stale_header', password: 'password 123' }, headers: stale });
    expect(signedIn.statusCode).toBe(201);
  });
});
