import { constraintKind } from '../../db/errors.js';
import { AppError } from '../../shared/errors.js';
import type { Store, Tx } from '../../db/store.js';
import type { PublicUserRow, Viewer } from '../../shared/visibility.js';
import { notifyRecommend, unnotifyRecommend } from '../notifications/notifications.service.js';
import { suspendedAmong } from '../suspensions/suspensions.repository.js';
import { createRecommendsRepository } from './recommends.repository.js';

/**
 * Records that a user recommends a post and counts it, inside the caller's transaction, and answers the recommender
 * as `viewer` sees them. The primary key (post_id, user_id) decides between two identical requests racing: one
 * inserts, the other gets the unique violation (on PostgreSQL it waits for the first to commit), a 409, so the
 * counter moves once. The post or the user deleted after the caller's checks (the foreign key rejected the insert),
 * or the user suspended meanwhile, is a 404 naming the post. Either error undoes the transaction.
 */
export async function createRecommend(tx: Tx, postId: number, userId: number, viewer: Viewer): Promise<PublicUserRow> {
  const gone = () => AppError.notFound('post');
  try {
    const recommends = createRecommendsRepository(tx.db);
    // Suspended while this request was on its way: the account is gone for everyone but admins.
    if ((await suspendedAmong(tx.db, [userId])).size > 0) throw gone();
    await recommends.insert({ post_id: postId, user_id: userId, created_at: new Date().toISOString() });
    await recommends.addToRecommendCount(postId, 1);
    const user = await recommends.findRecommender(postId, userId, viewer);
    // Suspended (or the post hidden) by a transaction that committed since the check above: undone, as gone.
    if (!user) throw gone();
    await notifyRecommend(tx, userId, postId); // notifications (CONTRACT §10)
    return user;
  } catch (error) {
    const kind = constraintKind(error);
    if (kind === 'unique') throw AppError.conflict('id', 'already recommends this post');
    if (kind === 'foreign_key') throw gone();
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
