import type { Kysely } from 'kysely';
import type { Database } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';
import { USER_COLUMNS, accountShownTo, blockBetween, isSuspended, mutes, userShownTo, userColumns, type PublicUserRow, type Viewer } from '../../shared/visibility.js';

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
        .select(userColumns(viewer))
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
        .select(userColumns(viewer))
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
        .select(userColumns(viewer))
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

    /**
     * What a new follow must know, read in one statement once both users' rows are locked (on PostgreSQL a statement
     * run after the lock sees every block, mute and suspension committed before it): the follower's row as the
     * follower themself or an admin sees it (the post count is the full one: the answer's viewer is one of them),
     * whether either user is suspended, whether a block stands between them either way, and whether the followee
     * mutes the follower (then the followee is not told, CONTRACT §10). Undefined when the follower is gone.
     */
    async followFacts(followeeId: number, followerId: number): Promise<FollowFacts | undefined> {
      const row = await db
        .selectFrom('users')
        .select(USER_COLUMNS)
        .select('users.post_count')
        .select((eb) => [
          // The rule's own predicates (shared/visibility.ts); the row is the follower's.
          isSuspended(followeeId)(eb).as('followee_suspended'),
          isSuspended('users.id')(eb).as('follower_suspended'),
          blockBetween(followeeId, 'users.id')(eb).as('blocked'),
          mutes(followeeId, followerId)(eb).as('muted'),
        ])
        .where('users.id', '=', followerId)
        .executeTakeFirst();
      if (!row) return undefined;
      const { followee_suspended, follower_suspended, blocked, muted, ...follower } = row;
      const suspended = new Set<number>();
      if (followee_suspended) suspended.add(followeeId);
      if (follower_suspended) suspended.add(followerId);
      return { follower: follower as PublicUserRow, suspended, blocked: Boolean(blocked), muted: Boolean(muted) };
    },

    /** Throws the driver's unique violation when the relation exists, its foreign key violation when a user is gone. */
    async insert(followeeId: number, followerId: number, now: string): Promise<void> {
      await db.insertInto('follows').values({ follower_id: followerId, followee_id: followeeId, created_at: now }).execute();
    },

    /** Deletes the relations of `pairs` in one statement; answers those that existed (now gone). */
    async remove(pairs: readonly FollowPair[]): Promise<FollowPair[]> {
      if (pairs.length === 0) return [];
      const rows = await db
        .deleteFrom('follows')
        .where((eb) => eb.or(pairs.map((p) => eb.and([eb('followee_id', '=', p.followeeId), eb('follower_id', '=', p.followerId)]))))
        .returning(['followee_id', 'follower_id'])
        .execute();
      return rows.map((row) => ({ followeeId: Number(row.followee_id), followerId: Number(row.follower_id) }));
    },

    /**
     * What ending a follow needs to know of its users, in one statement: which are suspended (their counters stay,
     * see adjustCounts) and how many posts each has (removePostsFromFeed).
     */
    async usersOf(ids: readonly number[]): Promise<{ suspended: Set<number>; posts: Map<number, number> }> {
      const rows = await db
        .selectFrom('users')
        .leftJoin('suspensions', 'suspensions.user_id', 'users.id')
        .select(['users.id', 'users.post_count', 'suspensions.user_id as suspended'])
        .where('users.id', 'in', [...ids])
        .execute();
      return {
        suspended: new Set(rows.filter((row) => row.suspended !== null).map((row) => Number(row.id))),
        posts: new Map(rows.map((row) => [Number(row.id), Number(row.post_count)])),
      };
    },

    /**
     * Moves both counters of one relation by `delta` (atomic `col = col ± 1`; the caller has locked both rows), in one
     * statement. A suspended account's relations are out of the other side's counter while the suspension stands
     * (see suspensions.service.ts), so that side's counter stays.
     */
    async adjustCounts(followeeId: number, followerId: number, delta: 1 | -1, suspended: ReadonlySet<number> = new Set()): Promise<void> {
      await moveCounts(db, followeeId, followerId, delta, suspended);
    },

    /**
     * adjustCounts for a new follow, answering the follower's counters as the update left them: a follow holds the
     * two rows only against blocks, suspensions and unfollows (see follow), so another follow of the same follower
     * may have moved them since it read the row.
     */
    async countFollow(followeeId: number, followerId: number, suspended: ReadonlySet<number>): Promise<{ follower_count: number; following_count: number } | undefined> {
      const rows = await moveCounts(db, followeeId, followerId, 1, suspended);
      return rows.find((row) => Number(row.id) === followerId);
    },

    /**
     * Records that the posts `followeeId` has now must enter the home feed of `followerId`: the fan-out worker writes
     * their entries after the follow commits (feed.fanout.ts), and until it has, feed reads take them from `posts`
     * (feed.repository.ts). Visibility is applied when the feed is read, so all of them.
     */
    async queueBackfill(followeeId: number, followerId: number): Promise<void> {
      await db.insertInto('feed_backfill').values({ user_id: followerId, owner_id: followeeId }).onConflict((oc) => oc.doNothing()).execute();
    },

    /**
     * Drops every written post of `followeeId` from the home feed of `followerId` (`followeePosts`: how many posts
     * the followee has). The feed's key (user_id, post_id) has no owner, and an index with one would cost every
     * fan-out write a random page (see the migration), so `owner_id = ?` alone walks the follower's whole feed.
     * For a followee with at most FEED_PROBED_POSTS posts the delete looks up one feed key per post of theirs
     * instead (through posts_owner_id): the walk grows with the follower's feed, the probes with the followee's
     * posts, and a follower's feed holds the posts of all their followees (bench/README.md, the `block` row).
     */
    async removePostsFromFeed(followeeId: number, followerId: number, followeePosts: number): Promise<void> {
      let entries = db.deleteFrom('feed_entries').where('user_id', '=', followerId).where('owner_id', '=', followeeId);
      if (followeePosts <= FEED_PROBED_POSTS) {
        entries = entries.where('post_id', 'in', db.selectFrom('posts').select('posts.id').where('posts.owner_id', '=', followeeId));
      }
      await entries.execute();
    },

    /** Drops the backfills still queued for `pairs` (posts of the followee yet to enter the follower's feed). */
    async removeBackfills(pairs: readonly FollowPair[]): Promise<void> {
      if (pairs.length === 0) return;
      await db
        .deleteFrom('feed_backfill')
        .where((eb) => eb.or(pairs.map((p) => eb.and([eb('user_id', '=', p.followerId), eb('owner_id', '=', p.followeeId)]))))
        .execute();
    },
  };
}

/**
 * Moves both counters of a relation by `delta`, a statement per row in ascending id order; a suspended side's
 * counterpart stays (see adjustCounts). Both rows are updated (by 0 where nothing moves): countFollow reads the
 * follower's back. The order is what keeps concurrent follows of the same two users (A→B beside B→A) from
 * deadlocking on PostgreSQL: they hold the rows only in key-share mode until here (see follow), and one UPDATE of
 * both rows locked them in the order its plan met them (a sequential or bitmap scan: the heap's order, which
 * changes as rows are rewritten), which the CI run of b896880 caught as a deadlock.
 */
async function moveCounts(db: Kysely<Database>, followeeId: number, followerId: number, delta: 1 | -1, suspended: ReadonlySet<number>) {
  const moves = [
    { id: followeeId, followers: suspended.has(followerId) ? 0 : delta, following: 0 }, // the followee's follower_count
    { id: followerId, followers: 0, following: suspended.has(followeeId) ? 0 : delta }, // the follower's following_count
  ].sort((a, b) => a.id - b.id);
  const rows: Array<{ id: number; follower_count: number; following_count: number }> = [];
  for (const move of moves) {
    const row = await db
      .updateTable('users')
      .set((eb) => ({ follower_count: eb('follower_count', '+', move.followers), following_count: eb('following_count', '+', move.following) }))
      .where('id', '=', move.id)
      .returning(['id', 'follower_count', 'following_count'])
      .executeTakeFirst();
    if (row) rows.push(row);
  }
  return rows;
}

/** What a follow reads of its two users under their locks (followFacts). */
export interface FollowFacts {
  /** The follower's row, counters as they were before the follow. */
  follower: PublicUserRow;
  /** Which of the two users are suspended. */
  suspended: Set<number>;
  /** A block stands between the two, either way. */
  blocked: boolean;
  /** The followee mutes the follower. */
  muted: boolean;
}

/** One follow relation. */
export interface FollowPair {
  followeeId: number;
  followerId: number;
}

/** Up to this many posts of a followee, their feed entries are deleted by key (removePostsFromFeed). */
export const FEED_PROBED_POSTS = 1000;

export type FollowersRepository = ReturnType<typeof createFollowersRepository>;
