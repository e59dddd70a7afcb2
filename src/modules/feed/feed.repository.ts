import { numbered, perViewerKind, type Prepared } from '../../db/prepared.js';
import type { PlainStatement, Store } from '../../db/store.js';
import type { PostRow, Role } from '../../db/types.js';
import { SLOT, VIEWER, bindParameters, compiledPredicate, type CompiledText, type Viewer } from '../../shared/visibility.js';
import { POST_FIELDS_SQL, type PageOptions } from '../posts/posts.repository.js';

/** The user whose home feed is read: visibility is judged for them, not for whoever asks. */
export interface FeedOwner {
  id: number;
  role: Role;
  /** As on Viewer: false lets the feed skip checks that cannot match; left out, they are made. */
  hasBlocks?: boolean;
  hasMutes?: boolean;
}

/**
 * The feed page, one statement: the owner's written entries (a range of the `(user_id, post_id)` primary key
 * walked backwards, each joined to its post by primary key) merged with the posts still in the fan-out queue by
 * users the owner follows, and with the posts of users the owner has just followed whose backfill the worker has
 * not written yet (`feed_backfill`, usually empty: one probe of its primary key), newest first. Both engines merge
 * the ordered branches and stop after `limit + 1` rows, so neither reads past the page (feed.test.ts pins SQLite's
 * plan; PostgreSQL's was read with EXPLAIN ANALYZE on a populated database, which a test's empty one cannot stand
 * in for). Only a reader with several backfills pending has that branch sorted: their posts, a few hundred rows.
 * - A post can be in the queue and in the owner's entries at once (a big post is fanned out in chunks), or be the
 *   pending followee's and in the queue or the entries, so the queued branch skips posts the owner already has an
 *   entry for, and the pending branch posts that are queued or have one: each post appears once, and the statement
 *   sees one snapshot, so a post the worker moves meanwhile is in one branch or another, never in none.
 * - Each branch selects the post id from the table it walks, which is what lets SQLite see that the branch comes
 *   out in `ORDER BY id` order (it is the same value as `posts.id`).
 * - For an admin's feed (posts filtered by mutes at most) the cursor is stated on `posts.id` too: PostgreSQL may
 *   join by merging with a backwards walk of posts' primary key, which then starts at the cursor instead of the
 *   newest post. Not on other feeds, which do not need it: see the next point.
 * - PostgreSQL runs the statement named (pg-store.ts), and keeps one plan for every run only when that generic plan
 *   does not cost more than the plans it makes for each run's values; otherwise it plans the statement, with all its
 *   branches and checks, again on every request, which took several times what running it takes. Each condition
 *   whose value it cannot see makes it guess a smaller share of the owner's entries and so a dearer walk to the
 *   page: a cursor stated twice was guessed twice, and `visibility = $n` too. So the cursor is stated once on the
 *   entries, and the rule's constants are literals (visibility.ts) where a generic plan can read their share.
 * - PostgreSQL plans each branch of a UNION ALL of joins on its own, without the outer ORDER BY and LIMIT, and then
 *   reads every entry of the feed and sorts them; each branch there carries its own ORDER BY and LIMIT, which makes
 *   both walk their primary keys backwards and stop. SQLite cannot take that form (it would sort each branch), and
 *   needs none: its merge pulls rows from the two branches only as the outer LIMIT asks for them.
 * - The queued branch tests the visibility OR with `IS TRUE`, as listQuery in posts.repository.ts does: left bare,
 *   SQLite would answer the OR with a MULTI-INDEX OR over all of `posts`.
 * - The limit is a literal, like `pageLimit` (src/shared/pagination.ts) writes it, for the same reason: SQLite plans
 *   an ordered join with the LIMIT's value and would re-prepare a statement whose LIMIT is bound.
 * The positional parameters are listed by `feedPageQuery`; PostgreSQL's text numbers the same `?`s in order.
 */
function feedPageStatement(predicate: CompiledText | undefined, limit: number, admin: boolean): Prepared {
  const visible = `${admin ? ' and posts.id < ?' : ''}${predicate ? ` and (${predicate.text})` : ''}`;
  const visibleQueued = predicate ? ` and (${predicate.text}) is true` : '';
  const rule = predicate?.parameters ?? [];
  const written =
    `select feed_entries.post_id as id, ${POST_FIELDS_SQL} from feed_entries ` +
    'inner join posts on posts.id = feed_entries.post_id ' +
    `where feed_entries.user_id = ? and feed_entries.post_id < ?${visible}`;
  const queued =
    `select fanout_queue.post_id as id, ${POST_FIELDS_SQL} from fanout_queue ` +
    'inner join follows as followed on followed.followee_id = fanout_queue.owner_id and followed.follower_id = ? ' +
    'inner join posts on posts.id = fanout_queue.post_id ' +
    `where fanout_queue.post_id < ?${visibleQueued} ` +
    'and not exists (select 1 from feed_entries as written where written.user_id = ? and written.post_id = fanout_queue.post_id)';
  const pending =
    `select posts.id as id, ${POST_FIELDS_SQL} from feed_backfill ` +
    'inner join posts on posts.owner_id = feed_backfill.owner_id ' +
    `where feed_backfill.user_id = ? and posts.id < ?${visibleQueued} ` +
    'and not exists (select 1 from feed_entries as written where written.user_id = ? and written.post_id = posts.id) ' +
    'and not exists (select 1 from fanout_queue as queued where queued.post_id = posts.id)';
  const page = `order by id desc limit ${limit + 1}`;
  const postgres =
    `(${written} order by feed_entries.post_id desc limit ${limit + 1}) union all ` +
    `(${queued} order by fanout_queue.post_id desc limit ${limit + 1}) union all ` +
    `(${pending} order by posts.id desc limit ${limit + 1}) ${page}`;
  // The values of the `?`s in the order they appear in the text: the owner and the cursor, the rule's own.
  const parameters = [VIEWER, SLOT, ...(admin ? [SLOT] : []), ...rule, VIEWER, SLOT, ...rule, VIEWER, VIEWER, SLOT, ...rule, VIEWER];
  return { statement: { sqlite: `${written} union all ${queued} union all ${pending} ${page}`, postgres: numbered(postgres) }, parameters };
}

/**
 * Built once per kind of owner (see viewerKind) and page size: a few kinds times the hundred page sizes allowed. The
 * feed is a listing: what the owner may see (listedTo), their mutes included.
 */
const feedPageStatements = perViewerKind((template, limit) => {
  const predicate = compiledPredicate(template, { listing: true });
  return feedPageStatement(predicate, limit!, template?.role === 'admin');
});

/**
 * The statement and parameters of a feed page: `limit + 1` posts of `owner`'s home feed with ids below `after`
 * (all of them without), newest first (see feedPageStatement). Exposed so that a test can EXPLAIN it.
 */
export function feedPageQuery(
  owner: NonNullable<Viewer>,
  limit: number,
  after: number | undefined,
): { statement: PlainStatement; params: unknown[] } {
  const compiled = feedPageStatements(owner, limit);
  // Without a cursor every id is below the largest safe integer: one text serves the first page and the next ones.
  const below = after ?? Number.MAX_SAFE_INTEGER;
  return { statement: compiled.statement, params: bindParameters(compiled.parameters, owner.id, [below, below, below, below]) };
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
     * their feed; private posts only when the feed owner is an admin). One plain-SQL statement (feedPageStatement,
     * db/prepared.ts): on every feed request, where the builder cost more than the database's answer.
     */
    page(owner: FeedOwner, { limit, after }: PageOptions): Promise<PostRow[]> {
      const { statement, params } = feedPageQuery(owner, limit, after);
      return store.query<PostRow>(statement, params);
    },
  };
}
