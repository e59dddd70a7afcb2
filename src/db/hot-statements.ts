import {
  POST_COLUMNS,
  SLOT,
  VIEWER,
  bindParameters,
  compileQuery,
  compiledPredicate,
  viewerFromColumn,
  viewerKind,
  visibleTo,
  type CompiledText,
  type Viewer,
} from '../shared/visibility.js';
import type { PlainStatement, Store, Tx } from './store.js';
import type { IdempotencyKeyRow, PostRow, Role } from './types.js';

/**
 * The hottest statements as plain SQL, one text per dialect, run by the store on the driver itself (`Store.query`).
 * Building, compiling and running a Kysely query costs more than SQLite takes to answer a point read, so only a
 * statement that a benchmark shows is worth it belongs here (bench/README.md, "Figures behind choices in the code");
 * everything else stays in the builder. The texts that judge visibility are compiled once per kind of viewer
 * from the predicates of src/shared/visibility.ts (the one statement of who sees what), never written by hand.
 */

/** `text` with its `?` placeholders numbered for PostgreSQL (`$1`, `$2`, …), in order. */
function numbered(text: string): string {
  let n = 0;
  return text.replace(/\?/g, () => `$${++n}`);
}

const plain = (text: string): PlainStatement => ({ sqlite: text, postgres: numbered(text) });

/** A compiled text ready to run: both dialects' statements and the parameter template. */
interface Template {
  statement: PlainStatement;
  parameters: readonly unknown[];
}

const templateOf = ({ text, parameters }: CompiledText): Template => ({ statement: plain(text), parameters });

/** `findVisiblePost` compiled, per kind of viewer (see viewerKind): at most a handful of texts. */
const postById = new Map<string, Template>();

/**
 * The post with this id if `viewer` may see it: `findVisiblePost` (src/shared/visibility.ts) as plain SQL, for
 * `GET /posts/{id}`, the most frequent read, whether anonymous or signed in. Not for a write's transaction: it
 * reads outside any (the store's read connection on SQLite, the pool on PostgreSQL). The counters are the stored
 * ones: the caller applies `withVisibleCounts` (which costs nothing for a viewer in no block).
 */
export function findReadablePost(store: Store, id: number, viewer: Viewer): Promise<PostRow | undefined> {
  const { key, template } = viewerKind(viewer);
  let compiled = postById.get(key);
  if (compiled === undefined) {
    const admin = template?.role === 'admin';
    compiled = templateOf(
      compileQuery((db) => {
        const query = db.selectFrom('posts').select(POST_COLUMNS).where('posts.id', '=', SLOT);
        // An admin sees every post: no condition at all (the predicate would be `1 = 1`).
        return admin ? query : query.where(visibleTo(template));
      }),
    );
    postById.set(key, compiled);
  }
  return store.queryOne<PostRow>(compiled.statement, bindParameters(compiled.parameters, viewer?.id, [id]));
}

/** A valid token's user (`from tokens` on the left): the user's current password version minted it. */
const TOKEN_USER_JOIN = 'inner join users on users.id = tokens.user_id and users.password_version = tokens.password_version';
/** The token of this hash, unexpired at a time (both parameters). */
const TOKEN_BY_HASH = 'where tokens.token_hash = ? and tokens.expires_at > ?';

const CALLER_BY_TOKEN_HASH_SQL =
  'select tokens.id as "tokenId", users.id as id, users.role as role, users.block_count as blocks, users.mute_count as mutes from tokens ' +
  `${TOKEN_USER_JOIN} ${TOKEN_BY_HASH}`;
const CALLER_BY_TOKEN_HASH: PlainStatement = plain(CALLER_BY_TOKEN_HASH_SQL);

/** A signed-in caller: the token, the user, and whether the visibility rule must check their blocks and mutes. */
export interface TokenCaller {
  tokenId: number;
  id: number;
  role: Role;
  hasBlocks: boolean;
  hasMutes: boolean;
}

/**
 * The caller behind a bearer token's hash, on every signed-in request: the token exists, has not expired (`now`,
 * an ISO timestamp), and was minted with the user's current password version. Only here: the builder has no
 * version of it, so its tests check what it answers (hot-statements.test.ts). The user's block and mute counts
 * come with the row at no cost, and let every read of this request skip checks that cannot match (Viewer).
 */
export async function findCallerByTokenHash(store: Store, tokenHash: string, now: string): Promise<TokenCaller | undefined> {
  const row = await store.queryOne<{ tokenId: number; id: number; role: Role; blocks: number; mutes: number }>(CALLER_BY_TOKEN_HASH, [tokenHash, now]);
  if (!row) return undefined;
  return { tokenId: row.tokenId, id: row.id, role: row.role, hasBlocks: Number(row.blocks) > 0, hasMutes: Number(row.mutes) > 0 };
}

/** The post columns but `id`, which each branch of the feed page takes from its own table (see feedPageStatement). */
const POST_FIELDS_SQL =
  'posts.owner_id, posts.title, posts.content, posts.visibility, posts.reply_count, posts.recommend_count, ' +
  'posts.created_at, posts.updated_at';

/** A member in no block: the viewer whose rule findCallerAndReadablePost's statement compiles (mutes do not apply to a read by id). */
const PLAIN_MEMBER = viewerKind({ id: 0, role: 'member', hasBlocks: false, hasMutes: false }).template;

let callerAndPost: Template | undefined;

/**
 * `CALLER_BY_TOKEN_HASH` and findReadablePost for a member in no block, as one statement: the token's row and its
 * user, and beside them the post if that user may see it (a left join, so a valid token with no post visible still
 * finds its caller). The rule is compiled from visibleTo like every hot text, with the viewer's id taken from the
 * user's row (viewerFromColumn) instead of a parameter. Parameters: the post id, the rule's own, the hash, now.
 */
function callerAndPostTemplate(): Template {
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
 * - The cursor is stated on `posts.id` too: for an admin's feed (no filter on posts) PostgreSQL may join by merging
 *   with a backwards walk of posts' primary key, which then starts at the cursor instead of the newest post.
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
function feedPageStatement(predicate: CompiledText | undefined, limit: number): { statement: PlainStatement; parameters: unknown[] } {
  const visible = predicate ? ` and (${predicate.text})` : '';
  const visibleQueued = predicate ? ` and (${predicate.text}) is true` : '';
  const rule = predicate?.parameters ?? [];
  const written =
    `select feed_entries.post_id as id, ${POST_FIELDS_SQL} from feed_entries ` +
    'inner join posts on posts.id = feed_entries.post_id ' +
    `where feed_entries.user_id = ? and feed_entries.post_id < ? and posts.id < ?${visible}`;
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
  const parameters = [VIEWER, SLOT, SLOT, ...rule, VIEWER, SLOT, ...rule, VIEWER, VIEWER, SLOT, ...rule, VIEWER];
  return { statement: { sqlite: `${written} union all ${queued} union all ${pending} ${page}`, postgres: numbered(postgres) }, parameters };
}

/** Built once per kind of owner (see viewerKind) and page size: a few kinds times the hundred page sizes allowed. */
const feedPageStatements = new Map<string, { statement: PlainStatement; parameters: unknown[] }>();

/**
 * The statement and parameters of a feed page: `limit + 1` posts of `owner`'s home feed with ids below `after`
 * (all of them without), newest first (see feedPageStatement). Exposed so that a test can EXPLAIN it.
 */
export function feedPageQuery(
  owner: NonNullable<Viewer>,
  limit: number,
  after: number | undefined,
): { statement: PlainStatement; params: unknown[] } {
  const { key, template } = viewerKind(owner);
  let compiled = feedPageStatements.get(`${key} ${limit}`);
  if (compiled === undefined) {
    // The feed is a listing: what the owner may see (listedTo), their mutes included.
    compiled = feedPageStatement(compiledPredicate(template, { listing: true }), limit);
    feedPageStatements.set(`${key} ${limit}`, compiled);
  }
  // Without a cursor every id is below the largest safe integer: one text serves the first page and the next ones.
  const below = after ?? Number.MAX_SAFE_INTEGER;
  return { statement: compiled.statement, params: bindParameters(compiled.parameters, owner.id, [below, below, below, below]) };
}

/** `limit + 1` posts of `owner`'s home feed, newest first, filtered by what the owner may see: see feedPageQuery. */
export async function readFeedPage(store: Store, owner: NonNullable<Viewer>, limit: number, after?: number): Promise<PostRow[]> {
  const { statement, params } = feedPageQuery(owner, limit, after);
  return store.query<PostRow>(statement, params);
}

/** A kept answer as an idempotent create reads it back (CONTRACT §6.2). */
export type KeptAnswerRow = Pick<IdempotencyKeyRow, 'fingerprint' | 'expires_at' | 'status' | 'content_type' | 'location' | 'etag' | 'body'>;

const KEPT_ANSWER_SQL =
  'select fingerprint, expires_at, status, content_type, location, etag, body from idempotency_keys ' +
  'where caller_id = ? and target = ? and idempotency_key = ?';
const KEPT_ANSWER: PlainStatement = plain(KEPT_ANSWER_SQL);

/** The row under an Idempotency-Key's scope (caller, method and path, key), on every create that carries a key. */
export function findKeptAnswer(store: Store, callerId: number, target: string, key: string): Promise<KeptAnswerRow | undefined> {
  return store.queryOne<KeptAnswerRow>(KEPT_ANSWER, [callerId, target, key]);
}

/**
 * Inserts the answer, or replaces a row that holds none (`status` null) or has expired by the time the request
 * started (`started_at`); a live answer stays and nothing is returned. On PostgreSQL a concurrent insert of the same
 * scope makes this wait until that transaction ends.
 */
const KEEP_ANSWER_SQL =
  'insert into idempotency_keys (caller_id, target, idempotency_key, fingerprint, claim_token, started_at, expires_at, ' +
  'status, content_type, location, etag, body) values (?, ?, ?, ?, null, ?, ?, ?, ?, ?, ?, ?) ' +
  'on conflict (caller_id, target, idempotency_key) do update set fingerprint = excluded.fingerprint, claim_token = null, ' +
  'started_at = excluded.started_at, expires_at = excluded.expires_at, status = excluded.status, ' +
  'content_type = excluded.content_type, location = excluded.location, etag = excluded.etag, body = excluded.body ' +
  'where idempotency_keys.expires_at <= excluded.started_at or idempotency_keys.status is null returning id';
const KEEP_ANSWER: PlainStatement = plain(KEEP_ANSWER_SQL);

/**
 * Keeps the answer of a create sent with an Idempotency-Key, inside `tx` (the create's own transaction): false when
 * the scope already holds a live answer (see KEEP_ANSWER_SQL).
 */
export async function keepAnswer(
  tx: Tx,
  row: Omit<IdempotencyKeyRow, 'id' | 'claim_token'> & { status: number; body: string },
): Promise<boolean> {
  // In the order of KEEP_ANSWER_SQL's placeholders.
  const params = [
    row.caller_id, row.target, row.idempotency_key, row.fingerprint, row.started_at, row.expires_at,
    row.status, row.content_type, row.location, row.etag, row.body,
  ];
  return (await tx.query<{ id: number }>(KEEP_ANSWER, params)).length > 0;
}
