import { describe, expect, it } from 'vitest';
import { PUBLIC_URL, buildTestApp, call } from '../../../test/helpers/build-test-app.js';
import { createAdmin, signIn, signUp } from '../../../test/helpers/factories.js';

const PROBLEM = 'application/problem+json; charset=utf-8';

describe('POST /users (sign-up)', () => {
  it('creates the user: 201, Location, the representation, a stored Argon2id hash', async () => {
    const app = await buildTestApp();
    const res = await call(app, 'POST', '/users', {
      body: { username: 'Ada_L', password: 'correct horse', displayName: 'Ada', bio: 'Engines' },
    });
    expect(res.statusCode).toBe(201);
    const user = res.json();
    expect(res.headers.location).toBe(`${PUBLIC_URL}/users/${user.id}`);
    expect(user).toEqual({
      id: expect.any(Number),
      username: 'Ada_L',
      displayName: 'Ada',
      bio: 'Engines',
      role: 'member',
      followerCount: 0,
      followingCount: 0,
      postCount: 0,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updatedAt: user.createdAt,
      links: [
        { rel: 'self', href: `${PUBLIC_URL}/users/${user.id}`, method: 'GET' },
        { rel: 'followers', href: `${PUBLIC_URL}/users/${user.id}/followers`, method: 'GET' },
        { rel: 'following', href: `${PUBLIC_URL}/users/${user.id}/following`, method: 'GET' },
        { rel: 'posts', href: `${PUBLIC_URL}/users/${user.id}/posts`, method: 'GET' },
      ],
    });
    expect(res.body).not.toContain('password');
    const row = await app.db.selectFrom('users').selectAll().where('id', '=', user.id).executeTakeFirstOrThrow();
    expect(row.password_hash).toMatch(/^\$argon2id\$v=19\$m=64,t=2,p=1\$/);
    expect(row.password_hash).not.toContain('correct horse');
  });

  it('answers 409 when the username is taken in any letter case, and stores nothing', async () => {
    const app = await buildTestApp();
    await signUp(app, { username: 'grace' });
    const res = await call(app, 'POST', '/users', { body: { username: 'GRACE', password: 'another one' } });
    expect(res.statusCode).toBe(409);
    expect(res.headers['content-type']).toBe(PROBLEM);
    expect(res.json()).toMatchObject({ status: 409, errors: [{ field: 'username' }] });
    const count = await app.db.selectFrom('users').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    expect(Number(count.n)).toBe(1);
  });

  it.each([
    ['a missing username', { password: 'password1' }, 'username'],
    ['a short username', { username: 'ab', password: 'password1' }, 'username'],
    ['a long username', { username: 'a'.repeat(33), password: 'password1' }, 'username'],
    ['a username with a space', { username: 'a b c', password: 'password1' }, 'username'],
    ['a numeric username', { username: 12345, password: 'password1' }, 'username'],
    ['a short password', { username: 'valid_name', password: 'short' }, 'password'],
    ['a long password', { username: 'valid_name', password: 'x'.repeat(257) }, 'password'],
    ['a long displayName', { username: 'valid_name', password: 'password1', displayName: 'x'.repeat(65) }, 'displayName'],
    ['a long bio', { username: 'valid_name', password: 'password1', bio: 'x'.repeat(501) }, 'bio'],
    ['U+0000 in the bio', { username: 'valid_name', password: 'password1', bio: 'a\u0000b' }, 'bio'],
    ['an unknown field', { username: 'valid_name', password: 'password1', admin: true }, 'admin'],
    ['a read-only role', { username: 'valid_name', password: 'password1', role: 'admin' }, 'role'],
  ])('rejects %s with 400 naming the field', async (_case, body, field) => {
    const app = await buildTestApp();
    const res = await call(app, 'POST', '/users', { body });
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toBe(PROBLEM);
    expect(res.json().errors.map((e: { field: string }) => e.field)).toContain(field);
    expect(await app.db.selectFrom('users').selectAll().execute()).toEqual([]);
  });

  it.each([
    ['malformed JSON', '{"username":', 'application/json', 400],
    ['a JSON array', '[1,2]', 'application/json', 400],
    ['an empty body', '', 'application/json', 400],
    ['text/plain', 'username=x', 'text/plain', 415],
    ['a form', 'username=x', 'application/x-www-form-urlencoded', 415],
  ])('rejects %s', async (_case, payload, type, status) => {
    const app = await buildTestApp();
    const res = await app.inject({ method: 'POST', url: '/users', payload, headers: { 'content-type': type } });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    expect(res.json()).toMatchObject({ status, title: expect.any(String), detail: expect.any(String), instance: '/users' });
  });

  it('accepts a charset parameter on the content type', async () => {
    const app = await buildTestApp();
    const res = await app.inject({
      method: 'POST',
      url: '/users',
      payload: JSON.stringify({ username: 'charset_ok', password: 'password1' }),
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    expect(res.statusCode).toBe(201);
  });

  it('answers 413 for a body over the limit', async () => {
    const app = await buildTestApp({ bodyLimit: 2048 });
    const res = await call(app, 'POST', '/users', { body: { username: 'big_body', password: 'password1', bio: 'x'.repeat(4000) } });
    expect(res.statusCode).toBe(413);
    expect(res.headers['content-type']).toBe(PROBLEM);
  });
});

describe('GET /users and GET /users/{user_id}', () => {
  it('lists users in id order, filters by username case-insensitively, and pages with Link', async () => {
    const app = await buildTestApp();
    const a = await signUp(app, { username: 'alpha' });
    const b = await signUp(app, { username: 'beta' });
    const c = await signUp(app, { username: 'gamma' });

    const all = await call(app, 'GET', '/users');
    expect(all.statusCode).toBe(200);
    expect(all.json().map((u: { id: number }) => u.id)).toEqual([a.id, b.id, c.id]);
    expect(all.headers.link).toBeUndefined();

    const filtered = await call(app, 'GET', '/users?username=BETA');
    expect(filtered.json().map((u: { username: string }) => u.username)).toEqual(['beta']);

    const first = await call(app, 'GET', '/users?limit=2');
    expect(first.json().map((u: { id: number }) => u.id)).toEqual([a.id, b.id]);
    const next = /^<([^>]+)>; rel="next"$/.exec(String(first.headers.link))?.[1];
    expect(next).toMatch(new RegExp(`^${PUBLIC_URL}/users\\?limit=2&cursor=`));
    const second = await call(app, 'GET', next!.slice(PUBLIC_URL.length));
    expect(second.json().map((u: { id: number }) => u.id)).toEqual([c.id]);
    expect(second.headers.link).toBeUndefined();
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['limit=abc', 'limit'],
    ['limit=1.5', 'limit'],
    ['limit=1e1', 'limit'],
    ['limit=0x10', 'limit'],
    ['limit=%2B5', 'limit'],
    ['limit=%205', 'limit'],
    ['limit=5.0', 'limit'],
    ['cursor=garbage', 'cursor'],
    ['cursor=MQ.AAAAAAAAAAAAAAAA', 'cursor'],
    ['cursor=%00', 'cursor'],
    ['username=a%00b', 'username'],
  ])('rejects ?%s with 400 naming the field', async (query, field) => {
    const app = await buildTestApp();
    const res = await call(app, 'GET', `/users?${query}`);
    expect(res.statusCode).toBe(400);
    expect(res.json().errors[0].field).toBe(field);
  });

  it('rejects a cursor from another collection', async () => {
    const app = await buildTestApp();
    await signUp(app);
    await signUp(app);
    const first = await call(app, 'GET', '/users?limit=1');
    const cursor = new URL(/<([^>]+)>/.exec(String(first.headers.link))![1]!).searchParams.get('cursor');
    const res = await call(app, 'GET', `/users?username=x&cursor=${cursor}`);
    expect(res.statusCode).toBe(400);
  });

  it('reads one user; the same GET twice gives the same body', async () => {
    const app = await buildTestApp();
    const a = await signUp(app, { username: 'reader' });
    const one = await call(app, 'GET', `/users/${a.id}`);
    const again = await call(app, 'GET', `/users/${a.id}`);
    expect(one.statusCode).toBe(200);
    expect(one.json().username).toBe('reader');
    expect(again.body).toBe(one.body);
  });

  it.each([
    ['abc', 400],
    ['1.5', 400],
    ['-3', 400],
    ['007', 400],
    ['9223372036854775808', 400],
    ['99999999999999999999', 400],
    ['9223372036854775807', 404],
    ['0', 404],
    ['424242', 404],
  ])('GET /users/%s answers %i', async (id, status) => {
    const app = await buildTestApp();
    const res = await call(app, 'GET', `/users/${id}`);
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (status === 400) expect(res.json().errors[0].field).toBe('user_id');
  });
});

describe('PUT /users/{user_id}', () => {
  const replacement = { username: 'renamed', displayName: 'New Name', bio: 'New bio' };

  it('replaces the user for themself, ignoring read-only fields sent back', async () => {
    const app = await buildTestApp();
    const a = await signUp(app, { username: 'before', bio: 'old' });
    const read = (await call(app, 'GET', `/users/${a.id}`)).json();
    const res = await call(app, 'PUT', `/users/${a.id}`, { token: a.token, body: { ...read, ...replacement, followerCount: 99 } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ ...replacement, id: a.id, followerCount: 0, createdAt: read.createdAt });
    const row = await app.db.selectFrom('users').selectAll().where('id', '=', a.id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ username: 'renamed', username_key: 'renamed', display_name: 'New Name', bio: 'New bio', follower_count: 0 });
  });

  it('lets an admin replace anyone and change a role', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const a = await signUp(app);
    const res = await call(app, 'PUT', `/users/${a.id}`, { token: admin.token, body: { ...replacement, role: 'admin' } });
    expect(res.statusCode).toBe(200);
    expect(res.json().role).toBe('admin');
  });

  it.each([
    ['no token', undefined, {}, 401],
    ['a garbage token', 'garbage', {}, 401],
    ['a missing field (not a patch)', 'self', { bio: undefined }, 400],
    ['an id that differs from the path', 'self', { id: 999 }, 400],
    ['a member changing their own role', 'self', { role: 'admin' }, 403],
    ['another member', 'other', {}, 403],
    ['a taken username', 'self', { username: 'TAKEN' }, 409],
  ])('answers with %s', async (_case, who, change, status) => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const other = await signUp(app, { username: 'taken' });
    const token = who === 'self' ? a.token : who === 'other' ? other.token : who;
    const res = await call(app, 'PUT', `/users/${a.id}`, { token, body: { ...replacement, ...change } });
    expect(res.statusCode).toBe(status);
    if (status === 401) expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    const row = await app.db.selectFrom('users').selectAll().where('id', '=', a.id).executeTakeFirstOrThrow();
    expect(row.username).toBe(a.username);
  });

  it('answers 404 for a user that does not exist', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const res = await call(app, 'PUT', '/users/424242', { token: admin.token, body: replacement });
    expect(res.statusCode).toBe(404);
  });
});

describe('PUT /users/{user_id}/password', () => {
  it('changes the password and revokes the other tokens, keeping the current one', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const second = await signIn(app, a.username, a.password);
    const res = await call(app, 'PUT', `/users/${a.id}/password`, {
      token: a.token,
      body: { currentPassword: a.password, newPassword: 'a brand new secret' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().id).toBe(a.id);
    expect((await call(app, 'PUT', `/users/${a.id}`, { token: second, body: { username: a.username, displayName: '', bio: '' } })).statusCode).toBe(401);
    expect((await call(app, 'PUT', `/users/${a.id}`, { token: a.token, body: { username: a.username, displayName: '', bio: '' } })).statusCode).toBe(200);
    expect((await call(app, 'POST', '/tokens', { body: { username: a.username, password: a.password } })).statusCode).toBe(401);
    expect((await call(app, 'POST', '/tokens', { body: { username: a.username, password: 'a brand new secret' } })).statusCode).toBe(201);
  });

  it.each([
    ['no token', 'none', 'correct horse battery', 401],
    ['a wrong current password', 'self', 'wrong password', 403],
    ['another user', 'other', 'correct horse battery', 403],
  ])('answers with %s', async (_case, who, currentPassword, status) => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const other = await signUp(app);
    const token = who === 'self' ? a.token : who === 'other' ? other.token : undefined;
    const res = await call(app, 'PUT', `/users/${a.id}/password`, { token, body: { currentPassword, newPassword: 'new password 1' } });
    expect(res.statusCode).toBe(status);
    expect((await call(app, 'POST', '/tokens', { body: { username: a.username, password: a.password } })).statusCode).toBe(201);
  });

  it('rejects a short new password with 400', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const res = await call(app, 'PUT', `/users/${a.id}/password`, { token: a.token, body: { currentPassword: a.password, newPassword: 'short' } });
    expect(res.statusCode).toBe(400);
    expect(res.json().errors[0].field).toBe('newPassword');
  });
});

describe('DELETE /users/{user_id} and DELETE /users', () => {
  it('lets a user delete themself: 200, then 404, and their tokens stop working', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const res = await call(app, 'DELETE', `/users/${a.id}`, { token: a.token });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ deleted: 1 });
    expect((await call(app, 'GET', `/users/${a.id}`)).statusCode).toBe(404);
    expect(await app.db.selectFrom('tokens').selectAll().where('user_id', '=', a.id).execute()).toEqual([]);
    expect((await call(app, 'DELETE', `/users/${a.id}`, { token: a.token })).statusCode).toBe(401);
  });

  it.each([
    ['no token', 'none', 'existing', 401],
    ['another member', 'other', 'existing', 403],
    ['a user that does not exist (seed §7)', 'admin', 'missing', 400],
    ['a malformed id', 'admin', 'abc', 400],
  ])('answers with %s', async (_case, who, target, status) => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const a = await signUp(app);
    const other = await signUp(app);
    const token = who === 'admin' ? admin.token : who === 'other' ? other.token : undefined;
    const id = target === 'existing' ? a.id : target === 'missing' ? 424242 : target;
    const res = await call(app, 'DELETE', `/users/${id}`, { token });
    expect(res.statusCode).toBe(status);
    expect((await call(app, 'GET', `/users/${a.id}`)).statusCode).toBe(200);
  });

  it('lets an admin delete another user', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const a = await signUp(app);
    expect((await call(app, 'DELETE', `/users/${a.id}`, { token: admin.token })).statusCode).toBe(200);
    expect((await call(app, 'GET', `/users/${a.id}`)).statusCode).toBe(404);
  });

  it('removes all users for an admin only, answering how many', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const a = await signUp(app);
    await signUp(app);
    expect((await call(app, 'DELETE', '/users')).statusCode).toBe(401);
    expect((await call(app, 'DELETE', '/users', { token: a.token })).statusCode).toBe(403);
    expect((await app.db.selectFrom('users').selectAll().execute()).length).toBe(3);
    const res = await call(app, 'DELETE', '/users', { token: admin.token });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ deleted: 3 });
    expect((await call(app, 'GET', '/users')).json()).toEqual([]);
    expect(await app.db.selectFrom('tokens').selectAll().execute()).toEqual([]);
  });
});

describe('whole-interface rules', () => {
  it('answers 405 with Allow for another method on a known path, 404 for an unknown path', async () => {
    const app = await buildTestApp();
    const patch = await call(app, 'PATCH', '/users/1');
    expect(patch.statusCode).toBe(405);
    expect(patch.headers.allow).toBe('DELETE, GET, HEAD, PUT');
    expect(patch.headers['content-type']).toBe(PROBLEM);
    const unknown = await call(app, 'GET', '/nowhere');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toMatchObject({ status: 404, instance: '/nowhere' });
    // A trailing slash leaves an empty id to the router: no path of the interface, not a malformed id (400).
    for (const [method, path] of [['GET', '/users/'], ['DELETE', '/users/'], ['GET', '/posts/'], ['GET', '/posts/1/replies/'], ['PUT', '/users/1/followers/']] as const) {
      const res = await call(app, method, path);
      expect([method, path, res.statusCode, res.headers['content-type']]).toEqual([method, path, 404, PROBLEM]);
    }
  });

  it('echoes a sane X-Request-Id and generates one otherwise', async () => {
    const app = await buildTestApp();
    expect((await call(app, 'GET', '/health', { headers: { 'x-request-id': 'abc-123' } })).headers['x-request-id']).toBe('abc-123');
    const generated = (await call(app, 'GET', '/health', { headers: { 'x-request-id': 'bad id\twith spaces' } })).headers['x-request-id'];
    expect(generated).toMatch(/^[0-9a-f]{16}-[0-9a-z]+$/);
    const next = String((await call(app, 'GET', '/nowhere')).headers['x-request-id']);
    expect(next).toMatch(/^[0-9a-f]{16}-[0-9a-z]+$/);
    // One process: the same random prefix, a new counter. Another process (app): another prefix.
    expect(next).not.toBe(generated);
    expect(next.split('-')[0]).toBe(String(generated).split('-')[0]);
    const other = await buildTestApp();
    expect(String((await call(other, 'GET', '/health')).headers['x-request-id']).split('-')[0]).not.toBe(String(generated).split('-')[0]);
  });
});

describe('protocol-level methods', () => {
  it('answers HEAD on a GET route like GET without a body', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const res = await call(app, 'HEAD', `/users/${a.id}`);
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('');
  });

  it('answers a CORS preflight, and a plain OPTIONS with 405 and Allow', async () => {
    const app = await buildTestApp();
    const preflight = await call(app, 'OPTIONS', '/users/1', {
      headers: { origin: 'http://app.example', 'access-control-request-method': 'PUT' },
    });
    expect(preflight.statusCode).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('http://app.example');
    expect(preflight.headers['access-control-allow-methods']).toBe('GET, HEAD, POST, PUT, DELETE');
    expect(preflight.headers['access-control-max-age']).toBe('600');
    expect(preflight.headers.vary).toBe('Origin, Access-Control-Request-Headers');
    expect(preflight.headers['access-control-allow-headers']).toBeUndefined();
    expect(preflight.body).toBe('');
    // The headers a browser asks to send are allowed back, whatever they are (the token, JSON, idempotency keys).
    const withHeaders = await call(app, 'OPTIONS', '/users', {
      headers: { origin: 'http://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
    });
    expect(withHeaders.statusCode).toBe(204);
    expect(withHeaders.headers['access-control-allow-headers']).toBe('authorization, content-type');
    // A "preflight" without an Origin is no CORS request: it is a plain OPTIONS.
    const noOrigin = await call(app, 'OPTIONS', '/users/1', { headers: { 'access-control-request-method': 'PUT' } });
    expect(noOrigin.statusCode).toBe(405);
    expect(noOrigin.headers['access-control-allow-origin']).toBeUndefined();
    const plain = await call(app, 'OPTIONS', '/users/1');
    expect(plain.statusCode).toBe(405);
    expect(plain.headers.allow).toBe('DELETE, GET, HEAD, PUT');
    expect(plain.headers['content-type']).toBe(PROBLEM);
    expect((await call(app, 'OPTIONS', '/nowhere')).statusCode).toBe(404);
  });

  it('adds CORS headers to answers for a browser origin, errors included, and only Vary without one', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const origin = 'https://app.example';
    for (const [url, status] of [[`/users/${a.id}`, 200], ['/users/999999', 404], ['/nowhere', 404]] as const) {
      const res = await call(app, 'GET', url, { headers: { origin } });
      expect(res.statusCode).toBe(status);
      expect(res.headers['access-control-allow-origin']).toBe(origin);
      expect(res.headers['access-control-expose-headers']).toBe(
        'Location, Link, X-Request-Id, Retry-After, WWW-Authenticate, ETag, Idempotent-Replayed, RateLimit-Policy, RateLimit',
      );
      // accept-encoding: compressible answers name it, compressed or not (src/plugins/compression.ts); Authorization:
      // GET answers depend on the caller (shared/conditional.ts).
      expect(res.headers.vary).toBe('Origin, Authorization, accept-encoding');
    }
    const plain = await call(app, 'GET', `/users/${a.id}`);
    expect(plain.statusCode).toBe(200);
    expect(plain.headers.vary).toBe('Origin, Authorization, accept-encoding');
    expect(plain.headers['access-control-allow-origin']).toBeUndefined();
    expect(plain.headers['access-control-expose-headers']).toBeUndefined();
  });

  it('answers 503 with Retry-After, a generic body and a request id when the database is gone', async () => {
    const app = await buildTestApp();
    await app.store.close();
    const res = await call(app, 'GET', '/users/1', { headers: { 'x-request-id': 'trace-me-1' } });
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.json()).toEqual({
      type: 'about:blank',
      title: 'Service Unavailable',
      status: 503,
      detail: 'The database is unavailable; retry later',
      instance: '/users/1',
      requestId: 'trace-me-1',
    });
    expect((await call(app, 'GET', '/health')).statusCode).toBe(503);
  });
});
