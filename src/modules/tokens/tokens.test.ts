import { CompiledQuery } from 'kysely';
import { describe, expect, it } from 'vitest';
import { PUBLIC_URL, buildTestApp, call, write } from '../../../test/helpers/build-test-app.js';
import { expectCreatedAtInIdOrder, nextPath } from '../../../test/helpers/api.js';
import { createAdmin, signIn, signUp, type TestUser } from '../../../test/helpers/factories.js';
import { backend, sqlitePlan } from '../../../test/helpers/database.js';
import { hashToken } from '../../shared/tokens.js';
import { createTokensRepository } from './tokens.repository.js';

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
    // Another member's token is answered as a missing one (CONTRACT §2), as GET answers it 404.
    ['another member', 'other', 'existing', 400],
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

  it('answers two revocations of one token sent at once 200 and 400: one of them revoked it', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const other = await signIn(app, a.username, a.password);
    const id = await idOf(app, other);
    const answers = await Promise.all([1, 2, 3].map(() => call(app, 'DELETE', `/tokens/${id}`, { token: a.token })));
    expect(answers.map((r) => r.statusCode).sort()).toEqual([200, 400, 400]);
    expect(await app.db.selectFrom('tokens').select('id').where('id', '=', id).executeTakeFirst()).toBeUndefined();
  });

  it('lets an admin revoke anyone’s token', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const a = await signUp(app);
    const id = (await app.db.selectFrom('tokens').select('id').where('user_id', '=', a.id).executeTakeFirstOrThrow()).id;
    expect((await call(app, 'DELETE', `/tokens/${id}`, { token: admin.token })).statusCode).toBe(200);
  });
});

/** The id of the token `secret`, read from the database (sign-in answers it too, but signIn keeps only the secret). */
const idOf = async (app: Awaited<ReturnType<typeof buildTestApp>>, secret: string) =>
  (await app.db.selectFrom('tokens').select('id').where('token_hash', '=', hashToken(secret)).executeTakeFirstOrThrow()).id;

const expire = (app: Awaited<ReturnType<typeof buildTestApp>>, id: number) =>
  write(app, (db) => db.updateTable('tokens').set({ expires_at: new Date(Date.now() - 1000).toISOString() }).where('id', '=', id).execute());

/** The secret and its hash appear nowhere in an answer. */
async function expectNoSecret(app: Awaited<ReturnType<typeof buildTestApp>>, body: string, ...users: TestUser[]) {
  const hashes = await app.db.selectFrom('tokens').select('token_hash').execute();
  expect(hashes.length).toBeGreaterThan(0);
  for (const { token_hash } of hashes) expect(body).not.toContain(token_hash);
  for (const user of users) expect(body).not.toContain(user.token);
}

describe('GET /tokens/{token_id}', () => {
  it('shows its owner the token without its secret: id, userId, createdAt, expiresAt, links; ETag and 304', async () => {
    const app = await buildTestApp({ tokenTtlSeconds: 600 });
    const a = await signUp(app);
    const row = await app.db.selectFrom('tokens').selectAll().where('user_id', '=', a.id).executeTakeFirstOrThrow();
    const res = await call(app, 'GET', `/tokens/${row.id}`, { token: a.token });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      id: row.id,
      userId: a.id,
      createdAt: new Date(row.created_at).toISOString(),
      expiresAt: new Date(row.expires_at).toISOString(),
      links: [
        { rel: 'self', href: `${PUBLIC_URL}/tokens/${row.id}`, method: 'GET' },
        { rel: 'user', href: `${PUBLIC_URL}/users/${a.id}`, method: 'GET' },
      ],
    });
    expect(Date.parse(res.json().expiresAt) - Date.parse(res.json().createdAt)).toBe(600_000);
    await expectNoSecret(app, res.body, a);
    expect(res.headers['cache-control']).toBe('private, no-cache');
    const etag = res.headers.etag;
    expect(etag).toMatch(/^"/);
    const again = await call(app, 'GET', `/tokens/${row.id}`, { token: a.token, headers: { 'if-none-match': String(etag) } });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
  });

  it('lets an admin read anyone’s token', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const a = await signUp(app);
    const id = await idOf(app, a.token);
    const res = await call(app, 'GET', `/tokens/${id}`, { token: admin.token });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ id, userId: a.id });
  });

  it.each([
    ['no token', 'none', 'existing', 401],
    ['another member (as if it did not exist)', 'other', 'existing', 404],
    ['an id that matches nothing', 'owner', 'missing', 404],
    ['a malformed id', 'owner', '007', 400],
    ['an id beyond 64 bits', 'owner', '9223372036854775808', 400],
  ])('answers %s', async (_case, who, target, status) => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const other = await signUp(app);
    const id = await idOf(app, a.token);
    const token = who === 'owner' ? a.token : who === 'other' ? other.token : undefined;
    const url = `/tokens/${target === 'existing' ? id : target === 'missing' ? 424242 : target}`;
    const res = await call(app, 'GET', url, { token });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect((await call(app, 'HEAD', url, { token })).statusCode).toBe(status);
    if (status === 404) expect(res.json().detail).toBe('token not found'); // the same words for both 404s
  });

  it('answers a revoked, an expired and a superseded token with 404, to its owner and to an admin alike', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const a = await signUp(app);
    const revoked = await idOf(app, await signIn(app, a.username, a.password));
    const expired = await idOf(app, await signIn(app, a.username, a.password));
    const superseded = await idOf(app, await signIn(app, a.username, a.password));
    expect((await call(app, 'DELETE', `/tokens/${revoked}`, { token: a.token })).statusCode).toBe(200);
    await expire(app, expired);
    // A sign-in that raced a password change leaves a row minted with the old version behind: it signs nobody in.
    await write(app, (db) => db.updateTable('tokens').set({ password_version: -1 }).where('id', '=', superseded).execute());
    for (const id of [revoked, expired, superseded]) {
      expect((await call(app, 'GET', `/tokens/${id}`, { token: a.token })).statusCode).toBe(404);
      expect((await call(app, 'GET', `/tokens/${id}`, { token: admin.token })).statusCode).toBe(404);
      // DELETE agrees with GET on what exists: a dead token is no token to revoke.
      expect((await call(app, 'DELETE', `/tokens/${id}`, { token: a.token })).statusCode).toBe(400);
    }
    expect((await call(app, 'GET', `/tokens/${await idOf(app, a.token)}`, { token: a.token })).statusCode).toBe(200);
  });
});

describe('GET /users/{user_id}/tokens', () => {
  it('lists the user’s live tokens newest first, paged with Link rel="next", leaving out revoked, expired and others’', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const other = await signUp(app);
    const secrets = [a.token];
    for (let i = 0; i < 5; i++) secrets.push(await signIn(app, a.username, a.password));
    const ids = await Promise.all(secrets.map((secret) => idOf(app, secret)));
    // ids[0] (a.token) is the caller's; of the others, one is revoked and one expired.
    expect((await call(app, 'DELETE', `/tokens/${ids[2]}`, { token: a.token })).statusCode).toBe(200);
    await expire(app, ids[4]!);
    const live = [ids[5], ids[3], ids[1], ids[0]];

    const seen: { id: number; userId: number; createdAt: string }[] = [];
    let path: string | undefined = `/users/${a.id}/tokens?limit=3`;
    let pages = 0;
    while (path) {
      const res = await call(app, 'GET', path, { token: a.token });
      expect(res.statusCode).toBe(200);
      await expectNoSecret(app, res.body, a, other);
      if (pages === 0) expect(res.headers.link).toMatch(new RegExp(`^<${PUBLIC_URL}/users/${a.id}/tokens\\?limit=3&cursor=[^>]+>; rel="next"$`));
      seen.push(...res.json());
      path = nextPath(res.headers.link);
      pages++;
    }
    expect(pages).toBe(2);
    expect(seen.map((t) => t.id)).toEqual(live);
    expect(seen.every((t) => t.userId === a.id)).toBe(true);
    expectCreatedAtInIdOrder(seen, 'newest first');
    const first = await call(app, 'GET', `/users/${a.id}/tokens`, { token: a.token });
    expect(first.json()[0]).toEqual((await call(app, 'GET', `/tokens/${live[0]}`, { token: a.token })).json());
    expect(first.headers.link).toBeUndefined();
  });

  it('lets an admin list anyone’s tokens', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const a = await signUp(app);
    const res = await call(app, 'GET', `/users/${a.id}/tokens`, { token: admin.token });
    expect(res.statusCode).toBe(200);
    expect(res.json().map((t: { id: number }) => t.id)).toEqual([await idOf(app, a.token)]);
  });

  it.each([
    ['no token', 'none', 'existing', '', 401],
    ['another member', 'other', 'existing', '', 403],
    ['an unknown user, to a member', 'other', 'missing', '', 404],
    ['an unknown user, to an admin', 'admin', 'missing', '', 404],
    ['a malformed user id', 'owner', '1.5', '', 400],
    ['a limit of 0', 'owner', 'existing', '?limit=0', 400],
    ['a limit of 101', 'owner', 'existing', '?limit=101', 400],
    ['a tampered cursor', 'owner', 'existing', '?cursor=5.AAAAAAAAAAAAAAAA', 400],
    ['an unknown query parameter', 'owner', 'existing', '?offset=2', 400],
  ])('answers %s', async (_case, who, target, query, status) => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const a = await signUp(app);
    const other = await signUp(app);
    const token = { owner: a.token, other: other.token, admin: admin.token, none: undefined }[who];
    const res = await call(app, 'GET', `/users/${target === 'existing' ? a.id : target === 'missing' ? 424242 : target}/tokens${query}`, { token });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  });

  it('refuses a cursor of another user’s list (400 naming cursor)', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const a = await signUp(app);
    await signIn(app, a.username, a.password);
    await signIn(app, admin.username, admin.password);
    const page = await call(app, 'GET', `/users/${admin.id}/tokens?limit=1`, { token: admin.token });
    const cursor = /cursor=([^&>]+)/.exec(String(page.headers.link))?.[1];
    expect(cursor).toBeDefined();
    const res = await call(app, 'GET', `/users/${a.id}/tokens?limit=1&cursor=${cursor}`, { token: admin.token });
    expect(res.statusCode).toBe(400);
    expect(res.json().errors).toEqual([{ field: 'cursor', message: expect.any(String) }]);
  });
});

describe('query plan: a page of a user’s tokens is a range of the (user_id, id) index', () => {
  it('walks the index backwards from the cursor, with no sort', async () => {
    const app = await buildTestApp();
    const query = createTokensRepository(app.db).listLiveQuery(1, new Date().toISOString(), { limit: 20, after: 500 });
    if (backend === 'sqlite') {
      const details = await sqlitePlan(app.db, query);
      expect(details).toContain('SEARCH tokens USING INDEX tokens_user_id_id (user_id=? AND id<?)');
      expect(details.join('\n')).not.toMatch(/TEMP B-TREE|SCAN /);
    } else {
      const { sql, parameters } = query.compile();
      const plan = await app.db.executeQuery<{ 'QUERY PLAN': string }>(CompiledQuery.raw(`EXPLAIN ${sql}`, [...parameters]));
      const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
      expect(text).toMatch(/Index Scan Backward using tokens_user_id_id on tokens/);
      expect(text).not.toMatch(/Sort|Seq Scan on tokens/);
    }
  });
});
