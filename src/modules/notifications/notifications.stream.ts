import { PassThrough } from 'node:stream';
import type { ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fastJson from 'fast-json-stringify';
import type { Kysely } from 'kysely';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Database, NotificationType, Role } from '../../db/types.js';
import type { Caller } from '../../plugins/auth.js';
import { AppError } from '../../shared/errors.js';
import type { Links } from '../../shared/links.js';
import { hashToken } from '../../shared/tokens.js';
import { TAG_PATTERN } from '../streams/events.js';
import { MAX_BACKLOG_BYTES, RETRY_AFTER_SECONDS, RETRY_MS, tooManyStreams } from '../streams/hub.js';
import type { Seat } from '../streams/seats.js';
import { createNotificationsRepository, type Recipient } from './notifications.repository.js';
import { NotificationSchema } from './notifications.schemas.js';
import { toNotification } from './notifications.representation.js';

/**
 * Live notification streams (CONTRACT §10 with §7's rules). Each stream is one recipient's, so it reads its own
 * slice of the log (`notification_events`, written by triggers on `notifications`, ids in commit order without
 * gaps: see the migration) from its cursor, over the `(recipient_id, id)` index: replaying from Last-Event-ID and
 * going on live are the same loop, so there is no hand-over between a catch-up and a pump to get wrong.
 *
 * What wakes a stream: a scan of the whole log after `position` (ids and recipients only) finds which recipients
 * have new events. It runs every POLL_MS while a stream is open in this process, so an event written by any
 * process on the database (PostgreSQL) is delivered within about that long, with no wake-up channel to lose.
 *
 * Every `created` event is judged when it is sent: the notification is read through `visibleNotifications` (the
 * one rule of what a recipient may see) as it is now, and sent only if it still exists and is visible; a
 * `deleted` event is sent as `{"id"}`. So a notification created and removed while the client was away is
 * replayed as nothing and a `notification.deleted`, and nothing hidden since is ever sent.
 *
 * Shared with the post streams (src/modules/streams): the per-user seats (STREAM_MAX_PER_USER counts both kinds),
 * the per-process limit (STREAM_MAX, both kinds together), Last-Event-ID's syntax check, the retry delay and the
 * slow-subscriber bound.
 */

/** How often the log is scanned for new events while a notification stream is open in this process. */
const POLL_MS = 200;
const BATCH = 100;
/** Nothing more is written while this much waits for the client (so a stream holds about this much at most). */
const PAUSE_BYTES = 256 * 1024;
const SLOW_GRACE_MS = 5_000;
const STALL_MS = 30_000;
const DRAIN_POLL_MS = 20;
const PURGE_EVERY_MS = 10 * 60_000;

interface Who {
  id: number;
  role: Role;
}

export interface NotificationSubscriber {
  readonly recipient: Recipient;
  readonly types: readonly NotificationType[] | undefined;
  readonly caller: { id: number; tokenHash: string };
  seat?: Seat;
  /** The last event id given to this stream or judged not for it. */
  cursor: number;
  readonly out: PassThrough;
  readonly res: ServerResponse;
  lastWrite: number;
  closed: boolean;
  running: boolean;
  again: boolean;
}

export interface NotificationStreamOptions {
  heartbeatMs: number;
  authRecheckMs: number;
  retentionSeconds: number;
}

export class NotificationStreams {
  private readonly subscribers = new Set<NotificationSubscriber>();
  private readonly byRecipient = new Map<number, Set<NotificationSubscriber>>();
  private readonly serialize = fastJson(NotificationSchema as object);
  /** The log has been scanned up to here (only meaningful while a stream is open). */
  private position = 0;
  private scanning = false;
  private rescan = false;
  private timers: NodeJS.Timeout[] = [];
  private closed = false;
  private readonly openGauge: Gauge;
  private readonly sent: Counter;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly transaction: (work: (db: Kysely<Database>) => Promise<void>) => Promise<void>,
    private readonly links: Links,
    private readonly options: NotificationStreamOptions,
    private readonly findCaller: (tokenHash: string) => Promise<Who | undefined>,
    private readonly log: FastifyBaseLogger,
    registry: Registry,
  ) {
    this.openGauge = new Gauge({ name: 'corkboard_notification_streams_open', help: 'Notification streams open in this process', registers: [registry] });
    this.sent = new Counter({ name: 'corkboard_notification_stream_events_sent_total', help: 'Events written to notification streams', registers: [registry] });
  }

  get size(): number {
    return this.subscribers.size;
  }

  start(): void {
    const tick = Math.max(50, Math.min(1000, Math.floor(this.options.heartbeatMs / 2)));
    this.every(tick, () => this.heartbeat());
    this.every(this.options.authRecheckMs, () => void this.recheck());
    this.every(POLL_MS, () => this.kick());
    this.every(PURGE_EVERY_MS, () => {
      const before = new Date(Date.now() - this.options.retentionSeconds * 1000).toISOString();
      this.transaction(async (db) => {
        await db.deleteFrom('notification_events').where('created_at', '<', before).execute();
      }).catch((error: unknown) => this.log.warn({ err: error }, 'purging old notification events failed'));
    });
  }

  private every(ms: number, run: () => void): void {
    const timer = setInterval(run, ms);
    timer.unref();
    this.timers.push(timer);
  }

  private async logEnd(): Promise<{ last: number; tag: string }> {
    const position = await this.db.selectFrom('notification_position').select(['last_id', 'tag']).where('id', '=', 1).executeTakeFirst();
    return { last: Number(position?.last_id ?? 0), tag: position?.tag ?? '' };
  }

  /**
   * Whether `id`-`tag` names an event of this log a stream may go on from: one kept with that tag, or the last one
   * handed out with that tag. Not after a restore (the number was handed out again, with another tag), nor a number
   * never handed out, nor one whose events were purged.
   */
  private async resumable(id: number, tag: string, end: { last: number; tag: string }): Promise<boolean> {
    const kept = await this.db.selectFrom('notification_events').select('tag').where('id', '=', id).executeTakeFirst();
    if (kept !== undefined) return kept.tag === tag;
    return end.last === id && end.tag === tag;
  }

  /**
   * Registers a stream: live from the end of the log, or replaying after `resume` (an `event: reset` first, going
   * on from the end of the log, when that id cannot be resumed from: purged, never issued, from before a restore,
   * or a bare number without its tag).
   */
  async add(sub: NotificationSubscriber, resume: Resume | undefined): Promise<void> {
    try {
      const end = await this.logEnd();
      const resumable = resume?.tag !== undefined && (await this.resumable(resume.id, resume.tag, end));
      const { last } = end;
      if (sub.closed) {
        this.remove(sub);
        return;
      }
      if (this.closed) throw tooManyStreams();
      // The first stream: scanning starts from here. Nothing can run between this and the registration below, so
      // an event committed later has a higher id and is scanned; the stream's own first read covers the rest.
      if (this.subscribers.size === 0) this.position = Math.max(this.position, last);
      this.subscribers.add(sub);
      let mine = this.byRecipient.get(sub.recipient.id);
      if (!mine) this.byRecipient.set(sub.recipient.id, (mine = new Set()));
      mine.add(sub);
      this.openGauge.set(this.subscribers.size);
      this.write(sub, `retry: ${RETRY_MS}\n\n`);
      sub.cursor = resume !== undefined && resumable ? resume.id : last;
      // The reset carries an id like every event: where the stream goes on from.
      if (resume !== undefined && !resumable) this.write(sub, `id: ${eventId(last, end.tag)}\nevent: reset\ndata: {}\n\n`);
      this.wake(sub);
    } catch (error) {
      this.remove(sub);
      throw error;
    }
  }

  remove(sub: NotificationSubscriber): void {
    sub.closed = true;
    sub.seat?.release();
    if (!this.subscribers.delete(sub)) return;
    const mine = this.byRecipient.get(sub.recipient.id);
    mine?.delete(sub);
    if (mine?.size === 0) this.byRecipient.delete(sub.recipient.id);
    this.openGauge.set(this.subscribers.size);
  }

  /** Ends every stream cleanly (shutdown): clients reconnect with Last-Event-ID elsewhere. */
  closeAll(): void {
    this.closed = true;
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    for (const sub of [...this.subscribers]) this.end(sub);
  }

  private end(sub: NotificationSubscriber): void {
    this.remove(sub);
    sub.res.once('finish', () => sub.res.socket?.end());
    sub.out.end();
  }

  private backlog(sub: NotificationSubscriber): number {
    return sub.out.readableLength + sub.out.writableLength + sub.res.writableLength + (sub.res.socket?.writableLength ?? 0);
  }

  private write(sub: NotificationSubscriber, text: string): void {
    if (sub.closed) return;
    sub.out.write(text);
    sub.lastWrite = Date.now();
    if (this.backlog(sub) > MAX_BACKLOG_BYTES) this.drop(sub);
  }

  private drop(sub: NotificationSubscriber): void {
    this.remove(sub);
    sub.res.destroy();
    sub.out.destroy();
  }

  /** Scans the log for recipients with new events and wakes their streams. */
  kick(): void {
    if (this.closed || this.subscribers.size === 0) return;
    if (this.scanning) {
      this.rescan = true;
      return;
    }
    this.scanning = true;
    void this.scan()
      .catch((error: unknown) => this.log.warn({ err: error }, 'notification stream scan failed; retrying'))
      .finally(() => {
        this.scanning = false;
        if (this.rescan) {
          this.rescan = false;
          this.kick();
        }
      });
  }

  private async scan(): Promise<void> {
    for (;;) {
      const rows = await this.db
        .selectFrom('notification_events')
        .select(['id', 'recipient_id'])
        .where('id', '>', this.position)
        .orderBy('id')
        .limit(1000)
        .execute();
      if (rows.length === 0) return;
      this.position = Number(rows[rows.length - 1]!.id);
      for (const row of rows) for (const sub of this.byRecipient.get(Number(row.recipient_id)) ?? []) this.wake(sub);
      if (rows.length < 1000) return;
    }
  }

  private wake(sub: NotificationSubscriber): void {
    if (sub.closed) return;
    if (sub.running) {
      sub.again = true;
      return;
    }
    sub.running = true;
    void this.run(sub).finally(() => {
      sub.running = false;
    });
  }

  /** Sends the stream every event of its recipient after its cursor, a batch at a time, only while the client reads. */
  private async run(sub: NotificationSubscriber): Promise<void> {
    const notifications = createNotificationsRepository(this.db);
    try {
      do {
        sub.again = false;
        for (;;) {
          if (!(await this.room(sub))) return;
          const events = await this.db
            .selectFrom('notification_events')
            .select(['id', 'kind', 'notification_id', 'tag'])
            .where('recipient_id', '=', sub.recipient.id)
            .where('id', '>', sub.cursor)
            .orderBy('id')
            .limit(BATCH)
            .execute();
          if (events.length === 0) break;
          const created = events.filter((event) => event.kind === 'created').map((event) => Number(event.notification_id));
          // Judged now, through the one visibility rule: what is gone or hidden is not sent.
          const visible = new Map((await notifications.findVisibleMany(sub.recipient, created, sub.types)).map((row) => [Number(row.id), row]));
          for (const event of events) {
            if (sub.closed) return;
            const id = Number(event.id);
            sub.cursor = id;
            if (event.kind === 'deleted') {
              this.write(sub, `id: ${eventId(id, event.tag)}\nevent: notification.deleted\ndata: {"id":${Number(event.notification_id)}}\n\n`);
            } else {
              const row = visible.get(Number(event.notification_id));
              if (!row) continue;
              this.write(sub, `id: ${eventId(id, event.tag)}\nevent: notification.created\ndata: ${this.serialize(toNotification(row, this.links))}\n\n`);
            }
            this.sent.inc();
          }
        }
      } while (sub.again && !sub.closed);
    } catch (error) {
      // The log could not be read: the client reconnects with Last-Event-ID and resumes.
      this.log.warn({ err: error }, 'notification stream read failed; ending the stream');
      if (!sub.closed) this.end(sub);
    }
  }

  /** Waits until at most PAUSE_BYTES wait for the client; drops one that takes nothing for too long. */
  private async room(sub: NotificationSubscriber): Promise<boolean> {
    let waiting = this.backlog(sub);
    let progress = Date.now();
    while (!sub.closed && waiting > PAUSE_BYTES) {
      await new Promise((resolve) => setTimeout(resolve, DRAIN_POLL_MS));
      const now = Date.now();
      const left = this.backlog(sub);
      if (left < waiting) progress = now;
      waiting = left;
      if (now - progress > (waiting > MAX_BACKLOG_BYTES ? SLOW_GRACE_MS : STALL_MS) && !sub.closed) {
        this.drop(sub);
        return false;
      }
    }
    return !sub.closed;
  }

  private heartbeat(): void {
    const due = Date.now() - this.options.heartbeatMs;
    for (const sub of this.subscribers) if (sub.lastWrite <= due) this.write(sub, ': keep-alive\n\n');
  }

  /** A stream whose token is revoked or expired (or whose admin is no longer one) ends. */
  private async recheck(): Promise<void> {
    for (const sub of [...this.subscribers]) {
      let caller: Who | undefined;
      try {
        caller = await this.findCaller(sub.caller.tokenHash);
      } catch (error) {
        this.log.warn({ err: error }, 'notification stream token re-check failed');
        return;
      }
      if (sub.closed) continue;
      if (!caller || (caller.id !== sub.recipient.id && caller.role !== 'admin')) this.end(sub);
    }
  }
}

/** Last-Event-ID: the post streams' format, `<number>-<tag>` or a bare number (answered with a reset). */
/** The id a client sees, and sends back as Last-Event-ID: the number, then the tag (`41-9f2c4a7be013`). */
const eventId = (id: number, tag: string): string => `${id}-${tag}`;

/** A Last-Event-ID: the number and the tag (undefined: a bare number, which gets a reset). */
interface Resume {
  id: number;
  tag: string | undefined;
}

const LAST_EVENT_ID = new RegExp(`^(0|[1-9][0-9]{0,15})(?:-(${TAG_PATTERN}))?$`);

/** Last-Event-ID as a resume point (its syntax was checked by `checkLastEventId` before the handler ran). */
function lastEventId(request: FastifyRequest): Resume | undefined {
  const raw = request.headers['last-event-id'];
  if (raw === undefined) return undefined;
  const match = LAST_EVENT_ID.exec(Array.isArray(raw) ? raw.join(',') : raw.trim());
  if (!match) throw AppError.badRequest('Last-Event-ID', 'must be the id of an event this stream sent');
  return { id: Number(match[1]), tag: match[2] };
}

/**
 * Answers with a live notification stream: the same refusals, in the same order, as the post streams' `openStream`
 * (STREAM_MAX for this process counting both kinds, then the caller's seats), then 200 `text/event-stream`.
 */
export async function openNotificationStream(
  app: FastifyInstance,
  streams: NotificationStreams,
  request: FastifyRequest,
  reply: FastifyReply,
  open: { recipient: Recipient; caller: Caller; types: readonly NotificationType[] | undefined },
): Promise<FastifyReply> {
  const resumeFrom = lastEventId(request);
  if (app.streams.full || app.streams.size + streams.size >= app.config.streamMax) throw tooManyStreams();
  const token = /^Bearer[ \t]+(\S+)/i.exec(request.headers.authorization ?? '')?.[1] ?? '';
  const out = new PassThrough();
  const sub: NotificationSubscriber = {
    recipient: open.recipient,
    types: open.types,
    caller: { id: open.caller.id, tokenHash: hashToken(token) },
    cursor: 0,
    out,
    res: reply.raw,
    lastWrite: Date.now(),
    closed: false,
    running: false,
    again: false,
  };
  reply.raw.once('close', () => streams.remove(sub));
  out.on('error', () => streams.remove(sub));
  const seat = await app.streamSeats.take({ userId: open.caller.id });
  if (!seat) {
    throw new AppError(429, `At most ${app.config.streamMaxPerUser} event streams per user`, undefined, { 'retry-after': RETRY_AFTER_SECONDS });
  }
  sub.seat = seat;
  const headers = () =>
    reply.code(200).header('content-type', 'text/event-stream').header('cache-control', 'no-store').header('x-accel-buffering', 'no');
  if (request.method === 'HEAD') {
    streams.remove(sub);
    return headers().send();
  }
  await streams.add(sub, resumeFrom);
  return headers().send(out);
}
