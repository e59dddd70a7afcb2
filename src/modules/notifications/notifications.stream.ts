import { PassThrough } from 'node:stream';
import type { ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fastJson from 'fast-json-stringify';
import { PostgresAdapter, sql, type Kysely } from 'kysely';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Database, NotificationType, Role } from '../../db/types.js';
import type { Caller } from '../../plugins/auth.js';
import { AppError } from '../../shared/errors.js';
import type { Links } from '../../shared/links.js';
import { hashToken } from '../../shared/tokens.js';
import { eventId, partsOf, positionOf, readableEvents, START, TAG_PATTERN, type Position } from '../streams/events.js';
import { MAX_BACKLOG_BYTES, RETRY_AFTER_SECONDS, RETRY_MS, tooManyStreams } from '../streams/hub.js';
import type { Seat } from '../streams/seats.js';
import { createNotificationsRepository, type Recipient } from './notifications.repository.js';
import { NotificationSchema } from './notifications.schemas.js';
import { toNotification } from './notifications.representation.js';

/**
 * Live notification streams (CONTRACT §10 with §7's rules). Each stream is one recipient's, so it reads its own
 * slice of the log (`notification_events`, written by triggers on `notifications`) from its cursor, over the
 * `(recipient_id, xid, id)` index: replaying from Last-Event-ID and going on live are the same loop, so there is no
 * hand-over between a catch-up and a pump to get wrong.
 *
 * Delivery order is the post streams' (src/modules/streams/events.ts, issue 45): (xid, id), and every read takes only
 * events below the horizon (`readableEvents`), under which no transaction of this database can commit an event any
 * more. On PostgreSQL an event's id comes from a sequence and its xid is its transaction's, so notification writers
 * share no row (20261127T1700_notification_event_xids.ts); an event is read only once every transaction that began
 * writing before its own has ended, so a cursor that went past an event never has one appear before it: no gap, no
 * duplicate. On SQLite the single writer orders commits: gapless ids from `notification_position`, xid 0.
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
  /** Where the last event given to this stream or judged not for it stands in delivery order. */
  cursor: Position;
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
  private position: Position = START;
  private readonly pg: boolean;
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
    this.pg = db.getExecutor().adapter instanceof PostgresAdapter;
  }

  /** A position as a row value to compare `(xid, id)` with. */
  private at(position: Position) {
    const { xid, id } = partsOf(position);
    return this.pg ? sql`(${xid}::xid8, ${id}::bigint)` : sql`(${BigInt(xid)}, ${id})`;
  }

  /** Events readers may take (below the horizon on PostgreSQL), after `position` in delivery order. */
  private eventsAfter(position: Position) {
    return this.db
      .selectFrom('notification_events')
      .where(readableEvents(this.pg))
      .where(sql<boolean>`(xid, id) > ${this.at(position)}`)
      .orderBy('xid')
      .orderBy('id');
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
      this.purge(before).catch((error: unknown) => this.log.warn({ err: error }, 'purging old notification events failed'));
    });
  }

  /**
   * Deletes the events written before `before` (ISO time), as the post streams' purgeEvents does: every event up to
   * the newest of those in delivery order, so what is kept is always everything after some event (a `created_at` is
   * not in delivery order, and a gap would let a resume from a kept id skip a purged one), and never the newest
   * readable event: it is where the log ends, the id a client is given with `event: reset` and may resume from.
   */
  async purge(before: string): Promise<void> {
    const readable = readableEvents(this.pg);
    const newest = (old: boolean) =>
      sql`(select xid, id from notification_events where ${readable}${old ? sql` and created_at < ${before}` : sql``} order by xid desc, id desc limit 1)`;
    await this.transaction(async (db) => {
      await sql`delete from notification_events where (xid, id) <= ${newest(true)} and (xid, id) < ${newest(false)}`.execute(db);
    });
  }

  private every(ms: number, run: () => void): void {
    const timer = setInterval(run, ms);
    timer.unref();
    this.timers.push(timer);
  }

  /**
   * Where the log ends as far as readers may go (the newest event below the horizon), and the id a client is given
   * for it. An empty log ends where `notification_position` stands: on SQLite the last id handed out (the events of
   * a log purged before the purge kept the newest), on PostgreSQL the last one handed out before its events took
   * xids; either with that id's tag (another after a restore).
   */
  private async logEnd(): Promise<{ position: Position; clientId: string }> {
    const last = await this.eventsAfter(START).clearOrderBy().select(['xid', 'id', 'tag']).orderBy('xid', 'desc').orderBy('id', 'desc').limit(1).executeTakeFirst();
    if (last) {
      const event = { xid: String(last.xid), id: Number(last.id), tag: last.tag };
      return { position: positionOf(event.xid, event.id), clientId: eventId(event) };
    }
    const start = await this.db.selectFrom('notification_position').select(['last_id', 'tag']).where('id', '=', 1).executeTakeFirst();
    const id = Number(start?.last_id ?? 0);
    return { position: positionOf('0', id), clientId: `${id}-${start?.tag ?? ''}` };
  }

  /**
   * Whether the event a client names is one of this log a stream may go on from: one kept with that tag (not limited
   * to the horizon: a client holds an id only once it was delivered, and the tag is not guessable), or where an empty
   * log ends. Not after a restore (the number was handed out again, with another tag), nor one never handed out, nor
   * one whose events were purged.
   */
  private async resumable(resume: Resume, end: { position: Position; clientId: string }): Promise<boolean> {
    if (resume.tag === undefined) return false;
    const position = positionOf(resume.xid, resume.id);
    const kept = await this.db.selectFrom('notification_events').select('tag').where(sql<boolean>`(xid, id) = ${this.at(position)}`).executeTakeFirst();
    if (kept !== undefined) return kept.tag === resume.tag;
    return end.position === position && end.clientId === eventId({ xid: resume.xid, id: resume.id, tag: resume.tag });
  }

  /**
   * Registers a stream: live from the end of the log, or replaying after `resume` (an `event: reset` first, going
   * on from the end of the log, when that id cannot be resumed from: purged, never issued, from before a restore,
   * or a bare number without its tag).
   */
  async add(sub: NotificationSubscriber, resume: Resume | undefined): Promise<void> {
    try {
      const end = await this.logEnd();
      const resumable = resume !== undefined && (await this.resumable(resume, end));
      if (sub.closed) {
        this.remove(sub);
        return;
      }
      if (this.closed) throw tooManyStreams();
      // The first stream: scanning starts from here. Nothing can run between this and the registration below, and an
      // event not readable when the end was read stands after it (its xid was at or above that horizon), so it is
      // scanned; the stream's own first read covers the rest.
      if (this.subscribers.size === 0 && end.position > this.position) this.position = end.position;
      this.subscribers.add(sub);
      let mine = this.byRecipient.get(sub.recipient.id);
      if (!mine) this.byRecipient.set(sub.recipient.id, (mine = new Set()));
      mine.add(sub);
      this.openGauge.set(this.subscribers.size);
      this.write(sub, `retry: ${RETRY_MS}\n\n`);
      sub.cursor = resume !== undefined && resumable ? positionOf(resume.xid, resume.id) : end.position;
      // The reset carries an id like every event: where the stream goes on from.
      if (resume !== undefined && !resumable) this.write(sub, `id: ${end.clientId}\nevent: reset\ndata: {}\n\n`);
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
      const rows = await this.eventsAfter(this.position).select(['xid', 'id', 'recipient_id']).limit(1000).execute();
      if (rows.length === 0) return;
      const last = rows[rows.length - 1]!;
      this.position = positionOf(String(last.xid), Number(last.id));
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
          const events = await this.eventsAfter(sub.cursor)
            .select(['xid', 'id', 'kind', 'notification_id', 'tag'])
            .where('recipient_id', '=', sub.recipient.id)
            .limit(BATCH)
            .execute();
          if (events.length === 0) break;
          const created = events.filter((event) => event.kind === 'created').map((event) => Number(event.notification_id));
          // Judged now, through the one visibility rule: what is gone or hidden is not sent.
          const visible = new Map((await notifications.findVisibleMany(sub.recipient, created, sub.types)).map((row) => [Number(row.id), row]));
          for (const event of events) {
            if (sub.closed) return;
            const at = { xid: String(event.xid), id: Number(event.id), tag: event.tag };
            sub.cursor = positionOf(at.xid, at.id);
            if (event.kind === 'deleted') {
              this.write(sub, `id: ${eventId(at)}\nevent: notification.deleted\ndata: {"id":${Number(event.notification_id)}}\n\n`);
            } else {
              const row = visible.get(Number(event.notification_id));
              if (!row) continue;
              this.write(sub, `id: ${eventId(at)}\nevent: notification.created\ndata: ${this.serialize(toNotification(row, this.links))}\n\n`);
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

/**
 * A Last-Event-ID: the post streams' format (`eventId`: `<xid>.<id>-<tag>`, or `<id>-<tag>` where the xid is 0) read
 * as the event's xid, id and tag (undefined: a bare number, which gets a reset).
 */
interface Resume {
  xid: string;
  id: number;
  tag: string | undefined;
}

const LAST_EVENT_ID = new RegExp(`^(?:(0|[1-9][0-9]{0,18})\\.)?(0|[1-9][0-9]{0,15})(?:-(${TAG_PATTERN}))?$`);

/** Last-Event-ID as a resume point (its syntax was checked by `checkLastEventId` before the handler ran). */
function lastEventId(request: FastifyRequest): Resume | undefined {
  const raw = request.headers['last-event-id'];
  if (raw === undefined) return undefined;
  const match = LAST_EVENT_ID.exec(Array.isArray(raw) ? raw.join(',') : raw.trim());
  if (!match) throw AppError.badRequest('Last-Event-ID', 'must be the id of an event this stream sent');
  return { xid: match[1] ?? '0', id: Number(match[2]), tag: match[3] };
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
    cursor: START,
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
