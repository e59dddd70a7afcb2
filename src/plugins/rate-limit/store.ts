import type { FastifyBaseLogger } from 'fastify';
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import { Redis } from 'ioredis';
import { Counter, type Registry } from 'prom-client';

/** At most one warning line per this interval while the store keeps failing (the rest are counted, not logged). */
const WARN_INTERVAL_MS = 60_000;

/**
 * Reports failures of the Redis counters (Redis down, a command timed out). A failed count is taken from this
 * process's memory instead (`withFallback`): the request is served (fail open: a rate limiter must never take the
 * service down with it) and still limited, per process. Every failure is counted in
 * `corkboard_rate_limit_store_errors_total`; the log gets one warning, then at most one per minute carrying how many
 * failures it stands for, so an outage under load does not write a line per request.
 */
export interface StoreFailures {
  /** A counter operation failed: the request it was for is counted in this process's memory. */
  report(error: unknown): void;
  /** The connection failed (no request affected by itself): logged, within the same one-a-minute budget. */
  warn(error: unknown): void;
}

export function storeFailures(registry: Registry, log: FastifyBaseLogger): StoreFailures {
  const counter = new Counter({
    name: 'corkboard_rate_limit_store_errors_total',
    help: 'Rate-limit counter operations that failed in Redis (unreachable or slow); those requests were counted in the process\'s memory',
    registers: [registry],
  });
  let lastWarning = -Infinity;
  let unlogged = 0;
  const warn = (error: unknown) => {
    const now = Date.now();
    if (now - lastWarning < WARN_INTERVAL_MS) return;
    lastWarning = now;
    log.warn({ err: error, failures: unlogged }, 'rate-limit store failed; each process counts in its own memory until Redis answers again');
    unlogged = 0;
  };
  return {
    report(error) {
      counter.inc();
      unlogged += 1;
      warn(error);
    },
    warn,
  };
}

/**
 * The Redis client for the counters. A request never waits on Redis for long: no offline queue (a command sent
 * while disconnected fails at once instead of waiting for a reconnect), no retries of a command, and short
 * connect and command timeouts. The client keeps reconnecting in the background (ioredis' default backoff).
 * Start-up waits for the first connection attempt only, so a Redis that is down does not stop the service.
 */
export async function connectRedis(url: string, failures: StoreFailures): Promise<Redis> {
  const redis = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    commandTimeout: 250,
  });
  // Connection errors arrive as events too; without a listener ioredis prints each one to stderr.
  redis.on('error', (error: unknown) => failures.warn(error));
  await redis.connect().catch(() => {
    // Already reported through the 'error' event; the client goes on reconnecting.
  });
  return redis;
}

/**
 * Fixed-window counters: the window of a key starts with its first count and lasts `windowMs`. The per-address
 * rate limits and the per-username sign-in throttle both count through one of these.
 */
export interface WindowCounts {
  /** Adds one to the key's count in its current window (starting one if none); the new count and ms left. */
  increment(key: string, windowMs: number): Promise<{ count: number; ttlMs: number }>;
  /** Takes one off the key's count if its window is still open. */
  decrement(key: string): Promise<void>;
}

/**
 * Counts in this process. A Map keeps insertion order and every key of one counter has the same window length, so
 * the entries are ordered by when their window ends: expired ones are dropped from the front on each call, and
 * memory holds only the keys counted within the last window (bounded by the addresses, or the usernames those
 * addresses may try, in a window).
 */
export function memoryCounts(): WindowCounts {
  const windows = new Map<string, { count: number; endsAt: number }>();
  return {
    increment(key, windowMs) {
      const now = Date.now();
      for (const [k, entry] of windows) {
        if (entry.endsAt > now) break;
        windows.delete(k);
      }
      let entry = windows.get(key);
      if (!entry) windows.set(key, (entry = { count: 0, endsAt: now + windowMs }));
      entry.count += 1;
      return Promise.resolve({ count: entry.count, ttlMs: entry.endsAt - now });
    },
    decrement(key) {
      const entry = windows.get(key);
      if (entry && entry.endsAt > Date.now() && entry.count > 0) entry.count -= 1;
      return Promise.resolve();
    },
  };
}

// The window starts with the first count and the key expires with it (a key found without expiry gets one, so a
// count can never stick). Both scripts run atomically in Redis, so processes sharing it count exactly.
const INCREMENT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
`;
// Only while the key exists: a plain DECR after the window ended would create a key without expiry.
const DECREMENT = `
local count = tonumber(redis.call('GET', KEYS[1]))
if count and count > 0 then redis.call('DECR', KEYS[1]) end
return 0
`;

type CountCommands = Redis & {
  corkboardCount(key: string, windowMs: number): Promise<[number, number]>;
  corkboardUncount(key: string): Promise<number>;
};

/** Counts in Redis under `<prefix><key>`, shared by every process on it. Rejects when Redis cannot answer. */
export function redisCounts(redis: Redis, prefix: string): WindowCounts {
  const commands = redis as CountCommands;
  // One client serves several counters: the scripts are defined on it once.
  if (typeof commands.corkboardCount !== 'function') {
    redis.defineCommand('corkboardCount', { numberOfKeys: 1, lua: INCREMENT });
    redis.defineCommand('corkboardUncount', { numberOfKeys: 1, lua: DECREMENT });
  }
  return {
    async increment(key, windowMs) {
      const [count, ttlMs] = await commands.corkboardCount(`${prefix}${key}`, windowMs);
      return { count, ttlMs };
    },
    async decrement(key) {
      await commands.corkboardUncount(`${prefix}${key}`);
    },
  };
}

/**
 * Redis counts, with this process's memory behind them (CONTRACT §6.3: no limit disappears while Redis is away).
 * Every count is kept in memory too, so when Redis fails the limit goes on from what this process has seen in the
 * current window, not from zero: a username or address already over its limit through this process stays refused.
 * A failure is reported (metric, rate-limited warning) and never reaches the request.
 */
export function withFallback(primary: WindowCounts, memory: WindowCounts, failures: StoreFailures): WindowCounts {
  return {
    async increment(key, windowMs) {
      const local = await memory.increment(key, windowMs);
      try {
        return await primary.increment(key, windowMs);
      } catch (error) {
        failures.report(error);
        return local;
      }
    },
    async decrement(key) {
      await memory.decrement(key);
      await primary.decrement(key).catch((error: unknown) => failures.report(error));
    },
  };
}

/**
 * The per-address counters as a store for @fastify/rate-limit, through its documented custom-store interface
 * (`incr`, `child`). One store for every policy: the keys carry the policy name (see index.ts), so `child()`
 * returns the same store, where the plugin's own would key by route and give each route its own counter. The store
 * never fails (a Redis failure falls back to memory in `counts`).
 * @see https://github.com/fastify/fastify-rate-limit#custom-store
 */
export function counterStore(counts: WindowCounts): FastifyRateLimitStoreCtor {
  const store: FastifyRateLimitStore = {
    incr(key, callback, timeWindow) {
      counts.increment(key, timeWindow).then(
        ({ count, ttlMs }) => callback(null, { current: count, ttl: ttlMs }),
        (error: unknown) => callback(error instanceof Error ? error : new Error(String(error))),
      );
    },
    child: () => store,
  };
  // The plugin calls `new Store(options)`; a constructor that returns an object yields that object.
  return function Store() {
    return store;
  } as unknown as FastifyRateLimitStoreCtor;
}
