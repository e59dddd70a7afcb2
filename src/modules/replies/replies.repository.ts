import type { Kysely } from 'kysely';
import type { Database, ReplyRow } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';

/** Reply rows. Pass a transaction instead of `db` to use it inside one; it never throws HTTP errors. */
export function createRepliesRepository(db: Kysely<Database>) {
  return {
    /** The reply if it exists and belongs to that post. */
    findInPost(postId: number, id: number): Promise<ReplyRow | undefined> {
      return db.selectFrom('replies').selectAll().where('id', '=', id).where('post_id', '=', postId).executeTakeFirst();
    },

    /** A post's replies oldest first, `limit + 1` rows after `after` (keyset over replies_post_id). */
    listByPost(postId: number, options: { limit: number; after?: number }): Promise<ReplyRow[]> {
      let query = db.selectFrom('replies').selectAll().where('post_id', '=', postId).orderBy('id', 'asc').limit(pageLimit(options.limit));
      if (options.after !== undefined) query = query.where('id', '>', options.after);
      return query.execute();
    },

    insert(values: { post_id: number; author_id: number; content: string; created_at: string }): Promise<ReplyRow> {
      return db
        .insertInto('replies')
        .values({ ...values, updated_at: values.created_at })
        .returningAll()
        .executeTakeFirstOrThrow();
    },

    update(postId: number, id: number, values: { content: string; updated_at: string }): Promise<ReplyRow | undefined> {
      return db
        .updateTable('replies')
        .set(values)
        .where('id', '=', id)
        .where('post_id', '=', postId)
        .returningAll()
        .executeTakeFirst();
    },

    /** True when the row was there to remove. */
    async remove(postId: number, id: number): Promise<boolean> {
      const result = await db.deleteFrom('replies').where('id', '=', id).where('post_id', '=', postId).executeTakeFirst();
      return result.numDeletedRows > 0n;
    },

    /** Moves the post's reply counter by `delta` (an atomic `reply_count = reply_count ± 1`); false when the post is gone. */
    async addToReplyCount(postId: number, delta: 1 | -1): Promise<boolean> {
      const result = await db
        .updateTable('posts')
        .set((eb) => ({ reply_count: eb('reply_count', '+', delta) }))
        .where('id', '=', postId)
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    },
  };
}

export type RepliesRepository = ReturnType<typeof createRepliesRepository>;
