import type { FastifyBaseLogger } from 'fastify';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/types.js';
import type { Links } from '../../shared/links.js';
import { createEventsRepository, positionOf, type LogEnd, type Position, type Resume } from './events.js';
import { CatchUp } from './catch-up.js';
import { heartbeat, recheck, type FindCaller } from './checks.js';
import { Delivery } from './delivery.js';
import { Pump } from './pump.js';
import { RETRY_MS, Subscribers, tooManyStreams, type Subscriber } from './registry.js';

// The hub's public names, wherever they now live.
export { CATCH_UP_POSTS } from './catch-up.js';
export type { FindCaller } from './checks.js';
export {
  MAX_BACKLOG_BYTES,
  REPLAY_PAUSE_BYTES,
  RETRY_AFTER_SECONDS,
  RETRY_MS,
  tooManyStreams,
  type StreamKind,
  type Subscriber,
} from './registry.js';
export type { Resume };

export interface StreamOptions {
  heartbeatMs: number;
  /** STREAM_MAX: open streams in this process (the per-user limit is seats.ts'). */
  max: number;
  /** How often the tokens of open streams are checked again (revoked or expired: the stream ends). */
  authRecheckMs: number;
}

/**
 * Every open stream of this process, and what feeds them, wired together:
 * - registry.ts: the open streams, their limit, and writing to one, ending or dropping it;
 * - pump.ts: live delivery, reading the log after `position` and handing each event to the live streams;
 * - catch-up.ts: streams that are not live (resuming from Last-Event-ID, or left behind by the pump) read the log
 *   at their client's pace up to the pump's position, then go live;
 * - delivery.ts: who sees an event (shared/visibility.ts' `seesPost`) and what they are sent;
 * - checks.ts: heartbeats and the re-check of the streams' tokens.
 */
export class StreamHub {
  /** The stream log's reads: one object for every part (tests wrap its methods). */
  private readonly events;
  private readonly subscribers: Subscribers;
  private readonly catchUp: CatchUp;
  private readonly pump: Pump;
  private started: Promise<void> | undefined;
  private timers: NodeJS.Timeout[] = [];

  constructor(
    db: Kysely<Database>,
    links: Links,
    private readonly options: StreamOptions,
    private readonly findCaller: FindCaller,
    private readonly log: FastifyBaseLogger,
    registry: Registry,
  ) {
    this.events = createEventsRepository(db);
    const openGauge = new Gauge({ name: 'corkboard_streams_open', help: 'Event streams open in this process', registers: [registry] });
    const sent = new Counter({ name: 'corkboard_stream_events_sent_total', help: 'Events written to event streams', registers: [registry] });
    const dropped = new Counter({
      name: 'corkboard_stream_subscribers_dropped_total',
      help: 'Event streams ended by the server: slow (more than 1 MiB waiting), revoked (token no longer valid)',
      labelNames: ['reason'],
      registers: [registry],
    });
    // Every reason shows a sample from the start (0), not only after its first drop: a scraper sees the series.
    for (const reason of ['slow', 'revoked'] as const) dropped.inc({ reason }, 0);
    this.subscribers = new Subscribers(options.max, openGauge, dropped);
    // The delivery starts catch-ups and a catch-up reads the pump's position: both are looked up when called.
    const delivery = new Delivery(db, this.events, links, this.subscribers, sent, (sub, countedFrom) => this.catchUp.run(sub, countedFrom));
    this.catchUp = new CatchUp(this.events, this.subscribers, delivery, () => this.pump.position, log);
    this.pump = new Pump(this.events, this.subscribers, delivery, this.catchUp, log, () => this.started !== undefined);
  }

  /** Reads where the log ends and starts the timers. Streams opened before it completes wait for it. */
  start(): Promise<void> {
    this.started ??= (async () => {
      try {
        this.pump.position = (await this.events.end()).position;
      } catch (error) {
        // The database is away: the next stream to open tries again.
        this.started = undefined;
        throw error;
      }
      const tick = Math.max(50, Math.min(1000, Math.floor(this.options.heartbeatMs / 2)));
      this.every(tick, () => heartbeat(this.subscribers, this.options.heartbeatMs));
      this.every(this.options.authRecheckMs, () => void recheck(this.subscribers, this.findCaller, this.log));
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
    return this.subscribers.full;
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
      } else if (!this.pump.idle) await this.events.end();
      // What may have changed during those waits: the client went away (nothing to register; its seat goes back),
      // or other streams took the last places.
      if (sub.closed) {
        this.remove(sub);
        return;
      }
      if (this.full) throw tooManyStreams();
      this.subscribers.register(sub);
      this.subscribers.write(sub, `retry: ${RETRY_MS}\n\n`);
      // The reset carries an id like every event (CONTRACT §7): the end of the log it goes on from, so a client that
      // reconnects after it resumes there instead of sending the stale id again and getting another reset.
      if (reset) this.subscribers.write(sub, `id: ${reset.clientId}\nevent: reset\ndata: {}\n\n`);
      if (this.pump.idle) {
        // `position` may be far behind: the pump first moves it to the end of the log, then places the stream (a
        // catch-up would otherwise go live at the old position and miss what lies between). The answer starts only
        // then (openStream awaits this), so a post the client writes once it sees the stream open is delivered.
        await new Promise<void>((resolve, reject) => {
          this.subscribers.joining.set(sub, { resumeFrom: from, joined: resolve, failed: reject });
          this.kick();
        });
      } else {
        this.pump.place(sub, from);
      }
    } catch (error) {
      // The log could not be read (the database is away), or there is no room: the stream does not open (its seat
      // goes back), and the client hears so now (a 503) instead of waiting, or of a stream that ends at once.
      this.remove(sub);
      throw error;
    }
  }

  remove(sub: Subscriber): void {
    this.subscribers.remove(sub);
  }

  /** Ends every stream cleanly (shutdown): clients reconnect, with Last-Event-ID, to another process. */
  closeAll(): void {
    this.pump.stop();
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    this.subscribers.closeAll();
  }

  /** Ends a stream: what was written is flushed, then the connection closes (it is not reused). */
  end(sub: Subscriber): void {
    this.subscribers.end(sub);
  }

  /** Asks the pump to run (again, if it is running). */
  kick(): void {
    this.pump.kick();
  }
}
