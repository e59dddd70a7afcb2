import { PostgresAdapter, sql, type Expression, type Kysely, type SelectQueryBuilder, type SqlBool } from 'kysely';
import type { Tx } from './store.js';
import type { Database } from './types.js';

/**
 * The post search index, one text per dialect (CONTRACT §11). Words come already folded and split by
 * src/modules/search/search.text.ts, so neither engine tokenizes or folds anything itself and both find the same
 * posts:
 * - SQLite: `post_search` is a contentless FTS5 table (rowid = post id) with the `ascii` tokenizer, which splits
 *   the stored text at its spaces only (every non-ASCII character is part of a word; the words hold no ASCII
 *   punctuation) and lower-cases ASCII letters that are lower-case already.
 * - PostgreSQL: `post_search.words` is a tsvector written lexeme by lexeme with positions (its text input, not
 *   to_tsvector: the default parser would re-split words), under a GIN index; queries are tsquery text, likewise
 *   taken verbatim.
 * Every term is quoted, so a query's text is never the engine's query syntax.
 */

/** One word of a query; `prefix`: matches the words starting with it. */
export interface SearchWord {
  text: string;
  prefix: boolean;
}

/** A word or a phrase (words adjacent and in order) that a post must hold, or must not hold (`exclude`). */
export interface SearchTerm {
  words: SearchWord[];
  exclude: boolean;
}

export const isPostgres = (db: Kysely<Database>) => db.getExecutor().adapter instanceof PostgresAdapter;

/** An FTS5 MATCH expression: `("a" AND "b" + "c" AND "pre"*) NOT ("x" OR "y")`. */
export function fts5Query(terms: readonly SearchTerm[]): string {
  const phrase = (term: SearchTerm) => term.words.map((w) => `"${w.text.replace(/"/g, '""')}"${w.prefix ? '*' : ''}`).join(' + ');
  const include = terms.filter((t) => !t.exclude).map(phrase);
  const exclude = terms.filter((t) => t.exclude).map(phrase);
  return exclude.length === 0 ? include.join(' AND ') : `(${include.join(' AND ')}) NOT (${exclude.join(' OR ')})`;
}

const lexeme = (text: string) => `'${text.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;

/** A tsquery in its text form: `'a' & ('b' <-> 'c') & 'pre':* & !'x'`. */
export function tsqueryText(terms: readonly SearchTerm[]): string {
  const phrase = (term: SearchTerm) => {
    const words = term.words.map((w) => `${lexeme(w.text)}${w.prefix ? ':*' : ''}`);
    return words.length === 1 ? words[0] : `(${words.join(' <-> ')})`;
  };
  return terms.map((term) => `${term.exclude ? '!' : ''}${phrase(term)}`).join(' & ');
}

/**
 * PostgreSQL: the posts' entries matching `match` (a tsquery's text, `searchMatch`), given as a sub-select. Every
 * search statement is prepared, and PostgreSQL plans a prepared statement for its values (a custom plan, ~0.5 ms for
 * the window's, more than the window's execution) until a plan for any values (the generic plan) costs no more in its
 * estimate; with the query's value in view, a common word's estimate stayed lower and every run was planned anew.
 * Behind a sub-select the value is unknown to the estimate of every plan, so the generic plan is taken after the
 * fifth run; the GIN index still uses it as its condition.
 */
const tsqueryMatch = (match: string) => sql<SqlBool>`post_search.words @@ (select ${match}::tsquery)`;

/**
 * The query in the engine's own syntax (an FTS5 MATCH expression, a tsquery's text): the one value a search statement
 * binds for its words, so that one statement text serves every query of a shape (posts.repository.ts compiles them
 * once).
 */
export const searchMatch = (db: Kysely<Database>, terms: readonly SearchTerm[]): string => (isPostgres(db) ? tsqueryText(terms) : fts5Query(terms));

/** A tsvector in its text form, each word with its positions (1-based, in order): `'a':1,3 'b':2`. */
export function tsvectorText(words: readonly string[]): string {
  const positions = new Map<string, number[]>();
  words.forEach((word, i) => {
    const list = positions.get(word);
    if (list) list.push(i + 1);
    else positions.set(word, [i + 1]);
  });
  return [...positions].map(([word, list]) => `${lexeme(word)}:${list.join(',')}`).join(' ');
}

/**
 * Writes a post's entry in `tx` (`replace`: it has one already). Its removal needs no call: a post's deletion takes it
 * along (PostgreSQL: the foreign key's cascade; SQLite: a trigger), the cascade of an account's deletion included.
 *
 * SQLite: at the transaction's COMMIT (`Tx.atCommit`), not in the unit's savepoint. FTS5 writes the words pending at
 * each savepoint as an index segment of its own, and every unit of the group commit runs in one, so written there
 * each create cost a segment (and the merges that follow); written after the batch's units, the batch's entries make
 * one segment (bench/README.md). By then a later unit of the batch may have deleted the post (its trigger found no
 * entry yet): the entry is written only for a post that is still there.
 */
export async function writePostSearch(tx: Tx, postId: number, words: readonly string[], replace: boolean): Promise<void> {
  const { db } = tx;
  if (isPostgres(db)) {
    await sql`insert into post_search (post_id, words) values (${postId}, ${tsvectorText(words)}::tsvector)
      on conflict (post_id) do update set words = excluded.words`.execute(db);
    return;
  }
  const text = words.join(' ');
  tx.atCommit(async () => {
    // FTS5 reads a rowid bound as a REAL (how the driver binds a JS number) as no rowid: cast it.
    if (replace) await sql`delete from post_search where rowid = cast(${postId} as integer)`.execute(db);
    // A plain INSERT … VALUES: one that may write several rows (INSERT … SELECT) opens a statement savepoint, and
    // FTS5 writes a segment at that too.
    const { rows } = await sql`select 1 as found from posts where id = ${postId}`.execute(db);
    if (rows.length > 0) await sql`insert into post_search (rowid, words) values (cast(${postId} as integer), ${text})`.execute(db);
  });
}

/**
 * Where in the id order a search query looks: below `below` (the page's cursor, or the end of an earlier window),
 * at or above `atLeast`; `ids`: only these posts (matches the index listed, see `searchPage`).
 */
export interface SearchWindow {
  below?: number;
  atLeast?: number;
  ids?: readonly number[];
  /**
   * PostgreSQL: the posts among the index's first `listed` matches below `below`, listed inside the same statement
   * (see `listedMatchesQuery`).
   */
  listed?: number;
  /** PostgreSQL: the window is the `size` newest posts below `below` (one owner's search: `atLeast` is the oldest of them). */
  size?: number;
  /**
   * The query is narrowed to one owner's posts (GET /users/{id}/posts?q=): their posts, over the `(owner_id, id)`
   * index, drive the page, each looked up in the search index, rather than every match of the words.
   */
  ownerId?: number;
}

/**
 * Narrows a posts query to the posts matching `match` (the query's text, `searchMatch`) in `window`, newest first,
 * `limit` rows (the page's `LIMIT`).
 *
 * SQLite: FTS5 drives the page, walking its doclists backwards from the cursor in rowid order and stopping at the
 * page's end, for a rare word as for a common one. The ORDER BY and the bounds must be on FTS5's rowid (not
 * `posts.id`) and the bounds INTEGERs (FTS5 takes a bound driver's REAL for no bound), or FTS5 scans every
 * match first. With `atLeast` (a window of ids, `searchPage`) it walks them forwards instead, every match of the
 * window, oldest first.
 *
 * PostgreSQL: a GIN index lists every match of a word (no order, no bound), so the planner chooses between it
 * (then sorts) and the primary key walked backwards with the match as a filter, by its estimate of how common the
 * words are; for a word outside its statistics it assumes 0.5% of rows, and walks a large table even for a word
 * that few posts hold. `searchPage` decides instead, by the statistics and by what it finds: a window of the newest
 * posts below the cursor first (`size`: bounded work, enough for a common word), then the index for the rest
 * (`listed`, or `ids`: the matches the index lists, a batch at a time), where a word that missed the window is rare.
 */
export function matchingPosts<O>(
  db: Kysely<Database>,
  query: SelectQueryBuilder<Database, 'posts', O>,
  match: string,
  { below, atLeast, ids, listed, size, ownerId }: SearchWindow,
  limit: Expression<number>,
) {
  if (isPostgres(db)) {
    const tsquery = tsqueryMatch(match);
    // Statements are prepared, and after a few runs PostgreSQL may plan them once for any parameters (a generic
    // plan), blind to the words and the bounds: each shape below has one good plan whatever they are.
    // The index's first `listed` matches below `below` (an array built once, before the posts are read) and the
    // posts among them the rest of the query keeps, by primary key: the two steps of `ids` below in one statement.
    const fromIndex = () =>
      query
        .where(sql<SqlBool>`posts.id = any(array(${listedMatchesQuery(db, match, below, listed!, ownerId)}))`)
        .orderBy('posts.id', 'desc')
        .limit(limit);
    if (listed !== undefined && size === undefined) return fromIndex();
    if (ids) {
      // Matches the index listed (`searchPage`): the posts among them the rest of the query keeps, by primary key.
      return query.where(sql<SqlBool>`posts.id = any(${ids}::bigint[])`).orderBy('posts.id', 'desc').limit(limit);
    }
    if (size !== undefined) {
      // The window as a subquery with a LIMIT in the text: a plan of at most `size` rows, whatever the bounds, each
      // post's entry read by its key. The match under IS TRUE (the same rows) is no index condition: a generic plan
      // ANDed the GIN index (every match of a common word) with the window's range.
      let window = db.selectFrom('posts').select('posts.id as window_id').orderBy('posts.id', 'desc').limit(sql.lit(size));
      if (below !== undefined) window = window.where('posts.id', '<', below);
      if (ownerId !== undefined) window = window.where('posts.owner_id', '=', ownerId);
      let walked = query
        .innerJoin(window.as('window'), 'window.window_id', 'posts.id')
        .innerJoin('post_search', 'post_search.post_id', 'posts.id')
        .where((eb) => eb(eb.parens(tsquery), 'is', sql.lit(true)));
      if (atLeast !== undefined) walked = walked.where('posts.id', '>=', atLeast);
      // In the window's order (the same order), so the walk stops at the page's end instead of sorting the window.
      const windowed = walked.orderBy('window.window_id', 'desc').limit(limit);
      if (listed === undefined) return windowed;
      // The window, and only when it shows nothing, the index's first batch (`fromIndex`), as one statement: the
      // second branch's condition does not depend on its rows, so PostgreSQL tests it once, first, and runs none of
      // the branch (its list of matches included) when the window showed a post. `from_index` says which branch
      // answered (`searchPage` takes it off the rows); the rows of both are the query's columns.
      const union = db
        .with('windowed', () => windowed as never)
        .selectFrom('windowed')
        .selectAll()
        .select(sql<boolean>`false`.as('from_index'))
        .unionAll(
          db
            .selectFrom(fromIndex().as('listed_page') as never)
            .selectAll()
            .select(sql<boolean>`true`.as('from_index'))
            .where(sql<SqlBool>`not exists (select from windowed)`) as never,
        )
        .orderBy(sql`id`, 'desc');
      return union as unknown as typeof windowed;
    }
    // One query over the whole index (tests compare the windows with it).
    let matching = query.innerJoin('post_search', 'post_search.post_id', 'posts.id').where(tsquery);
    // Each bound on both sides of the join: a merge join does not carry a range from one side to the other.
    if (below !== undefined) matching = matching.where('posts.id', '<', below).where('post_search.post_id', '<', below);
    if (atLeast !== undefined) matching = matching.where('posts.id', '>=', atLeast).where('post_search.post_id', '>=', atLeast);
    return matching.orderBy('posts.id', 'desc').limit(limit);
  }
  const fts5 = sql<SqlBool>`post_search match ${match}`;
  if (ownerId !== undefined) {
    // One owner's posts newest first (the owner index) in the outer loop, each matched by an FTS5 lookup of its
    // rowid: SQLite keeps a CROSS JOIN's order, and would otherwise drive by every match of the words.
    let owned = query.crossJoin('post_search').where(sql<SqlBool>`post_search.rowid = posts.id`).where(fts5).where('posts.owner_id', '=', ownerId);
    if (below !== undefined) owned = owned.where('posts.id', '<', below);
    return owned.orderBy('posts.id', 'desc').limit(limit);
  }
  if (atLeast !== undefined) {
    // A window of ids below a cursor (`searchPage`): FTS5 read forwards, oldest first, every match in the window (no
    // LIMIT: the newest are wanted, and the window bounds the rows); searchPage puts them newest first. The join's
    // unary `+` keeps SQLite from copying the bounds onto `posts.id` (an equality of two columns does), which made
    // the posts' index drive and FTS5 answer one lookup a post.
    let window = query
      .innerJoin('post_search', (join) => join.on(sql<SqlBool>`posts.id = +post_search.rowid`))
      .where(fts5)
      .where(sql<SqlBool>`post_search.rowid >= cast(${atLeast} as integer)`);
    if (below !== undefined) window = window.where(sql<SqlBool>`post_search.rowid < cast(${below} as integer)`);
    return window.orderBy(sql`post_search.rowid`, 'asc');
  }
  let matching = query.innerJoin('post_search', (join) => join.on(sql<SqlBool>`post_search.rowid = posts.id`)).where(fts5);
  if (below !== undefined) matching = matching.where(sql<SqlBool>`post_search.rowid < cast(${below} as integer)`);
  return matching.orderBy(sql`post_search.rowid`, 'desc').limit(limit);
}

/**
 * PostgreSQL: how many of the newest posts below the cursor a page looks at along the id order first when the
 * statistics do not call the query common (a common one's first window is sized by its share), and at most after
 * that when a window found some matches but not a page. The first window's job is then to catch a word common among
 * the newest posts that the statistics (as of the last ANALYZE) do not know yet: a word in one post in ten there is
 * missed by 32 posts 3% of the time, and then listing it from the index reads its matches (bench/README.md).
 */
export const SEARCH_WINDOW = 32;
export const SEARCH_WINDOW_MAX = 32_768;

/**
 * Reads one search page of `limit + 1` rows after `after` through `read` (a query made by `matchingPosts`). On
 * SQLite, see `sqliteSearchPage`. On PostgreSQL, a window of the newest posts below the cursor first, walked in id
 * order with the match as a filter (bounded work, enough for a common word), then the index's matches for the rest
 * (see `matchingPosts`), which are then few. The same rows either way.
 */
export async function searchPage<Row extends { id: number }>(
  db: Kysely<Database>,
  terms: readonly SearchTerm[],
  after: number | undefined,
  limit: number,
  read: (window: SearchWindow) => Promise<Row[]>,
  options: { ownerId?: number; first?: number; max?: number; batch?: number } = {},
): Promise<Row[]> {
  const { ownerId } = options;
  if (!isPostgres(db)) return sqliteSearchPage(after, limit, read, { ownerId, first: options.first ?? SQLITE_WINDOW, max: options.max ?? SQLITE_WINDOW_MAX });
  const windows = { first: options.first ?? SEARCH_WINDOW, max: options.max ?? SEARCH_WINDOW_MAX, batch: options.batch ?? INDEX_BATCH };
  return ownerId === undefined
    ? postgresSearchPage(db, terms, after, limit, read, windows)
    : ownerSearchPage(db, terms, after, limit, read, { ...windows, ownerId });
}

interface Windows {
  first: number;
  max: number;
  batch: number;
}

/**
 * PostgreSQL, every owner's posts. PostgreSQL's statistics say how common the query is (`commonShare`, kept a
 * minute): a common query's first window is sized to hold a page at that density, so its page is one statement
 * most of the time; anything else gets a first window of `first` posts. A window is one statement that walks the
 * newest posts below `below` and stops at the page's end; when it does not fill the page, the next starts below
 * the oldest match it found (not at its last post, which the statement does not answer: at most one window's posts
 * without a match are looked at twice), as large as the density found says the page needs (twice that, at most
 * `max`).
 *
 * After the windows, a query they missed is rare (in fewer than one post in `first`), unless it is common in older
 * posts only: listing the index's matches of that one would read all of them (hundreds of thousands, seconds) to
 * keep a page, so a query the statistics call common is walked along the primary key instead (`walkedMatches`).
 * A rare query's first window comes with the index's first batch of matches in one statement (`listed` with
 * `size`: the batch's posts when the window shows none), so its page is one statement when that fills it; only a
 * page left short lists the batch again to learn whether more matches follow.
 */
async function postgresSearchPage<Row extends { id: number }>(
  db: Kysely<Database>,
  terms: readonly SearchTerm[],
  after: number | undefined,
  limit: number,
  read: (window: SearchWindow) => Promise<Row[]>,
  { first, max, batch }: Windows,
): Promise<Row[]> {
  const rows: Row[] = [];
  let below = after;
  const share = await commonShare(db, terms);
  const common = share >= COMMON_SHARE;
  let size = common ? Math.max(first, nextWindow(1, share, limit + 1, max)) : first;
  // Whether the index's first batch below `below` has been read (a rare query's first statement).
  let batchRead = false;
  for (let round = 0; round < 2; round++) {
    const withBatch = !common && round === 0;
    const found = await read({ below, size, listed: withBatch ? batch : undefined });
    const fromIndex = found.length > 0 && (found[0] as { from_index?: boolean }).from_index === true;
    for (const row of found) {
      if (withBatch) delete (row as { from_index?: boolean }).from_index;
      rows.push(row);
    }
    if (rows.length > limit) return rows.slice(0, limit + 1);
    if (found.length === 0 || fromIndex) {
      batchRead = withBatch;
      break;
    }
    below = found[found.length - 1]!.id;
    size = nextWindow(size, found.length, limit + 1 - rows.length, max);
  }
  if (!common) {
    if (!batchRead) {
      rows.push(...(await read({ below, listed: batch })));
      if (rows.length > limit) return rows.slice(0, limit + 1);
    }
    // Short of a page: whether the batch held every match below is known by listing it.
    const ids = (await listedMatches(db, terms, below, batch, undefined)).map((r) => Number(r.post_id));
    if (ids.length < batch) return rows;
    below = ids[ids.length - 1];
  }
  return readMatches(db, terms, rows, below, limit, read, { walk: common, batch });
}

/**
 * The page's remaining rows from the index's matches below `below`, a batch at a time, each batch's posts read by
 * their keys: listed from the index (`listedMatches`, for a rare query) or found by walking the primary key
 * (`walkedMatches`, a common one).
 */
async function readMatches<Row extends { id: number }>(
  db: Kysely<Database>,
  terms: readonly SearchTerm[],
  rows: Row[],
  below: number | undefined,
  limit: number,
  read: (window: SearchWindow) => Promise<Row[]>,
  { walk, batch, ownerId }: { walk: boolean; batch: number; ownerId?: number },
): Promise<Row[]> {
  const step = walk ? WALK_BATCH : batch;
  for (;;) {
    const ids = (await (walk ? walkedMatches(db, terms, below) : listedMatches(db, terms, below, batch, ownerId))).map((r) => Number(r.post_id));
    if (ids.length === 0) break;
    rows.push(...(await read({ ids, ownerId })));
    if (rows.length > limit || ids.length < step) break;
    below = ids[ids.length - 1];
  }
  return rows.slice(0, limit + 1);
}

/**
 * PostgreSQL, one owner's posts (GET /users/{id}/posts?q=): windows of that owner's newest posts below the cursor
 * (the owner index), each bounded by its oldest id read first (`atLeast`); then the index's matches of that owner.
 * A common query is walked on, window after window to the owner's first post: listing the index would read the
 * matches of every owner to keep that owner's.
 */
async function ownerSearchPage<Row extends { id: number }>(
  db: Kysely<Database>,
  terms: readonly SearchTerm[],
  after: number | undefined,
  limit: number,
  read: (window: SearchWindow) => Promise<Row[]>,
  { first, max, batch, ownerId }: Windows & { ownerId: number },
): Promise<Row[]> {
  const rows: Row[] = [];
  let below = after;
  let size = first;
  let common: boolean | undefined;
  const walkOn = async () => (common ??= (await commonShare(db, terms)) >= COMMON_SHARE);
  for (let round = 0; round < 2 || (await walkOn()); round++) {
    let edge = db.selectFrom('posts').select('posts.id').where('posts.owner_id', '=', ownerId).orderBy('posts.id', 'desc').offset(size - 1).limit(1);
    if (below !== undefined) edge = edge.where('posts.id', '<', below);
    const atLeast = (await edge.executeTakeFirst())?.id;
    const found = await read({ below, atLeast, size, ownerId });
    rows.push(...found);
    if (rows.length > limit || atLeast === undefined) return rows.slice(0, limit + 1);
    below = atLeast;
    if (found.length === 0) {
      if (!(await walkOn())) break;
      size = max;
      continue;
    }
    size = nextWindow(size, found.length, limit + 1 - rows.length, max);
  }
  return readMatches(db, terms, rows, below, limit, read, { walk: false, batch, ownerId });
}

/**
 * The next window's size after one of `size` ids found `found` (> 0) matches and the page still lacks `missing`
 * rows: twice what that density says the page needs, at most `max`. A power of two, so that the statement texts
 * (PostgreSQL's window LIMIT is in them) are few.
 */
function nextWindow(size: number, found: number, missing: number, max: number): number {
  return Math.min(max, 2 ** Math.ceil(Math.log2((2 * missing * size) / found)));
}

/**
 * SQLite: how many ids below the cursor a page after a cursor looks at first (about a page of a word in half the
 * posts), and at most in its second window.
 */
export const SQLITE_WINDOW = 64;
export const SQLITE_WINDOW_MAX = 4096;

/**
 * SQLite's page (see `searchPage`). A first page, and one owner's search (the owner index drives it, each post looked
 * up in FTS5 by its rowid), are one statement: FTS5 walks its doclists backwards from their newest entry and stops at
 * the page's end. A page after a cursor is not: to start backwards from a rowid, FTS5 steps back through its doclist
 * index from the newest entry, re-reading an index page from its start at each step (`fts5DlidxLvlPrev`), so the
 * seek costs more the older the cursor and the more common the word. Forwards it seeks in one pass. So a page after
 * a cursor reads windows of ids below it forwards (`atLeast`, all the window's matches, oldest first), newest window
 * first: the first `first` ids, then as many as the first's density says the page needs (twice that, at most `max`).
 * Past two windows (a word rare below the cursor: its doclist is short) the rest is the one backwards statement.
 */
async function sqliteSearchPage<Row extends { id: number }>(
  after: number | undefined,
  limit: number,
  read: (window: SearchWindow) => Promise<Row[]>,
  { ownerId, first, max }: { ownerId?: number; first: number; max: number },
): Promise<Row[]> {
  if (after === undefined || ownerId !== undefined) return read({ below: after, ownerId });
  const rows: Row[] = [];
  let below = after;
  let size = first;
  for (let round = 0; round < 2; round++) {
    // Ids start at 1: a window reaching below it is the last one.
    const atLeast = Math.max(below - size, 1);
    const found = await read({ below, atLeast });
    for (let i = found.length - 1; i >= 0; i--) rows.push(found[i]!);
    if (rows.length > limit || atLeast === 1) return rows.slice(0, limit + 1);
    below = atLeast;
    size = found.length === 0 ? max : nextWindow(size, found.length, limit + 1 - rows.length, max);
  }
  rows.push(...(await read({ below })));
  return rows.slice(0, limit + 1);
}

/** How many of the index's matches a search page takes at a time once past the windows. */
const INDEX_BATCH = 500;

/**
 * The index's matches below `below`, newest first, a batch at a time. Written so that a generic plan (the statement
 * is prepared; PostgreSQL may plan it once for any words) is the GIN index's bitmap and a sort of its matches, never
 * a walk of the primary key testing every entry (for a rare word, the whole table): `+ 0` keeps the bound out of the
 * index conditions (ANDed with a range of the primary key it read every row below the bound), and the order is by
 * `post_id + 0`, which no index gives, so there is no walk that would stop early to choose.
 */
function listedMatchesQuery(db: Kysely<Database>, match: string, below: number | undefined, batchSize: number, ownerId: number | undefined) {
  let batch = db
    .selectFrom('post_search')
    .select('post_search.post_id')
    .where(tsqueryMatch(match))
    .orderBy(sql`post_search.post_id + 0`, 'desc')
    .limit(sql.lit(batchSize));
  if (below !== undefined) batch = batch.where(sql<SqlBool>`post_search.post_id + 0 < ${below}`);
  // One owner's matches only, so that a batch is not spent on other owners' posts (each matched post by its key).
  if (ownerId !== undefined) {
    batch = batch.innerJoin('posts', 'posts.id', 'post_search.post_id').where(sql<SqlBool>`posts.owner_id + 0 = ${ownerId}`);
  }
  return batch;
}

const listedMatches = (db: Kysely<Database>, terms: readonly SearchTerm[], below: number | undefined, batchSize: number, ownerId: number | undefined) =>
  listedMatchesQuery(db, tsqueryText(terms), below, batchSize, ownerId).execute();

/**
 * The matches below `below`, newest first, found by walking the primary key backwards and testing each entry: for a
 * query in at least COMMON_SHARE of the posts, about WALK_BATCH ÷ that share entries. The match under IS TRUE is no
 * index condition, so even a generic plan cannot take the GIN index's list of every match.
 */
function walkedMatches(db: Kysely<Database>, terms: readonly SearchTerm[], below: number | undefined) {
  let walk = db
    .selectFrom('post_search')
    .select('post_search.post_id')
    .where((eb) => eb(eb.parens(tsqueryMatch(tsqueryText(terms))), 'is', sql.lit(true)))
    .orderBy('post_search.post_id', 'desc')
    .limit(sql.lit(WALK_BATCH));
  if (below !== undefined) walk = walk.where('post_search.post_id', '<', below);
  return walk.execute();
}

/** A query in at least this share of the posts is walked, not listed (see `searchPage`). */
export const COMMON_SHARE = 0.01;
const WALK_BATCH = 128;
const STATS_MAX_AGE_MS = 60_000;

/**
 * The share of posts estimated to match `terms` from PostgreSQL's statistics of `post_search.words` (its most common
 * lexemes and their shares, as ANALYZE left them): the product of the shares of its words, each term a single plain
 * word; 0 (rare) when any word is not among the most common or any term is a phrase or a prefix, whose share the
 * statistics do not give. Exclusions do not count. Read at most once a minute per pool.
 */
export async function commonShare(db: Kysely<Database>, terms: readonly SearchTerm[]): Promise<number> {
  const included = terms.filter((term) => !term.exclude);
  if (included.length === 0 || included.some((term) => term.words.length !== 1 || term.words[0]!.prefix)) return 0;
  const shares = await commonWords(db);
  return included.reduce((share, term) => share * (shares.get(term.words[0]!.text) ?? 0), 1);
}

const statistics = new WeakMap<Kysely<Database>, { at: number; shares: Promise<Map<string, number>> }>();

function commonWords(db: Kysely<Database>): Promise<Map<string, number>> {
  const kept = statistics.get(db);
  if (kept && Date.now() - kept.at < STATS_MAX_AGE_MS) return kept.shares;
  const shares = sql<{ word: string | null; share: number | null }>`
    select unnest(most_common_elems::text::text[]) as word, unnest(most_common_elem_freqs) as share
      from pg_stats where schemaname = current_schema() and tablename = 'post_search' and attname = 'words'`
    .execute(db)
    .then((result) => new Map(result.rows.flatMap((row) => (row.word !== null && row.share !== null ? [[row.word, Number(row.share)] as const] : []))));
  statistics.set(db, { at: Date.now(), shares });
  // A failed read is not kept: the next search asks again.
  shares.catch(() => statistics.delete(db));
  return shares;
}

/**
 * `users.username_key` compared in code-point order on both engines (SQLite's BINARY; PostgreSQL's "C", which an
 * index of the search migration serves), whatever the database's default collation: users found by name are
 * ordered and paged by it, and `_` must sort where it sorts on SQLite.
 */
export const usernameOrder = (db: Kysely<Database>) =>
  isPostgres(db) ? sql<string>`users.username_key collate "C"` : sql<string>`users.username_key`;
