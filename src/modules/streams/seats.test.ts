import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jointSeat, memorySeats, poolSeats, redisSeats, type StreamSeats } from './seats.js';

const REDIS_URL = 'redis://127.0.0.1:6379';

describe('stream seats in memory', () => {
  it('gives each user at most max seats, and a seat given back (once, however often released) frees one', async () => {
    const seats = memorySeats(2);
    const [a, b] = [await seats.take({ userId: 1 }), await seats.take({ userId: 1 })];
    expect(a).toBeDefined();
    expect(b).toBeDefined();
    expect(await seats.take({ userId: 1 })).toBeUndefined();
    // Another user is counted apart.
    expect(await seats.take({ userId: 2 })).toBeDefined();
    a!.release();
    a!.release();
    expect(await seats.take({ userId: 1 })).toBeDefined();
    expect(await seats.take({ userId: 1 })).toBeUndefined();
  });

  it('counts each client address apart, and apart from a user whose id reads the same', async () => {
    const seats = memorySeats(2);
    expect([await seats.take({ userId: 1 }), await seats.take({ userId: 1 })].every(Boolean)).toBe(true);
    const held = [await seats.take({ address: '1' }), await seats.take({ address: '1' })];
    expect(held.every(Boolean)).toBe(true);
    expect(await seats.take({ address: '1' })).toBeUndefined();
    expect(await seats.take({ address: '192.0.2.1' })).toBeDefined();
    held[0]!.release();
    expect(await seats.take({ address: '1' })).toBeDefined();
    expect(await seats.take({ userId: 1 })).toBeUndefined();
  });

  it('a pool counts at most max, and a joint seat gives back each of its parts once', async () => {
    const pool = poolSeats(2);
    const user = memorySeats(1);
    const [a, b] = [pool.take(), pool.take()];
    expect(b).toBeDefined();
    expect(pool.take()).toBeUndefined();
    const joint = jointSeat((await user.take({ userId: 3 }))!, a!);
    joint.release();
    joint.release();
    expect(pool.take()).toBeDefined();
    expect(pool.take()).toBeUndefined();
    expect(await user.take({ userId: 3 })).toBeDefined();
  });
});

describe('stream seats in Redis (REDIS_URL), shared by processes', () => {
  const keyPrefix = `corkboard-seats-${randomBytes(6).toString('hex')}:`;
  const log = pino({ enabled: false });
  let redis: Redis;
  const opened: StreamSeats[] = [];
  const open = (options: { max: number; leaseMs?: number; url?: string }) => {
    const seats = redisSeats({ url: options.url ?? REDIS_URL, keyPrefix, max: options.max, log, ...(options.leaseMs ? { leaseMs: options.leaseMs } : {}) });
    opened.push(seats);
    return seats;
  };
  /**
   * Waits until a new client has connected: a seat taken before that is counted in its own process only. Each
   * client is probed with a user of its own, so that one's probe cannot pass for another's.
   */
  const connected = async (seats: StreamSeats, userId: number) => {
    const key = `${keyPrefix}stream-seats:${userId}`;
    for (let i = 0; i < 100; i++) {
      const seat = await seats.take({ userId: userId });
      const inRedis = (await redis.zcard(key)) > 0;
      seat?.release();
      await new Promise((r) => setTimeout(r, 20));
      if (inRedis) return;
    }
    throw new Error('the seats never reached Redis');
  };

  beforeAll(async () => {
    redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
  });
  afterAll(async () => {
    await Promise.all(opened.map((seats) => seats.close()));
    const keys = await redis.keys(`${keyPrefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
  });

  it('counts one user’s seats across two processes, and a seat given back frees one for either', async () => {
    const [a, b] = [open({ max: 3 }), open({ max: 3 })];
    await Promise.all([connected(a, 1007), connected(b, 2007)]);
    const held = [await a.take({ userId: 7 }), await b.take({ userId: 7 }), await a.take({ userId: 7 })];
    expect(held.every(Boolean)).toBe(true);
    expect(await b.take({ userId: 7 })).toBeUndefined();
    expect(await a.take({ userId: 7 })).toBeUndefined();
    expect(await redis.zcard(`${keyPrefix}stream-seats:7`)).toBe(3);
    // Other users are counted apart.
    expect(await b.take({ userId: 8 })).toBeDefined();
    held[0]!.release();
    await expect.poll(() => redis.zcard(`${keyPrefix}stream-seats:7`)).toBe(2);
    expect(await b.take({ userId: 7 })).toBeDefined();
    expect(await a.take({ userId: 7 })).toBeUndefined();
  });

  it('counts a client address’s seats across two processes, under a key no user’s can be', async () => {
    const [a, b] = [open({ max: 2 }), open({ max: 2 })];
    await Promise.all([connected(a, 1009), connected(b, 2009)]);
    const held = [await a.take({ address: '9' }), await b.take({ address: '9' })];
    expect(held.every(Boolean)).toBe(true);
    expect(await a.take({ address: '9' })).toBeUndefined();
    expect(await b.take({ address: '9' })).toBeUndefined();
    expect(await redis.zcard(`${keyPrefix}stream-seats:address:9`)).toBe(2);
    // User 9 is another count.
    expect(await a.take({ userId: 9 })).toBeDefined();
    expect(await redis.zcard(`${keyPrefix}stream-seats:9`)).toBe(1);
    held[1]!.release();
    await expect.poll(() => redis.zcard(`${keyPrefix}stream-seats:address:9`)).toBe(1);
    expect(await a.take({ address: '9' })).toBeDefined();
  });

  it('keeps a seat while its process renews the lease, and frees the seats of a process that died once theirs runs out', { timeout: 15_000 }, async () => {
    const a = open({ max: 2, leaseMs: 1500 });
    await connected(a, 1011);
    const kept = await a.take({ userId: 11 });
    expect(kept).toBeDefined();
    // A process that died holding a seat: its lease is in Redis and nobody renews it.
    const [seconds, micros] = (await redis.time()) as [string | number, string | number];
    const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    await redis.zadd(`${keyPrefix}stream-seats:11`, now + 1500, 'dead-process:1');
    expect(await a.take({ userId: 11 })).toBeUndefined();
    // Three lease lengths later the renewed seat still counts and the dead one does not: taking a seat drops it.
    await new Promise((r) => setTimeout(r, 4500));
    const another = await a.take({ userId: 11 });
    expect(another).toBeDefined();
    expect(await a.take({ userId: 11 })).toBeUndefined();
    const members = await redis.zrange(`${keyPrefix}stream-seats:11`, 0, -1);
    expect(members).toHaveLength(2);
    expect(members.filter((m) => m.startsWith('dead-process'))).toEqual([]);
    kept!.release();
    another!.release();
  });

  it('puts a seat back that Redis lost while its stream is still open', async () => {
    const a = open({ max: 1, leaseMs: 600 });
    await connected(a, 1013);
    const seat = await a.take({ userId: 13 });
    expect(seat).toBeDefined();
    // Redis restarted without its data (or failed over): the open stream's seat is gone there.
    await redis.del(`${keyPrefix}stream-seats:13`);
    // The next renewal (within a third of the lease) puts it back, so the limit holds again.
    await expect.poll(() => redis.zcard(`${keyPrefix}stream-seats:13`), { timeout: 2000, interval: 50 }).toBe(1);
    expect(await a.take({ userId: 13 })).toBeUndefined();
    seat!.release();
  });

  it('counts in this process alone while Redis cannot be reached, promptly', async () => {
    const seats = open({ max: 2, url: 'redis://127.0.0.1:1' });
    const started = performance.now();
    const [a, b, c] = [await seats.take({ userId: 5 }), await seats.take({ userId: 5 }), await seats.take({ userId: 5 })];
    expect(performance.now() - started).toBeLessThan(1000);
    expect([Boolean(a), Boolean(b), c]).toEqual([true, true, undefined]);
    a!.release();
    expect(await seats.take({ userId: 5 })).toBeDefined();
    // An address is limited there too, apart from the user.
    const [d, e, f] = [await seats.take({ address: '5' }), await seats.take({ address: '5' }), await seats.take({ address: '5' })];
    expect([Boolean(d), Boolean(e), f]).toEqual([true, true, undefined]);
  });
});
