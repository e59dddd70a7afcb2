import type { Redis } from 'ioredis';
import type { StoreFailures } from './store.js';

/** One sign-in attempt that has been counted against its username. */
export interface SignInAttempt {
  /** The password was right: the attempt was not a failure, so it is taken off the count again. */
  succeeded(): Promise<void>;
}

/**
 * Failed sign-ins per target username (CONTRACT §2, §6.3), whatever addresses they come from: at most `max` per
 * window for one username (case-insensitive), so a password cannot be guessed from many addresses.
 *
 * An attempt is counted *before* its password is checked and taken back when it succeeds. Counting only after a
 * failure would let parallel guesses all pass the check before any of them is recorded (a password hash takes
 * tens of milliseconds), so a botnet could make far more than `max` guesses in a window; counted up front,
 * guesses in flight hold their place and at most `max` are ever checked.
 *
 * A success does not reset the count, only takes its own attempt back: if it reset it, the account's owner
 * signing in would hand an attacker guessing at the same username a fresh allowance each time. The owner's own
 * mistypes stay counted until the window ends (a minute by default), which is the price of that.
 *
 * An unknown username is counted and refused the same way as a known one, so the limit does not reveal which
 * usernames exist.
 */
export interface SignInThrottle {
  /**
   * Counts an attempt at `username`. Resolves with `{ retryAfterSeconds }` when the username is over its limit
   * (the caller answers 429 without checking the password), else with the attempt.
   */
  begin(username: string): Promise<SignInAttempt | { retryAfterSeconds: number }>;
}

const NOTHING_TO_UNDO: SignInAttempt = { succeeded: () => Promise.resolve() };

/** RATE_LIMIT=off. */
export const UNTHROTTLED: SignInThrottle = { begin: () => Promise.resolve(NOTHING_TO_UNDO) };

/** Where the counts live: this process's memory or Redis. */
interface Counts {
  /** Adds one to the key's count in the current window (starting one if none); the new count and ms left. */
  increment(key: string): Promise<{ count: number; ttlMs: number }>;
  /** Takes one off the key's count if its window is still open. */
  decrement(key: string): Promise<void>;
}

function throttle(counts: Counts, max: number, onError: (error: unknown) => void): SignInThrottle {
  return {
    async begin(username) {
      const key = username.toLowerCase();
      let counted: { count: number; ttlMs: number };
      try {
        counted = await counts.increment(key);
      } catch (error) {
        // Fail open (CONTRACT §6.3): an unreachable Redis must not stop anyone signing in.
        onError(error);
        return NOTHING_TO_UNDO;
      }
      if (counted.count > max) return { retryAfterSeconds: Math.max(1, Math.ceil(counted.ttlMs / 1000)) };
      return {
        succeeded: () => counts.decrement(key).catch(onError),
      };
    },
  };
}

/**
 * Counts in this process. A Map keeps insertion order, and every window has the same length, so the entries are
 * ordered by when their window ends: expired ones are dropped from the front on each call, and memory holds only
 * the usernames tried within the last window.
 */
export function memorySignInThrottle(max: number, windowMs: number): SignInThrottle {
  const windows = new Map<string, { count: number; endsAt: number }>();
  const sweep = (now: number) => {
    for (const [key, entry] of windows) {
      if (entry.endsAt > now) break;
      windows.delete(key);
    }
  };
  const counts: Counts = {
    increment(key) {
      const now = Date.now();
      sweep(now);
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
  return throttle(counts, max, () => {});
}

// The window starts with the first attempt (fixed window, like the per-address counters) and the key expires
// with it. Both scripts run atomically in Redis, so processes sharing it count exactly.
const INCREMENT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {count, redis.call('PTTL', KEYS[1])}
`;
// Only while the key exists: a plain DECR after the window ended would create a key without expiry.
const DECREMENT = `
local count = tonumber(redis.call('GET', KEYS[1]))
if count and count > 0 then redis.call('DECR', KEYS[1]) end
return 0
`;

type ThrottleCommands = Redis & {
  corkboardSignInIncrement(key: string, windowMs: number): Promise<[number, number]>;
  corkboardSignInDecrement(key: string): Promise<number>;
};

/** Counts in Redis under `<prefix>signin:<username>`, shared by every process. */
export function redisSignInThrottle(redis: Redis, prefix: string, max: number, windowMs: number, failures: StoreFailures): SignInThrottle {
  redis.defineCommand('corkboardSignInIncrement', { numberOfKeys: 1, lua: INCREMENT });
  redis.defineCommand('corkboardSignInDecrement', { numberOfKeys: 1, lua: DECREMENT });
  const commands = redis as ThrottleCommands;
  const counts: Counts = {
    async increment(key) {
      const [count, ttlMs] = await commands.corkboardSignInIncrement(`${prefix}signin:${key}`, windowMs);
      return { count, ttlMs };
    },
    async decrement(key) {
      await commands.corkboardSignInDecrement(`${prefix}signin:${key}`);
    },
  };
  return throttle(counts, max, (error) => failures.report(error));
}
