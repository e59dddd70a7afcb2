import { PassThrough } from 'node:stream';
import { normalizeIP } from '@fastify/rate-limit';
import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyReply, FastifyRequest, preValidationAsyncHookHandler } from 'fastify';
import { afterCommitNotifier, listen, type Listener } from '../../db/pg-notify.js';
import type { Caller } from '../../plugins/auth.js';
import { appendVary } from '../../shared/conditional.js';
import { AppError } from '../../shared/errors.js';
import { findCallerByTokenHash } from '../tokens/tokens.repository.js';
import { adoptRestoredLog, EVENTS_CHANNEL, purgeEvents, recordStreamEvent, START, TAG_PATTERN } from './events.js';
import { redisWakeup, type Wakeup } from './redis-wakeup.js';
import { jointSeat, memorySeats, poolSeats, redisSeats, type Seat, type StreamSeats } from './seats.js';
import { RETRY_AFTER_SECONDS, StreamHub, tooManyStreams, type Resume, type StreamKind, type Subscriber } from './hub.js';

declare module 'fastify' {
  interface FastifyInstance {
    streams: StreamHub;
    /** Who may open one more stream under STREAM_MAX_PER_USER: a user, or an address without a token. */
    streamSeats: StreamSeats;
    /** This process's streams opened without a token, at most anonymousStreamMax(STREAM_MAX). */
    anonymousStreams: { take(): Seat | undefined };
  }
}

/**
 * The part of STREAM_MAX that streams opened without a token may hold (CONTRACT §7): all but a tenth (at least one),
 * which is kept for signed-in users, so that anonymous readers from however many addresses cannot shut them out.
 */
export function anonymousStreamMax(streamMax: number): number {
  return streamMax - Math.ceil(streamMax / 10);
}

/** The anonymous part of STREAM_MAX is taken; a signed-in client may still open a stream. */
const tooManyAnonymousStreams = () =>
  new AppError(503, 'Too many event streams without a token on this server; sign in, or retry later', undefined, { 'retry-after': RETRY_AFTER_SECONDS });

/** How often old events are purged (in the background, never by a request). */
const PURGE_EVERY_MS = 10 * 60_000;
/**
 * While the wake-up (Redis, or LISTEN on PostgreSQL) is not connected, how often the hub looks for other processes'
 * events itself (CONTRACT §7: delivery within 1 s of the commit, even while the wake-up reconnects). A look with no
 * stream open costs nothing (see pump.ts).
 */
const WAKEUP_DOWN_POLL_MS = 250;

/**
 * Whether to answer with an event stream (CONTRACT §7): the client accepts `text/event-stream` (q > 0) at least as
 * much as `application/json`. The answer varies on Accept either way, so `Vary` says so for caches.
 */
export function negotiateStream(request: FastifyRequest, reply: FastifyReply): boolean {
  appendVary(reply, 'Accept');
  return wantsStream(request);
}

function wantsStream(request: FastifyRequest): boolean {
  // A HEAD (which Fastify routes to the same handler) gets a stream's headers with no stream behind them.
  const accept = request.headers.accept;
  if (accept === undefined) return false;
  const stream = quality(accept, 'text/event-stream');
  return stream !== undefined && stream > 0 && stream >= (quality(accept, 'application/json') ?? 0);
}

/**
 * The preValidation hook of the routes that stream: a stream request with a malformed Last-Event-ID is a 400
 * before the bearer token is checked (a preHandler), as every malformed request is 400 whoever sends it.
 */
export const checkLastEventId: preValidationAsyncHookHandler = async (request) => {
  if (wantsStream(request)) lastEventId(request);
};

/** The q-value (RFC 9110 §12.4.2) `accept` gives exactly `type`, or undefined when it does not list it. */
function quality(accept: string, type: string): number | undefined {
  for (const range of accept.split(',')) {
    const [name = '', ...parameters] = range.split(';').map((part) => part.trim());
    if (name.toLowerCase() !== type) continue;
    const q = parameters.find((parameter) => /^q\s*=/i.test(parameter));
    const value = q === undefined ? 1 : Number(q.slice(q.indexOf('=') + 1).trim());
    return Number.isFinite(value) ? value : 0;
  }
  return undefined;
}

/**
 * Last-Event-ID: absent, or an id this service sends (`<xid>.<id>-<tag>` or `<id>-<tag>`, see eventId), or a bare
 * number (an id of the format before tags: well-formed, and answered with a reset). Anything else is a 400.
 */
const LAST_EVENT_ID = new RegExp(`^(?:(0|[1-9][0-9]{0,18})\\.)?(0|[1-9][0-9]{0,15})(?:-(${TAG_PATTERN}))?$`);
/** xid8 is unsigned 64 bits; PostgreSQL hands out far fewer, and a larger one would not even cast. */
const MAX_XID = 2n ** 63n;

function lastEventId(request: FastifyRequest): Resume | undefined {
  const raw = request.headers['last-event-id'];
  if (raw === undefined) return undefined;
  const value = Array.isArray(raw) ? raw.join(',') : raw.trim();
  const match = LAST_EVENT_ID.exec(value);
  if (!match || !Number.isSafeInteger(Number(match[2])) || BigInt(match[1] ?? 0) >= MAX_XID) {
    throw AppError.badRequest('Last-Event-ID', 'must be the id of an event this stream sent');
  }
  return { xid: match[1] ?? '0', id: Number(match[2]), tag: match[3] };
}

export interface OpenStream {
  kind: StreamKind;
  /** Whose visibility the stream follows (see Subscriber.viewer). */
  viewer: { id: number; role: Caller['role'] } | undefined;
  caller: Caller | undefined;
}

/**
 * Answers the request with a live stream: 200 `text/event-stream`, `Cache-Control: no-store`. Everything that
 * can refuse it (a malformed Last-Event-ID, the limits) does so before the stream opens, as an ordinary problem.
 * A HEAD gets the same checks and headers, and no stream.
 */
export async function openStream(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply, open: OpenStream): Promise<FastifyReply> {
  const resumeFrom = lastEventId(request);
  // Shutting down counts as full: `app.closing` aborting runs the hub's closeAll (below).
  if (app.streams.full) throw tooManyStreams();
  const tokenHash = open.caller ? app.auth.hashOf(request) : undefined;
  const out = new PassThrough();
  const sub: Subscriber = {
    kind: open.kind,
    viewer: open.viewer,
    caller: open.caller && tokenHash ? { id: open.caller.id, tokenHash } : undefined,
    cursor: START,
    live: false,
    out,
    res: reply.raw,
    lastWrite: Date.now(),
    closed: false,
  };
  // Removing a stream gives its seat back, whenever it comes: also for a client that leaves while the seat or the
  // log is awaited below (the hub then never registers it), or a stream that cannot open (add removes it).
  reply.raw.once('close', () => app.streams.remove(sub));
  out.on('error', () => app.streams.remove(sub));
  // A client that left while its token was looked up (before this handler) closed the response already: no 'close'
  // comes any more, so it is removed now, and is never registered (its seat, taken below, goes back in add).
  if (reply.raw.destroyed) app.streams.remove(sub);
  if (open.caller) {
    const seat = await app.streamSeats.take({ userId: open.caller.id });
    if (!seat) {
      throw new AppError(429, `At most ${app.config.streamMaxPerUser} event streams per user`, undefined, { 'retry-after': RETRY_AFTER_SECONDS });
    }
    sub.seat = seat;
  } else {
    // Keyed as the rate limits key a client (IPv4-mapped addresses as IPv4, IPv6 by its /64): request.ip is the
    // rightmost untrusted X-Forwarded-For entry under TRUST_PROXY, else the peer, so a client cannot pick it.
    const seat = await app.streamSeats.take({ address: normalizeIP(request.ip) });
    if (!seat) {
      throw new AppError(429, `At most ${app.config.streamMaxPerUser} event streams per client address without a token`, undefined, {
        'retry-after': RETRY_AFTER_SECONDS,
      });
    }
    const share = app.anonymousStreams.take();
    if (!share) {
      seat.release();
      throw tooManyAnonymousStreams();
    }
    sub.seat = jointSeat(seat, share);
  }
  if (request.method === 'HEAD') {
    app.streams.remove(sub);
    return streamHeaders(reply).send();
  }
  await app.streams.add(sub, resumeFrom);
  return streamHeaders(reply).send(out);
}

/** A stream's 200 and headers; the retry line follows at once (X-Accel-Buffering asks nginx not to buffer). */
function streamHeaders(reply: FastifyReply): FastifyReply {
  return reply
    .code(200)
    .header('content-type', 'text/event-stream')
    .header('cache-control', 'no-store')
    .header('x-accel-buffering', 'no');
}

/**
 * Live streams of posts (CONTRACT §7): the event log, written inside every post write; this process's streams;
 * the cross-process wake-up (Redis pub/sub when REDIS_URL is set, else PostgreSQL LISTEN on the session
 * connection); the background purge.
 */
export default fp(
  async (app) => {
    const config = app.config;
    const hub = new StreamHub(
      app.store.db,
      app.links,
      {
        heartbeatMs: config.streamHeartbeatSeconds * 1000,
        max: config.streamMax,
        authRecheckMs: config.streamAuthRecheckSeconds * 1000,
      },
      (hash) => findCallerByTokenHash(app.store, hash, new Date().toISOString()),
      app.log,
      app.metrics,
    );
    app.decorate('streams', hub);
    // With REDIS_URL the per-user and per-address limits hold across every process on that Redis, as the rate limits do.
    const seats =
      config.redisUrl === undefined
        ? memorySeats(config.streamMaxPerUser)
        : redisSeats({ url: config.redisUrl, keyPrefix: config.redisKeyPrefix, max: config.streamMaxPerUser, log: app.log });
    app.decorate('streamSeats', seats);
    app.decorate('anonymousStreams', poolSeats(anonymousStreamMax(config.streamMax)));

    app.postChanges.subscribe({
      inTransaction: async (tx, change) => {
        await recordStreamEvent(tx, change);
      },
    });
    // Other processes hear of a commit after it, through Redis or a NOTIFY sent from the pool (never from inside the
    // write: see afterCommitNotifier).
    const notifier =
      app.store.dialect === 'postgres' && config.redisUrl === undefined
        ? afterCommitNotifier(app.store.db, EVENTS_CHANNEL, (error) => app.log.warn({ err: error }, 'event stream NOTIFY failed'))
        : undefined;
    app.postChanges.subscribe({
      afterCommit: () => {
        hub.kick();
        wakeup?.publish();
        notifier?.notify();
      },
    });

    let listener: Listener | undefined;
    let wakeup: Wakeup | undefined;
    let purge: NodeJS.Timeout | undefined;
    let wakeupDownPoll: NodeJS.Timeout | undefined;
    app.addHook('onReady', async () => {
      const adopted = await adoptRestoredLog(app.store.db);
      if (adopted > 0) app.log.warn({ events: adopted }, 'the event log holds xids ahead of this PostgreSQL cluster (restored from another): its ids now get a reset');
      await hub.start();
      const runPurge = () => {
        const before = new Date(Date.now() - config.streamRetentionSeconds * 1000).toISOString();
        purgeEvents(app.store, before).catch((error: unknown) => app.log.warn({ err: error }, 'purging old stream events failed'));
      };
      purge = setInterval(runPurge, PURGE_EVERY_MS);
      purge.unref();
    });
    // Only a listening server hears other processes (an app built for inject() in a test has no peers).
    app.addHook('onListen', async () => {
      if (app.store.dialect !== 'postgres') return;
      // Down (or not yet connected): the hub would hear of other processes' commits only through its 5 s safety
      // poll. A poll rather than a second channel: where REDIS_URL is used, a session connection may not be at hand.
      wakeupDownPoll = setInterval(() => {
        if (!(wakeup ?? listener)?.connected) hub.kick();
      }, WAKEUP_DOWN_POLL_MS);
      wakeupDownPoll.unref();
      if (config.redisUrl !== undefined) {
        wakeup = redisWakeup({
          url: config.redisUrl,
          channel: `${config.redisKeyPrefix}stream-events`,
          onMessage: () => hub.kick(),
          onConnected: () => hub.kick(),
          onError: (error) => app.log.warn({ err: error }, 'event stream Redis connection failed; polling the event log meanwhile'),
        });
        return;
      }
      listener = listen({
        url: config.databaseDirectUrl ?? config.databaseUrl,
        channel: EVENTS_CHANNEL,
        onMessage: () => hub.kick(),
        onConnected: () => hub.kick(),
        onError: (error) => app.log.warn({ err: error }, 'event stream LISTEN connection lost; reconnecting'),
      });
    });
    app.closing.addEventListener('abort', () => hub.closeAll(), { once: true });
    app.addHook('onClose', async () => {
      hub.closeAll();
      await seats.close();
      if (purge) clearInterval(purge);
      if (wakeupDownPoll) clearInterval(wakeupDownPoll);
      await listener?.close();
      await wakeup?.close();
    });
  },
  { name: 'streams', dependencies: ['metrics'] },
);
