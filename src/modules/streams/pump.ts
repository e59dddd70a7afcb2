import type { FastifyBaseLogger } from 'fastify';
import { START, type Position } from './events.js';
import type { CatchUp } from './catch-up.js';
import { later, postsOf, sizeOf, type Delivery, type EventLog } from './delivery.js';
import type { Subscriber, Subscribers } from './registry.js';

/**
 * How soon the pump looks again while committed events wait above the horizon (PostgreSQL, see events.ts): the
 * delay a long transaction elsewhere adds to a delivery, past its own end, is at most this.
 */
const HORIZON_POLL_MS = 50;
/** Events the pump reads at a time (their log rows: a few dozen bytes each). */
const BATCH = 500;
/** Posts the pump reads at a time, for that many events (rendered from their current rows). */
const PUMP_POSTS = 50;

/**
 * Live delivery: one run at a time reads the events after `position` in delivery order (commit order: see
 * events.ts; on PostgreSQL only events below the horizon, and while a committed event waits above it, behind a
 * transaction still open, the pump looks again every HORIZON_POLL_MS) and hands each to every live subscriber,
 * judging visibility for each at that moment and rendering the post from its current row, read then: the log keeps
 * no copy of it (see delivery.ts). It is kicked after a local commit, by PostgreSQL's NOTIFY (or Redis) for commits
 * of other processes, and by a slow poll as a safety net.
 *
 * Subscribers that are not live catch up on their own (catch-up.ts), up to `position`.
 *
 * While no stream is open the pump does not run: a kick only marks it `idle`. Every post write kicks it, and
 * reading the log back after each one was work for nobody (bench/README.md, "Figures behind choices in the code").
 * The next run first moves `position` to the end of the log; a stream that opens meanwhile joins in that run,
 * before its answer starts.
 */
export class Pump {
  /** Where live delivery stands: the last event handed to the live subscribers (set by the hub's start). */
  position: Position = START;
  /** Kicks were skipped while no stream was open: `position` may be behind the end of the log. */
  idle = false;
  private running = false;
  private again = false;
  private stopped = false;
  /** A look at the horizon again, while committed events wait above it (see run). */
  private horizonPoll: NodeJS.Timeout | undefined;

  constructor(
    private readonly events: EventLog,
    private readonly subscribers: Subscribers,
    private readonly delivery: Delivery,
    private readonly catchUp: CatchUp,
    private readonly log: FastifyBaseLogger,
    /** Whether the hub has been started: no run before. */
    private readonly started: () => boolean,
  ) {}

  /** Puts a new stream live at `position`, or starts its catch-up after `from` (an event judged resumable). */
  place(sub: Subscriber, from: Position | undefined): void {
    if (from === undefined) {
      sub.cursor = this.position;
      sub.live = true;
    } else {
      sub.cursor = from;
      void this.catchUp.run(sub, this.position);
    }
  }

  /** Asks the pump to run (again, if it is running). */
  kick(): void {
    if (this.stopped || !this.started()) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.subscribers.size === 0) {
      this.idle = true;
      return;
    }
    this.running = true;
    void this.run()
      .catch((error: unknown) => {
        this.log.warn({ err: error }, 'event stream pump failed; retrying');
        for (const { failed } of this.subscribers.joining.values()) failed(error);
        this.subscribers.joining.clear();
        setTimeout(() => this.kick(), 1000).unref();
      })
      .finally(() => {
        this.running = false;
        if (this.again) this.kick();
      });
  }

  /** No more runs (shutdown). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.horizonPoll);
  }

  private async run(): Promise<void> {
    do {
      this.again = false;
      if (this.idle) {
        // Nothing was read while no stream was open: go on from the end of the log, not from where reading stopped.
        this.position = later(this.position, (await this.events.end()).position);
        this.idle = false;
      }
      for (const [sub, { resumeFrom, joined }] of this.subscribers.joining) {
        this.place(sub, resumeFrom);
        joined();
      }
      this.subscribers.joining.clear();
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
            // reads this event from the log itself (see catch-up.ts).
            const before = this.position;
            this.position = event.position;
            const live: Subscriber[] = [];
            for (const sub of this.subscribers) {
              if (sub.cursor >= event.position) continue;
              if (sub.live) live.push(sub);
              else if (sub.behind !== undefined) sub.behind += size;
            }
            try {
              await this.delivery.deliver(event, row, live);
            } catch (error) {
              // Nobody was given it (deliver fails before its first write): the retry starts from this event again.
              this.position = before;
              throw error;
            }
          }
        }
      }
    } while (this.again && !this.stopped);
  }
}
