import type { PassThrough } from 'node:stream';
import type { ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import fastJson from 'fast-json-stringify';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Kysely } from 'kysely';
import type { Database, PostRow, Role, Visibility } from '../../db/types.js';
import type { Links } from '../../shared/links.js';
import { AppError } from '../../shared/errors.js';
import { toPost } from '../../shared/representations.js';
import { PostSchema } from '../posts/posts.schemas.js';
import { seesPost } from '../../shared/visibility.js';
import { createEventsRepository, eventId, positionOf, START, type LogEnd, type OwnerRelations, type Position, type Resume, type StreamEvent } from './events.js';
import type { Seat } from './seats.js';

/**
 * A subscriber with more than this waiting for it (bytes written but not yet taken by the client, plus the events
 * it has fallen behind by) that does not drain for SLOW_GRACE_MS is disconnected.
 */
export const MAX_BACKLOG_BYTES = 1024 * 1024;
/**
 * Nothing more is written to a subscriber while this much is waiting for it: the live pump leaves it to catch up
 * from the log at its own pace, and a catch-up waits. So no single write outruns the client, and a stream holds
 * about this much, plus one catch-up chunk (CATCH_UP_POSTS posts), at most: well under MAX_BACKLOG_BYTES, for
 * however many streams resume and never read (issue 40: a resume once held its whole 500-event batch, ~5 MB).
 */
export const REPLAY_PAUSE_BYTES = 64 * 1024;
/** How long a subscriber more than MAX_BACKLOG_BYTES behind may take nothing before it is dropped. */
const SLOW_GRACE_MS = 5_000;
/** How long a catch-up waits for a client that takes nothing (however little is waiting) before dropping it. */
const REPLAY_STALL_MS = 30_000;
/** How often a paused catch-up looks whether the client has taken what was written. */
const DRAIN_POLL_MS = 20;
/**
 * How soon the pump looks again while committed events wait above the horizon (PostgreSQL, see events.ts): the
 * delay a long transaction elsewhere adds to a delivery, past its own end, is at most this.
 */
const HORIZON_POLL_MS = 50;
/** Events the pump reads at a time (their log rows: a few dozen bytes each). */
const BATCH = 500;
/** Posts the pump reads at a time, for that many events (rendered from their current rows). */
const PUMP_POSTS = 50;
/** Events a catch-up reads at a time. */
const CATCH_UP_PAGE = 64;
/**
 * Posts a catch-up reads and writes at a time, and only once the client has taken what it was given: at most 8
 * posts of 10,000 characters (about 80 KB; 500 KB if every character needs a six-byte JSON escape) ahead of it.
 */
export const CATCH_UP_POSTS = 8;
/** Catch-up chunks read and written at once in this process: bounds what they hold together while in flight. */
const CATCH_UP_READS = 8;
/** How long a client refused for lack of room is asked to wait. */
export const RETRY_AFTER_SECONDS = '5';

/** STREAM_MAX streams are open in this process, or it is shutting down. */
export const tooManyStreams = () =>
  new AppError(503, 'Too many open event streams on this server; retry later', undefined, { 'retry-after': RETRY_AFTER_SECONDS });

/** The reconnection delay the `retry:` line asks of clients. */
export const RETRY_MS = 2000;

export type StreamKind = 'posts' | 'feed';

export interface StreamOptions {
  heartbeatMs: number;
  /** STREAM_MAX: open streams in this process (the per-user limit is seats.ts'). */
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
  /** The signed-in caller who opened it, with their token's hash (for the re-check). */
  readonly caller: { id: number; tokenHash: string } | undefined;
  /** The caller's place under STREAM_MAX_PER_USER (seats.ts), given back when the stream is removed. */
  seat?: Seat;
  /** The position of the last event this subscriber has been given or has been judged not to see. */
  cursor: Position;
  /**
   * False while it catches up from the log (replaying from Last-Event-ID, or after falling behind the pump): the
   * pump hands it live events only afterwards.
   */
  live: boolean;
  /** While catching up: the bytes of the events the pump has passed that it has still to go through. */
  behind?: number;
  /** While catching up: the events after this position are counted in `behind`. */
  countedFrom?: Position;
  /** What the response streams to the client (Fastify pipes it into the socket). */
  readonly out: PassThrough;
  readonly res: ServerResponse;
  lastWrite: number;
  closed: boolean;
}

export type { Resume };

export type FindCaller = (tokenHash: string) => Promise<Who | undefined>;

/**
 * Every open stream of this process, and the pump that feeds them.
 *
 * The pump reads the log for live delivery: one run at a time reads the events after `position` in delivery order
 * (commit order: see events.ts; on PostgreSQL only events below the horizon, and while a committed event waits above
 * it, behind a transaction still open, the pump looks again every HORIZON_POLL_MS) and hands each to every live subscriber, judging visibility for each at that
 * moment (a follow looked up once per event for all the subscribers who need it) and rendering the post from its
 * current row, read then: the log keeps no copy of it (see deliver). It is kicked after a local
 * commit, by PostgreSQL's NOTIFY (or Redis) for commits of other processes, and by a slow poll as a safety net.
 *
 * A subscriber that is not live catches up on its own (`catchUp`): one resuming from Last-Event-ID, and one the
 * pump found with more than REPLAY_PAUSE_BYTES still waiting, which it leaves behind rather than write past what
 * the client takes (a burst of big events would otherwise be written all at once, and a reader that keeps up cut
 * off). The catch-up reads the log after the subscriber's cursor up to `position`, writing only while the client
 * takes what it was given, and goes live once it has reached `position`. The pump moves `position` to an event
 * before choosing who gets it live, both without a pause, so an event is handed over either by the pump (the
 * subscriber was live) or by the catch-up (it was not): nothing twice, nothing lost in between.
 *
 * While no stream is open the pump does not run: a kick only marks the hub `idle`. Every post write kicks it, and
 * reading the log back after each one was work for nobody (bench/README.md, "Figures behind choices in the code").
 * The next run first moves `position` to the end of the log; a stream that opens meanwhile joins in that run,
 * before its answer starts.
 */
export class StreamHub {
  private readonly subscribers = new Set<Subscriber>();
  private readonly events;
  private readonly serialize: (post: unknown) => string;
  private position: Position = START;
  private started: Promise<void> | undefined;
  private running = false;
  private again = false;
  /** Kicks were skipped while no stream was open: `position` may be behind the end of the log. */
  private idle = false;
  /**
   * Streams opening while idle, each with its Last-Event-ID (if any) and what lets its opening go on once the pump
   * has placed it.
   */
  private readonly joining = new Map<Subscriber, { resumeFrom: Position | undefined; joined: () => void; failed: (error: unknown) => void }>();
  private readonly catchUpReads = new Gate(CATCH_UP_READS);
  private timers: NodeJS.Timeout[] = [];
  /** A look at the horizon again, while committed events wait above it (see pump). */
  private horizonPoll: NodeJS.Timeout | undefined;
  /** Follower lists of deleted accounts (DeletedAccount), by the id of the event that holds each; a few. */
  private readonly followerLists = new Map<number, ReadonlySet<number>>();
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
    // Every reason shows a sample from the start (0), not only after its first drop: a scraper sees the series.
    for (const reason of ['slow', 'revoked'] as const) this.dropped.inc({ reason }, 0);
  }

  /** Reads where the log ends and starts the timers. Streams opened before it completes wait for it. */
  start(): Promise<void> {
    this.started ??= (async () => {
      try {
        this.position = (await this.events.end()).position;
      } catch (error) {
        // The database is away: the next stream to open tries again.
        this.started = undefined;
        throw error;
      }
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

  /** Whether this process takes no more streams: STREAM_MAX are open, or it is shutting down (closeAll). */
  get full(): boolean {
    return this.closed || this.subscribers.size >= this.options.max;
  }

  /**
   * Registers an open stream. `resume` undefined: it goes live at the current end of the log. Otherwise it is
   * replayed from there first, or, when that id is not one this database's log may go on from (see
   * `resumable`), it gets `event: reset` and goes on from the end of the log.
   */
  async add(sub: Subscriber, resume: Resume | undefined): Promise<void> {
    try {
      await this.start();
      // A resume is judged before the answer starts. A stream that would go live at once reads the log's end too,
      // though it does not need it: with the database away the client hears 503 now, rather than getting a stream
      // that stays silent until the database is back. (A stream joining while idle reads it in the pump anyway.)
      let from: Position | undefined;
      let reset: LogEnd | undefined;
      if (resume !== undefined) {
        if (await this.events.resumable(resume)) from = positionOf(resume.xid, resume.id);
        else {
          reset = await this.events.end();
          from = reset.position;
        }
      } else if (!this.idle) await this.events.end();
      // What may have changed during those waits: the client went away (nothing to register; its seat goes back),
      // or other streams took the last places.
      if (sub.closed) {
        this.remove(sub);
        return;
      }
      if (this.full) throw tooManyStreams();
      this.subscribers.add(sub);
      this.openGauge.set(this.subscribers.size);
      this.write(sub, `retry: ${RETRY_MS}\n\n`);
      // The reset carries an id like every event (CONTRACT §7): the end of the log it goes on from, so a client that
      // reconnects after it resumes there instead of sending the stale id again and getting another reset.
      if (reset) this.write(sub, `id: ${reset.clientId}\nevent: reset\ndata: {}\n\n`);
      if (this.idle) {
        // `position` may be far behind: the pump first moves it to the end of the log, then places the stream (a
        // catch-up would otherwise go live at the old position and miss what lies between). The answer starts only
        // then (openStream awaits this), so a post the client writes once it sees the stream open is delivered.
        await new Promise<void>((resolve, reject) => {
          this.joining.set(sub, { resumeFrom: from, joined: resolve, failed: reject });
          this.kick();
        });
      } else {
        this.place(sub, from);
      }
    } catch (error) {
      // The log could not be read (the database is away), or there is no room: the stream does not open (its seat
      // goes back), and the client hears so now (a 503) instead of waiting, or of a stream that ends at once.
      this.remove(sub);
      throw error;
    }
  }

  /** Puts a new stream live at `position`, or starts its catch-up after `from` (an event judged resumable). */
  private place(sub: Subscriber, from: Position | undefined): void {
    if (from === undefined) {
      sub.cursor = this.position;
      sub.live = true;
    } else {
      sub.cursor = from;
      void this.catchUp(sub, this.position);
    }
  }

  remove(sub: Subscriber): void {
    // Also for a stream that is not (or not yet) registered: its seat goes back, and add() will not register it.
    sub.closed = true;
    sub.seat?.release();
    if (!this.subscribers.delete(sub)) return;
    this.joining.get(sub)?.joined();
    this.joining.delete(sub);
    this.openGauge.set(this.subscribers.size);
  }

  /** Ends every stream cleanly (shutdown): clients reconnect, with Last-Event-ID, to another process. */
  closeAll(): void {
    this.closed = true;
    for (const timer of this.timers) clearInterval(timer);
    clearTimeout(this.horizonPoll);
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
        for (const { failed } of this.joining.values()) failed(error);
        this.joining.clear();
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
        this.position = later(this.position, (await this.events.end()).position);
        this.idle = false;
      }
      for (const [sub, { resumeFrom, joined }] of this.joining) {
        this.place(sub, resumeFrom);
        joined();
      }
      this.joining.clear();
      for (;;) {
        const batch = await this.events.after(this.position, BATCH);
        if (batch.length === 0) {
          // Committed events above the horizon (an older transaction is still open): nobody will wake this process
          // when that transaction ends if it was not a post write, so look again shortly.
          if (!this.horizonPoll && (await this.events.waiting())) {
            this.horizonPoll = setTimeout(() => {
              this.horizonPoll = undefined;
              this.kick();
            }, HORIZON_POLL_MS);
            this.horizonPoll.unref();
          }
          break;
        }
        for (let i = 0; i < batch.length; i += PUMP_POSTS) {
          const chunk = batch.slice(i, i + PUMP_POSTS);
          const rows = await this.events.posts(postsOf(chunk));
          for (const event of chunk) {
            const row = rows.get(event.postId);
            const size = sizeOf(row);
            // `position` first, then who is live, with no pause between: a catch-up that has not gone live by now
            // reads this event from the log itself (see catchUp).
            const before = this.position;
            this.position = event.position;
            const live: Subscriber[] = [];
            for (const sub of this.subscribers) {
              if (sub.cursor >= event.position) continue;
              if (sub.live) live.push(sub);
              else if (sub.behind !== undefined) sub.behind += size;
            }
            try {
              await this.deliver(event, row, live);
            } catch (error) {
              // Nobody was given it (deliver fails before its first write): the retry starts from this event again.
              this.position = before;
              throw error;
            }
          }
        }
      }
    } while (this.again && !this.closed);
  }

  /**
   * Sends a subscriber that is not live what it is missing, from its cursor up to where the pump stands, and only
   * while the client takes what it is given; then puts it live. It reads CATCH_UP_PAGE events of the log at a time
   * and their posts CATCH_UP_POSTS at a time, each chunk only once no more than REPLAY_PAUSE_BYTES wait for the
   * client, so what it holds is bounded whatever the client does. `countedFrom`: the events after it count in
   * `behind` (the pump adds those it passes from now on).
   */
  private async catchUp(sub: Subscriber, countedFrom: Position): Promise<void> {
    sub.live = false;
    sub.countedFrom = countedFrom;
    sub.behind ??= 0;
    try {
      for (;;) {
        if (!(await this.room(sub))) return;
        const upTo = this.position;
        // Checked and set with no pause in between, against the pump's `position` (see pump).
        if (sub.cursor >= upTo) {
          sub.live = true;
          sub.behind = undefined;
          sub.countedFrom = undefined;
          return;
        }
        // The cursor's own event first: the purge deletes everything up to some event, so while the cursor's is
        // kept, nothing after it is gone. Gone: the events after the cursor were purged while it caught up (or
        // before: a stream left behind for longer than the retention). Start afresh. (START names no event: it was
        // the cursor only of a stream opened on an empty log, which nothing purged since.)
        const start = sub.cursor === START;
        const page = await this.events.after(sub.cursor, CATCH_UP_PAGE, upTo, !start);
        if (!start && page.shift()?.position !== sub.cursor) {
          const end = await this.events.end();
          sub.cursor = later(sub.cursor, end.position);
          this.write(sub, `id: ${end.clientId}\nevent: reset\ndata: {}\n\n`);
          continue;
        }
        for (let i = 0; i < page.length; i += CATCH_UP_POSTS) {
          if (!(await this.room(sub))) return;
          const chunk = page.slice(i, i + CATCH_UP_POSTS);
          await this.catchUpReads.run(async () => {
            const rows = await this.events.posts(postsOf(chunk));
            for (const event of chunk) {
              const row = rows.get(event.postId);
              await this.deliver(event, row, [sub]);
              if (event.position > countedFrom) sub.behind = Math.max(0, (sub.behind ?? 0) - sizeOf(row));
            }
          });
        }
      }
    } catch (error) {
      // A failed read of the log: the client reconnects with Last-Event-ID (the retry line) and resumes.
      this.log.warn({ err: error }, 'event stream catch-up failed; ending the stream');
      if (!sub.closed) this.end(sub);
    }
  }

  /**
   * Waits until at most REPLAY_PAUSE_BYTES are waiting for the client. A client that takes nothing meanwhile is
   * dropped as slow: after SLOW_GRACE_MS when more than MAX_BACKLOG_BYTES wait for it (written, or events it is
   * behind by), else after REPLAY_STALL_MS. False: the stream is closed.
   */
  private async room(sub: Subscriber): Promise<boolean> {
    let waiting = this.backlog(sub);
    let progress = Date.now();
    while (!sub.closed && waiting > REPLAY_PAUSE_BYTES) {
      await new Promise((resolve) => setTimeout(resolve, DRAIN_POLL_MS));
      const now = Date.now();
      const left = this.backlog(sub);
      if (left < waiting) progress = now;
      waiting = left;
      const grace = waiting + (sub.behind ?? 0) > MAX_BACKLOG_BYTES ? SLOW_GRACE_MS : REPLAY_STALL_MS;
      if (now - progress > grace && !sub.closed) {
        this.drop(sub, 'slow');
        return false;
      }
    }
    return !sub.closed;
  }

  /**
   * Sends one event to each of `subs`, judged and rendered from the post as it is now (`row`; undefined: deleted),
   * never from what the event recorded, and moves their cursors past it (CONTRACT §7). A post the subscriber may
   * see now goes as it is now, under the event's name; one gone or hidden from it goes as `post.deleted`, only to a
   * subscriber that could see the version the event made or replaced (so a stranger never learns of a private post
   * by its id), and a deletion to one that could see it as it was deleted.
   */
  private async deliver(event: StreamEvent, row: PostRow | undefined, subs: Subscriber[]): Promise<void> {
    if (subs.length === 0) return;
    const ownerId = event.ownerId;
    const byFollowers = row?.visibility === 'followers' || event.visibility === 'followers' || event.previousVisibility === 'followers';
    const needFollow = new Set<number>();
    for (const sub of subs) {
      const v = sub.viewer;
      if (!v || v.id === ownerId) continue;
      if (sub.kind === 'feed' || (v.role !== 'admin' && byFollowers)) needFollow.add(v.id);
    }
    const follows = needFollow.size > 0 ? await this.followersAmong(event, [...needFollow]) : new Set<number>();
    // Blocks, mutes and the owner's suspension (CONTRACT §9), for every signed-in viewer but the owner: one read.
    const viewers = new Set<number>();
    for (const sub of subs) if (sub.viewer && sub.viewer.id !== ownerId) viewers.add(sub.viewer.id);
    const relations = await this.events.ownerRelations(ownerId, [...viewers]);

    let body: string | undefined;
    const deleted = `event: post.deleted\ndata: {"id":${event.postId}}\n\n`;
    for (const sub of subs) {
      if (sub.closed || sub.cursor >= event.position) continue;
      if (sub.live && this.backlog(sub) > REPLAY_PAUSE_BYTES) {
        // The client has not taken what it was given: writing on would outrun it. It catches up from the log at
        // its own pace (this event included) and is live again once it has.
        sub.behind = sizeOf(row);
        void this.catchUp(sub, sub.cursor);
        continue;
      }
      sub.cursor = event.position;
      const sees = (visibility: Visibility | null) => visibility !== null && canSee(sub, ownerId, visibility, follows, relations);
      let frame: string | undefined;
      if (event.kind === 'deleted') {
        if (sees(event.visibility)) frame = deleted;
      } else if (row && sees(row.visibility)) {
        body ??= `data: ${this.serialize(toPost(row, this.links))}\n\n`;
        frame = `event: post.${event.kind}\n${body}`;
      } else if (sees(event.visibility) || sees(event.previousVisibility)) {
        frame = deleted;
      }
      if (frame === undefined) continue;
      this.write(sub, `id: ${eventId(event)}\n${frame}`);
      this.sent.inc();
    }
  }

  /**
   * Which of `candidates` follow the event's owner: now, or for a post deleted with its owner's account, as they
   * did before that deletion (recorded with the event: the follows went with the account).
   */
  private async followersAmong(event: StreamEvent, candidates: number[]): Promise<ReadonlySet<number>> {
    let recorded: ReadonlySet<number> | undefined;
    if (event.followers) recorded = new Set(event.followers);
    else if (event.followersIn !== undefined) {
      recorded = this.followerLists.get(event.followersIn);
      if (!recorded) {
        // Purged already (kept an hour, like the events pointing at it): nobody is known to have followed.
        recorded = new Set((await this.events.byId(event.followersIn))?.followers);
        if (this.followerLists.size >= 16) this.followerLists.delete(this.followerLists.keys().next().value!);
        this.followerLists.set(event.followersIn, recorded);
      }
    }
    if (!recorded) return this.events.followersAmong(event.ownerId, candidates);
    return new Set(candidates.filter((id) => recorded.has(id)));
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

/** The later of two positions. */
const later = (a: Position, b: Position): Position => (a >= b ? a : b);

/** The post ids of these events whose posts may still exist (a deletion's is gone). */
const postsOf = (events: readonly StreamEvent[]): number[] => events.filter((e) => e.kind !== 'deleted').map((e) => e.postId);

/** About how many bytes a post takes on a stream (its two long fields and the rest): what a subscriber behind by it misses. */
const sizeOf = (row: PostRow | undefined): number => (row ? row.title.length + row.content.length + 400 : 40);

/** Runs at most `max` pieces of work at once; the others wait their turn, first come first served. */
class Gate {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly max: number) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.active < this.max) this.active++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await work();
    } finally {
      // The place passes to the next in line, or is given back.
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}

/**
 * Whether the subscriber sees a post of `ownerId` with `visibility`: the rule of shared/visibility.ts (`seesPost`)
 * for a listing, as GET /posts lists posts to its caller. A feed stream: only posts by users the feed's owner
 * follows, judged for the owner, as GET /users/{id}/feed lists them.
 */
function canSee(sub: Subscriber, ownerId: number, visibility: Visibility, follows: ReadonlySet<number>, relations: OwnerRelations): boolean {
  const v = sub.viewer;
  if (sub.kind === 'feed' && (!v || v.id === ownerId || !follows.has(v.id))) return false;
  const rel = {
    follows: v !== undefined && follows.has(v.id),
    blocked: v !== undefined && relations.blocked.has(v.id),
    mutes: v !== undefined && relations.muting.has(v.id),
    ownerSuspended: relations.ownerSuspended,
  };
  return seesPost(v, { ownerId, visibility }, rel, true);
}
