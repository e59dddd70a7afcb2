import type { PassThrough } from 'node:stream';
import type { ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import fastJson from 'fast-json-stringify';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Kysely } from 'kysely';
import type { Database, Role, Visibility } from '../../db/types.js';
import type { Links } from '../../shared/links.js';
import { toPost } from '../../shared/representations.js';
import { PostSchema } from '../posts/posts.schemas.js';
import { createEventsRepository, type StreamEvent } from './events.js';

/** A subscriber more than this far behind (bytes written but not yet taken by the client) is disconnected. */
export const MAX_BACKLOG_BYTES = 1024 * 1024;
/** A replay pauses while this much is waiting for the client, so catching up cannot by itself hit the limit. */
const REPLAY_PAUSE_BYTES = 256 * 1024;
/** How long a replay waits for a client that does not read before dropping it. */
const REPLAY_STALL_MS = 30_000;
const BATCH = 500;
/** The reconnection delay the `retry:` line asks of clients. */
export const RETRY_MS = 2000;

export type StreamKind = 'posts' | 'feed';

export interface StreamOptions {
  heartbeatMs: number;
  maxPerUser: number;
  max: number;
  /** How often the tokens of open streams are checked again (revoked or expired: the stream ends). */
  authRecheckMs: number;
}

interface Who {
  id: number;
  role: Role;
}

/** One open stream. */
export interface Subscriber {
  readonly kind: StreamKind;
  /**
   * Whose eyes the stream sees through: for `posts` the caller (undefined: anonymous); for `feed` the feed's owner,
   * also when an admin reads it, as GET /users/{id}/feed judges visibility.
   */
  viewer: Who | undefined;
  /** The signed-in caller who opened it, with their token's hash (for the per-user limit and the re-check). */
  readonly caller: { id: number; tokenHash: string } | undefined;
  /** The last event id this subscriber has been given or has been judged not to see. */
  cursor: number;
  /** False while it is replaying from Last-Event-ID: the pump hands it live events only afterwards. */
  live: boolean;
  /** What the response streams to the client (Fastify pipes it into the socket). */
  readonly out: PassThrough;
  readonly res: ServerResponse;
  lastWrite: number;
  closed: boolean;
}

export type FindCaller = (tokenHash: string) => Promise<Who | undefined>;

/**
 * Every open stream of this process, and the pump that feeds them.
 *
 * The pump is the only reader of the event log: one run at a time reads the events after `position` in id order
 * (ids follow commit order, see events.ts) and hands each to every live subscriber, judging visibility for each at
 * that moment (a follow looked up once per event for all the subscribers who need it). It is kicked after a local
 * commit, by PostgreSQL's NOTIFY for commits of other processes, and by a slow poll as a safety net. A subscriber
 * resuming from Last-Event-ID is caught up inside the same serialised run (replay up to `position`, then live), so
 * nothing is sent twice and nothing falls between replay and live.
 *
 * While no stream is open the pump does not run: a kick only marks the hub `idle`. Every post write kicks it, and
 * reading the log back after each one was work for nobody (bench/README.md, "the stream pump with no stream open").
 * The next run first moves `position` to the end of the log; a stream that opens meanwhile joins in that run,
 * before its answer starts.
 */
export class StreamHub {
  private readonly subscribers = new Set<Subscriber>();
  private readonly pending = new Set<Subscriber>();
  private readonly perUser = new Map<number, number>();
  private readonly events;
  private readonly serialize: (post: unknown) => string;
  private position = 0;
  private started: Promise<void> | undefined;
  private running = false;
  private again = false;
  /** Kicks were skipped while no stream was open: `position` may be behind the end of the log. */
  private idle = false;
  /** Streams opening while idle, each with what lets its opening go on once the pump has placed it. */
  private readonly joining = new Map<Subscriber, () => void>();
  private timers: NodeJS.Timeout[] = [];
  private closed = false;
  private readonly openGauge: Gauge;
  private readonly sent: Counter;
  private readonly dropped: Counter<'reason'>;

  constructor(
    db: Kysely<Database>,
    private readonly links: Links,
    private readonly options: StreamOptions,
    private readonly findCaller: FindCaller,
    private readonly log: FastifyBaseLogger,
    registry: Registry,
  ) {
    this.events = createEventsRepository(db);
    // The serializer Fastify compiles for GET /posts/{id}'s answer: the same fields in the same order.
    this.serialize = fastJson(PostSchema as object);
    this.openGauge = new Gauge({ name: 'corkboard_streams_open', help: 'Event streams open in this process', registers: [registry] });
    this.sent = new Counter({ name: 'corkboard_stream_events_sent_total', help: 'Events written to event streams', registers: [registry] });
    this.dropped = new Counter({
      name: 'corkboard_stream_subscribers_dropped_total',
      help: 'Event streams ended by the server: slow (more than 1 MiB waiting), revoked (token no longer valid)',
      labelNames: ['reason'],
      registers: [registry],
    });
  }

  /** Reads where the log ends and starts the timers. Streams opened before it completes wait for it. */
  start(): Promise<void> {
    this.started ??= (async () => {
      this.position = (await this.events.bounds()).last;
      const tick = Math.max(50, Math.min(1000, Math.floor(this.options.heartbeatMs / 2)));
      this.every(tick, () => this.heartbeat());
      this.every(this.options.authRecheckMs, () => void this.recheck());
      // A safety net under NOTIFY (a notification missed while the listener reconnects) and other writers.
      this.every(5000, () => this.kick());
    })();
    return this.started;
  }

  private every(ms: number, run: () => void): void {
    const timer = setInterval(run, ms);
    timer.unref();
    this.timers.push(timer);
  }

  get size(): number {
    return this.subscribers.size;
  }

  /** Whether one more stream may open: undefined, or the reason it may not. */
  refusal(callerId: number | undefined): 'process' | 'user' | undefined {
    if (this.closed || this.subscribers.size >= this.options.max) return 'process';
    if (callerId !== undefined && (this.perUser.get(callerId) ?? 0) >= this.options.maxPerUser) return 'user';
    return undefined;
  }

  /**
   * Registers an open stream. `lastEventId` undefined: it goes live at the current end of the log. Otherwise it
   * is replayed from there first (with `event: reset` when that id is no longer kept).
   */
  async add(sub: Subscriber, lastEventId: number | undefined): Promise<void> {
    await this.start();
    this.subscribers.add(sub);
    if (sub.caller) this.perUser.set(sub.caller.id, (this.perUser.get(sub.caller.id) ?? 0) + 1);
    this.openGauge.set(this.subscribers.size);
    this.write(sub, `retry: ${RETRY_MS}\n\n`);
    if (lastEventId === undefined && this.idle) {
      // `position` may be far behind: the pump places the stream at the end of the log. The answer starts only
      // then (openStream awaits this), so a post the client writes once it sees the stream open is delivered.
      await new Promise<void>((resolve) => {
        this.joining.set(sub, resolve);
        this.kick();
      });
    } else if (lastEventId === undefined) {
      sub.cursor = this.position;
      sub.live = true;
    } else {
      sub.cursor = lastEventId;
      this.pending.add(sub);
      this.kick();
    }
  }

  remove(sub: Subscriber): void {
    if (!this.subscribers.delete(sub)) return;
    sub.closed = true;
    this.pending.delete(sub);
    this.joining.get(sub)?.();
    this.joining.delete(sub);
    if (sub.caller) {
      const left = (this.perUser.get(sub.caller.id) ?? 1) - 1;
      if (left > 0) this.perUser.set(sub.caller.id, left);
      else this.perUser.delete(sub.caller.id);
    }
    this.openGauge.set(this.subscribers.size);
  }

  /** Ends every stream cleanly (shutdown): clients reconnect, with Last-Event-ID, to another process. */
  closeAll(): void {
    this.closed = true;
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    for (const sub of [...this.subscribers]) this.end(sub);
  }

  /** Ends a stream: what was written is flushed, then the connection closes (it is not reused). */
  end(sub: Subscriber): void {
    this.remove(sub);
    sub.res.once('finish', () => sub.res.socket?.end());
    sub.out.end();
  }

  private drop(sub: Subscriber, reason: 'slow' | 'revoked'): void {
    this.dropped.inc({ reason });
    if (reason === 'slow') {
      this.remove(sub);
      sub.res.destroy();
      sub.out.destroy();
    } else {
      this.end(sub);
    }
  }

  /** Bytes written to this stream that the client has not taken yet. */
  private backlog(sub: Subscriber): number {
    return sub.out.readableLength + sub.out.writableLength + sub.res.writableLength + (sub.res.socket?.writableLength ?? 0);
  }

  private write(sub: Subscriber, text: string): void {
    if (sub.closed) return;
    sub.out.write(text);
    sub.lastWrite = Date.now();
    if (this.backlog(sub) > MAX_BACKLOG_BYTES) this.drop(sub, 'slow');
  }

  /** Asks the pump to run (again, if it is running). */
  kick(): void {
    if (this.closed || !this.started) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.subscribers.size === 0) {
      this.idle = true;
      return;
    }
    this.running = true;
    void this.pump()
      .catch((error: unknown) => {
        this.log.warn({ err: error }, 'event stream pump failed; retrying');
        setTimeout(() => this.kick(), 1000).unref();
      })
      .finally(() => {
        this.running = false;
        if (this.again) this.kick();
      });
  }

  private async pump(): Promise<void> {
    do {
      this.again = false;
      if (this.idle) {
        // Nothing was read while no stream was open: go on from the end of the log, not from where reading stopped.
        this.position = Math.max(this.position, (await this.events.bounds()).last);
        this.idle = false;
      }
      for (const [sub, joined] of this.joining) {
        sub.cursor = this.position;
        sub.live = true;
        joined();
      }
      this.joining.clear();
      for (const sub of [...this.pending]) {
        await this.catchUp(sub);
        this.pending.delete(sub);
        sub.live = true;
      }
      for (;;) {
        const batch = await this.events.after(this.position, BATCH);
        if (batch.length === 0) break;
        for (const event of batch) {
          const live = [...this.subscribers].filter((sub) => sub.live && sub.cursor < event.id);
          await this.deliver(event, live);
          this.position = event.id;
        }
      }
    } while (this.again && !this.closed);
  }

  /** Replays what a resuming subscriber missed, up to where the pump stands; live delivery takes over from there. */
  private async catchUp(sub: Subscriber): Promise<void> {
    const { last, oldest } = await this.events.bounds();
    if (sub.cursor > last) {
      // An id this database never handed out (another deployment's, or from before a restore): start afresh.
      this.write(sub, 'event: reset\ndata: {}\n\n');
      sub.cursor = last;
    } else if (oldest === undefined ? sub.cursor < last : sub.cursor + 1 < oldest) {
      // Ids have no gaps: an id below the oldest kept means events after it were purged.
      this.write(sub, 'event: reset\ndata: {}\n\n');
    }
    for (;;) {
      if (sub.closed) return;
      const batch = await this.events.after(sub.cursor, BATCH, this.position);
      if (batch.length === 0) return;
      for (const event of batch) await this.deliver(event, [sub]);
      const stalled = Date.now() + REPLAY_STALL_MS;
      while (!sub.closed && this.backlog(sub) > REPLAY_PAUSE_BYTES) {
        if (Date.now() > stalled) return this.drop(sub, 'slow');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
  }

  /** Sends one event to each of `subs` that may see it now, and moves their cursors past it. */
  private async deliver(event: StreamEvent, subs: Subscriber[]): Promise<void> {
    if (subs.length === 0) return;
    const needFollow = new Set<number>();
    for (const sub of subs) {
      const v = sub.viewer;
      if (!v || v.id === event.ownerId) continue;
      if (sub.kind === 'feed' || (v.role !== 'admin' && (event.visibility === 'followers' || event.previousVisibility === 'followers'))) {
        needFollow.add(v.id);
      }
    }
    const follows = needFollow.size > 0 ? await this.events.followersAmong(event.ownerId, [...needFollow]) : new Set<number>();

    let body: string | undefined;
    const deleted = `data: {"id":${event.postId}}\n\n`;
    for (const sub of subs) {
      if (sub.closed || sub.cursor >= event.id) continue;
      sub.cursor = event.id;
      const sees = (visibility: Visibility) => canSee(sub, event.ownerId, visibility, follows);
      let frame: string | undefined;
      if (event.kind === 'deleted') {
        if (sees(event.visibility)) frame = `event: post.deleted\n${deleted}`;
      } else if (sees(event.visibility)) {
        body ??= `data: ${this.serialize(toPost(event.post, this.links))}\n\n`;
        frame = `event: post.${event.kind}\n${body}`;
      } else if (event.kind === 'updated' && event.previousVisibility && sees(event.previousVisibility)) {
        frame = `event: post.deleted\n${deleted}`;
      }
      if (frame === undefined) continue;
      this.write(sub, `id: ${event.id}\n${frame}`);
      this.sent.inc();
    }
  }

  private heartbeat(): void {
    const due = Date.now() - this.options.heartbeatMs;
    for (const sub of this.subscribers) {
      if (sub.lastWrite <= due) this.write(sub, ': keep-alive\n\n');
    }
  }

  /** Looks every stream's token up again: one revoked or expired (or an admin no longer admin) ends its streams. */
  private async recheck(): Promise<void> {
    const byToken = new Map<string, Subscriber[]>();
    for (const sub of this.subscribers) {
      if (!sub.caller) continue;
      const list = byToken.get(sub.caller.tokenHash) ?? [];
      list.push(sub);
      byToken.set(sub.caller.tokenHash, list);
    }
    for (const [hash, subs] of byToken) {
      let caller: Who | undefined;
      try {
        caller = await this.findCaller(hash);
      } catch (error) {
        this.log.warn({ err: error }, 'event stream token re-check failed');
        return;
      }
      for (const sub of subs) {
        if (sub.closed) continue;
        if (!caller) this.drop(sub, 'revoked');
        else if (sub.kind === 'posts') sub.viewer = caller;
        else if (sub.viewer?.id !== caller.id && caller.role !== 'admin') this.drop(sub, 'revoked');
      }
    }
  }
}

/**
 * Whether the subscriber sees a post of `ownerId` with `visibility` (CONTRACT §3 and §7). A posts stream: what
 * GET /posts/{id} would show its caller. A feed stream: posts by users the feed's owner follows that the owner may
 * see, as GET /users/{id}/feed lists them.
 */
function canSee(sub: Subscriber, ownerId: number, visibility: Visibility, follows: ReadonlySet<number>): boolean {
  const v = sub.viewer;
  if (sub.kind === 'feed') {
    if (!v || v.id === ownerId || !follows.has(v.id)) return false;
    return visibility !== 'private' || v.role === 'admin';
  }
  if (visibility === 'public') return true;
  if (!v) return false;
  if (v.role === 'admin' || v.id === ownerId) return true;
  return visibility === 'followers' && follows.has(v.id);
}
