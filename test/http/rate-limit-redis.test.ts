import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import { e2eDatabase, killLeftovers, request, startServer, type E2eDatabase, type ServerProcess } from '../helpers/server-process.js';

/**
 * Rate limits of real server processes with REDIS_URL: a limit shared exactly by two processes, and a Redis that
 * cannot be reached (served promptly, limited in the process's memory, and the process still stops cleanly).
 */
describe('rate limits with REDIS_URL, over sockets', () => {
  const REDIS_URL = 'redis://127.0.0.1:6379';
  let db: E2eDatabase;
  let redis: Redis;
  const prefix = `corkboard-e2e-${randomBytes(6).toString('hex')}:`;

  beforeAll(async () => {
    db = await e2eDatabase();
    redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
    await db?.drop();
  });
  afterEach(killLeftovers);

  // Two processes on one database need PostgreSQL (SQLite is one process's embedded file).
  it.skipIf(backend !== 'postgres')('two processes sharing Redis enforce one limit, and one per-username count, together', async () => {
    // One proxy hop in front, so each sign-in below can come from an address of its own (X-Forwarded-For).
    const env = { RATE_LIMIT: 'on', RATE_LIMIT_MAX: '4', RATE_LIMIT_AUTH_MAX: '3', REDIS_URL, REDIS_KEY_PREFIX: prefix, TRUST_PROXY: '1' };
    const [a, b] = await Promise.all([startServer({ databaseUrl: db.url, env }), startServer({ databaseUrl: db.url, env })]);
    const servers: ServerProcess[] = [a, b, a, b, a];
    const seen = [];
    for (const server of servers) {
      const res = await request(server.url, 'GET', '/users');
      seen.push(res.status === 200 ? res.headers.get('ratelimit') : res.status);
    }
    expect(seen.slice(0, 4).map((field) => String(field).replace(/;t=\d+$/, ''))).toEqual([
      '"default";r=3',
      '"default";r=2',
      '"default";r=1',
      '"default";r=0',
    ]);
    expect(seen[4]).toBe(429);
    // Failed sign-ins for one username from four addresses, alternating between the processes: each address is
    // well within its own auth allowance, so the 429 is the username's count, kept in Redis for both.
    const statuses = [];
    for (const [i, server] of [a, b, a, b].entries()) {
      const headers = { 'x-forwarded-for': `203.0.113.${i + 1}` };
      statuses.push((await request(server.url, 'POST', '/tokens', { headers, body: { username: 'shared_target', password: 'wrong password' } })).status);
    }
    expect(statuses).toEqual([401, 401, 401, 429]);
    expect(await redis.get(`${prefix}signin:shared_target`)).toBe('4');
    expect(await Promise.all([a.stop(), b.stop()])).toEqual([
      { code: 0, signal: null },
      { code: 0, signal: null },
    ]);
  });

  it('serves requests promptly when Redis is unreachable, limited in memory, and stops cleanly', async () => {
    const server = await startServer({
      databaseUrl: db.url,
      env: { RATE_LIMIT: 'on', RATE_LIMIT_MAX: '2', REDIS_URL: 'redis://127.0.0.1:1', REDIS_KEY_PREFIX: prefix, LOG_LEVEL: 'warn' },
    });
    const durations = [];
    const statuses = [];
    for (let i = 0; i < 6; i++) {
      const started = performance.now();
      const res = await request(server.url, 'GET', '/users');
      durations.push(performance.now() - started);
      statuses.push(res.status);
      expect(res.headers.get('ratelimit-policy')).toBe('"default";q=2;w=60');
    }
    // Never a 5xx: the limit goes on in this process's memory (CONTRACT §6.3).
    expect(statuses).toEqual([200, 200, 429, 429, 429, 429]);
    expect(Math.max(...durations)).toBeLessThan(500);
    const metrics = await request(server.url, 'GET', '/metrics');
    expect(Number(/^corkboard_rate_limit_store_errors_total (\d+)$/m.exec(metrics.text)?.[1])).toBeGreaterThanOrEqual(6);
    // Warned about, but not once per request.
    const warnings = server.logs().filter((line) => String(line.msg).startsWith('rate-limit store failed'));
    expect(warnings.length).toBeGreaterThanOrEqual(1);
    expect(warnings.length).toBeLessThan(3);
    expect(await server.stop()).toEqual({ code: 0, signal: null });
  });
});
