import type { PassThrough } from 'node:stream';
import type { ServerResponse } from 'node:http';
import type { Counter, Gauge } from 'prom-client';
import type { Role } from '../../db/types.js';
import { AppError } from '../../shared/errors.js';
import type { Position } from './events.js';
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
/** How long a client refused for lack of room is asked to wait. */
export const RETRY_AFTER_SECONDS = '5';

/** STREAM_MAX streams are open in this process, or it is shutting down. */
export const tooManyStreams = () =>
  new AppError(503, 'Too many open event streams on this server; retry later', undefined, { 'retry-after': RETRY_AFTER_SECONDS });

/** The reconnection delay the `retry:` line asks of clients. */
export const RETRY_MS = 2000;

export type StreamKind = 'posts' | 'feed';

export interface Who {
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

/** A stream opening while the hub is idle: where it resumes from, and what lets its opening go on once placed. */
interface Joining {
  resumeFrom: Position | undefined;
  joined: () => void;
  failed: (error: unknown) => void;
}

/**
 * The open streams of this process, under STREAM_MAX (the per-user limit is seats.ts'), and what every part of the
 * hub does to one of them: write to it, measure what waits for its client, end it, drop it.
 */
export class Subscribers {
  private readonly open = new Set<Subscriber>();
  /** Streams registered while the pump was idle, which its next run places (see pump.ts). */
  readonly joining = new Map<Subscriber, Joining>();
  private closed = false;

  constructor(
    private readonly max: number,
    private readonly openGauge: Gauge,
    private readonly dropped: Counter<'reason'>,
  ) {}

  get size(): number {
    return this.open.size;
  }

  /** Whether this process takes no more streams: STREAM_MAX are open, or it is shutting down (closeAll). */
  get full(): boolean {
    return this.closed || this.open.size >= this.max;
  }

  [Symbol.iterator](): IterableIterator<Subscriber> {
    return this.open.values();
  }

  register(sub: Subscriber): void {
    this.open.add(sub);
    this.openGauge.set(this.open.size);
  }

  remove(sub: Subscriber): void {
    // Also for a stream that is not (or not yet) registered: its seat goes back, and add() will not register it.
    sub.closed = true;
    sub.seat?.release();
    if (!this.open.delete(sub)) return;
    this.joining.get(sub)?.joined();
    this.joining.delete(sub);
    this.openGauge.set(this.open.size);
  }

  /** Ends every stream cleanly and takes no more (shutdown). */
  closeAll(): void {
    this.closed = true;
    for (const sub of [...this.open]) this.end(sub);
  }

  /** Ends a stream: what was written is flushed, then the connection closes (it is not reused). */
  end(sub: Subscriber): void {
    this.remove(sub);
    sub.res.once('finish', () => sub.res.socket?.end());
    sub.out.end();
  }

  drop(sub: Subscriber, reason: 'slow' | 'revoked'): void {
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
  backlog(sub: Subscriber): number {
    return sub.out.readableLength + sub.out.writableLength + sub.res.writableLength + (sub.res.socket?.writableLength ?? 0);
  }

  write(sub: Subscriber, text: string): void {
    if (sub.closed) return;
    sub.out.write(text);
    sub.lastWrite = Date.now();
    if (this.backlog(sub) > MAX_BACKLOG_BYTES) this.drop(sub, 'slow');
  }
}
