import { randomBytes } from 'node:crypto';
import { PostgresAdapter, sql, type Kysely, type Selectable } from 'kysely';
import type { Tx } from '../../db/store.js';
import type { Database, PostRow, StreamEventsTable, Visibility } from '../../db/types.js';
import type { PostChange } from '../../shared/post-changes.js';

/** The channel on which PostgreSQL tells every process "events have committed" (sent after the commit: see wake). */
export const EVENTS_CHANNEL = 'corkboard_stream_events';

/**
 * Where an event stands in delivery order: its transaction's id and its own, as text that sorts as they do (so the
 * hub compares positions with < and >=). START stands before every event.
 */
export type Position = string;
export const positionOf = (xid: string, id: number): Position => `${xid.padStart(20, '0')}:${String(id).padStart(16, '0')}`;
export const START: Position = positionOf('0', 0);
export const partsOf = (position: Position): { xid: string; id: number } => {
  const [xid, id] = position.split(':') as [string, string];
  return { xid: BigInt(xid).toString(), id: Number(id) };
};

export interface StreamEvent {
  /** Unique (PostgreSQL: from a sequence, not in commit order): what `followersIn` points at. */
  id: number;
  /** The writing transaction's id (PostgreSQL; '0' on SQLite and for events written before issue 45). */
  xid: string;
  position: Position;
  /** Random, sent with the id (see eventId): what tells an id handed out again after a restore from the first. */
  tag: string;
  kind: StreamEventsTable['kind'];
  postId: number;
  ownerId: number;
  /** The post's visibility as this event left it (a deletion: as it was deleted). */
  visibility: Visibility;
  previousVisibility: Visibility | null;
  /**
   * A post deleted with its owner's account: the owner's followers as they were before (the follows went in the
   * same transaction). Either the list itself, or the id of the event of that deletion that holds it.
   */
  followers?: readonly number[];
  followersIn?: number;
}

/**
 * The id a client sees, and sends back as Last-Event-ID: `<xid>.<id>-<tag>` (`7413.41-9f2c4a7be013`), or `<id>-<tag>`
 * where the xid is 0 (SQLite, and events written before issue 45: their ids as clients hold them stay valid).
 * Opaque to clients; read as (xid, id), they increase in delivery order.
 */
export const eventId = (event: { xid: string; id: number; tag: string }): string =>
  event.xid === '0' ? `${event.id}-${event.tag}` : `${event.xid}.${event.id}-${event.tag}`;

/** A tag: 48 random bits, as 12 lowercase hex digits (the migration tags older events the same way). */
const newTag = (): string => randomBytes(6).toString('hex');
export const TAG_PATTERN = '[0-9a-f]{12}';

/**
 * Writes the durable row of a post change inside the writing transaction (its PostChanges `inTransaction` work).
 *
 * Delivery follows commit order without a row every writer waits on (issue 45). On PostgreSQL the row takes its id
 * from a sequence and records its transaction's id (`xid`, pg_current_xact_id(), both column defaults). Readers take
 * events in (xid, id) order, and only those whose xid is below the horizon (HORIZON, below): no event of this
 * database can ever commit there any more, so a reader that went past an
 * event never misses one before it: no gap, no duplicate, resumable from any kept id (the transactional-outbox
 * reader). Writers no longer wait on each other at all: until issue 45 the id came from the one row of
 * `stream_position`, bumped by UPDATE … RETURNING and locked until the commit, so post commits of the whole service
 * (every process) went one at a time. The price is on the reading side: an event is delivered only once every
 * transaction of this database that began writing before its own has ended, so a long transaction (any that wrote,
 * not only post writes; bounded by idle_in_transaction_session_timeout and statement_timeout where set) holds deliveries back
 * that long; the hub polls the horizon meanwhile (see pump.ts). Figures: bench/README.md, decision table.
 *
 * SQLite's single writer already orders commits: its events keep drawing gapless ids from `stream_position` (the
 * row costs nothing there, every writer holds the one write lock anyway), with xid 0; the readers are the same.
 *
 * No NOTIFY in the writing transaction: PostgreSQL takes a lock global to the database at the commit of any
 * transaction that notified, which would serialise post commits again. Other processes are woken after the commit
 * (streams.plugin.ts).
 */
export async function recordStreamEvent(tx: Tx, change: PostChange): Promise<number> {
  // A post deleted with its owner's account: who followed the owner before (see DeletedAccount), listed by the
  // account's first event and pointed at by the others (a list per post would repeat a big account's followers).
  const account = change.kind === 'deleted' ? change.account : undefined;
  const event: EventRow = {
    kind: change.kind,
    post_id: change.post.id,
    owner_id: change.post.owner_id,
    visibility: change.post.visibility,
    previous_visibility: change.kind === 'updated' ? change.previous.visibility : null,
    tag: newTag(),
    followers: account && account.listedIn === undefined ? JSON.stringify(account.followers) : null,
    followers_in: account?.listedIn ?? null,
    created_at: new Date().toISOString(),
  };
  const id = await insertEvent(tx, event);
  if (account) account.listedIn ??= id;
  return id;
}

type EventRow = Omit<StreamEventsTable, 'id' | 'xid'>;

async function insertEvent(tx: Tx, event: EventRow): Promise<number> {
  if (tx.dialect === 'postgres') {
    // The id and the xid are the columns' defaults (nextval, pg_current_xact_id()): nothing shared is locked.
    const row = await tx.db.insertInto('stream_events').values(event).returning('id').executeTakeFirstOrThrow();
    return Number(row.id);
  }
  // SQLite: the next gapless id from the counter (no UPDATE inside a WITH there).
  const { id } = await tx.db
    .updateTable('stream_position')
    .set((eb) => ({ last_id: eb('last_id', '+', 1), tag: event.tag }))
    .where('id', '=', 1)
    .returning('last_id as id')
    .executeTakeFirstOrThrow();
  await tx.db.insertInto('stream_events').values({ id: Number(id), ...event }).execute();
  return Number(id);
}

function toEvent(row: Selectable<StreamEventsTable>): StreamEvent {
  const xid = String(row.xid);
  const id = Number(row.id);
  return {
    id,
    xid,
    position: positionOf(xid, id),
    tag: row.tag,
    kind: row.kind,
    postId: Number(row.post_id),
    ownerId: Number(row.owner_id),
    visibility: row.visibility,
    previousVisibility: row.previous_visibility,
    ...(row.followers !== null ? { followers: JSON.parse(row.followers) as number[] } : {}),
    ...(row.followers_in !== null ? { followersIn: Number(row.followers_in) } : {}),
  };
}

/** Where the log ends (as far as readers may go: below the horizon), and the id a client is given for it. */
export interface LogEnd {
  position: Position;
  clientId: string;
}

/** An event a client names in Last-Event-ID (tag undefined: a bare number, which names none this log vouches for). */
export interface Resume {
  xid: string;
  id: number;
  tag: string | undefined;
}

/** Candidate followers looked up in one statement's `IN (…)`. */
const CANDIDATES_PER_READ = 500;

export function createEventsRepository(db: Kysely<Database>) {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  const readable = readableEvents(pg);
  const at = (position: Position) => {
    const { xid, id } = partsOf(position);
    return pg ? sql`(${xid}::xid8, ${id}::bigint)` : sql`(${BigInt(xid)}, ${id})`;
  };
  const events = () => db.selectFrom('stream_events').where(readable);
  const end = async (): Promise<LogEnd> => {
    const last = await events().select(['xid', 'id', 'tag']).orderBy('xid', 'desc').orderBy('id', 'desc').limit(1).executeTakeFirst();
    if (last) return { position: positionOf(String(last.xid), Number(last.id)), clientId: eventId({ xid: String(last.xid), id: Number(last.id), tag: last.tag }) };
    // An empty log: the id of its start, with the tag `stream_position` was given (another after a restore).
    const start = await db.selectFrom('stream_position').select('tag').where('id', '=', 1).executeTakeFirst();
    return { position: START, clientId: `0-${start?.tag ?? ''}` };
  };
  return {
    /**
     * Up to `limit` events after `from` (with `from` itself first when `including`), in delivery order, no further
     * than `upTo` if given; only events below the horizon (see recordStreamEvent).
     */
    async after(from: Position, limit: number, upTo?: Position, including = false): Promise<StreamEvent[]> {
      let query = events().selectAll().where(including ? sql<boolean>`(xid, id) >= ${at(from)}` : sql<boolean>`(xid, id) > ${at(from)}`);
      if (upTo !== undefined) query = query.where(sql<boolean>`(xid, id) <= ${at(upTo)}`);
      const rows = await query.orderBy('xid').orderBy('id').limit(limit).execute();
      return rows.map(toEvent);
    },
    /**
     * Whether an event has committed that readers may not take yet (PostgreSQL: its xid is not below the horizon,
     * as an older transaction is still open). The hub then looks again shortly rather than wait for a wake-up.
     */
    async waiting(): Promise<boolean> {
      if (!pg) return false;
      const row = await db
        .selectFrom('stream_events')
        .select('id')
        .where(sql<boolean>`xid >= ${HORIZON}`)
        .limit(1)
        .executeTakeFirst();
      return row !== undefined;
    },
    /** One event, if it is still kept. */
    async byId(id: number): Promise<StreamEvent | undefined> {
      const row = await db.selectFrom('stream_events').selectAll().where('id', '=', id).executeTakeFirst();
      return row === undefined ? undefined : toEvent(row);
    },
    end,
    /**
     * Whether the event a client names is one of this database's log that a stream may go on from: kept (the purge
     * keeps the newest event) with that tag, or the start of a log still empty with its tag. Not after a restore
     * (the id was handed out again, with another tag), nor an id never handed out, nor one whose event was purged.
     */
    async resumable(resume: Resume): Promise<boolean> {
      if (resume.tag === undefined) return false;
      const position = positionOf(resume.xid, resume.id);
      if (position === START) {
        const log = await end();
        return log.position === START && log.clientId === `0-${resume.tag}`;
      }
      // Not limited to the horizon: a client holds an event's id only once it was delivered, below the horizon then
      // (which may step back briefly on PostgreSQL, see HORIZON), and the tag is not guessable.
      const kept = await db.selectFrom('stream_events').select('tag').where(sql<boolean>`(xid, id) = ${at(position)}`).executeTakeFirst();
      return kept?.tag === resume.tag;
    },
    /** The current rows of these posts (those that still exist), by id. */
    async posts(ids: readonly number[]): Promise<Map<number, PostRow>> {
      const found = new Map<number, PostRow>();
      if (ids.length === 0) return found;
      const rows = await db.selectFrom('posts').selectAll().where('id', 'in', [...new Set(ids)]).execute();
      for (const row of rows) found.set(Number(row.id), row);
      return found;
    },
    /**
     * Which of `candidates` follow `ownerId` now. The pump asks this for every event with the viewers of all open
     * streams that need it (every feed stream), often thousands. Most owners have fewer followers than that: their
     * followers are one read, matched here. A list of thousands of candidates in `IN (…)` 500 at a time was ten
     * statements an event for 5,000 feed streams, and on PostgreSQL the pump fell behind the benchmark's posts
     * (bench/README.md, "Figures behind choices in the code"). An owner with more followers than candidates (a celebrity) would make that
     * read as long as their following: the read stops one row past the candidates' count, and then the candidates
     * are looked up among the owner's follows instead, so the work is bounded by the streams, not by the followers.
     */
    /** See `ownerRelations`. */
    ownerRelations: (ownerId: number, candidates: readonly number[]) => ownerRelations(db, ownerId, candidates),
    async followersAmong(ownerId: number, candidates: readonly number[]): Promise<Set<number>> {
      const followersOf = db.selectFrom('follows').select('follower_id').where('followee_id', '=', ownerId);
      const ids = (rows: Array<{ follower_id: number }>) => rows.map((row) => Number(row.follower_id));
      if (candidates.length > CANDIDATES_PER_READ) {
        const followers = ids(await followersOf.limit(candidates.length + 1).execute());
        if (followers.length <= candidates.length) {
          const wanted = new Set(candidates);
          return new Set(followers.filter((id) => wanted.has(id)));
        }
      }
      const found = new Set<number>();
      for (let i = 0; i < candidates.length; i += CANDIDATES_PER_READ) {
        const chunk = candidates.slice(i, i + CANDIDATES_PER_READ);
        for (const id of ids(await followersOf.where('follower_id', 'in', chunk).execute())) found.add(id);
      }
      return found;
    },
  };
}

/** What stands between an event's owner and the viewers of open streams (CONTRACT §9), for `seesPost`. */
export interface OwnerRelations {
  /** Candidates in a block with the owner, either way. */
  blocked: ReadonlySet<number>;
  /** Candidates who mute the owner. */
  muting: ReadonlySet<number>;
  ownerSuspended: boolean;
}

/**
 * Which of `candidates` are in a block with `ownerId` or mute them, and whether the owner is suspended: one read of
 * the owner's blocks and mutes (few for nearly every owner) and the suspension's key, stopping one row past the
 * candidates' count. An owner with more of them than there are candidates has the candidates looked up instead,
 * 500 at a time, so the work is bounded by the streams, as in `followersAmong`.
 */
export async function ownerRelations(db: Kysely<Database>, ownerId: number, candidates: readonly number[]): Promise<OwnerRelations> {
  const read = (among?: readonly number[]) => {
    let blockedBy = db.selectFrom('blocks').select([sql.lit('b').as('kind'), 'blocks.blocked_id as user_id']).where('blocks.blocker_id', '=', ownerId);
    let blockers = db.selectFrom('blocks').select([sql.lit('b').as('kind'), 'blocks.blocker_id as user_id']).where('blocks.blocked_id', '=', ownerId);
    let muters = db.selectFrom('mutes').select([sql.lit('m').as('kind'), 'mutes.muter_id as user_id']).where('mutes.muted_id', '=', ownerId);
    if (among) {
      blockedBy = blockedBy.where('blocks.blocked_id', 'in', among);
      blockers = blockers.where('blocks.blocker_id', 'in', among);
      muters = muters.where('mutes.muter_id', 'in', among);
    }
    return suspended.unionAll(blockedBy).unionAll(blockers).unionAll(muters);
  };
  const suspended = db.selectFrom('suspensions').select([sql.lit('s').as('kind'), 'suspensions.user_id']).where('suspensions.user_id', '=', ownerId);
  const wanted = new Set(candidates);
  let rows = await read().limit(candidates.length + 2).execute();
  if (rows.length > candidates.length + 1) {
    rows = await suspended.execute();
    for (let i = 0; i < candidates.length; i += CANDIDATES_PER_READ) rows.push(...(await read(candidates.slice(i, i + CANDIDATES_PER_READ)).execute()));
  }
  const blocked = new Set<number>();
  const muting = new Set<number>();
  let ownerSuspended = false;
  for (const row of rows) {
    const id = Number(row.user_id);
    if (row.kind === 's') ownerSuspended = true;
    else if (wanted.has(id)) (row.kind === 'b' ? blocked : muting).add(id);
  }
  return { blocked, muting, ownerSuspended };
}

/**
 * PostgreSQL: after a restore into another cluster (pg_dump and pg_restore, a new server), the log holds xids that
 * cluster never handed out, ahead of the ones it hands out now: new events would sort before them, and a reader past
 * them would never see the new ones. Every event with an xid this cluster has not reached yet means the whole log came
 * from elsewhere: its events are moved to xid 0 (before every new one, in id order) with new tags, so ids from before
 * the restore get `event: reset` (CONTRACT §7), and readers go on from the log as it now stands. Run at start-up,
 * before the service writes; a restore within the cluster (its xids only go up) needs nothing. Returns how many.
 */
export async function adoptRestoredLog(db: Kysely<Database>): Promise<number> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return 0;
  let adopted = 0;
  // The notification log (20261127T1700) is ordered the same way, so a restore moves it the same way.
  for (const log of ['stream_events', 'notification_events'] as const) {
    const result = await sql`update ${sql.table(log)} set xid = '0', tag = substr(md5(random()::text || clock_timestamp()::text), 1, 12)
      where xid <> '0' and exists (select 1 from ${sql.table(log)} where xid >= pg_snapshot_xmax(pg_current_snapshot()))`.execute(db);
    adopted += Number(result.numAffectedRows ?? 0);
  }
  return adopted;
}

/**
 * PostgreSQL: the horizon, the xid below which no event of this database can commit any more, as seen by the
 * statement it is part of (pg_current_snapshot() is the statement's snapshot, the one its reads of stream_events
 * see). It must be in the same statement as those reads.
 *
 * pg_snapshot_xmin would do, but it is the cluster's: a transaction that wrote in any database of the server (another
 * service's, a CREATE DATABASE, a long load) would hold our deliveries back as long. So the horizon is the smallest
 * xid the snapshot lists as in progress, leaving out those that pg_stat_activity shows as the transaction of a
 * backend connected to another database; if none is left, the snapshot's xmax. Why that is safe: an event not seen
 * by the snapshot was written either by a transaction at or above xmax (above the horizon), or by one the snapshot
 * lists as in progress. A listed xid left out belongs to a backend of another database, which cannot write our
 * tables (a backend never changes database, an xid names one transaction), so no event will ever commit with it.
 * Every other listed xid is kept: ours, a prepared transaction, one whose backend has ended since, or one whose
 * backend_xid we may not see (PostgreSQL 15 shows datid and backend_xid of every session to every role, the
 * query text only to the session's role or pg_read_all_stats; should a server hide them, the horizon falls back to
 * the cluster's for those xids). So no event can later appear below an event a
 * reader took: no gap, no duplicate. An xid whose transaction ends between the snapshot and the read of
 * pg_stat_activity is kept, so the horizon can step back briefly; readers never go back (they read after where they
 * are), and `resumable` does not depend on it.
 */
export const HORIZON = sql`(select coalesce(min(x), pg_snapshot_xmax(pg_current_snapshot()))
  from pg_snapshot_xip(pg_current_snapshot()) as x
  where not exists (select 1 from pg_stat_activity a
    where a.backend_xid = xid(x) and a.datid <> (select oid from pg_database where datname = current_database())))`;

/**
 * Events readers may take: on PostgreSQL those below the horizon, whose transactions, and all before them, ended.
 * Also the notification log's (notifications.stream.ts), whose rows carry an `xid` the same way.
 */
export const readableEvents = (pg: boolean) => (pg ? sql<boolean>`xid < ${HORIZON}` : sql<boolean>`1 = 1`);

/**
 * Deletes the events written before `before` (ISO time), in a transaction of its own: every event up to the newest
 * of those in delivery order, so what is kept is always everything after some event (a `created_at` is not in
 * delivery order; a gap would let a resume from a kept id skip a purged one). The newest readable event is always
 * kept: it is where the log ends, which a client is told with `event: reset` and may resume from.
 */
export async function purgeEvents(store: { transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T> }, before: string): Promise<number> {
  return store.transaction(async (tx) => {
    const readable = readableEvents(tx.dialect === 'postgres');
    const newest = (old: boolean) =>
      sql`(select xid, id from stream_events where ${readable}${old ? sql` and created_at < ${before}` : sql``} order by xid desc, id desc limit 1)`;
    const result = await sql`delete from stream_events where (xid, id) <= ${newest(true)} and (xid, id) < ${newest(false)}`.execute(tx.db);
    return Number(result.numAffectedRows ?? 0);
  });
}
