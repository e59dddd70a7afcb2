import type { Kysely } from 'kysely';
import { constraintKind } from '../../db/errors.js';
import { inTransaction } from '../../db/transaction.js';
import type { Database } from '../../db/types.js';
import type { PublicUserRow } from '../users/users.repository.js';
import { createRecommendsRepository } from './recommends.repository.js';
import { nowIso } from '../../shared/clock.js';

export type CreateRecommendResult =
  | { outcome: 'created'; user: PublicUserRow }
  | { outcome: 'duplicate' }
  | { outcome: 'gone' };

/**
 * Records that a user recommends a post and counts it, in one transaction. The primary key (post_id, user_id)
 * decides between two identical requests racing: one inserts, the other gets the unique violation (on PostgreSQL
 * it waits for the first to commit) and is reported as a duplicate, so the counter moves once.
 * `gone`: the post or the user was deleted after the caller's checks (the foreign key rejected the insert).
 */
export async function createRecommend(db: Kysely<Database>, postId: number, userId: number): Promise<CreateRecommendResult> {
  try {
    return await inTransaction(db, async (trx) => {
      const recommends = createRecommendsRepository(trx);
      await recommends.insert({ post_id: postId, user_id: userId, created_at: nowIso() });
      await recommends.addToRecommendCount(postId, 1);
      const user = await recommends.findRecommender(postId, userId);
      if (!user) throw new Error('a recommend just inserted is not readable in its own transaction');
      return { outcome: 'created', user };
    });
  } catch (error) {
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
export async function deleteRecommend(db: Kysely<Database>, postId: number, userId: number): Promise<boolean> {
  return inTransaction(db, async (trx) => {
    const recommends = createRecommendsRepository(trx);
    if (!(await recommends.remove(postId, userId))) return false;
    await recommends.addToRecommendCount(postId, -1);
    return true;
  });
}
