import { sql, type Kysely } from 'kysely';
import { perViewerKind, plain, prepare, type Prepared } from '../../db/prepared.js';
import type { PlainStatement, Store, Tx } from '../../db/store.js';
import type { Database, NotificationRow, NotificationType, Role } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';
import { SLOT, VIEWER, actorHeardBy, bindParameters, compileQuery, mayBeTold, visibleTo } from '../../shared/visibility.js';

/** Whose notifications are read: the recipient (with their role, which decides what posts they may see). */
export interface Recipient {
  id: number;
  role: Role;
  /**
   * As on Viewer: false when the request's own lookup of the recipient found them in no block, so the reads skip
   * the block probes (most users: the marker's count then costs a third of the probes). Left out, blocks are
   * checked: a stream, which outlives its lookup, never sets it.
   */
  hasBlocks?: boolean;
}

export const NOTIFICATION_COLUMNS = [
  'notifications.id',
  'notifications.recipient_id',
  'notifications.actor_id',
  'notifications.type',
  'notifications.post_id',
  'notifications.reply_id',
  'notifications.created_at',
] as const;

/** A page of notifications: `limit + 1` rows with ids below `after`, of `types` when given. */
export interface NotificationsPage {
  limit: number;
  after?: number;
  types?: readonly NotificationType[];
}

/** Past this many unread notifications the marker says 1000 (CONTRACT §10): the count stops there. */
export const UNREAD_COUNT_CAP = 1000;

/**
 * THE statement of which notifications `recipient` may see (CONTRACT §9, §10): theirs, from an actor they may hear
 * of (`actorHeardBy`: no block either way, not suspended) and about no post they may not see now (`visibleTo`,
 * correlated to the notification's post), both rules of src/shared/visibility.ts. Every read of notifications (a
 * page, one by id, the marker's unread count, the stream) starts here.
 *
 * The post check is a scalar subquery per row (`(select true from posts where posts.id = notifications.post_id and
 * …) is true`), not `exists`: PostgreSQL may turn an `exists` under an OR into a hashed subplan that reads every
 * visible post before the first notification, while a scalar subquery is always one probe of `posts` by its key for
 * each row the `(recipient_id, id)` range yields. The whole condition is tested with `IS TRUE`, as the posts list
 * does (posts.repository.ts): left bare, SQLite may answer the OR with one index per branch and a sort, instead of
 * walking `(recipient_id, id)` and filtering each row.
 *
 * Only what can be hidden is probed. A `follow` is about no post. A `reply` or a `recommend` is always about the
 * recipient's own post (notifyReply and notifyRecommend tell the post's owner, and a post never changes owner): rules
 * 1 and 3 always let its owner see it, so all that can hide it is the recipient's own suspension (rule 2, when an
 * admin reads a suspended user's notifications), one probe for the whole statement instead of one of `posts` per
 * row. Only a `mention` (someone else's post) is probed row by row. The marker's unread count walks up to 1,001
 * rows: the posts probes were most of its cost.
 */
export function visibleNotifications(db: Kysely<Database>, recipient: Recipient) {
  return db
    .selectFrom('notifications')
    .where('notifications.recipient_id', '=', recipient.id)
    .where((eb) => actorHeardBy(recipient)(eb))
    .where((eb) =>
      eb(
        eb.parens(
          eb.or([
            eb('notifications.post_id', 'is', null),
            eb.and([
              eb('notifications.type', 'in', ['reply', 'recommend']),
              eb.not(eb.exists(eb.selectFrom('suspensions').select('suspensions.user_id').where('suspensions.user_id', '=', recipient.id))),
            ]),
            eb(
              eb
                .selectFrom('posts')
                .select(sql.lit(true).as('seen'))
                .whereRef('posts.id', '=', 'notifications.post_id')
                .where((inner) => visibleTo(recipient)(inner)),
              'is',
              sql.lit(true),
            ),
          ]),
        ),
        'is',
        sql.lit(true),
      ),
    );
}

/** A recipient's kind for the prepared page: role, and whether blocks are checked (rule 6 keeps an admin's too). */
function recipientKind(recipient: Recipient): { key: string; template: Recipient } {
  const hasBlocks = recipient.hasBlocks !== false;
  return { key: `${recipient.role}:${hasBlocks ? 'b' : ''}`, template: { id: VIEWER, role: recipient.role, hasBlocks } };
}

/**
 * A page without a `types` filter, the collection as an app reads it (`pageQuery`'s own text), compiled once per
 * kind of recipient and page size like GET /posts' page (posts.repository.ts, db/prepared.ts): built through the
 * builder on every request, the rule's checks cost more than reading the page. The cursor is always bound (the
 * largest safe integer for the first page); a `types` filter, a list of any length, goes through the builder. The
 * kinds are `recipientKind`'s, not `viewerKind`'s, which drop an admin's blocks (an admin sees every post) while rule
 * 6 keeps them for an admin's own notifications.
 */
const firstPages = perViewerKind(
  (template: Recipient, limit) => prepare(compileQuery((db) => createNotificationsRepository(db).pageQuery(template, { limit: limit!, after: SLOT }))),
  recipientKind,
);

/** `limit + 1` notifications of `recipient` below `after`, newest first (`page`, prepared when no `types` filter). */
export function notificationsPage(store: Store, recipient: Recipient, page: NotificationsPage): Promise<NotificationRow[]> {
  if (page.types !== undefined) return createNotificationsRepository(store.db).page(recipient, page);
  const compiled = firstPages(recipient, page.limit);
  return store.query<NotificationRow>(compiled.statement, bindParameters(compiled.parameters, recipient.id, [page.after ?? Number.MAX_SAFE_INTEGER]));
}

/** Notification rows: reads through `visibleNotifications`, writes by the services that cause them. */
export function createNotificationsRepository(db: Kysely<Database>) {
  /** The page query `page` runs (and the prepared first pages compile): `limit + 1` rows below `after`, newest first. */
  function pageQuery(recipient: Recipient, { limit, after, types }: NotificationsPage) {
    let query = visibleNotifications(db, recipient).select(NOTIFICATION_COLUMNS);
    if (after !== undefined) query = query.where('notifications.id', '<', after);
    if (types !== undefined) query = query.where('notifications.type', 'in', types);
    return query.orderBy('notifications.id', 'desc').limit(pageLimit(limit));
  }

  return {
    pageQuery,

    /** A page, newest first, `limit + 1` rows below `before` (keyset on the id). */
    page: (recipient: Recipient, page: NotificationsPage): Promise<NotificationRow[]> => pageQuery(recipient, page).execute(),

    findVisible(recipient: Recipient, id: number): Promise<NotificationRow | undefined> {
      return visibleNotifications(db, recipient).select(NOTIFICATION_COLUMNS).where('notifications.id', '=', id).executeTakeFirst();
    },

    /** Those of `ids` that exist and are visible (and of `types`, when given): a stream's batch, judged as it is sent. */
    findVisibleMany(recipient: Recipient, ids: readonly number[], types?: readonly NotificationType[]): Promise<NotificationRow[]> {
      if (ids.length === 0) return Promise.resolve([]);
      let query = visibleNotifications(db, recipient).select(NOTIFICATION_COLUMNS).where('notifications.id', 'in', ids);
      if (types !== undefined) query = query.where('notifications.type', 'in', types);
      return query.execute();
    },

    /**
     * The visible notifications newer than `lastReadId`, counted up to UNREAD_COUNT_CAP + 1: one range of the
     * `(recipient_id, id)` index cut short by the LIMIT, so 100,000 unread cost what 1,001 do.
     */
    async unreadCount(recipient: Recipient, lastReadId: number): Promise<number> {
      const row = await db
        .selectFrom(
          visibleNotifications(db, recipient)
            .select('notifications.id')
            .where('notifications.id', '>', lastReadId)
            .orderBy('notifications.id')
            .limit(sql.lit(UNREAD_COUNT_CAP + 1))
            .as('unread'),
        )
        .select((eb) => eb.fn.countAll<number | string>().as('n'))
        .executeTakeFirstOrThrow();
      return Math.min(Number(row.n), UNREAD_COUNT_CAP);
    },

    async marker(userId: number): Promise<number> {
      const row = await db.selectFrom('notification_markers').select('last_read_id').where('user_id', '=', userId).executeTakeFirst();
      return row === undefined ? 0 : Number(row.last_read_id);
    },

    /** Moves the marker to `lastReadId` unless it is further already (one statement: racing PUTs keep the highest). */
    async advanceMarker(userId: number, lastReadId: number): Promise<void> {
      await db
        .insertInto('notification_markers')
        .values({ user_id: userId, last_read_id: lastReadId })
        .onConflict((oc) =>
          oc
            .column('user_id')
            .doUpdateSet({ last_read_id: (eb) => eb.ref('excluded.last_read_id') })
            .where((eb) => eb('notification_markers.last_read_id', '<', eb.ref('excluded.last_read_id'))),
        )
        .execute();
    },

    /** Any number of rows through the builder (test set-up); the services write through `insertNotifications`. */
    async insert(rows: readonly NewNotification[]): Promise<void> {
      if (rows.length === 0) return;
      const created_at = new Date().toISOString();
      await db
        .insertInto('notifications')
        .values(rows.map((row) => ({ post_id: null, reply_id: null, ...row, created_at })))
        .execute();
    },

    /** The recipients already told about mentions in this post (replyId undefined) or reply. */
    async mentioned(postId: number, replyId: number | undefined): Promise<number[]> {
      let query = db.selectFrom('notifications').select('recipient_id').where('type', '=', 'mention').where('post_id', '=', postId);
      query = replyId === undefined ? query.where('reply_id', 'is', null) : query.where('reply_id', '=', replyId);
      return (await query.execute()).map((row) => Number(row.recipient_id));
    },

    async removeMentions(postId: number, replyId: number | undefined, recipients: readonly number[]): Promise<void> {
      if (recipients.length === 0) return;
      let query = db.deleteFrom('notifications').where('type', '=', 'mention').where('post_id', '=', postId).where('recipient_id', 'in', recipients);
      query = replyId === undefined ? query.where('reply_id', 'is', null) : query.where('reply_id', '=', replyId);
      await query.execute();
    },

    /** Undoes a follow's or a recommend's notification (the actor/recipient index finds it). */
    async remove(where: { type: 'follow' | 'recommend'; recipientId: number; actorId: number; postId?: number }): Promise<void> {
      let query = db
        .deleteFrom('notifications')
        .where('actor_id', '=', where.actorId)
        .where('recipient_id', '=', where.recipientId)
        .where('type', '=', where.type);
      if (where.postId !== undefined) query = query.where('post_id', '=', where.postId);
      await query.execute();
    },

    /** The `follow` notifications of these follows (`actorId` followed `recipientId`), in one statement. */
    async removeFollows(follows: readonly { recipientId: number; actorId: number }[]): Promise<void> {
      if (follows.length === 0) return;
      await db
        .deleteFrom('notifications')
        .where((eb) => eb.or(follows.map((f) => eb.and([eb('actor_id', '=', f.actorId), eb('recipient_id', '=', f.recipientId)]))))
        .where('type', '=', 'follow')
        .execute();
    },

    /** The ids of the users whose username keys are among `names`, by key: one statement for all the names. */
    async usersByKey(names: readonly string[]): Promise<Map<string, number>> {
      const rows = await db.selectFrom('users').select(['id', 'username_key']).where('username_key', 'in', names).execute();
      return new Map(rows.map((row) => [row.username_key, Number(row.id)]));
    },

    /** The post's owner, with their username key; undefined when the post is gone. */
    async ownerOf(postId: number): Promise<{ id: number; key: string } | undefined> {
      const row = await db
        .selectFrom('posts')
        .innerJoin('users', 'users.id', 'posts.owner_id')
        .select(['users.id', 'users.username_key'])
        .where('posts.id', '=', postId)
        .executeTakeFirst();
      return row && { id: Number(row.id), key: row.username_key };
    },

    /** Removes what an account's deletion takes (removeAccountNotifications); no `userId`: every notification. */
    async removeAccount(userId?: number): Promise<void> {
      const all = db.deleteFrom('notifications');
      if (userId === undefined) {
        await all.execute();
        return;
      }
      // Three statements, each over its own index (one OR would be a scan of the table on PostgreSQL).
      await all.where('recipient_id', '=', userId).execute();
      await all.where('actor_id', '=', userId).execute();
      await all.where('post_id', 'in', (eb) => eb.selectFrom('posts').select('posts.id').where('posts.owner_id', '=', userId)).execute();
    },
  };
}

export type NotificationsRepository = ReturnType<typeof createNotificationsRepository>;

export interface NewNotification {
  recipient_id: number;
  actor_id: number;
  type: NotificationType;
  post_id?: number;
  reply_id?: number;
}

// The two statements of a notifying write (a post's or reply's mentions above all: one of each for up to
// MAX_MENTIONS users) are plain texts run with `Tx.query` (db/prepared.ts), kept per shape: building either through
// Kysely, a judgement of 20 users or a 20-row insert, cost several times what the database does to answer it.
// Their number is bounded: a shape per count of users, and a write names at most MAX_MENTIONS (a follow, a reply
// and a recommend, one).

/** Values the compiled judgement carries in place of a run's: the post, the actor, each user in turn. */
const POST_MARK = -7_340_101;
const ACTOR_MARK = -7_340_102;
const USER_MARK = -7_340_103;

const judgements = new Map<string, Prepared>();

/** `mayBeTold` over `count` users named by username key or given by id, compiled from the builder once per shape. */
function judgement(by: 'names' | 'ids', count: number): Prepared {
  const key = `${by} ${count}`;
  let prepared = judgements.get(key);
  if (prepared === undefined) {
    const users = Array.from({ length: count }, () => USER_MARK);
    prepared = prepare(
      compileQuery((db) => {
        const query = db.selectFrom(['users', 'posts']).select(['users.id', 'users.username_key']).where('posts.id', '=', POST_MARK).where(mayBeTold(ACTOR_MARK));
        return by === 'names' ? query.where('users.username_key', 'in', users as unknown as string[]) : query.where('users.id', 'in', users);
      }),
    );
    judgements.set(key, prepared);
  }
  return prepared;
}

/**
 * Of the users named (by username key) or given (by id) in `who`, those who may be told about the post now, as
 * `actorId`'s doing (`mayBeTold`, src/shared/visibility.ts): one statement for all of them; no order.
 */
export async function findMayBeTold(
  tx: Tx,
  postId: number,
  actorId: number,
  who: { names: readonly string[] } | { ids: readonly number[] },
): Promise<Array<{ id: number; username_key: string }>> {
  const users: readonly (string | number)[] = 'names' in who ? who.names : who.ids;
  if (users.length === 0) return [];
  const { statement, parameters } = judgement('names' in who ? 'names' : 'ids', users.length);
  let next = 0;
  const values = parameters.map((value) => (value === POST_MARK ? postId : value === ACTOR_MARK ? actorId : value === USER_MARK ? users[next++] : value));
  return tx.query(statement, values);
}

const NOTIFICATION_ROW = '(?, ?, ?, ?, ?, ?)';
const inserts = new Map<number, PlainStatement>();

/** Writes notifications, in the order given (their ids follow it), all with one statement and one `created_at`. */
export async function insertNotifications(tx: Tx, rows: readonly NewNotification[]): Promise<void> {
  if (rows.length === 0) return;
  let statement = inserts.get(rows.length);
  if (statement === undefined) {
    statement = plain(
      `insert into notifications (recipient_id, actor_id, type, post_id, reply_id, created_at) values ${Array.from(rows, () => NOTIFICATION_ROW).join(', ')}`,
    );
    inserts.set(rows.length, statement);
  }
  const createdAt = new Date().toISOString();
  await tx.query(
    statement,
    rows.flatMap((row) => [row.recipient_id, row.actor_id, row.type, row.post_id ?? null, row.reply_id ?? null, createdAt]),
  );
}
