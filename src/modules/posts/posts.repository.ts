import { sql, type Kysely } from 'kysely';
import { matchingPosts, searchPage, type SearchTerm, type SearchWindow } from '../../db/search-sql.js';
import type { Database, PostRow, Visibility } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';
import { POST_COLUMNS, listedTo, visibleTo, type Viewer } from '../../shared/visibility.js';

export interface PageOptions {
  limit: number;
  /** The id after which the page starts (newest first: only smaller ids follow). */
  after?: number;
}

/** Search (CONTRACT §11): only the posts matching `terms` (search.query.ts), and only `ownerId`'s when given. */
export interface PostSearch {
  terms: readonly SearchTerm[];
  ownerId?: number;
}

/** The per-visibility counter on the owner's row that a post of this visibility is counted in, besides post_count. */
const VISIBILITY_COUNTER = { public: 'public_post_count', followers: 'followers_post_count', private: undefined } as const;

/**
 * Posts newest first. Every collection is keyset-paginated on the post id, descending, so a page is one index
 * range scan of `limit + 1` rows whatever its depth. The `*Query` builders are what the methods run; they are
 * exposed so that a test can EXPLAIN exactly the SQL a route executes. Pass a transaction's `db` to write.
 */
export function createPostsRepository(db: Kysely<Database>) {
  /**
   * GET /posts. Anonymous callers see public posts only, which the `(visibility, id)` index serves directly; a
   * signed-in caller walks the primary key backwards and filters each row through `visibleTo`, stopping after
   * `limit + 1` matches.
   *
   * For a member the predicate is an OR. Left bare, SQLite answers it with a MULTI-INDEX OR (one index per branch)
   * followed by a sort of every match below the cursor, so a page would cost as much as the whole table. Testing
   * the OR with `IS TRUE` (same truth table for a WHERE clause, standard SQL on both engines) turns it into a row
   * filter, and the ORDER BY is served by the primary key again. The EXPLAIN test in posts.test.ts pins this.
   */
  function listQuery(viewer: Viewer, { limit, after }: PageOptions, search?: PostSearch, window: SearchWindow = { below: after }) {
    let query = db.selectFrom('posts').select(POST_COLUMNS);
    // A listing: what the viewer may see (listedTo), less the posts of users they mute; a search (CONTRACT §11: blocks
    // and the caller's mutes apply), the user-posts one included, narrows these same posts.
    query = viewer ? query.where((eb) => eb(eb.parens(listedTo(viewer)(eb)), 'is', sql.lit(true))) : query.where(listedTo(viewer));
    // Search: these same visible posts, narrowed to the matches and paged over the search index (db/search-sql.ts).
    if (search) {
      if (search.ownerId !== undefined) query = query.where('posts.owner_id', '=', search.ownerId);
      return matchingPosts(db, query, search.terms, { ...window, ownerId: search.ownerId }, pageLimit(limit));
    }
    if (after !== undefined) query = query.where('posts.id', '<', after);
    return query.orderBy('posts.id', 'desc').limit(pageLimit(limit));
  }

  /** GET /users/{id}/posts: one owner's posts over the `(owner_id, id)` index (mutes do not apply: CONTRACT §9). */
  function listByOwnerQuery(ownerId: number, viewer: Viewer, { limit, after }: PageOptions) {
    let query = db.selectFrom('posts').select(POST_COLUMNS).where('posts.owner_id', '=', ownerId).where(visibleTo(viewer));
    if (after !== undefined) query = query.where('posts.id', '<', after);
    return query.orderBy('posts.id', 'desc').limit(pageLimit(limit));
  }

  return {
    listQuery,
    listByOwnerQuery,

    list: (viewer: Viewer, page: PageOptions, search?: PostSearch): Promise<PostRow[]> =>
      search
        ? searchPage(db, search.terms, page.after, page.limit, (window) => listQuery(viewer, page, search, window).execute(), { ownerId: search.ownerId })
        : listQuery(viewer, page).execute(),

    listByOwner: (ownerId: number, viewer: Viewer, page: PageOptions): Promise<PostRow[]> =>
      listByOwnerQuery(ownerId, viewer, page).execute(),

    insert(values: { owner_id: number; title: string; content: string; visibility: Visibility; created_at: string }): Promise<PostRow> {
      return db
        .insertInto('posts')
        .values({ ...values, updated_at: values.created_at })
        .returning(POST_COLUMNS)
        .executeTakeFirstOrThrow();
    },

    update(id: number, values: { title: string; content: string; visibility: Visibility; updated_at: string }): Promise<PostRow | undefined> {
      return db.updateTable('posts').set(values).where('id', '=', id).returning(POST_COLUMNS).executeTakeFirst();
    },

    /** Deletes the post (its replies, recommends and feed entries cascade); answers the row it removed. */
    remove(id: number): Promise<PostRow | undefined> {
      return db.deleteFrom('posts').where('id', '=', id).returning(POST_COLUMNS).executeTakeFirst();
    },

    /**
     * Moves a user's post counters by `delta` for one post of `visibility`: the total, and the counter of that
     * visibility. False when the user does not exist.
     */
    async countPost(userId: number, visibility: Visibility, delta: 1 | -1): Promise<boolean> {
      const column = VISIBILITY_COUNTER[visibility];
      const result = await db
        .updateTable('users')
        .set((eb) => ({
          post_count: eb('post_count', '+', delta),
          ...(column ? { [column]: eb(column, '+', delta) } : {}),
        }))
        .where('id', '=', userId)
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    },
  };
}

export type PostsRepository = ReturnType<typeof createPostsRepository>;
