import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import { e2eDatabase, killLeftovers, openDatabase, request, startServer, type E2eDatabase, type HttpResponse, type ServerProcess } from '../helpers/server-process.js';

/**
 * Idempotency keys against real server processes (CONTRACT §6.2, §8): the key is decided by the database, so
 * simultaneous requests with one key create once, on one process or on two sharing a PostgreSQL database, and a
 * key used through one process is replayed by the other.
 */
describe('Idempotency-Key across sockets and processes', () => {
  let db: E2eDatabase;
  let servers: ServerProcess[];

  beforeAll(async () => {
    db = await e2eDatabase();
    // SQLite is one process's file; PostgreSQL takes two processes behind an imaginary load balancer.
    servers = await Promise.all((backend === 'postgres' ? [1, 2] : [1]).map(() => startServer({ databaseUrl: db.url })));
  });
  afterAll(async () => {
    const exits = await Promise.all(servers.map((s) => s.stop()));
    await killLeftovers();
    await db?.drop();
    for (const exit of exits) expect(exit).toEqual({ code: 0, signal: null });
  }, 120_000);

  const serverFor = (i: number) => servers[i % servers.length]!;

  async function count(table: 'users' | 'posts' | 'idempotency_keys'): Promise<number> {
    const handle = openDatabase(db.url);
    try {
      return Number((await handle.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    } finally {
      await handle.close();
    }
  }

  function checkOneCreated(answers: HttpResponse[]): HttpResponse {
    const created = answers.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null);
    expect(created, answers.map((r) => `${r.status} ${r.text}`).join('\n')).toHaveLength(1);
    const [first] = created as [HttpResponse];
    for (const res of answers) {
      if (res === first) continue;
      if (res.status === 409) {
        expect(res.headers.get('retry-after')).toBe('1');
      } else {
        expect(res.status).toBe(201);
        expect(res.headers.get('idempotent-replayed')).toBe('true');
        expect(res.text).toBe(first.text);
        expect(res.headers.get('location')).toBe(first.headers.get('location'));
      }
    }
    return first;
  }

  it('signs up once when the same sign-up with one key is sent many times at once, to every process', async () => {
    const body = { username: 'race_signup', password: 'correct horse battery' };
    const answers = await Promise.all(
      Array.from({ length: 16 }, (_, i) => request(serverFor(i).url, 'POST', '/users', { body, headers: { 'idempotency-key': '"signup-race"' } })),
    );
    const first = checkOneCreated(answers);
    expect(await count('users')).toBe(1);

    // Afterwards every process replays it, through either spelling of the key.
    for (const [i, key] of ['signup-race', '"signup-race"'].entries()) {
      const again = await request(serverFor(i + 1).url, 'POST', '/users', { body, headers: { 'idempotency-key': key } });
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.text).toBe(first.text);
      // Browsers may read the marker (CORS).
    }
    const cors = await request(serverFor(1).url, 'POST', '/users', { body, headers: { 'idempotency-key': 'signup-race', origin: 'https://app.example' } });
    expect(cors.headers.get('access-control-expose-headers')).toContain('Idempotent-Replayed');
    expect(await count('users')).toBe(1);
  });

  it('publishes once when one post with one key races on every process, and keeps one row for the key', async () => {
    const username = 'race_poster';
    const password = 'correct horse battery';
    const user = (await request(serverFor(0).url, 'POST', '/users', { body: { username, password } })).json<{ id: number }>();
    const { token } = (await request(serverFor(1).url, 'POST', '/tokens', { body: { username, password } })).json<{ token: string }>();
    const keysBefore = await count('idempotency_keys');
    const body = { title: 'Once', content: 'Only once, whoever gets it' };
    for (let round = 0; round < 3; round++) {
      const key = `post-race-${round}`;
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) => request(serverFor(i).url, 'POST', `/users/${user.id}/posts`, { token, body, headers: { 'idempotency-key': key } })),
      );
      checkOneCreated(answers);
    }
    expect(await count('posts')).toBe(3);
    expect(await count('idempotency_keys')).toBe(keysBefore + 3);
  });
});
