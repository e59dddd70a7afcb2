import { sql, type Kysely } from 'kysely';
import { keptUpTo, perViewerKind, plain, prepare, type Prepared } from '../../db/prepared.js';
import { isPostgres, matchingPosts, searchMatch, searchPage, type SearchTerm, type SearchWindow } from '../../db/search-sql.js';
import type { Store } from '../../db/store.js';
import type { Database, PostRow, Role, Visibility } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';
import {
  POST_COLUMNS,
  SLOT,
  VIEWER,
  bindParameters,
  compileQuery,
  compiledPredicate,
  listedTo,
  viewerFromColumn,
  viewerKind,
  visibleTo,
  type Viewer,
} from '../../shared/visibility.js';
import { TOKEN_BY_HASH, TOKEN_USER_JOIN, type TokenCaller } from '../tokens/tokens.repository.js';

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
  function listQuery(
    viewer: Viewer,
    { limit, after }: PageOptions,
    search?: PostSearch,
    window: SearchWindow = { below: after },
    match: string | undefined = search && searchMatch(db, search.terms),
  ) {
    let query = db.selectFrom('posts').select(POST_COLUMNS);
    // A listing: what the viewer may see (listedTo), less the posts of users they mute; a search (CONTRACT §11: blocks
    // and the caller's mutes apply), the user-posts one included, narrows these same posts.
    query = viewer ? query.where((eb) => eb(eb.parens(listedTo(viewer)(eb)), 'is', sql.lit(true))) : query.where(listedTo(viewer));
    // Search: these same visible posts, narrowed to the matches and paged over the search index (db/search-sql.ts).
    if (search) {
      if (search.ownerId !== undefined) query = query.where('posts.owner_id', '=', search.ownerId);
      return matchingPosts(db, query, match!, { ...window, ownerId: search.ownerId }, pageLimit(limit));
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

    listByOwner: (ownerId: number, viewer: Viewer, page: PageOptions): Promise<PostRow[]> =>
      listByOwnerQuery(ownerId, viewer, page).execute(),

    insert(values: { owner_id: number; title: string; content: string; visibility: Visibility; created_at: string }): Promise<PostRow> {
      return db
        .insertInto('posts')
        .values({ ...values, updated_at: values.created_at })
        .returning(POST_COLUMNS)
        .executeTakeFirstOrThrow();
    },

    /** The post's whole row, as it is before an edit (the locked row: no visibility rule). */
    find(id: number): Promise<PostRow | undefined> {
      return db.selectFrom('posts').selectAll().where('id', '=', id).executeTakeFirst();
    },

    update(id: number, values: { title: string; content: string; visibility: Visibility; updated_at: string }): Promise<PostRow | undefined> {
      return db.updateTable('posts').set(values).where('id', '=', id).returning(POST_COLUMNS).executeTakeFirst();
    },

    /** Deletes the post (its replies, recommends and feed entries cascade); answers the row it removed. */
    remove(id: number): Promise<PostRow | undefined> {
      return db.deleteFrom('posts').where('id', '=', id).returning(POST_COLUMNS).executeTakeFirst();
    },

    /**
     * The post as it must be dated so that its owner's posts carry createdAt in the order of their ids, once the
     * owner's row is locked (createPost). On PostgreSQL two creates of one owner draw their id and their time side by
     * side, before that lock, and may draw them in opposite orders: the one locking second then takes a time between
     * its committed neighbours' (the owner's nearest post below its id and above it), a tie where they disagree. Each
     * create does this under the lock, so the committed posts stay in order. SQLite's writer runs creates one after
     * another, time and id together: nothing to do there.
     */
    async orderCreatedAt(post: PostRow): Promise<PostRow> {
      if (!isPostgres(db)) return post;
      const neighbour = (side: '<' | '>') =>
        db
          .selectFrom('posts')
          .select('created_at')
          .where('owner_id', '=', post.owner_id)
          .where('id', side, post.id)
          .orderBy('id', side === '<' ? 'desc' : 'asc')
          .limit(1);
      const { before, after } = await db
        .selectNoFrom([neighbour('<').as('before'), neighbour('>').as('after')])
        .executeTakeFirstOrThrow();
      let at = post.created_at;
      if (before !== null && before > at) at = before;
      if (after !== null && after < at) at = after;
      if (at === post.created_at) return post;
      return db.updateTable('posts').set({ created_at: at, updated_at: at }).where('id', '=', post.id).returning(POST_COLUMNS).executeTakeFirstOrThrow();
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

/** `findVisiblePost` compiled, per kind of viewer (see viewerKind): at most a handful of texts. */
const postById = perViewerKind(
  (template): Prepared =>
    prepare(
      compileQuery((db) => {
        const query = db.selectFrom('posts').select(POST_COLUMNS).where('posts.id', '=', SLOT);
        // An admin sees every post: no condition at all (the predicate would be `1 = 1`).
        return template?.role === 'admin' ? query : query.where(visibleTo(template));
      }),
    ),
);

/**
 * The post with this id if `viewer` may see it: `findVisiblePost` (src/shared/visibility.ts) as plain SQL
 * (db/prepared.ts), for `GET /posts/{id}`, the most frequent read, whether anonymous or signed in. Not for a write's
 * transaction: it reads outside any (the store's read connection on SQLite, the pool on PostgreSQL). The counters
 * are the stored ones: the caller applies `withVisibleCounts` (which costs nothing for a viewer in no block).
 */
export function findReadablePost(store: Store, id: number, viewer: Viewer): Promise<PostRow | undefined> {
  const compiled = postById(viewer);
  return store.queryOne<PostRow>(compiled.statement, bindParameters(compiled.parameters, viewer?.id, [id]));
}

/**
 * GET /posts without a search (`listQuery`, the same builder), compiled once per kind of viewer and page size: the
 * first page of the collection is the second most frequent read, and building its query with the rule's checks on
 * every request cost more than reading the page (bench/README.md, "Figures behind choices in the code"). The cursor
 * is always bound: the first page binds the largest safe integer, so one text serves every page of a size.
 */
const postsPage = perViewerKind((template, limit) =>
  prepare(compileQuery((db) => createPostsRepository(db).listQuery(template, { limit: limit!, after: SLOT }))),
);

/** `limit + 1` posts of GET /posts (no search) that `viewer` may see, newest first, with ids below `after`. */
export function listPostsPage(store: Store, viewer: Viewer, { limit, after }: PageOptions): Promise<PostRow[]> {
  const compiled = postsPage(viewer, limit);
  return store.query<PostRow>(compiled.statement, bindParameters(compiled.parameters, viewer?.id, [after ?? Number.MAX_SAFE_INTEGER]));
}

/**
 * GET /posts?q= and GET /users/{id}/posts?q= (CONTRACT §11): `searchPage`'s windows (db/search-sql.ts), each statement
 * compiled once per kind of viewer and shape of window (its sizes, which bounds it has, the page size) and kept:
 * built on every request, the search statement (the visibility rule in each branch of a rare word's union) cost Node
 * twice the CPU of GET /posts' whole page (bench/README.md, "Figures behind choices in the code"). The words, the
 * bounds, the listed ids and the owner are bound on each run in place of their stand-ins below.
 */
export function searchPosts(store: Store, viewer: Viewer, page: PageOptions, search: PostSearch): Promise<PostRow[]> {
  return searchPage(store.db, search.terms, page.after, page.limit, searchReader(store, viewer, page, search), { ownerId: search.ownerId });
}

/** The `read` of `searchPosts`' windows: each window's compiled statement, run with this search's values. */
export function searchReader(store: Store, viewer: Viewer, page: PageOptions, search: PostSearch): (window: SearchWindow) => Promise<PostRow[]> {
  const { db } = store;
  const match = searchMatch(db, search.terms);
  const { key: kind, template } = viewerKind(viewer);
  return (window) => {
    const { below, atLeast, ids, listed, size } = window;
    const shape = `${store.dialect} ${kind} ${page.limit} ${below !== undefined} ${atLeast !== undefined} ${ids !== undefined} ${listed} ${size} ${search.ownerId !== undefined}`;
    const compiled = searchStatements(shape, () => {
      const stand = {
        below: below === undefined ? undefined : BELOW,
        atLeast: atLeast === undefined ? undefined : AT_LEAST,
        ids: ids === undefined ? undefined : IDS,
        listed,
        size,
      };
      const ownerId = search.ownerId === undefined ? undefined : OWNER;
      const { sql: text, parameters } = createPostsRepository(db).listQuery(template, page, { terms: [], ownerId }, stand, MATCH).compile();
      return { statement: { sqlite: text, postgres: text }, parameters };
    });
    const values = compiled.parameters.map((value) =>
      value === VIEWER ? viewer?.id
      : value === MATCH ? match
      : value === BELOW ? below
      : value === AT_LEAST ? atLeast
      : value === IDS ? ids
      : value === OWNER ? search.ownerId
      : value,
    );
    return store.query<PostRow>(compiled.statement, values);
  };
}

/** Stand-ins for a search statement's values (VIEWER and SLOT's kin, shared/visibility.ts): compared by identity. */
const MATCH = '\u0000search match';
const BELOW = -7_340_041;
const AT_LEAST = -7_340_043;
const OWNER = -7_340_047;
const IDS: readonly number[] = [-7_340_053];

/** The compiled search statements; the text is the store's dialect's, compiled by its own Kysely. */
const searchStatements = keptUpTo<Prepared>(1_000);

/** The post columns but `id`, for a statement that takes the id from another table (the feed page's branches). */
export const POST_FIELDS_SQL =
  'posts.owner_id, posts.title, posts.content, posts.visibility, posts.reply_count, posts.recommend_count, ' +
  'posts.created_at, posts.updated_at';

/** A member in no block: the viewer whose rule findCallerAndReadablePost's statement compiles (mutes do not apply to a read by id). */
const PLAIN_MEMBER = viewerKind({ id: 0, role: 'member', hasBlocks: false, hasMutes: false }).template;

let callerAndPost: Prepared | undefined;

/**
 * The caller statement of tokens.repository.ts (findCallerByTokenHash) and findReadablePost for a member in no
 * block, as one statement: the token's row and its user, and beside them the post if that user may see it (a left
 * join, so a valid token with no post visible still finds its caller). The rule is compiled from visibleTo like
 * every prepared text, with the viewer's id taken from the user's row (viewerFromColumn) instead of a parameter.
 * Parameters: the post id, the rule's own, the hash, now.
 */
function callerAndPostTemplate(): Prepared {
  const rule = viewerFromColumn(compiledPredicate(PLAIN_MEMBER, { listing: false })!, '"users"."id"');
  const text =
    'select tokens.id as caller_token_id, users.id as caller_id, users.role as caller_role, ' +
    `users.block_count as caller_blocks, users.mute_count as caller_mutes, posts.id as id, ${POST_FIELDS_SQL} from tokens ` +
    `${TOKEN_USER_JOIN} left join posts on posts.id = ? and (${rule.text}) ${TOKEN_BY_HASH}`;
  return { statement: plain(text), parameters: [SLOT, ...rule.parameters, SLOT, SLOT] };
}

type CallerAndPostRow = {
  caller_token_id: number;
  caller_id: number;
  caller_role: Role;
  caller_blocks: number;
  caller_mutes: number;
} & ({ id: number } & Omit<PostRow, 'id'> | { id: null });

/**
 * GET /posts/{id} with a bearer token: the caller behind the token's hash (as findCallerByTokenHash finds it;
 * undefined for no valid token) and the post if the caller may see it (as findReadablePost reads it). A member in
 * no block, nearly every caller, costs one statement instead of two; for an admin or a caller in a block the
 * statement's rule is not theirs, and the post is read again with their own.
 */
export async function findCallerAndReadablePost(
  store: Store,
  tokenHash: string,
  now: string,
  id: number,
): Promise<{ caller: TokenCaller; post: PostRow | undefined } | undefined> {
  callerAndPost ??= callerAndPostTemplate();
  const row = await store.queryOne<CallerAndPostRow>(callerAndPost.statement, bindParameters(callerAndPost.parameters, undefined, [id, tokenHash, now]));
  if (!row) return undefined;
  const { caller_token_id, caller_id, caller_role, caller_blocks, caller_mutes, ...post } = row;
  const caller: TokenCaller = {
    tokenId: caller_token_id,
    id: caller_id,
    role: caller_role,
    hasBlocks: Number(caller_blocks) > 0,
    hasMutes: Number(caller_mutes) > 0,
  };
  if (caller.role !== 'member' || caller.hasBlocks) return { caller, post: await findReadablePost(store, id, caller) };
  return { caller, post: post.id === null ? undefined : post };
}
