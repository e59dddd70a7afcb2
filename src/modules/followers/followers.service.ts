import type { Store, Tx } from '../../db/store.js';
import { constraintKind } from '../../db/errors.js';
import { AppError } from '../../shared/errors.js';
import { PROBLEM_TYPES } from '../../shared/problems.js';
import type { PublicUserRow, Viewer } from '../../shared/visibility.js';
import { notifyFollow, unnotifyFollows } from '../notifications/notifications.service.js';
import { createFollowersRepository, type FollowPair } from './followers.repository.js';

/**
 * `followerId` starts following `followeeId`, inside the caller's transaction: the relation, both counters and the
 * follower's home feed (the followee's existing posts, queued for the fan-out worker to write after this commits;
 * feed reads merge them from `posts` until it has). Answers the follower's row with its counters already moved, as
 * `viewer` sees it: the follower themself or an admin (the route lets no one else ask), who see the full post count.
 *
 * Both users' rows are held first, in ascending id order, as a foreign key holds them (`shareRows`): every
 * transaction that could change what a follow must respect locks them outright (`lockRows`) and so waits for the
 * follow, or is waited for: a block between the two, either way, which is a 403 (CONTRACT §9), a mute, a
 * suspension, an unfollow, the deletion of either user, and the worker's backfill, which then writes the entries of
 * every post the followee has by then (a post created later is fanned out to the relation like any other). Other
 * follows of the same users do not wait for this one until the counters: a popular user followed by many at once
 * would otherwise take them one at a time for the whole of each follow. The counters are the last statement, so a
 * follow holds the followee's row for that statement and the commit only. A followee that does not exist for `viewer`
 * (gone, or suspended and `viewer` no admin) is a 404. The primary key is the arbiter of duplicates: of two identical
 * requests racing, one inserts and the other gets the unique violation (409) and changes nothing. A user deleted
 * meanwhile surfaces as a missing row or a foreign key violation (404). Each error undoes the transaction.
 *
 * What the follow must know (the follower's row, suspensions, a block, a mute) is one read once the rows are held.
 */
export async function follow(tx: Tx, followeeId: number, followerId: number, viewer: Viewer): Promise<PublicUserRow> {
  try {
    if ((await tx.shareRows('users', [followeeId, followerId])).length < 2) throw AppError.notFound('user');
    const follows = createFollowersRepository(tx.db);
    const facts = await follows.followFacts(followeeId, followerId);
    if (!facts) throw AppError.notFound('user');
    if (facts.suspended.has(followeeId) && viewer?.role !== 'admin') throw AppError.notFound('user');
    if (facts.blocked) {
      throw AppError.forbidden('A block stands between these two users: neither may follow the other', PROBLEM_TYPES.blocked);
    }
    await follows.insert(followeeId, followerId, new Date().toISOString());
    await follows.queueBackfill(followeeId, followerId);
    await notifyFollow(tx, followerId, followeeId, facts.muted); // notifications (CONTRACT §10)
    const counts = await follows.countFollow(followeeId, followerId, facts.suspended);
    return { ...facts.follower, ...counts };
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
