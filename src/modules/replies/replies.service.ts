import type { Kysely } from 'kysely';
import { isForeignKeyViolation } from '../../db/errors.js';
import { inTransaction } from '../../db/transaction.js';
import type { Database, ReplyRow } from '../../db/types.js';
import { createRepliesRepository } from './replies.repository.js';
import { nowIso } from '../../shared/clock.js';

/**
 * Inserts a reply and counts it on its post in one transaction. Returns undefined when the post (or the author)
 * was deleted after the caller's visibility check: the foreign key rejects the insert and the route answers 404.
 * On PostgreSQL the insert takes a key-share lock on the post row, so the post cannot vanish between the insert
 * and the counter update; the update changes no key, so it never waits on another replier.
 */
export async function createReply(
  db: Kysely<Database>,
  input: { postId: number; authorId: number; content: string },
): Promise<ReplyRow | undefined> {
  try {
    return await inTransaction(db, async (trx) => {
      const replies = createRepliesRepository(trx);
      const row = await replies.insert({
        post_id: input.postId,
        author_id: input.authorId,
        content: input.content,
        created_at: nowIso(),
      });
      await replies.addToReplyCount(input.postId, 1);
      return row;
    });
  } catch (error) {
    if (isForeignKeyViolation(error)) return undefined;
    throw error;
  }
}

/**
 * Deletes a reply and uncounts it in one transaction. False when there was no row to delete (never there, or a
 * concurrent delete won): the counter is then left alone, so two racing deletes decrement it once.
 */
export async function deleteReply(db: Kysely<Database>, postId: number, id: number): Promise<boolean> {
  return inTransaction(db, async (trx) => {
    const replies = createRepliesRepository(trx);
    if (!(await replies.remove(postId, id))) return false;
    await replies.addToReplyCount(postId, -1);
    return true;
  });
}
