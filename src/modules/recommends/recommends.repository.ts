import type { Kysely } from 'kysely';
import type { Database } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';
import { recommenderShownTo, userColumns, type PublicUserRow, type Viewer } from '../../shared/visibility.js';

/** Recommend rows (post, user). Pass a transaction instead of `db` to use it inside one. */
export function createRecommendsRepository(db: Kysely<Database>) {
  const recommenders = (postId: number, viewer: Viewer) =>
    db
      .selectFrom('recommends')
      .innerJoin('users', 'users.id', 'recommends.user_id')
      .select(userColumns(viewer))
      .where('recommends.post_id', '=', postId)
      // Recommenders `viewer` may see: neither suspended nor across a block (shared/visibility.ts).
      .where(recommenderShownTo(viewer));

  return {
    /** The user, if they recommended the post. */
    findRecommender(postId: number, userId: number, viewer: Viewer): Promise<PublicUserRow | undefined> {
      return recommenders(postId, viewer).where('recommends.user_id', '=', userId).executeTakeFirst();
    },

    /** The users who recommended a post in user id order, `limit + 1` rows after `after` (keyset over the primary key). */
    listRecommenders(postId: number, viewer: Viewer, options: { limit: number; after?: number }): Promise<PublicUserRow[]> {
      let query = recommenders(postId, viewer).orderBy('recommends.user_id', 'asc').limit(pageLimit(options.limit));
      if (options.after !== undefined) query = query.where('recommends.user_id', '>', options.after);
      return query.execute();
    },

    /** Throws the driver's unique violation when the user already recommends the post. */
    async insert(values: { post_id: number; user_id: number; created_at: string }): Promise<void> {
      await db.insertInto('recommends').values(values).execute();
    },

    /** True when the row was there to remove. */
    async remove(postId: number, userId: number): Promise<boolean> {
      const result = await db
        .deleteFrom('recommends')
        .where('post_id', '=', postId)
        .where('user_id', '=', userId)
        .executeTakeFirst();
      return result.numDeletedRows > 0n;
    },

    /** Moves the post's recommend counter by `delta` (an atomic `recommend_count = recommend_count ± 1`). */
    async addToRecommendCount(postId: number, delta: 1 | -1): Promise<void> {
      await db
        .updateTable('posts')
        .set((eb) => ({ recommend_count: eb('recommend_count', '+', delta) }))
        .where('id', '=', postId)
        .execute();
    },
  };
}

export type RecommendsRepository = ReturnType<typeof createRecommendsRepository>;
