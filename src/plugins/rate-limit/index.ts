import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import rateLimit, { normalizeIP } from '@fastify/rate-limit';
import { AppError } from '../../shared/errors.js';
import { signInThrottle, UNTHROTTLED, type SignInThrottle } from './sign-in-throttle.js';
import { connectRedis, counterStore, memoryCounts, redisCounts, storeFailures, withFallback, type WindowCounts } from './store.js';

export type { SignInAttempt, SignInThrottle } from './sign-in-throttle.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Failed sign-ins per target username (see sign-in-throttle.ts). */
    signInThrottle: SignInThrottle;
  }
  interface FastifyContextConfig {
    /**
     * The rate-limit policy a route counts against: `auth` (sign-up, sign-in, password change) or, when unset,
     * `default`. `rateLimit: false` exempts a route (health, metrics).
     */
    rateLimitPolicy?: 'auth';
  }
}

/** Response fields of the rate limits, for CORS (security.ts exposes them to browser scripts). */
export const RATE_LIMIT_FIELDS = ['RateLimit-Policy', 'RateLimit'];

/**
 * A 429 of one policy: `Retry-After` and the policy's `RateLimit` with nothing remaining, rendered by the one error
 * handler (problem+json, or the board envelope under /boards).
 */
export function tooManyRequests(policy: string, retryAfterSeconds: number): AppError {
  return new AppError(429, `Too many requests; retry after ${retryAfterSeconds} seconds`, undefined, {
    'retry-after': String(retryAfterSeconds),
    ratelimit: `"${policy}";r=0;t=${retryAfterSeconds}`,
  });
}

/**
 * Rate limits with the fields of draft-ietf-httpapi-ratelimit-headers-11 (CONTRACT §6.3). Each limited route
 * counts against one named policy, per client address: `default` (RATE_LIMIT_MAX) or `auth` (RATE_LIMIT_AUTH_MAX),
 * both over RATE_LIMIT_WINDOW_MS. A policy is one quota: sign-up, sign-in and password change draw on the same
 * `auth` allowance of an address, as its single `RateLimit-Policy` entry says. Every answer of a limited route
 * carries `RateLimit-Policy: "auth";q=20;w=60` and `RateLimit: "auth";r=<remaining>;t=<seconds to reset>`.
 *
 * Counting is @fastify/rate-limit's (its IP normalisation, its limiter) over a store of ours (store.ts, through the
 * plugin's custom-store interface); the fields are written here, because the plugin only knows the older
 * `RateLimit-Limit/Remaining/Reset` and `X-RateLimit-*` ones. With REDIS_URL the counters (these and the
 * per-username ones) live in Redis, exact across processes; without, in each process's memory. If Redis fails,
 * requests are served and counted in each process's memory meanwhile (CONTRACT §6.3: no limit disappears), with a
 * metric and a warning (store.ts); the `RateLimit` field then tells what this process counts.
 * @see https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-11
 */
export default fp(
  async (app) => {
    const { rateLimit: limits, redisUrl, redisKeyPrefix } = app.config;
    if (!limits.enabled) {
      app.decorate('signInThrottle', UNTHROTTLED);
      return;
    }
    const failures = storeFailures(app.metrics, app.log);
    const redis = redisUrl === undefined ? undefined : await connectRedis(redisUrl, failures);
    if (redis) {
      app.addHook('onClose', () => {
        redis.disconnect();
      });
    }
    /** One namespace of counters: in Redis under `<prefix><namespace>:`, with memory behind it; else in memory. */
    const counts = (namespace: string): WindowCounts =>
      redis ? withFallback(redisCounts(redis, `${redisKeyPrefix}${namespace}:`), memoryCounts(), failures) : memoryCounts();
    app.decorate('signInThrottle', signInThrottle(counts('signin'), limits.authMax, limits.windowMs));

    // The plugin is registered in a scope of its own with `global: false`: it only lends its counters to the hooks
    // below and never adds limiters (with the older fields) to the service's routes itself.
    // Filled in by the scope below, which runs to completion before any route is added.
    const policies = {} as Record<'default' | 'auth', Limiter>;
    await app.register(async (scope) => {
      await scope.register(rateLimit, { global: false, timeWindow: limits.windowMs, store: counterStore(counts('rate')) });
      for (const [name, max] of [
        ['default', limits.max],
        ['auth', limits.authMax],
      ] as const) {
        const count = scope.createRateLimit({ max, keyGenerator: (request) => `${name}:${normalizeIP(request.ip)}` });
        policies[name] = limiter(name, max, limits.windowMs, count);
      }
    });

    app.addHook('onRoute', (route) => {
      const exempt = route.config?.rateLimit;
      if (exempt !== undefined && exempt !== false) throw new Error(`${route.method} ${route.url}: name a rate-limit policy with config.rateLimitPolicy`);
    });
    // An instance hook, registered before the conditional plugin's (app.ts): a request is counted before anything
    // of its route can refuse it, so every answer of a limited route carries the fields, a malformed If-Match's
    // 400 included. Requests no route takes (404, 405, preflights) were answered by earlier hooks.
    app.addHook('onRequest', async (request, reply) => {
      const { rateLimit: exempt, rateLimitPolicy } = request.routeOptions.config;
      if (exempt === false || request.is404) return;
      await policies[rateLimitPolicy ?? 'default'](request, reply);
    });
  },
  { name: 'rate-limit', dependencies: ['error-handler', 'metrics'] },
);

type Count = ReturnType<FastifyInstance['createRateLimit']>;

type Limiter = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

/** One policy: counts the request, writes the fields, refuses it past the quota. */
function limiter(name: string, max: number, windowMs: number, count: Count): Limiter {
  const policyField = `"${name}";q=${max};w=${Math.ceil(windowMs / 1000)}`;
  return async (request, reply) => {
    reply.header('ratelimit-policy', policyField);
    const counted = await count(request);
    // `isAllowed` is an allow-list hit, and there is no allow list.
    if (counted.isAllowed) return;
    const { remaining, ttlInSeconds, isExceeded } = counted;
    if (isExceeded) throw tooManyRequests(name, ttlInSeconds);
    reply.header('ratelimit', `"${name}";r=${remaining};t=${ttlInSeconds}`);
  };
}
