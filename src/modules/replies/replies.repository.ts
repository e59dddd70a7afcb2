import type { Kysely } from 'kysely';
import type { Database, ReplyRow } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';
import { replyShownTo, type Viewer } from '../../shared/visibility.js';

/** Reply rows. Pass a transaction instead of `db` to use it inside one; it never throws HTTP errors. */
export function createRepliesRepository(db: Kysely<Database>) {
  return {
    /**
     * The reply if it exists, belongs to that post and `viewer` may see it (its author neither suspended nor across
     * a block: shared/visibility.ts). The caller has checked that the viewer may see the post.
     */
    findInPost(postId: number, id: number, viewer: Viewer): Promise<ReplyRow | undefined> {
      return db
        .selectFrom('replies')
        .selectAll()
        .where('replies.id', '=', id)
        .where('replies.post_id', '=', postId)
        .where(replyShownTo(viewer, { listing: false }))
        .executeTakeFirst();
    },

    /**
     * A post's replies that `viewer` is shown in a list (the viewer's mutes too), oldest first, `limit + 1` rows after
     * `after` (keyset over replies_post_id).
     */
    listByPost(postId: number, viewer: Viewer, options: { limit: number; after?: number }): Promise<ReplyRow[]> {
      let query = db
        .selectFrom('replies')
        .selectAll()
        .where('replies.post_id', '=', postId)
        .where(replyShownTo(viewer, { listing: true }))
        .orderBy('replies.id', 'asc')
        .limit(pageLimit(options.limit));
      if (options.after !== undefined) query = query.where('replies.id', '>', options.after);
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

    /** The author of the row removed; undefined when there was none to remove. */
    async remove(postId: number, id: number): Promise<number | undefined> {
      const row = await db.deleteFrom('replies').where('id', '=', id).where('post_id', '=', postId).returning('author_id').executeTakeFirst();
      return row === undefined ? undefined : Number(row.author_id);
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
