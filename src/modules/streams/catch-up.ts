import type { FastifyBaseLogger } from 'fastify';
import { START, type Position } from './events.js';
import { later, postsOf, sizeOf, type Delivery, type EventLog } from './delivery.js';
import { MAX_BACKLOG_BYTES, REPLAY_PAUSE_BYTES, type Subscriber, type Subscribers } from './registry.js';

/** How long a subscriber more than MAX_BACKLOG_BYTES behind may take nothing before it is dropped. */
const SLOW_GRACE_MS = 5_000;
/** How long a catch-up waits for a client that takes nothing (however little is waiting) before dropping it. */
const REPLAY_STALL_MS = 30_000;
/** How often a paused catch-up looks whether the client has taken what was written. */
const DRAIN_POLL_MS = 20;
/** Events a catch-up reads at a time. */
const CATCH_UP_PAGE = 64;
/**
 * Posts a catch-up reads and writes at a time, and only once the client has taken what it was given: at most 8
 * posts of 10,000 characters (about 80 KB; 500 KB if every character needs a six-byte JSON escape) ahead of it.
 */
export const CATCH_UP_POSTS = 8;
/** Catch-up chunks read and written at once in this process: bounds what they hold together while in flight. */
const CATCH_UP_READS = 8;

/**
 * The catch-ups of subscribers that are not live: one resuming from Last-Event-ID, and one the pump found with more
 * than REPLAY_PAUSE_BYTES still waiting, which it leaves behind rather than write past what the client takes (a
 * burst of big events would otherwise be written all at once, and a reader that keeps up cut off). A catch-up reads
 * the log after the subscriber's cursor up to where the pump stands (`pumpPosition`), writing only while the client
 * takes what it was given, and goes live once it has reached it. The pump moves its position to an event before
 * choosing who gets it live, both without a pause, so an event is handed over either by the pump (the subscriber was
 * live) or by the catch-up (it was not): nothing twice, nothing lost in between.
 */
export class CatchUp {
  private readonly reads = new Gate(CATCH_UP_READS);

  constructor(
    private readonly events: EventLog,
    private readonly subscribers: Subscribers,
    private readonly delivery: Delivery,
    /** Where the pump stands now (pump.ts): read afresh at every step. */
    private readonly pumpPosition: () => Position,
    private readonly log: FastifyBaseLogger,
  ) {}

  /**
   * Sends a subscriber that is not live what it is missing, from its cursor up to where the pump stands, and only
   * while the client takes what it is given; then puts it live. It reads CATCH_UP_PAGE events of the log at a time
   * and their posts CATCH_UP_POSTS at a time, each chunk only once no more than REPLAY_PAUSE_BYTES wait for the
   * client, so what it holds is bounded whatever the client does. `countedFrom`: the events after it count in
   * `behind` (the pump adds those it passes from now on).
   */
  async run(sub: Subscriber, countedFrom: Position): Promise<void> {
    sub.live = false;
    sub.countedFrom = countedFrom;
    sub.behind ??= 0;
    try {
      for (;;) {
        if (!(await this.room(sub))) return;
        const upTo = this.pumpPosition();
        // Checked and set with no pause in between, against the pump's position (see pump.ts).
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
          this.subscribers.write(sub, `id: ${end.clientId}\nevent: reset\ndata: {}\n\n`);
          continue;
        }
        for (let i = 0; i < page.length; i += CATCH_UP_POSTS) {
          if (!(await this.room(sub))) return;
          const chunk = page.slice(i, i + CATCH_UP_POSTS);
          await this.reads.run(async () => {
            const rows = await this.events.posts(postsOf(chunk));
            for (const event of chunk) {
              const row = rows.get(event.postId);
              await this.delivery.deliver(event, row, [sub]);
              if (event.position > countedFrom) sub.behind = Math.max(0, (sub.behind ?? 0) - sizeOf(row));
            }
          });
        }
      }
    } catch (error) {
      // A failed read of the log: the client reconnects with Last-Event-ID (the retry line) and resumes.
      this.log.warn({ err: error }, 'event stream catch-up failed; ending the stream');
      if (!sub.closed) this.subscribers.end(sub);
    }
  }

  /**
   * Waits until at most REPLAY_PAUSE_BYTES are waiting for the client. A client that takes nothing meanwhile is
   * dropped as slow: after SLOW_GRACE_MS when more than MAX_BACKLOG_BYTES wait for it (written, or events it is
   * behind by), else after REPLAY_STALL_MS. False: the stream is closed.
   */
  private async room(sub: Subscriber): Promise<boolean> {
    let waiting = this.subscribers.backlog(sub);
    let progress = Date.now();
    while (!sub.closed && waiting > REPLAY_PAUSE_BYTES) {
      await new Promise((resolve) => setTimeout(resolve, DRAIN_POLL_MS));
      const now = Date.now();
      const left = this.subscribers.backlog(sub);
      if (left < waiting) progress = now;
      waiting = left;
      const grace = waiting + (sub.behind ?? 0) > MAX_BACKLOG_BYTES ? SLOW_GRACE_MS : REPLAY_STALL_MS;
      if (now - progress > grace && !sub.closed) {
        this.subscribers.drop(sub, 'slow');
        return false;
      }
    }
    return !sub.closed;
  }
}

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
