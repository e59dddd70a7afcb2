import { sql, type Kysely, type SqlBool } from 'kysely';
import type { Database, NewUserRow, Role } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';
import { isPostgres, usernameOrder } from '../../db/search-sql.js';
import { userSearchWords, userWords } from '../search/search.text.js';
import { USER_COLUMNS, userShownTo, visiblePostCount, type PublicUserRow, type Viewer } from '../../shared/visibility.js';

export const usernameKey = (username: string) => username.toLowerCase();

/**
 * Users a word found in at most this many users' names drives the search from `user_words` (searchByName): reading
 * that many index entries costs about what walking `limit * users / USER_INDEX_MAX` users does (bench/README.md).
 */
export const USER_INDEX_MAX = 2000;

/** After every word that starts with a prefix in code-point order: U+10FFFF, the last code point, is in no word. */
const WORD_END = '\u{10FFFF}';

interface WordBatch {
  rows: { user_id: number; username_key: string }[];
  /** How many users past the cursor have the word, counted up to `USER_INDEX_MAX + 1`. */
  total: number;
}

/**
 * The first `batchSize` users in username order past `after` with a word starting with `word`, out of its first
 * `USER_INDEX_MAX + 1` rows of `user_words` (all of them when the word is that rare), and how many those are: one
 * range of the primary key, sorted, the users' rows unread.
 */
async function usersWithWord(db: Kysely<Database>, word: string, after: string | undefined, batchSize: number): Promise<WordBatch> {
  let range = db
    .selectFrom('user_words')
    .select(['user_words.user_id', 'user_words.username_key'])
    .where('user_words.word', '>=', word)
    .where('user_words.word', '<', word + WORD_END)
    .limit(sql.lit(USER_INDEX_MAX + 1));
  if (after !== undefined) range = range.where('user_words.username_key', '>', after);
  const rows = await db
    .selectFrom(range.as('found'))
    .select(['found.user_id', 'found.username_key', sql<number>`count(*) over ()`.as('total')])
    .orderBy('found.username_key', 'asc')
    .limit(sql.lit(batchSize))
    .execute();
  return { rows, total: rows.length === 0 ? 0 : Number(rows[0]!.total) };
}

/** Writes a user's rows of `user_words` (their words, search.text.ts), in the transaction that writes the user. */
async function writeUserWords(db: Kysely<Database>, userId: number, username: string, displayName: string): Promise<void> {
  const key = usernameKey(username);
  const rows = userWords(username, displayName).map((word) => ({ word, username_key: key, user_id: userId }));
  if (rows.length > 0) await db.insertInto('user_words').values(rows).execute();
}

/**
 * User rows. Reads answer `PublicUserRow` (no password hash; `post_count` as the viewer may see it). Pass a
 * transaction's `db` to use it inside one.
 */
export function createUsersRepository(db: Kysely<Database>) {
  return {
    /** The user as `viewer` may see them: a suspended account is missing to all but admins (CONTRACT §9). */
    findById(id: number, viewer: Viewer): Promise<PublicUserRow | undefined> {
      return db
        .selectFrom('users')
        .select(USER_COLUMNS)
        .select(visiblePostCount(viewer))
        .where('users.id', '=', id)
        .where(userShownTo(viewer))
        .executeTakeFirst();
    },

    /** Whether the user exists for `viewer` (a suspended account does not, but to admins). */
    exists(id: number, viewer: Viewer): Promise<boolean> {
      return db
        .selectFrom('users')
        .select('users.id')
        .where('users.id', '=', id)
        .where(userShownTo(viewer))
        .executeTakeFirst()
        .then((row) => row !== undefined);
    },

    findCredentialsByUsername(username: string) {
      return db
        .selectFrom('users')
        .select(['id', 'role', 'password_hash', 'password_version'])
        .where('username_key', '=', usernameKey(username))
        .executeTakeFirst();
    },

    findPasswordHash(id: number) {
      return db.selectFrom('users').select('password_hash').where('id', '=', id).executeTakeFirst();
    },

    /** Users in id order, `limit + 1` rows after `after` (keyset). */
    list(viewer: Viewer, options: { limit: number; after?: number; username?: string }): Promise<PublicUserRow[]> {
      let query = db
        .selectFrom('users')
        .select(USER_COLUMNS)
        .select(visiblePostCount(viewer))
        .where(userShownTo(viewer))
        .orderBy('users.id', 'asc')
        .limit(pageLimit(options.limit));
      if (options.after !== undefined) query = query.where('users.id', '>', options.after);
      if (options.username !== undefined) query = query.where('username_key', '=', usernameKey(options.username));
      return query.execute();
    },

    /**
     * GET /users?q= (CONTRACT §11): the users each of whose `words` (search.query.ts) starts a word of their
     * username or display name, in lower-cased username order, `limit + 1` rows after `after` (a username_key).
     *
     * Driven by the query word that the fewest users past the cursor have, if at most `USER_INDEX_MAX` do (a name):
     * its range of `user_words`, which gives the users' username_key without reading their rows, is ordered by it
     * and read a batch at a time (each word's first batch also counts its users); only a batch's users are read,
     * each filtered by the other words. When every word is that
     * common, the walk of the username index instead (the old plan), which a common word stops early: at most
     * `limit * users / USER_INDEX_MAX` rows walked on average for words spread over the alphabet. Each path's cost is
     * bounded by one of the two, whichever the words call for; which one is decided here, by counting, not by the
     * planner's estimate (PostgreSQL's generic plans are blind to the words).
     */
    async searchByName(viewer: Viewer, words: readonly string[], options: { limit: number; after?: string; username?: string }): Promise<PublicUserRow[]> {
      const wanted = options.limit + 1;
      const batchSize = 2 * wanted;
      // Each word's first batch, and how many users past the cursor have it (up to USER_INDEX_MAX + 1).
      const firsts = await Promise.all(words.map((word) => usersWithWord(db, word, options.after, batchSize)));
      const rarest = firsts.reduce((best, batch, i) => (batch.total < (firsts[best] as WordBatch).total ? i : best), 0);
      const filtered = (others: readonly string[]) => {
        let query = db
          .selectFrom('users')
          .select(USER_COLUMNS)
          .select(visiblePostCount(viewer))
          // A suspended account is found by admins only (CONTRACT §9); blocks do not hide profiles here (§11).
          .where(userShownTo(viewer));
        if (others.length > 0) query = query.where((eb) => eb.and(others.map((word) => eb('users.search_words', 'like', `% ${word}%`))));
        if (options.username !== undefined) query = query.where('username_key', '=', usernameKey(options.username));
        return query;
      };
      if ((firsts[rarest] as WordBatch).total > USER_INDEX_MAX) {
        let walk = filtered(words).orderBy(usernameOrder(db), 'asc').limit(pageLimit(options.limit));
        if (options.after !== undefined) walk = walk.where(usernameOrder(db), '>', options.after);
        return walk.execute();
      }
      const word = words[rarest] as string;
      const others = words.filter((_, i) => i !== rarest);
      const rows: PublicUserRow[] = [];
      for (let found = (firsts[rarest] as WordBatch).rows; found.length > 0; ) {
        // A user has one row per word of theirs in the range (`ann` finds Ann Annabel twice): adjacent, as the order
        // is the username's.
        const order = new Map<number, number>();
        for (const { user_id } of found) if (!order.has(Number(user_id))) order.set(Number(user_id), order.size);
        const ids = [...order.keys()];
        const users = await filtered(others)
          .where(isPostgres(db) ? sql<SqlBool>`users.id = any(${ids}::bigint[])` : sql<SqlBool>`users.id in (select value from json_each(${JSON.stringify(ids)}))`)
          .execute();
        rows.push(...users.sort((a, b) => (order.get(Number(a.id)) as number) - (order.get(Number(b.id)) as number)));
        if (rows.length >= wanted || found.length < batchSize) break;
        found = (await usersWithWord(db, word, (found[found.length - 1] as { username_key: string }).username_key, batchSize)).rows;
      }
      return rows.slice(0, wanted);
    },

    /** Throws the driver's unique violation when the username is taken in any letter case. */
    async insert(values: Omit<NewUserRow, 'username_key'>): Promise<number> {
      const row = await db
        .insertInto('users')
        .values({ ...values, username_key: usernameKey(values.username), search_words: userSearchWords(values.username, values.display_name) })
        .returning('id')
        .executeTakeFirstOrThrow();
      await writeUserWords(db, row.id, values.username, values.display_name);
      return row.id;
    },

    /** False when the user no longer exists. Throws the unique violation on a username clash. */
    async update(id: number, values: { username: string; display_name: string; bio: string; role?: Role; updated_at: string }): Promise<boolean> {
      const result = await db
        .updateTable('users')
        .set({ ...values, username_key: usernameKey(values.username), search_words: userSearchWords(values.username, values.display_name) })
        .where('id', '=', id)
        .executeTakeFirst();
      if (result.numUpdatedRows === 0n) return false;
      await db.deleteFrom('user_words').where('user_id', '=', id).execute();
      await writeUserWords(db, id, values.username, values.display_name);
      return true;
    },

    /** Sets a new password hash and bumps the password version; answers the new version. */
    async setPassword(id: number, passwordHash: string, now: string): Promise<number | undefined> {
      const row = await db
        .updateTable('users')
        .set({ password_hash: passwordHash, password_version: sql`password_version + 1`, updated_at: now })
        .where('id', '=', id)
        .returning('password_version')
        .executeTakeFirst();
      return row?.password_version;
    },

    async setRole(id: number, role: Role, now: string): Promise<void> {
      await db.updateTable('users').set({ role, updated_at: now }).where('id', '=', id).execute();
    },
  };
}

export type UsersRepository = ReturnType<typeof createUsersRepository>;
