import type { Kysely } from 'kysely';
import type { Database } from '../../db/types.js';
import { inTransaction } from '../../db/transaction.js';
import { constraintKind } from '../../db/errors.js';
import { AppError } from '../../shared/errors.js';
import { USER_COLUMNS, type PublicUserRow } from '../users/users.repository.js';
import { createFollowersRepository } from './followers.repository.js';
import { nowIso } from '../../shared/clock.js';

/**
 * `followerId` starts following `followeeId`, in one transaction: the relation, both counters and the follower's
 * home feed (every existing post of the followee). Answers the follower's row with its counters already moved.
 *
 * The primary key is the arbiter of duplicates: of two identical requests racing, one inserts and the other gets
 * the unique violation (409) and changes nothing. A user deleted meanwhile surfaces as a foreign key violation
 * (404). The counters are moved before the feed is filled, so the followee's row is locked (on PostgreSQL) while
 * its posts are read: a post created concurrently is either seen here or, once this commits, sees the relation.
 */
export async function follow(db: Kysely<Database>, followeeId: number, followerId: number): Promise<PublicUserRow> {
  try {
    return await inTransaction(db, async (trx) => {
      const follows = createFollowersRepository(trx);
      await follows.insert(followeeId, followerId, nowIso());
      await follows.adjustCounts(followeeId, followerId, 1);
      await follows.addPostsToFeed(followeeId, followerId);
      return trx.selectFrom('users').select(USER_COLUMNS).where('id', '=', followerId).executeTakeFirstOrThrow();
    });
  } catch (error) {
    switch (constraintKind(error)) {
      case 'unique':
        throw AppError.conflict('id', 'already follows this user');
      case 'foreign_key':
        throw AppError.notFound('user');
      default:
        throw error;
    }
  }
}

/**
 * Ends the relation in one transaction: the row, both counters and the followee's posts in the follower's feed.
 * False when there was no such relation (also when a concurrent unfollow got there first: only one of them moves
 * the counters).
 */
export async function unfollow(db: Kysely<Database>, followeeId: number, followerId: number): Promise<boolean> {
  return inTransaction(db, async (trx) => {
    const follows = createFollowersRepository(trx);
    if (!(await follows.remove(followeeId, followerId))) return false;
    await follows.adjustCounts(followeeId, followerId, -1);
    await follows.removePostsFromFeed(followeeId, followerId);
    return true;
  });
}
