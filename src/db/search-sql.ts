import { PostgresAdapter, sql, type Kysely, type SelectQueryBuilder, type SqlBool } from 'kysely';
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
 * Writes a post's entry (`replace`: it has one already). Its removal needs no call: a post's deletion takes it
 * along (PostgreSQL: the foreign key's cascade; SQLite: a trigger), the cascade of an account's deletion included.
 */
export async function writePostSearch(db: Kysely<Database>, postId: number, words: readonly string[], replace: boolean): Promise<void> {
  if (isPostgres(db)) {
    await sql`insert into post_search (post_id, words) values (${postId}, ${tsvectorText(words)}::tsvector)
      on conflict (post_id) do update set words = excluded.words`.execute(db);
    return;
  }
  // FTS5 reads a rowid bound as a REAL (how the driver binds a JS number) as no rowid: cast it.
  if (replace) await sql`delete from post_search where rowid = cast(${postId} as integer)`.execute(db);
  await sql`insert into post_search (rowid, words) values (cast(${postId} as integer), ${words.join(' ')})`.execute(db);
}

/**
 * Narrows a posts query to the posts matching `terms`, newest first after `after` (keyset). The index drives the
 * page, newest match first, and stops at the page's end: SQLite's FTS5 walks its doclists backwards from the
 * cursor, ordered by its rowid (which must then be the ORDER BY and the bound, not `posts.id`, and the bound an
 * INTEGER, or FTS5 scans from the newest match). PostgreSQL plans between the GIN index (a rare word: every match,
 * then the newest) and the primary key walked backwards with the match as a filter (a common word).
 */
export function matchingPosts<O>(
  db: Kysely<Database>,
  query: SelectQueryBuilder<Database, 'posts', O>,
  terms: readonly SearchTerm[],
  after: number | undefined,
) {
  if (isPostgres(db)) {
    let matching = query
      .innerJoin('post_search', 'post_search.post_id', 'posts.id')
      .where(sql<SqlBool>`post_search.words @@ ${tsqueryText(terms)}::tsquery`);
    if (after !== undefined) matching = matching.where('posts.id', '<', after);
    return matching.orderBy('posts.id', 'desc');
  }
  let matching = query
    .innerJoin('post_search', (join) => join.on(sql<SqlBool>`post_search.rowid = posts.id`))
    .where(sql<SqlBool>`post_search match ${fts5Query(terms)}`);
  if (after !== undefined) matching = matching.where(sql<SqlBool>`post_search.rowid < cast(${after} as integer)`);
  return matching.orderBy(sql`post_search.rowid`, 'desc');
}

/**
 * `users.username_key` compared in code-point order on both engines (SQLite's BINARY; PostgreSQL's "C", which an
 * index of the search migration serves), whatever the database's default collation: users found by name are
 * ordered and paged by it, and `_` must sort where it sorts on SQLite.
 */
export const usernameOrder = (db: Kysely<Database>) =>
  isPostgres(db) ? sql<string>`users.username_key collate "C"` : sql<string>`users.username_key`;
