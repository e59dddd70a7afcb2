import type { Store, Tx } from '../../db/store.js';
import { constraintKind } from '../../db/errors.js';
import { AppError } from '../../shared/errors.js';
import { PROBLEM_TYPES } from '../../shared/problems.js';
import type { PublicUserRow, Viewer } from '../../shared/visibility.js';
import { notifyFollow, unnotifyFollows } from '../notifications/notifications.service.js';
import { blockBetween } from '../blocks/blocks.repository.js';
import { suspendedAmong } from '../suspensions/suspensions.repository.js';
import { createFollowersRepository, type FollowPair } from './followers.repository.js';

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
    return (await removeFollows(tx, [{ followeeId, followerId }])).length > 0;
  });
}

/**
 * Removes the follows between `a` and `b`, both ways, inside `tx` (both users' rows already locked): what a block
 * does (CONTRACT §9).
 */
export async function removeFollowsBetween(tx: Tx, a: number, b: number): Promise<void> {
  await removeFollows(tx, [{ followeeId: a, followerId: b }, { followeeId: b, followerId: a }]);
}

/**
 * Removes follow relations inside `tx` (their users' rows already locked): the rows, the counters, the feed
 * entries, the queued backfills and the `follow` notifications. Each step takes one statement for all the pairs,
 * except the counters and the feed entries (one user's and one feed's each). Answers the pairs that existed.
 */
async function removeFollows(tx: Tx, pairs: readonly FollowPair[]): Promise<FollowPair[]> {
  const follows = createFollowersRepository(tx.db);
  const removed = await follows.remove(pairs);
  if (removed.length === 0) return removed;
  const users = await follows.usersOf([...new Set(removed.flatMap((p) => [p.followeeId, p.followerId]))]);
  for (const { followeeId, followerId } of removed) {
    await follows.adjustCounts(followeeId, followerId, -1, users.suspended);
    await follows.removePostsFromFeed(followeeId, followerId, users.posts.get(followeeId) ?? 0);
  }
  await follows.removeBackfills(removed);
  await unnotifyFollows(tx, removed); // notifications (CONTRACT §10)
  return removed;
}
