import { sql, type Kysely } from 'kysely';
import type { Database, PostRow, Role } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';
import { POST_COLUMNS, visibleTo } from '../../shared/visibility.js';
import type { PageOptions } from '../posts/posts.repository.js';

/** The user whose home feed is read: visibility is judged for them, not for whoever asks. */
export interface FeedOwner {
  id: number;
  role: Role;
}

/**
 * Home feeds are written ahead of reading (one `feed_entries` row per follower, by the fan-out worker in
 * feed.fanout.ts) so that reading one is a range scan of the `(user_id, post_id)` primary key plus one primary-key
 * lookup per post: O(page size), however many users the reader follows. Posts still in the fan-out queue are
 * merged in from a second query, which is one probe of an empty table when the worker has caught up.
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
      .where(visibleTo(owner));
    if (after !== undefined) query = query.where('feed_entries.post_id', '<', after);
    return query.orderBy('feed_entries.post_id', 'desc').limit(pageLimit(limit));
  }

  /**
   * The same page of posts that are still queued for fan-out, by users the feed owner follows: a backwards walk of
   * the (small) queue, each row checked against the follow and the post.
   */
  function queuedQuery(owner: FeedOwner, { limit, after }: PageOptions) {
    let query = db
      .selectFrom('fanout_queue')
      .innerJoin('follows', (join) =>
        join.onRef('follows.followee_id', '=', 'fanout_queue.owner_id').on('follows.follower_id', '=', owner.id),
      )
      .innerJoin('posts', 'posts.id', 'fanout_queue.post_id')
      .select(POST_COLUMNS)
      // `IS TRUE` keeps the visibility OR a row filter (see listQuery in posts.repository.ts): left bare, SQLite
      // answered it with a MULTI-INDEX OR over all of `posts`.
      .where((eb) => eb(eb.parens(visibleTo(owner)(eb)), 'is', sql.lit(true)));
    if (after !== undefined) query = query.where('fanout_queue.post_id', '<', after);
    return query.orderBy('fanout_queue.post_id', 'desc').limit(pageLimit(limit));
  }

  return {
    pageQuery,
    queuedQuery,
    /**
     * `limit + 1` posts of the feed, newest first: written entries and queued posts merged. The queue is read
     * first: a post the worker moves in between is then in the queue's answer, or in the entries', or in both
     * (it appears once), never in neither.
     */
    async page(owner: FeedOwner, page: PageOptions): Promise<PostRow[]> {
      const queued = await queuedQuery(owner, page).execute();
      const written = await pageQuery(owner, page).execute();
      if (queued.length === 0) return written;
      const byId = new Map([...written, ...queued].map((row) => [row.id, row]));
      return [...byId.values()].sort((a, b) => b.id - a.id).slice(0, page.limit + 1);
    },
  };
}
