import type { Kysely } from 'kysely';
import type { Dialect } from '../../db/database.js';
import type { Database, PostRow, Visibility } from '../../db/types.js';
import { inTransaction, lockRow } from '../../db/transaction.js';
import { createPostsRepository } from './posts.repository.js';

/**
 * Creates a post in one transaction: the owner's post_count first, then the post, then its fan-out into the home
 * feed of every follower. Taking the owner's row lock first (the counter update) serialises this against a
 * concurrent follow of the owner, which updates the same row (follower_count) before it copies the owner's posts
 * into the new follower's feed: whichever commits second sees the other's rows, so no feed entry is lost.
 * Undefined when the owner does not exist (any more).
 */
export async function createPost(
  db: Kysely<Database>,
  ownerId: number,
  input: { title: string; content: string; visibility?: Visibility },
): Promise<PostRow | undefined> {
  return inTransaction(db, async (trx) => {
    const posts = createPostsRepository(trx);
    if (!(await posts.addToPostCount(ownerId, 1))) return undefined;
    const row = await posts.insert({
      owner_id: ownerId,
      title: input.title,
      content: input.content,
      visibility: input.visibility ?? 'public',
      created_at: new Date().toISOString(),
    });
    await posts.fanOut(row.id, ownerId);
    return row;
  });
}

/**
 * Deletes a post in one transaction: the post row is locked first (so a concurrent reply or recommend that points
 * at it waits and then fails its foreign key instead of bumping a counter on a vanishing row), the cascade removes
 * its replies, recommends and feed entries, and the owner's post_count goes down by one. False when the post is
 * already gone.
 */
export async function deletePost(db: Kysely<Database>, dialect: Dialect, id: number): Promise<boolean> {
  return inTransaction(db, async (trx) => {
    if (!(await lockRow(trx, dialect, 'posts', id))) return false;
    const posts = createPostsRepository(trx);
    const ownerId = await posts.remove(id);
    if (ownerId === undefined) return false;
    await posts.addToPostCount(ownerId, -1);
    return true;
  });
}
