import { createRequire } from 'node:module';
import type { FastifyBaseLogger } from 'fastify';
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import { Redis } from 'ioredis';
import { Counter, type Registry } from 'prom-client';

/** At most one warning line per this interval while the store keeps failing (the rest are counted, not logged). */
const WARN_INTERVAL_MS = 60_000;

/**
 * Reports failures of the counter store (Redis down, a command timed out). Requests go on without a limit
 * (fail open): a rate limiter must never take the service down with it. Every failure is counted in
 * `corkboard_rate_limit_store_errors_total`; the log gets one warning, then at most one per minute carrying
 * how many failures it stands for, so an outage under load does not write a line per request.
 */
export interface StoreFailures {
  /** A counter operation failed: the request it was for goes unlimited. */
  report(error: unknown): void;
  /** The connection failed (no request affected by itself): logged, within the same one-a-minute budget. */
  warn(error: unknown): void;
}

export function storeFailures(registry: Registry, log: FastifyBaseLogger): StoreFailures {
  const counter = new Counter({
    name: 'corkboard_rate_limit_store_errors_total',
    help: 'Rate-limit counter operations that failed (Redis unreachable or slow); those requests were served without a limit',
    registers: [registry],
  });
  let lastWarning = -Infinity;
  let unlogged = 0;
  const warn = (error: unknown) => {
    const now = Date.now();
    if (now - lastWarning < WARN_INTERVAL_MS) return;
    lastWarning = now;
    log.warn({ err: error, failures: unlogged }, 'rate-limit store failed; requests are served without a limit until it answers again');
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

interface RedisStoreCtor {
  new (continueExceeding: boolean, exponentialBackoff: boolean, redis: Redis, key: string): FastifyRateLimitStore & {
    incr: FastifyRateLimitStore['incr'];
  };
}

// @fastify/rate-limit's own Redis store (an atomic INCR + PEXPIRE Lua script). The package has no export map;
// its file is required directly, because the plugin builds a store only through its `store` option's constructor.
const RedisStore = createRequire(import.meta.url)('@fastify/rate-limit/store/RedisStore.js') as RedisStoreCtor;

/**
 * The per-address counters in Redis, as a `store` for @fastify/rate-limit. One namespace (`<prefix>rate:`) for
 * every policy: the keys carry the policy name (see index.ts), so `child()` returns the same store, where the
 * plugin's own would key by route and give each route its own counter. Failures are reported here and then
 * passed on: the plugin's `skipOnError` serves the request.
 */
export function redisStore(redis: Redis, prefix: string, failures: StoreFailures): FastifyRateLimitStoreCtor {
  const inner = new RedisStore(false, false, redis, `${prefix}rate:`);
  const store: FastifyRateLimitStore = {
    incr(key, callback, timeWindow, max) {
      inner.incr(
        key,
        (error, result) => {
          if (error) failures.report(error);
          callback(error, result);
        },
        timeWindow,
        max,
      );
    },
    child: () => store,
  };
  // The plugin calls `new Store(options)`; a constructor that returns an object yields that object.
  return function Store() {
    return store;
  } as unknown as FastifyRateLimitStoreCtor;
}
