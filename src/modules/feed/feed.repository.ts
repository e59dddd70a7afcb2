import type { Kysely } from 'kysely';
import type { Database, PostRow, Role } from '../../db/types.js';
import { callerKind, pageCompiler, POST_COLUMNS, type PageOptions } from '../posts/posts.repository.js';
import { visibleTo } from '../posts/posts.visibility.js';

/** The user whose home feed is read: visibility is judged for them, not for whoever asks. */
export interface FeedOwner {
  id: number;
  role: Role;
}

/**
 * Home feeds are written at post time (one `feed_entries` row per follower, see posts.service.ts) so that reading
 * one is a range scan of the `(user_id, post_id)` primary key plus one primary-key lookup per post: O(page size),
 * however many users the reader follows.
 */
export function createFeedRepository(db: Kysely<Database>) {
  /**
   * The feed owner's entries newest first, joined to their posts and filtered by what the feed owner may see
   * (for a member: public posts and followers-only ones, since they follow every owner in their feed; private
   * posts only when the feed owner is an admin). The builder is exposed so that a test can EXPLAIN it.
   */
  function pageQuery(owner: FeedOwner, { limit, after }: PageOptions) {
    let query = db
      .selectFrom('feed_entries')
      .innerJoin('posts', 'posts.id', 'feed_entries.post_id')
      .select(POST_COLUMNS)
      .where('feed_entries.user_id', '=', owner.id)
      .where(visibleTo({ id: owner.id, role: owner.role, tokenId: 0 }));
    if (after !== undefined) query = query.where('feed_entries.post_id', '<', after);
    return query.orderBy('feed_entries.post_id', 'desc').limit(limit + 1);
  }

  // Compiled once per shape (member or admin feed owner × first page or after a cursor): see pageCompiler.
  const pageCompiled = pageCompiler((kind, ownerId, page) => pageQuery({ id: ownerId, role: kind === 'admin' ? 'admin' : 'member' }, page));

  return {
    pageQuery,
    /** `pageQuery(owner, page).compile()`, without building the query again. */
    pageCompiled: (owner: FeedOwner, page: PageOptions) => pageCompiled(callerKind(owner), owner.id, page),
    async page(owner: FeedOwner, page: PageOptions): Promise<PostRow[]> {
      const { rows } = await db.executeQuery(pageCompiled(callerKind(owner), owner.id, page));
      return rows;
    },
  };
}
