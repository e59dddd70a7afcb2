import { constraintKind } from '../../db/errors.js';
import type { Store, Tx } from '../../db/store.js';
import type { PublicUserRow, Viewer } from '../../shared/visibility.js';
import { notifyRecommend, unnotifyRecommend } from '../notifications/notifications.service.js';
import { suspendedAmong } from '../suspensions/suspensions.repository.js';
import { createRecommendsRepository } from './recommends.repository.js';

export type CreateRecommendResult =
  | { outcome: 'created'; user: PublicUserRow }
  | { outcome: 'duplicate' }
  | { outcome: 'gone' };

/**
 * Records that a user recommends a post and counts it, in one transaction. The primary key (post_id, user_id)
 * decides between two identical requests racing: one inserts, the other gets the unique violation (on PostgreSQL
 * it waits for the first to commit) and is reported as a duplicate, so the counter moves once.
 * `gone`: the post or the user was deleted after the caller's checks (the foreign key rejected the insert).
 * `withinTransaction` runs last inside the transaction (an idempotent create keeps its answer there).
 */
/** Thrown inside the transaction to undo a recommend whose recommender can no longer be shown (see createRecommend). */
class RecommendGone extends Error {}

export async function createRecommend(
  store: Store,
  postId: number,
  userId: number,
  viewer: Viewer,
  withinTransaction?: (tx: Tx, user: PublicUserRow) => Promise<void>,
): Promise<CreateRecommendResult> {
  try {
    return await store.transaction(async (tx) => {
      const recommends = createRecommendsRepository(tx.db);
      // Suspended while this request was on its way: the account is gone for everyone but admins.
      if ((await suspendedAmong(tx.db, [userId])).size > 0) return { outcome: 'gone' };
      await recommends.insert({ post_id: postId, user_id: userId, created_at: new Date().toISOString() });
      await recommends.addToRecommendCount(postId, 1);
      const user = await recommends.findRecommender(postId, userId, viewer);
      // Suspended (or the post hidden) by a transaction that committed since the check above: undone, as gone.
      if (!user) throw new RecommendGone();
      await notifyRecommend(tx, userId, postId); // notifications (CONTRACT §10)
      await withinTransaction?.(tx, user);
      return { outcome: 'created', user };
    });
  } catch (error) {
    if (error instanceof RecommendGone) return { outcome: 'gone' };
    const kind = constraintKind(error);
    if (kind === 'unique') return { outcome: 'duplicate' };
    if (kind === 'foreign_key') return { outcome: 'gone' };
    throw error;
  }
}

/**
 * Removes a recommend and uncounts it in one transaction. False when there was none (never there, or a concurrent
 * delete won), in which case the counter is left alone.
 */
export async function deleteRecommend(store: Store, postId: number, userId: number): Promise<boolean> {
  return store.transaction(async (tx) => {
    const recommends = createRecommendsRepository(tx.db);
    if (!(await recommends.remove(postId, userId))) return false;
    // A suspended user's recommends are out of the counter already (suspensions.service.ts).
    if (!(await suspendedAmong(tx.db, [userId])).has(userId)) await recommends.addToRecommendCount(postId, -1);
    await unnotifyRecommend(tx, userId, postId); // notifications (CONTRACT §10)
    return true;
  });
}
