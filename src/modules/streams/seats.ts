import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { Redis } from 'ioredis';

/** One open stream's place under a limit, counted until it is given back (release is idempotent). */
export interface Seat {
  release(): void;
}

/**
 * Whose streams a seat counts (CONTRACT §7): a signed-in user's (STREAM_MAX_PER_USER), or those opened without a
 * token from one client address (as many).
 */
export type SeatOwner = { userId: number } | { address: string };

/**
 * The limit on open event streams per user and per anonymous client address. In memory it is one process's count;
 * with REDIS_URL it is one count for every process sharing that Redis, as the rate limits are.
 */
export interface StreamSeats {
  /** Takes one of the owner's seats, or answers undefined when all of them are taken. */
  take(owner: SeatOwner): Promise<Seat | undefined>;
  close(): Promise<void>;
}

/**
 * The name of an owner's count, in memory and in Redis. A user's is their id (as before addresses were counted, so
 * processes of both versions agree on it during a rolling upgrade); an address's is prefixed, so never a user's.
 */
function seatKey(owner: SeatOwner): string {
  return 'userId' in owner ? String(owner.userId) : `address:${owner.address}`;
}

/** Each process's own count: exact for one process, per process behind a load balancer. */
export function memorySeats(max: number): StreamSeats {
  const held = new Map<string, number>();
  return {
    async take(owner) {
      return takeLocal(held, seatKey(owner), max);
    },
    async close() {},
  };
}

/** At most `max` seats of one pool in this process, taken at once (no await between the check and the count). */
export function poolSeats(max: number): { take(): Seat | undefined } {
  const held = new Map<string, number>();
  return { take: () => takeLocal(held, '', max) };
}

/** One seat made of several, all given back together. */
export function jointSeat(...parts: Seat[]): Seat {
  return {
    release() {
      for (const part of parts) part.release();
    },
  };
}

function takeLocal(held: Map<string, number>, key: string, max: number): Seat | undefined {
  const count = held.get(key) ?? 0;
  if (count >= max) return undefined;
  held.set(key, count + 1);
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      const left = (held.get(key) ?? 1) - 1;
      if (left > 0) held.set(key, left);
      else held.delete(key);
    },
  };
}

// An owner's seats are a sorted set of holders scored by when their lease ends, by Redis's clock (processes' clocks may
// disagree). Taking one drops the expired leases first, so the seats of a process that died without giving them
// back (kill -9, a lost machine) come free once their lease runs out.
const NOW_MS = `
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)`;
const TAKE = `${NOW_MS}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;
// Extends the lease of a seat this process holds, and puts it back if Redis lost it (restarted without its data, a
// failover, an outage longer than a lease): every stream still open counts again. A seat given back is no longer
// renewed, and its ZREM follows any renewal sent before it on the same connection.
const RENEW = `${NOW_MS}
redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[1]), ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1`;

type SeatCommands = Redis & {
  takeSeat(key: string, max: number, leaseMs: number, holder: string): Promise<number>;
  renewSeat(key: string, leaseMs: number, holder: string): Promise<number>;
};

/** At most one warning line a minute while Redis keeps failing. */
const WARN_INTERVAL_MS = 60_000;

export interface RedisSeatsOptions {
  url: string;
  keyPrefix: string;
  max: number;
  /** How long a seat stays taken without being renewed; this process renews its seats three times per lease. */
  leaseMs?: number;
  log: FastifyBaseLogger;
}

/**
 * Seats in Redis, shared by every process on it. Each open stream holds a lease that its process renews while the
 * stream is open and deletes when it closes. A request never waits on Redis for long (no offline queue, short
 * timeouts, as for the rate limits); when Redis cannot answer, the seat is taken from this process's own count
 * instead (the limit holds per process, as without REDIS_URL) and a warning is logged, so that streams stay
 * available. Seats taken that way are never in Redis: they are not renewed there or given back there.
 */
export function redisSeats(options: RedisSeatsOptions): StreamSeats {
  const leaseMs = options.leaseMs ?? 60_000;
  const redis = new Redis(options.url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    commandTimeout: 250,
  }) as SeatCommands;
  redis.defineCommand('takeSeat', { numberOfKeys: 1, lua: TAKE });
  redis.defineCommand('renewSeat', { numberOfKeys: 1, lua: RENEW });
  let lastWarning = -Infinity;
  const warn = (error: unknown) => {
    if (Date.now() - lastWarning < WARN_INTERVAL_MS) return;
    lastWarning = Date.now();
    options.log.warn({ err: error }, 'stream seats: Redis failed; the stream limits per user and per address are counted per process until it answers');
  };
  redis.on('error', warn);
  // The first connection: a take waits for it (the connect timeout at most) rather than counting per process only
  // because the process has just started. After it, a take never waits for a connection.
  let connecting: Promise<void> | undefined = redis.connect().then(
    () => {},
    () => {
      // Reported through the 'error' event; the client goes on reconnecting.
    },
  );
  void connecting.then(() => (connecting = undefined));

  const processId = randomBytes(8).toString('hex');
  let sequence = 0;
  /** This process's seats in Redis, by holder: renewed until given back. */
  const leases = new Map<string, string>();
  /** Seats taken while Redis could not answer. */
  const local = new Map<string, number>();
  const renewal = setInterval(() => {
    for (const [holder, key] of leases) redis.renewSeat(key, leaseMs, holder).catch(warn);
  }, Math.max(50, Math.floor(leaseMs / 3)));
  renewal.unref();

  return {
    async take(owner) {
      const name = seatKey(owner);
      const key = `${options.keyPrefix}stream-seats:${name}`;
      const holder = `${processId}:${++sequence}`;
      let taken: number;
      if (connecting) await connecting;
      try {
        taken = await redis.takeSeat(key, options.max, leaseMs, holder);
      } catch (error) {
        warn(error);
        // A take that timed out here may still have run there: its seat is not one this process will renew.
        redis.zrem(key, holder).catch(() => {});
        return takeLocal(local, name, options.max);
      }
      if (taken !== 1) return undefined;
      leases.set(holder, key);
      return {
        release() {
          if (!leases.delete(holder)) return;
          // If this fails, the lease runs out on its own: it is no longer renewed.
          redis.zrem(key, holder).catch(warn);
        },
      };
    },
    async close() {
      clearInterval(renewal);
      // Shutdown ends every stream first (each gives its seat back); what is left runs out with its lease.
      await Promise.allSettled([...leases].map(([holder, key]) => redis.zrem(key, holder)));
      leases.clear();
      // quit() waits for the replies of what was sent before it (the seats just given back); disconnect() if it cannot.
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
