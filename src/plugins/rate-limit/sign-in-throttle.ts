import type { WindowCounts } from './store.js';

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

/**
 * Counts attempts per lower-cased username in `counts`: this process's memory, or Redis with memory behind it
 * (store.ts), which never fails, so no attempt goes uncounted while Redis is away.
 */
export function signInThrottle(counts: WindowCounts, max: number, windowMs: number): SignInThrottle {
  return {
    async begin(username) {
      const key = username.toLowerCase();
      const { count, ttlMs } = await counts.increment(key, windowMs);
      if (count > max) return { retryAfterSeconds: Math.max(1, Math.ceil(ttlMs / 1000)) };
      return { succeeded: () => counts.decrement(key) };
    },
  };
}
