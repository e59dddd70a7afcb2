import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { notifyInTransaction } from '../../db/pg-notify.js';
import type { Tx } from '../../db/store.js';
import type { Database, PostRow, StreamEventsTable, Visibility } from '../../db/types.js';
import type { PostChange } from '../../shared/post-changes.js';

/** The channel on which PostgreSQL tells every process "events up to id N have committed". */
export const EVENTS_CHANNEL = 'corkboard_stream_events';

export interface StreamEvent {
  id: number;
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

/** The id a client sees, and sends back as Last-Event-ID: the number, then the tag (`41-9f2c4a7be013`). */
export const eventId = (id: number, tag: string): string => `${id}-${tag}`;

/** A tag: 48 random bits, as 12 lowercase hex digits (the migration tags older events the same way). */
const newTag = (): string => randomBytes(6).toString('hex');
export const TAG_PATTERN = '[0-9a-f]{12}';

/**
 * Writes the durable row of a post change inside the writing transaction (a PostChanges recorder).
 *
 * Ids follow commit order. The id comes from the one row of `stream_position`, bumped by UPDATE … RETURNING: the
 * row stays locked until this transaction ends, so a second writer waits there and draws the next id only after
 * the first has committed (or rolled back, which gives the id back: ids have no gaps). A PostgreSQL sequence would
 * not do: a transaction that drew 41 may commit after one that drew 42, and a client resuming from 42 would never
 * see 41. The price is that post writes commit one at a time: services record the change near the end of each
 * post write (only an idempotent create's kept answer, or an account's own row, is written after it), so little
 * more than the commit is serialised, not the work before it.
 * On SQLite the single writer already serialises transactions; the same statements run there.
 *
 * On PostgreSQL the transaction also queues a NOTIFY (no body: payloads are capped at 8,000 bytes, and a process
 * that hears it reads the log after its own position), which every process's listener hears once it commits.
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

type EventRow = Omit<StreamEventsTable, 'id'>;

/** Candidate followers looked up in one statement's `IN (…)`. */
const CANDIDATES_PER_READ = 500;

async function insertEvent(tx: Tx, event: EventRow): Promise<number> {
  if (tx.dialect === 'postgres') {
    // The wake-up first, outside the counter's lock (it is sent at commit whatever its place). Then the id and
    // the row in one statement, so the lock is held for one round trip and the commit.
    await notifyInTransaction(tx.db, EVENTS_CHANNEL, '');
    const row = await tx.db
      .with('position', (db) =>
        db
          .updateTable('stream_position')
          .set((eb) => ({ last_id: eb('last_id', '+', 1), tag: event.tag }))
          .where('id', '=', 1)
          .returning('last_id'),
      )
      .insertInto('stream_events')
      .columns(['id', 'kind', 'post_id', 'owner_id', 'visibility', 'previous_visibility', 'tag', 'followers', 'followers_in', 'created_at'])
      .expression((eb) =>
        eb
          .selectFrom('position')
          .select([
            'position.last_id',
            eb.val(event.kind).as('kind'),
            eb.val(event.post_id).as('post_id'),
            eb.val(event.owner_id).as('owner_id'),
            eb.val(event.visibility).as('visibility'),
            eb.cast<string | null>(eb.val(event.previous_visibility), 'text').as('previous_visibility'),
            eb.val(event.tag).as('tag'),
            eb.cast<string | null>(eb.val(event.followers), 'text').as('followers'),
            eb.cast<number | null>(eb.val(event.followers_in), 'bigint').as('followers_in'),
            eb.val(event.created_at).as('created_at'),
          ]),
      )
      .returning('id')
      .executeTakeFirstOrThrow();
    return Number(row.id);
  }
  // SQLite: no UPDATE inside a WITH; its single writer holds every lock anyway.
  const { id } = await tx.db
    .updateTable('stream_position')
    .set((eb) => ({ last_id: eb('last_id', '+', 1), tag: event.tag }))
    .where('id', '=', 1)
    .returning('last_id as id')
    .executeTakeFirstOrThrow();
  await tx.db.insertInto('stream_events').values({ id: Number(id), ...event }).execute();
  return Number(id);
}

function toEvent(row: StreamEventsTable): StreamEvent {
  return {
    id: Number(row.id),
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

/** The last event id handed out and its tag. */
export interface LogEnd {
  last: number;
  tag: string;
}

export function createEventsRepository(db: Kysely<Database>) {
  return {
    /** Up to `limit` events after `after`, in id (= commit) order, optionally no further than `upTo`. */
    async after(after: number, limit: number, upTo?: number): Promise<StreamEvent[]> {
      let query = db.selectFrom('stream_events').selectAll().where('id', '>', after);
      if (upTo !== undefined) query = query.where('id', '<=', upTo);
      const rows = await query.orderBy('id').limit(limit).execute();
      return rows.map(toEvent);
    },
    /** One event, if it is still kept. */
    async byId(id: number): Promise<StreamEvent | undefined> {
      const row = await db.selectFrom('stream_events').selectAll().where('id', '=', id).executeTakeFirst();
      return row === undefined ? undefined : toEvent(row);
    },
    /** Where the log ends. */
    async end(): Promise<LogEnd> {
      const position = await db.selectFrom('stream_position').select(['last_id', 'tag']).where('id', '=', 1).executeTakeFirst();
      return { last: Number(position?.last_id ?? 0), tag: position?.tag ?? '' };
    },
    /**
     * Whether `id`-`tag` names an event of this database's log that a stream may go on from: one kept with that tag,
     * or the last one handed out (which may have been purged) with that tag. Not after a restore (the id was handed
     * out again, with another tag), nor an id never handed out, nor one whose events were purged.
     */
    async resumable(id: number, tag: string): Promise<boolean> {
      const kept = await db.selectFrom('stream_events').select('tag').where('id', '=', id).executeTakeFirst();
      if (kept !== undefined) return kept.tag === tag;
      const end = await this.end();
      return end.last === id && end.tag === tag;
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
 * Deletes the events written before `before` (ISO time), in a transaction of its own: every event up to the newest
 * of those, so what is kept is always everything after some id (a `created_at` taken before the counter's lock may
 * be a little out of id order; a gap would let a resume from a kept id skip a purged one).
 */
export async function purgeEvents(store: { transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T> }, before: string): Promise<number> {
  return store.transaction(async (tx) => {
    const result = await tx.db
      .deleteFrom('stream_events')
      .where('id', '<=', (eb) => eb.selectFrom('stream_events').select((e) => e.fn.max('id').as('id')).where('created_at', '<', before))
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  });
}
