import { describe, expect, it } from 'vitest';
import { PUBLIC_URL, buildTestApp, call, write } from '../../../test/helpers/build-test-app.js';
import { createAdmin, signUp } from '../../../test/helpers/factories.js';
import { hashToken } from '../../shared/tokens.js';

const replaceSelf = (u: { username: string }) => ({ username: u.username, displayName: 'x', bio: '' });

describe('POST /tokens', () => {
  it('issues a token: 201, Location, expiry from the TTL, stored only as a hash', async () => {
    const app = await buildTestApp({ tokenTtlSeconds: 600 });
    const a = await signUp(app);
    const before = Date.now();
    const res = await call(app, 'POST', '/tokens', { body: { username: a.username.toUpperCase(), password: a.password } });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toEqual({ id: expect.any(Number), token: expect.stringMatching(/^cb_[A-Za-z0-9_-]{43}$/), expiresAt: expect.any(String), userId: a.id });
    expect(res.headers.location).toBe(`${PUBLIC_URL}/tokens/${body.id}`);
    const ttl = Date.parse(body.expiresAt) - before;
    expect(ttl).toBeGreaterThan(599_000);
    expect(ttl).toBeLessThan(601_000);
    const row = await app.db.selectFrom('tokens').selectAll().where('id', '=', body.id).executeTakeFirstOrThrow();
    expect(row.token_hash).toBe(hashToken(body.token));
    expect(JSON.stringify(row)).not.toContain(body.token);
    expect((await call(app, 'PUT', `/users/${a.id}`, { token: body.token, body: replaceSelf(a) })).statusCode).toBe(200);
  });

  it.each([
    ['a wrong password', 'known', 'wrong password', 401],
    ['an unknown username', 'unknown', 'correct horse battery', 401],
  ])('answers %s with 401 and issues nothing', async (_case, who, password, status) => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const res = await call(app, 'POST', '/tokens', { body: { username: who === 'known' ? a.username : 'nobody_here', password } });
    expect(res.statusCode).toBe(status);
    expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(res.json().detail).toBe('The username or password is incorrect');
    expect((await app.db.selectFrom('tokens').selectAll().execute()).length).toBe(1);
  });

  it.each([
    ['no body fields', {}, 'username'],
    ['a missing password', { username: 'someone' }, 'password'],
    ['an unknown field', { username: 'someone', password: 'x', remember: true }, 'remember'],
    ['a numeric password', { username: 'someone', password: 12345678 }, 'password'],
    ['a username with U+0000', { username: 'some\u0000one', password: 'correct horse battery' }, 'username'],
    ['a password with U+0000', { username: 'someone', password: 'correct\u0000horse' }, 'password'],
  ])('rejects %s with 400 naming the field', async (_case, body, field) => {
    const app = await buildTestApp();
    const res = await call(app, 'POST', '/tokens', { body });
    expect(res.statusCode).toBe(400);
    expect(res.json().errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  it('rejects an expired token with 401 invalid_token', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    await write(app, (db) => db.updateTable('tokens').set({ expires_at: new Date(Date.now() - 1000).toISOString() }).execute());
    const res = await call(app, 'PUT', `/users/${a.id}`, { token: a.token, body: replaceSelf(a) });
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toContain('error="invalid_token"');
  });

  it('sweeps expired tokens when a new one is issued', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    await write(app, (db) => db.updateTable('tokens').set({ expires_at: new Date(Date.now() - 1000).toISOString() }).execute());
    await call(app, 'POST', '/tokens', { body: { username: a.username, password: a.password } });
    expect((await app.db.selectFrom('tokens').selectAll().execute()).length).toBe(1);
  });
});

describe('DELETE /tokens/{token_id}', () => {
  it('revokes the token for its owner: 200, and the token stops working at once', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const id = (await app.db.selectFrom('tokens').select('id').executeTakeFirstOrThrow()).id;
    const res = await call(app, 'DELETE', `/tokens/${id}`, { token: a.token });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ deleted: 1 });
    expect(await app.db.selectFrom('tokens').selectAll().execute()).toEqual([]);
    expect((await call(app, 'PUT', `/users/${a.id}`, { token: a.token, body: replaceSelf(a) })).statusCode).toBe(401);
  });

  it.each([
    ['no token', 'none', 'existing', 401],
    ['another member', 'other', 'existing', 403],
    ['a token that does not exist (seed §7)', 'owner', 'missing', 400],
    ['a malformed id', 'owner', 'x1', 400],
  ])('answers %s', async (_case, who, target, status) => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const other = await signUp(app);
    const id = (await app.db.selectFrom('tokens').select('id').where('user_id', '=', a.id).executeTakeFirstOrThrow()).id;
    const token = who === 'owner' ? a.token : who === 'other' ? other.token : undefined;
    const res = await call(app, 'DELETE', `/tokens/${target === 'existing' ? id : target === 'missing' ? 424242 : target}`, { token });
    expect(res.statusCode).toBe(status);
    expect(await app.db.selectFrom('tokens').select('id').where('id', '=', id).executeTakeFirst()).toEqual({ id });
  });

  it('lets an admin revoke anyone’s token', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const a = await signUp(app);
    const id = (await app.db.selectFrom('tokens').select('id').where('user_id', '=', a.id).executeTakeFirstOrThrow()).id;
    expect((await call(app, 'DELETE', `/tokens/${id}`, { token: admin.token })).statusCode).toBe(200);
  });
});
