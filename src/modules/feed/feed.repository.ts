import { readFeedPage } from '../../db/hot-statements.js';
import type { Store } from '../../db/store.js';
import type { PostRow, Role } from '../../db/types.js';
import type { PageOptions } from '../posts/posts.repository.js';

/** The user whose home feed is read: visibility is judged for them, not for whoever asks. */
export interface FeedOwner {
  id: number;
  role: Role;
  /** As on Viewer: false lets the feed skip checks that cannot match; left out, they are made. */
  hasBlocks?: boolean;
  hasMutes?: boolean;
}

/**
 * Home feeds are written ahead of reading (one `feed_entries` row per follower, by the fan-out worker in
 * feed.fanout.ts) so that reading one is a range scan of the `(user_id, post_id)` primary key plus one primary-key
 * lookup per post: O(page size), however many users the reader follows. Posts still in the fan-out queue are
 * merged in by the same statement, which costs one probe of an empty table when the worker has caught up.
 */
export function createFeedRepository(store: Store) {
  return {
    /**
     * `limit + 1` posts of the feed, newest first: written entries and queued posts merged, filtered by what the
     * feed owner may see (for a member: public posts and followers-only ones, since they follow every owner in
     * their feed; private posts only when the feed owner is an admin). One plain-SQL statement (hot-statements.ts):
     * on every feed request, where the builder cost more than the database's answer.
     */
    page(owner: FeedOwner, { limit, after }: PageOptions): Promise<PostRow[]> {
      return readFeedPage(store, owner, limit, after);
    },
  };
}
