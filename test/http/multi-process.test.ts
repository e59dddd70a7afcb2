import { migrations } from '../../src/db/migrations/index.js';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import {
  E2E_PUBLIC_URL,
  e2eDatabase,
  killLeftovers,
  openDatabase,
  request,
  startServer,
  type E2eDatabase,
  type ServerProcess,
} from '../helpers/server-process.js';

/**
 * Two server processes behind an imaginary load balancer, sharing one PostgreSQL database: whatever one process
 * hands out (users, tokens, cursors, revocations) holds on the other at once. No process keeps state of its own
 * that matters. SQLite is one process's embedded file, so this applies to PostgreSQL only.
 */
describe.skipIf(backend !== 'postgres')('two server processes on one PostgreSQL database', () => {
  let db: E2eDatabase;
  let a: ServerProcess;
  let b: ServerProcess;

  beforeAll(async () => {
    db = await e2eDatabase();
    // Started together on an empty database: both run the migrations at once (Kysely's migrator takes a lock).
    [a, b] = await Promise.all([startServer({ databaseUrl: db.url }), startServer({ databaseUrl: db.url })]);
  });
  afterAll(async () => {
    const exits = await Promise.all([a?.stop(), b?.stop()]);
    await killLeftovers();
    await db?.drop();
    expect(exits).toEqual([
      { code: 0, signal: null },
      { code: 0, signal: null },
    ]);
  }, 120_000);

  async function signUp(server: ServerProcess, username: string) {
    const password = `${username} password`;
    const created = await request(server.url, 'POST', '/users', { body: { username, password } });
    expect(created.status).toBe(201);
    const token = await request(server.url, 'POST', '/tokens', { body: { username, password } });
    expect(token.status).toBe(201);
    return { id: created.json<{ id: number }>().id, token: token.json<{ id: number; token: string }>() };
  }

  it('both came up on the same database, which was migrated exactly once', async () => {
    expect(a.port).not.toBe(b.port);
    for (const server of [a, b]) expect((await request(server.url, 'GET', '/health')).status).toBe(200);
    const handle = openDatabase(db.url);
    try {
      const applied = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(handle.db);
      // Each migration exactly once, though both processes ran the migrator at start.
      expect(applied.rows.map((r) => r.name)).toEqual(Object.keys(migrations).sort());
      // The cursor-signing secret is shared through the database: one row, whichever process wrote it.
      expect(await handle.db.selectFrom('settings').select('key').where('key', '=', 'cursor_secret').execute()).toHaveLength(1);
    } finally {
      await handle.close();
    }
  });

  it('reads through B what was written through A, and accepts A’s token for a write', async () => {
    const user = await signUp(a, 'mp_writer');
    const read = await request(b.url, 'GET', `/users/${user.id}`);
    expect(read.status).toBe(200);
    expect(read.json()).toMatchObject({ id: user.id, username: 'mp_writer' });

    const replaced = await request(b.url, 'PUT', `/users/${user.id}`, {
      token: user.token.token,
      body: { username: 'mp_writer', displayName: 'Written through B', bio: 'with a token from A' },
    });
    expect(replaced.status).toBe(200);
    const back = await request(a.url, 'GET', `/users/${user.id}`);
    expect(back.json()).toMatchObject({ displayName: 'Written through B', bio: 'with a token from A' });
  });

  it('follows a pagination cursor issued by A on B, and back, visiting every user once', async () => {
    for (const name of ['mp_page_1', 'mp_page_2', 'mp_page_3']) {
      expect((await request(a.url, 'POST', '/users', { body: { username: name, password: 'page password' } })).status).toBe(201);
    }
    const all = (await request(a.url, 'GET', '/users?limit=100')).json<{ id: number }[]>().map((u) => u.id);
    expect(all.length).toBeGreaterThanOrEqual(4);

    const visited: number[] = [];
    let next: string | undefined = '/users?limit=1';
    for (let hop = 0; next !== undefined; hop++) {
      const server = hop % 2 === 0 ? a : b;
      const page = await request(server.url, 'GET', next);
      expect(page.status, `page ${hop} through ${server === a ? 'A' : 'B'}`).toBe(200);
      visited.push(...page.json<{ id: number }[]>().map((u) => u.id));
      const link = page.headers.get('link');
      if (link === null) {
        next = undefined;
      } else {
        // Links are rooted at PUBLIC_URL (a load balancer's address), never at the process that answered.
        const href = /^<([^>]+)>; rel="next"$/.exec(link)?.[1];
        expect(href?.startsWith(`${E2E_PUBLIC_URL}/users?`)).toBe(true);
        next = href?.slice(E2E_PUBLIC_URL.length);
      }
      expect(hop).toBeLessThan(all.length + 1);
    }
    expect(visited).toEqual(all);
  });

  it('rejects on B, at once, a token revoked through A', async () => {
    const user = await signUp(a, 'mp_revoked');
    const body = { username: 'mp_revoked', displayName: 'still signed in', bio: '' };
    expect((await request(b.url, 'PUT', `/users/${user.id}`, { token: user.token.token, body })).status).toBe(200);

    const revoked = await request(a.url, 'DELETE', `/tokens/${user.token.id}`, { token: user.token.token });
    expect(revoked.status).toBe(200);
    expect(revoked.json()).toEqual({ deleted: 1 });

    const rejected = await request(b.url, 'PUT', `/users/${user.id}`, { token: user.token.token, body });
    expect(rejected.status).toBe(401);
    expect(rejected.headers.get('www-authenticate')).toMatch(/^Bearer .*error="invalid_token"/);
    expect((await request(a.url, 'PUT', `/users/${user.id}`, { token: user.token.token, body })).status).toBe(401);
  });
});
