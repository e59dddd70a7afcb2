import type { Store, Tx } from '../../db/store.js';
import type { ReplyRow } from '../../db/types.js';
import { updatedAfter, type Precondition } from '../../shared/conditional.js';
import { notifyReply, replyEdited } from '../notifications/notifications.service.js';
import { suspendedAmong } from '../suspensions/suspensions.repository.js';
import { createRepliesRepository } from './replies.repository.js';

/**
 * Counts a reply on its post and inserts it inside the caller's transaction. Returns undefined when the post (or
 * the author) was deleted after the caller's visibility check, and the route answers 404.
 * On PostgreSQL the post's counter is its row lock: the repliers of one post take it one at a time, and each draws
 * its id and its time after it, so a post's replies carry createdAt in id order (oldest first by either), as on
 * SQLite. The author's row is held first, as the insert's foreign key would hold it: users before posts.
 */
export async function createReply(tx: Tx, input: { postId: number; authorId: number; content: string }): Promise<ReplyRow | undefined> {
  const replies = createRepliesRepository(tx.db);
  // Both rows the insert refers to are held from here on, so its foreign keys cannot fail.
  if ((await tx.shareRows('users', [input.authorId])).length === 0) return undefined;
  // Suspended while this request was on its way: the account is gone for everyone but admins.
  if ((await suspendedAmong(tx.db, [input.authorId])).size > 0) return undefined;
  if (!(await replies.addToReplyCount(input.postId, 1))) return undefined;
  const row = await replies.insert({
    post_id: input.postId,
    author_id: input.authorId,
    content: input.content,
    created_at: new Date().toISOString(),
  });
  await notifyReply(tx, row); // notifications (CONTRACT §10)
  return row;
}

/**
 * Deletes a reply and uncounts it in one transaction. False when there was no row to delete (never there, or a
 * concurrent delete won): the counter is then left alone, so two racing deletes decrement it once.
 */
export async function deleteReply(store: Store, postId: number, id: number, options: { ifMatch?: Precondition } = {}): Promise<boolean> {
  return store.transaction(async (tx) => {
    const { db } = tx;
    // Notifications: the post's row before the cascade takes the notification log's counter (lock order in
    // notifications.service.ts), as createReply takes them.
    await tx.lockRows('posts', [postId]);
    if (!(await lockForPrecondition(tx, id, options.ifMatch))) return false;
    const replies = createRepliesRepository(db);
    const author = await replies.remove(postId, id);
    if (author === undefined) return false;
    // A suspended author's replies are out of the counter already (suspensions.service.ts).
    if (!(await suspendedAmong(db, [author])).has(author)) await replies.addToReplyCount(postId, -1);
    return true;
  });
}

/** Replaces a reply's content; undefined when it is gone. */
export function replaceReply(
  store: Store,
  postId: number,
  id: number,
  content: string,
  options: { ifMatch?: Precondition } = {},
): Promise<ReplyRow | undefined> {
  return store.transaction(async (tx) => {
    const checked = await lockForPrecondition(tx, id, options.ifMatch);
    if (!checked) return undefined;
    const row = await createRepliesRepository(tx.db).update(postId, id, { content, updated_at: updatedAfter(checked.seen) });
    if (row) await replyEdited(tx, row); // notifications (CONTRACT §10)
    return row;
  });
}

/**
 * With an If-Match precondition (CONTRACT §6.1), locks the reply's row and runs it, so check and write are one
 * atomic step: `seen` is the matched representation's updatedAt. Undefined when the row is gone. Without a
 * precondition there is nothing to do.
 */
async function lockForPrecondition(tx: Tx, id: number, ifMatch: Precondition | undefined): Promise<{ seen?: string } | undefined> {
  if (!ifMatch) return {};
  if ((await tx.lockRows('replies', [id])).length === 0) return undefined;
  return { seen: await ifMatch(tx.db) };
}
