import { constraintKind } from '../../db/errors.js';
import type { Store, Tx } from '../../db/store.js';
import type { PostRow, Visibility } from '../../db/types.js';
import { updatedAfter, type Precondition } from '../../shared/conditional.js';
import { postWritten } from '../notifications/notifications.service.js';
import { indexPost } from '../search/search.repository.js';
import { createPostsRepository } from './posts.repository.js';

/**
 * Creates a post inside the caller's transaction: the post, which a trigger queues for the fan-out worker
 * (feed.fanout.ts) to write into the home feed of every follower (the worker hears of it once the transaction
 * commits; feeds merge queued posts, so the post is in them at once), its mentions, search entry and stream event,
 * and last the owner's post counters. Undefined when the owner does not exist.
 *
 * The counters come last because the UPDATE locks the owner's row until COMMIT, and every other create of the same
 * owner waits on it (PostgreSQL; issue 45): taken at the end, the lock covers what must be serial per owner (the
 * count, and createdAt in id order, see orderCreatedAt) and the COMMIT, not the inserts before them, which two
 * creates of one owner run side by side. The post's foreign key to its owner only shares the row (FOR KEY SHARE),
 * which the counter UPDATE does not wait for.
 */
export async function createPost(
  tx: Tx,
  ownerId: number,
  input: { title: string; content: string; visibility?: Visibility },
): Promise<PostRow | undefined> {
  const visibility = input.visibility ?? 'public';
  const posts = createPostsRepository(tx.db);
  const createdAt = new Date().toISOString();
  let post: PostRow;
  try {
    post = await posts.insert({ owner_id: ownerId, title: input.title, content: input.content, visibility, created_at: createdAt });
  } catch (error) {
    if (constraintKind(error) === 'foreign_key') return undefined; // no such owner
    throw error;
  }
  await postWritten(tx, post, true); // notifications of its mentions (CONTRACT §10), before the stream event
  await indexPost(tx, post, false); // search (CONTRACT §11): in the same transaction
  // The event records the post's id, owner and visibility, which orderCreatedAt below leaves as they are.
  await tx.recordPostChange({ kind: 'created', post });
  if (!(await posts.countPost(ownerId, visibility, 1))) return undefined;
  return posts.orderCreatedAt(post);
}

/**
 * Replaces a post's writable fields and moves the owner's per-visibility counters when its visibility changes.
 * The owner's row is locked before the post's (users before posts, everywhere). Undefined when the post is gone.
 * `ifMatch` (If-Match, CONTRACT §6.1) runs once both rows are locked, so check and write are one atomic step.
 */
export async function replacePost(
  store: Store,
  current: { id: number; owner_id: number },
  input: { title: string; content: string; visibility: Visibility },
  options: { ifMatch?: Precondition } = {},
): Promise<PostRow | undefined> {
  return store.transaction(async (tx) => {
    await tx.lockRows('users', [current.owner_id]);
    if ((await tx.lockRows('posts', [current.id])).length === 0) return undefined;
    await options.ifMatch?.(tx.db);
    const posts = createPostsRepository(tx.db);
    const previous = await posts.find(current.id);
    if (!previous) return undefined;
    // Strictly later than the last write: see Precondition.
    const post = await posts.update(current.id, { ...input, updated_at: updatedAfter(previous.updated_at) });
    if (!post) return undefined;
    // Search (CONTRACT §11): the new words, in the same transaction; visibility is checked when searching.
    if (previous.title !== post.title || previous.content !== post.content) await indexPost(tx, post, true);
    if (previous.visibility !== post.visibility) {
      await posts.countPost(post.owner_id, previous.visibility, -1);
      await posts.countPost(post.owner_id, post.visibility, 1);
    }
    await postWritten(tx, post, false); // notifications of its mentions (CONTRACT §10), before the stream event
    await tx.recordPostChange({ kind: 'updated', post, previous });
    return post;
  });
}

/**
 * Deletes a post in one transaction: its owner's row and the post's are locked first (so a concurrent reply or
 * recommend that points at it waits and then fails its foreign key instead of bumping a counter on a vanishing
 * row), the cascade removes its replies, recommends and feed entries, and the owner's counters go down by one.
 * False when the post is already gone. `ifMatch` runs once the rows are locked.
 */
export async function deletePost(
  store: Store,
  current: { id: number; owner_id: number },
  options: { ifMatch?: Precondition } = {},
): Promise<boolean> {
  return store.transaction(async (tx) => {
    await tx.lockRows('users', [current.owner_id]);
    if ((await tx.lockRows('posts', [current.id])).length === 0) return false;
    await options.ifMatch?.(tx.db);
    const posts = createPostsRepository(tx.db);
    // Its search entry goes with the row (db/search-sql.ts: a trigger on SQLite, the foreign key on PostgreSQL).
    const post = await posts.remove(current.id);
    if (!post) return false;
    await posts.countPost(post.owner_id, post.visibility, -1);
    await tx.recordPostChange({ kind: 'deleted', post });
    return true;
  });
}
