import { randomBytes } from 'node:crypto';
import net from 'node:net';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { buildTestApp, type Response } from '../../../test/helpers/build-test-app.js';
import { signUp } from '../../../test/helpers/factories.js';
import type { Config } from '../../config.js';

const PROBLEM = 'application/problem+json; charset=utf-8';
const LEGACY = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset'];

function limited(overrides: Partial<Config['rateLimit']> = {}, config: Partial<Config> = {}): Promise<FastifyInstance> {
  return buildTestApp({ rateLimit: { enabled: true, max: 600, authMax: 20, windowMs: 60_000, ...overrides }, ...config });
}

/** A request from a given client address. */
function from(app: FastifyInstance, remoteAddress: string, method: InjectOptions['method'], url: string, body?: unknown): Promise<Response> {
  return app.inject({ method, url, remoteAddress, ...(body === undefined ? {} : { payload: body as InjectOptions['payload'] }) });
}

function expectNoLegacyFields(res: Response) {
  for (const name of LEGACY) expect(res.headers[name], name).toBeUndefined();
}

/** `"name";r=<n>;t=<n>` of a RateLimit field, as numbers. */
function parseRateLimit(field: unknown): { policy: string; r: number; t: number } {
  const match = /^"([a-z]+)";r=(\d+);t=(\d+)$/.exec(String(field));
  if (!match) throw new Error(`not a RateLimit field: ${String(field)}`);
  return { policy: match[1] as string, r: Number(match[2]), t: Number(match[3]) };
}

describe('rate-limit fields (draft-ietf-httpapi-ratelimit-headers-11)', () => {
  it('ordinary routes carry the default policy and a decrementing RateLimit, then 429 with Retry-After as problem+json', async () => {
    const app = await limited({ max: 3, windowMs: 30_000 });
    const remaining = [];
    for (let i = 0; i < 3; i++) {
      const res = await from(app, '10.0.0.1', 'GET', '/users');
      expect(res.statusCode).toBe(200);
      expect(res.headers['ratelimit-policy']).toBe('"default";q=3;w=30');
      const field = parseRateLimit(res.headers.ratelimit);
      expect(field.policy).toBe('default');
      expect(field.t).toBeGreaterThan(0);
      expect(field.t).toBeLessThanOrEqual(30);
      remaining.push(field.r);
      expectNoLegacyFields(res);
    }
    expect(remaining).toEqual([2, 1, 0]);
    // The quota is the policy's, not one route's: another ordinary route draws on the same allowance.
    const over = await from(app, '10.0.0.1', 'GET', '/posts');
    expect(over.statusCode).toBe(429);
    expect(over.headers['content-type']).toBe(PROBLEM);
    expect(over.json()).toMatchObject({ status: 429, title: 'Too Many Requests', instance: '/posts' });
    const retryAfter = Number(over.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(30);
    expect(over.headers['ratelimit-policy']).toBe('"default";q=3;w=30');
    expect(parseRateLimit(over.headers.ratelimit)).toEqual({ policy: 'default', r: 0, t: retryAfter });
    expectNoLegacyFields(over);
    // Under /boards a 429 is the board envelope.
    const board = await from(app, '10.0.0.1', 'GET', '/boards');
    expect(board.statusCode).toBe(429);
    expect(board.json()).toMatchObject({ code: '429', data: null });
    expect(Number(board.headers['retry-after'])).toBeGreaterThan(0);
    // Another address has its own allowance.
    const other = await from(app, '10.0.0.2', 'GET', '/users');
    expect(other.statusCode).toBe(200);
    expect(parseRateLimit(other.headers.ratelimit).r).toBe(2);
  });

  it('a route\'s own 400s are counted and carry the fields: a malformed header, query or body; a GET\'s 429 says how to cache it', async () => {
    const app = await limited({ max: 10 });
    const requests: Array<[InjectOptions['method'], string, Record<string, string>, unknown]> = [
      ['GET', '/users', { 'if-none-match': 'abc' }, undefined],
      ['PUT', '/posts/1', { 'if-match': 'abc' }, { title: 't', content: 'c', visibility: 'public' }],
      ['GET', '/users?bogus=1', {}, undefined],
      ['POST', '/users', {}, { username: 'x' }],
    ];
    const remaining = [];
    for (const [method, url, headers, body] of requests) {
      const res = await app.inject({ method, url, headers, remoteAddress: '10.0.0.9', ...(body === undefined ? {} : { payload: body as InjectOptions['payload'] }) });
      expect(res.statusCode, url).toBe(400);
      expect(res.headers['ratelimit-policy'], url).toMatch(/^"(default|auth)";q=\d+;w=60$/);
      remaining.push(parseRateLimit(res.headers.ratelimit).r);
    }
    // Sign-up draws on the auth policy; the others on the default one, one request each.
    expect(remaining).toEqual([9, 8, 7, 19]);
    // A HEAD is counted once, like the GET it copies.
    const head = await from(app, '10.0.0.9', 'HEAD', '/users');
    expect(parseRateLimit(head.headers.ratelimit).r).toBe(6);
    for (let i = 0; i < 6; i++) await from(app, '10.0.0.9', 'GET', '/users');
    const over = await from(app, '10.0.0.9', 'GET', '/users');
    expect(over.statusCode).toBe(429);
    expect(over.headers['cache-control']).toBe('no-cache');
    expect(String(over.headers.vary)).toMatch(/Authorization/);
  });

  it('sign-up, sign-in and password change share the auth policy, separate from the default one', async () => {
    const app = await limited({ max: 100, authMax: 3 });
    const created = await from(app, '10.0.1.1', 'POST', '/users', { username: 'carol', password: 'carol password 1' });
    expect(created.statusCode).toBe(201);
    expect(created.headers['ratelimit-policy']).toBe('"auth";q=3;w=60');
    expect(parseRateLimit(created.headers.ratelimit)).toMatchObject({ policy: 'auth', r: 2 });
    const token = await from(app, '10.0.1.1', 'POST', '/tokens', { username: 'carol', password: 'carol password 1' });
    expect(token.statusCode).toBe(201);
    expect(parseRateLimit(token.headers.ratelimit)).toMatchObject({ policy: 'auth', r: 1 });
    const change = await app.inject({
      method: 'PUT',
      url: `/users/${created.json().id}/password`,
      remoteAddress: '10.0.1.1',
      headers: { authorization: `Bearer ${token.json().token}` },
      payload: { currentPassword: 'carol password 1', newPassword: 'carol password 2' },
    });
    expect(change.headers['ratelimit-policy']).toBe('"auth";q=3;w=60');
    expect(parseRateLimit(change.headers.ratelimit)).toMatchObject({ policy: 'auth', r: 0 });
    const refused = await from(app, '10.0.1.1', 'POST', '/tokens', { username: 'carol', password: 'carol password 2' });
    expect(refused.statusCode).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(parseRateLimit(refused.headers.ratelimit)).toMatchObject({ policy: 'auth', r: 0 });
    // The default policy of the same address is untouched by the auth one.
    const read = await from(app, '10.0.1.1', 'GET', '/users');
    expect(read.statusCode).toBe(200);
    expect(read.headers['ratelimit-policy']).toBe('"default";q=100;w=60');
    expect(parseRateLimit(read.headers.ratelimit).r).toBe(99);
  });

  it('sends none of the fields with RATE_LIMIT=off, and none on /health and /metrics', async () => {
    const off = await buildTestApp({ rateLimit: { enabled: false, max: 1, authMax: 1, windowMs: 60_000 } });
    for (let i = 0; i < 3; i++) {
      const res = await from(off, '10.0.2.1', 'GET', '/users');
      expect(res.statusCode).toBe(200);
      expect(res.headers['ratelimit-policy']).toBeUndefined();
      expect(res.headers.ratelimit).toBeUndefined();
      expectNoLegacyFields(res);
    }
    const on = await limited({ max: 1 });
    for (const url of ['/health', '/metrics', '/health', '/metrics']) {
      const res = await from(on, '10.0.2.1', 'GET', url);
      expect(res.statusCode, url).toBe(200);
      expect(res.headers['ratelimit-policy'], url).toBeUndefined();
      expect(res.headers.ratelimit, url).toBeUndefined();
      expectNoLegacyFields(res);
    }
  });

  it('lets browser scripts read the fields (CORS exposed headers)', async () => {
    const app = await limited();
    const res = await app.inject({ method: 'GET', url: '/users', headers: { origin: 'https://app.example' } });
    const exposed = String(res.headers['access-control-expose-headers']).split(', ');
    expect(exposed).toEqual(expect.arrayContaining(['RateLimit-Policy', 'RateLimit', 'Retry-After']));
    expect(exposed).not.toContain('RateLimit-Limit');
  });
});

describe('failed sign-ins per username', () => {
  it('refuses a username after RATE_LIMIT_AUTH_MAX failures from any addresses, the right password too; others are unaffected', async () => {
    const app = await limited({ authMax: 20 });
    const alice = await signUp(app, { username: 'alice', password: 'alice password 1' });
    const bob = await signUp(app, { username: 'bob', password: 'bob password 1' });
    const statuses = [];
    for (let i = 1; i <= 21; i++) {
      // Upper case counts against the same username.
      const username = i % 2 ? 'alice' : 'ALICE';
      statuses.push((await from(app, `10.1.0.${i}`, 'POST', '/tokens', { username, password: `guess ${i}` })).statusCode);
    }
    expect(statuses).toEqual([...Array(20).fill(401), 429]);
    const tokensBefore = await app.db.selectFrom('tokens').select('id').where('user_id', '=', alice.id).execute();
    const right = await from(app, '10.1.1.1', 'POST', '/tokens', { username: 'alice', password: alice.password });
    expect(right.statusCode).toBe(429);
    expect(right.headers['content-type']).toBe(PROBLEM);
    const retryAfter = Number(right.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(right.headers['ratelimit-policy']).toBe('"auth";q=20;w=60');
    expect(parseRateLimit(right.headers.ratelimit)).toEqual({ policy: 'auth', r: 0, t: retryAfter });
    // No token was issued.
    expect(await app.db.selectFrom('tokens').select('id').where('user_id', '=', alice.id).execute()).toEqual(tokensBefore);
    const other = await from(app, '10.1.1.1', 'POST', '/tokens', { username: 'bob', password: bob.password });
    expect(other.statusCode).toBe(201);
  });

  it('throttles an unknown username the same way (no probing for which exist)', async () => {
    const app = await limited({ authMax: 3 });
    const statuses = [];
    for (let i = 1; i <= 4; i++) {
      statuses.push((await from(app, `10.2.0.${i}`, 'POST', '/tokens', { username: 'nobody', password: 'whatever 1' })).statusCode);
    }
    expect(statuses).toEqual([401, 401, 401, 429]);
  });

  it('counts failures only: successful sign-ins neither count nor reset the count', async () => {
    const app = await limited({ authMax: 3 });
    const dave = await signUp(app, { username: 'dave', password: 'dave password 1' });
    const attempt = (i: number, password: string) => from(app, `10.3.0.${i}`, 'POST', '/tokens', { username: 'dave', password });
    expect((await attempt(1, 'wrong 1')).statusCode).toBe(401);
    expect((await attempt(2, 'wrong 2')).statusCode).toBe(401);
    for (let i = 3; i <= 6; i++) expect((await attempt(i, dave.password)).statusCode).toBe(201);
    expect((await attempt(7, 'wrong 3')).statusCode).toBe(401);
    expect((await attempt(8, 'wrong 4')).statusCode).toBe(429);
    expect((await attempt(9, dave.password)).statusCode).toBe(429);
  });

  it('opens again when the window has passed', async () => {
    const app = await limited({ authMax: 1, windowMs: 1000 });
    const erin = { username: 'erin', password: 'erin password 1' };
    expect((await from(app, '10.4.0.1', 'POST', '/users', erin)).statusCode).toBe(201);
    expect((await from(app, '10.4.0.2', 'POST', '/tokens', { username: 'erin', password: 'wrong' })).statusCode).toBe(401);
    expect((await from(app, '10.4.0.3', 'POST', '/tokens', erin)).statusCode).toBe(429);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect((await from(app, '10.4.0.4', 'POST', '/tokens', erin)).statusCode).toBe(201);
  });
});

describe('counters in Redis (REDIS_URL)', () => {
  const REDIS_URL = 'redis://127.0.0.1:6379';
  let redis: Redis;
  beforeAll(async () => {
    redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
  });
  afterAll(() => redis.quit());

  /** A key prefix of the test's own, whose keys are deleted when it finishes. */
  function prefix(): string {
    const own = `corkboard-test-${randomBytes(6).toString('hex')}:`;
    onTestFinished(async () => {
      const keys = await redis.keys(`${own}*`);
      if (keys.length > 0) await redis.del(...keys);
    });
    return own;
  }

  it('two processes sharing Redis enforce one exact limit together', async () => {
    const redisKeyPrefix = prefix();
    const a = await limited({ max: 5 }, { redisUrl: REDIS_URL, redisKeyPrefix });
    const b = await limited({ max: 5 }, { redisUrl: REDIS_URL, redisKeyPrefix });
    const seen = [];
    for (const app of [a, b, a, b, a, b]) {
      const res = await from(app, '10.5.0.1', 'GET', '/users');
      seen.push(res.statusCode === 200 ? parseRateLimit(res.headers.ratelimit).r : res.statusCode);
    }
    expect(seen).toEqual([4, 3, 2, 1, 0, 429]);
    // The counter is in Redis, under the configured prefix, keyed by policy and address.
    expect(await redis.get(`${redisKeyPrefix}rate:default:10.5.0.1`)).toBe('6');
  });

  it('counts failed sign-ins for one username across processes', async () => {
    const redisKeyPrefix = prefix();
    const a = await limited({ authMax: 5 }, { redisUrl: REDIS_URL, redisKeyPrefix });
    const b = await limited({ authMax: 5 }, { redisUrl: REDIS_URL, redisKeyPrefix });
    const frank = await signUp(b, { username: 'frank', password: 'frank password 1' });
    const statuses = [];
    for (const [i, app] of [a, b, a, b, a, b].entries()) {
      statuses.push((await from(app, `10.6.0.${i}`, 'POST', '/tokens', { username: 'Frank', password: `guess ${i}` })).statusCode);
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
    expect((await from(b, '10.6.1.1', 'POST', '/tokens', { username: 'frank', password: frank.password })).statusCode).toBe(429);
    expect(await redis.get(`${redisKeyPrefix}signin:frank`)).toBe('7');
    const ttl = await redis.pttl(`${redisKeyPrefix}signin:frank`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });

  it('with Redis unreachable, serves requests promptly and limits them in memory (per address and per username), counting the failures', async () => {
    const app = await limited({ max: 3, authMax: 2 }, { redisUrl: 'redis://127.0.0.1:1', redisKeyPrefix: prefix() });
    const durations = [];
    const seen = [];
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      const res = await from(app, '10.7.0.1', 'GET', '/users');
      durations.push(performance.now() - started);
      expect(res.headers['ratelimit-policy']).toBe('"default";q=3;w=60');
      seen.push(res.statusCode === 200 ? parseRateLimit(res.headers.ratelimit).r : res.statusCode);
    }
    // Never a 5xx, never waiting on Redis, and the limit still holds: counted in this process.
    expect(seen).toEqual([2, 1, 0, 429, 429]);
    expect(Math.max(...durations)).toBeLessThan(250);
    // Another address has its own count.
    expect((await from(app, '10.7.0.2', 'GET', '/users')).statusCode).toBe(200);

    // Sign-up from one address, guesses at one username from many (the per-address auth quota is not what stops them).
    const user = await signUp(app, { username: 'gina', password: 'gina password 1' });
    const statuses = [];
    for (let i = 0; i < 30; i++) {
      statuses.push((await from(app, `10.7.2.${i}`, 'POST', '/tokens', { username: 'gina', password: `guess ${i}` })).statusCode);
    }
    expect(statuses).toEqual([401, 401, ...Array(28).fill(429)]);
    expect((await from(app, '10.7.3.1', 'POST', '/tokens', { username: 'gina', password: user.password })).statusCode).toBe(429);
    const metrics = await from(app, '10.7.0.1', 'GET', '/metrics');
    const failures = /^corkboard_rate_limit_store_errors_total (\d+)$/m.exec(metrics.body);
    // At least: 6 reads, the sign-up, 31 sign-ins (each an address count and a username count).
    expect(Number(failures?.[1])).toBeGreaterThanOrEqual(6 + 1 + 31 * 2);
  });

  it('when Redis goes away mid-window, what was counted there goes on being limited from memory', async () => {
    const proxy = await redisProxy();
    const app = await limited({ max: 4, authMax: 3 }, { redisUrl: `redis://127.0.0.1:${proxy.port}`, redisKeyPrefix: prefix() });
    const user = await signUp(app, { username: 'hana', password: 'hana password 1' });
    // With Redis up: the username reaches its limit, and an address nearly uses its quota.
    const before = [];
    for (let i = 0; i < 4; i++) before.push((await from(app, `10.8.2.${i}`, 'POST', '/tokens', { username: 'hana', password: `guess ${i}` })).statusCode);
    expect(before).toEqual([401, 401, 401, 429]);
    for (let i = 0; i < 3; i++) expect((await from(app, '10.8.0.1', 'GET', '/users')).statusCode).toBe(200);
    expect(await redis.exists(`${app.config.redisKeyPrefix}signin:hana`)).toBe(1);

    await proxy.close();
    const after = [];
    for (let i = 0; i < 30; i++) after.push((await from(app, `10.8.3.${i}`, 'POST', '/tokens', { username: 'hana', password: `guess ${i}` })).statusCode);
    // Not one more guess was checked.
    expect(after).toEqual(Array(30).fill(429));
    expect((await from(app, '10.8.4.1', 'POST', '/tokens', { username: 'hana', password: user.password })).statusCode).toBe(429);
    const reads = [];
    for (let i = 0; i < 2; i++) reads.push((await from(app, '10.8.0.1', 'GET', '/users')).statusCode);
    expect(reads).toEqual([200, 429]);
  });
});

/**
 * A TCP relay to the machine's Redis that a test can take away (the Redis itself is shared and stays up): `close`
 * stops listening and cuts every relayed connection, so the client sees Redis go down and cannot reconnect.
 */
async function redisProxy(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(6379, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => sockets.delete(socket));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  let closed: Promise<void> | undefined;
  const close = () =>
    (closed ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const socket of sockets) socket.destroy();
    }));
  onTestFinished(close);
  return { port, close };
}
