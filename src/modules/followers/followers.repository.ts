import type { Kysely } from 'kysely';
import type { Database } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';
import { USER_COLUMNS, accountShownTo, userShownTo, visiblePostCount, type PublicUserRow, type Viewer } from '../../shared/visibility.js';

/**
 * The follow graph. `follows` is keyed (followee_id, follower_id), which serves "followers of X" in follower id
 * order; the (follower_id, followee_id) index serves "whom X follows". Pass a transaction instead of `db` to use
 * these inside one.
 */
export function createFollowersRepository(db: Kysely<Database>) {
  return {
    /** Users who follow `followeeId`, in follower id order, `limit + 1` rows after `after` (keyset). */
    listFollowers(followeeId: number, viewer: Viewer, options: { limit: number; after?: number }): Promise<PublicUserRow[]> {
      let query = db
        .selectFrom('follows')
        .innerJoin('users', 'users.id', 'follows.follower_id')
        .select(USER_COLUMNS).select(visiblePostCount(viewer))
        .where('follows.followee_id', '=', followeeId)
        .where(userShownTo(viewer))
        .orderBy('follows.follower_id', 'asc')
        .limit(pageLimit(options.limit));
      if (options.after !== undefined) query = query.where('follows.follower_id', '>', options.after);
      return query.execute();
    },

    /** Users whom `followerId` follows, in followee id order, `limit + 1` rows after `after` (keyset). */
    listFollowing(followerId: number, viewer: Viewer, options: { limit: number; after?: number }): Promise<PublicUserRow[]> {
      let query = db
        .selectFrom('follows')
        .innerJoin('users', 'users.id', 'follows.followee_id')
        .select(USER_COLUMNS).select(visiblePostCount(viewer))
        .where('follows.follower_id', '=', followerId)
        .where(userShownTo(viewer))
        .orderBy('follows.followee_id', 'asc')
        .limit(pageLimit(options.limit));
      if (options.after !== undefined) query = query.where('follows.followee_id', '>', options.after);
      return query.execute();
    },

    /** The follower's user row, if `followerId` follows `followeeId`. */
    findFollower(followeeId: number, followerId: number, viewer: Viewer): Promise<PublicUserRow | undefined> {
      return db
        .selectFrom('follows')
        .innerJoin('users', 'users.id', 'follows.follower_id')
        .select(USER_COLUMNS).select(visiblePostCount(viewer))
        .where('follows.followee_id', '=', followeeId)
        .where('follows.follower_id', '=', followerId)
        .where(userShownTo(viewer))
        // Either user suspended: the relation is missing to all but admins.
        .where(accountShownTo(viewer, 'follows.followee_id'))
        .executeTakeFirst();
    },

    async exists(followeeId: number, followerId: number): Promise<boolean> {
      const row = await db
        .selectFrom('follows')
        .select('follower_id')
        .where('followee_id', '=', followeeId)
        .where('follower_id', '=', followerId)
        .executeTakeFirst();
      return row !== undefined;
    },

    /** The follower's user row as `viewer` sees it, counters included (a new follow answers it). */
    followerRow(followerId: number, viewer: Viewer): Promise<PublicUserRow> {
      return db.selectFrom('users').select(USER_COLUMNS).select(visiblePostCount(viewer)).where('id', '=', followerId).executeTakeFirstOrThrow();
    },

    /** Throws the driver's unique violation when the relation exists, its foreign key violation when a user is gone. */
    async insert(followeeId: number, followerId: number, now: string): Promise<void> {
      await db.insertInto('follows').values({ follower_id: followerId, followee_id: followeeId, created_at: now }).execute();
    },

    /** True when the relation existed and is now gone. */
    async remove(followeeId: number, followerId: number): Promise<boolean> {
      const result = await db
        .deleteFrom('follows')
        .where('followee_id', '=', followeeId)
        .where('follower_id', '=', followerId)
        .executeTakeFirst();
      return result.numDeletedRows > 0n;
    },

    /**
     * Moves both counters of one relation by `delta` (atomic `col = col ± 1`; the caller has locked both rows). A
     * suspended account's relations are out of the other side's counter while the suspension stands (see
     * suspensions.service.ts), so that side's counter stays.
     */
    async adjustCounts(followeeId: number, followerId: number, delta: 1 | -1, suspended: ReadonlySet<number> = new Set()): Promise<void> {
      const op = delta > 0 ? '+' : '-';
      if (!suspended.has(followerId)) {
        await db.updateTable('users').set((eb) => ({ follower_count: eb('follower_count', op, 1) })).where('id', '=', followeeId).execute();
      }
      if (!suspended.has(followeeId)) {
        await db.updateTable('users').set((eb) => ({ following_count: eb('following_count', op, 1) })).where('id', '=', followerId).execute();
      }
    },

    /**
     * Records that the posts `followeeId` has now must enter the home feed of `followerId`: the fan-out worker writes
     * their entries after the follow commits (feed.fanout.ts), and until it has, feed reads take them from `posts`
     * (feed.repository.ts). Visibility is applied when the feed is read, so all of them.
     */
    async queueBackfill(followeeId: number, followerId: number): Promise<void> {
      await db.insertInto('feed_backfill').values({ user_id: followerId, owner_id: followeeId }).onConflict((oc) => oc.doNothing()).execute();
    },

    /** Drops every post of `followeeId` from the home feed of `followerId`, written or still to be written. */
    async removePostsFromFeed(followeeId: number, followerId: number): Promise<void> {
      await db.deleteFrom('feed_entries').where('user_id', '=', followerId).where('owner_id', '=', followeeId).execute();
      await db.deleteFrom('feed_backfill').where('user_id', '=', followerId).where('owner_id', '=', followeeId).execute();
    },
  };
}

export type FollowersRepository = ReturnType<typeof createFollowersRepository>;
