import type { Store, Tx } from '../../db/store.js';
import { constraintKind } from '../../db/errors.js';
import { AppError } from '../../shared/errors.js';
import { PROBLEM_TYPES } from '../../shared/problems.js';
import type { PublicUserRow, Viewer } from '../../shared/visibility.js';
import { notifyFollow, unnotifyFollow } from '../notifications/notifications.service.js';
import { blockBetween } from '../blocks/blocks.repository.js';
import { suspendedAmong } from '../suspensions/suspensions.repository.js';
import { createFollowersRepository } from './followers.repository.js';

/**
 * `followerId` starts following `followeeId`, inside the caller's transaction: the relation, both counters and the
 * follower's home feed (the followee's existing posts, queued for the fan-out worker to write after this commits;
 * feed reads merge them from `posts` until it has). Answers the follower's row with its counters already moved.
 *
 * Both users' rows are locked first, in ascending id order (A follows B while B follows A cannot deadlock). The
 * worker's backfill locks the same two rows, so it writes the entries of every post the followee has by then, and
 * a post created later is fanned out to the relation like any other. A block between the two, either way, is a 403
 * (CONTRACT §9); the block's own transaction locks the same two rows, so a follow and a block never cross. The
 * primary key is the arbiter of duplicates: of two identical requests racing, one inserts and the other gets the
 * unique violation (409) and changes nothing. A user deleted meanwhile surfaces as a missing row or a foreign key
 * violation (404). Each error undoes the transaction.
 */
export async function follow(tx: Tx, followeeId: number, followerId: number, viewer: Viewer): Promise<PublicUserRow> {
  try {
    if ((await tx.lockRows('users', [followeeId, followerId])).length < 2) throw AppError.notFound('user');
    if (await blockBetween(tx.db, followeeId, followerId)) {
      throw AppError.forbidden('A block stands between these two users: neither may follow the other', PROBLEM_TYPES.blocked);
    }
    const follows = createFollowersRepository(tx.db);
    await follows.insert(followeeId, followerId, new Date().toISOString());
    await follows.adjustCounts(followeeId, followerId, 1, await suspendedAmong(tx.db, [followeeId, followerId]));
    await follows.queueBackfill(followeeId, followerId);
    await notifyFollow(tx, followerId, followeeId); // notifications (CONTRACT §10)
    return await follows.followerRow(followerId, viewer);
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
export async function unfollow(store: Store, followeeId: number, followerId: number): Promise<boolean> {
  return store.transaction(async (tx) => {
    await tx.lockRows('users', [followeeId, followerId]);
    return removeFollow(tx, followeeId, followerId);
  });
}

/**
 * Removes one follow relation inside `tx` (both users' rows already locked): the row, both counters, the feed
 * entries. False when there was none. Shared by unfollowing and blocking (which removes the follows both ways).
 */
export async function removeFollow(tx: Tx, followeeId: number, followerId: number): Promise<boolean> {
  const follows = createFollowersRepository(tx.db);
  if (!(await follows.remove(followeeId, followerId))) return false;
  await follows.adjustCounts(followeeId, followerId, -1, await suspendedAmong(tx.db, [followeeId, followerId]));
  await follows.removePostsFromFeed(followeeId, followerId);
  await unnotifyFollow(tx, followerId, followeeId); // notifications (CONTRACT §10)
  return true;
}
