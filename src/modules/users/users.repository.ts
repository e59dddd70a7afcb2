import { sql, type Kysely } from 'kysely';
import type { Database, NewUserRow, Role } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';
import { usernameOrder } from '../../db/search-sql.js';
import { userSearchWords } from '../search/search.text.js';
import { USER_COLUMNS, userShownTo, visiblePostCount, type PublicUserRow, type Viewer } from '../../shared/visibility.js';

export const usernameKey = (username: string) => username.toLowerCase();

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
     * username or display name (`search_words`, search.text.ts), in lower-cased username order, `limit + 1` rows
     * after `after` (keyset over the unique username index). The walk stops at the page's end, so a word many
     * users share costs little; one that few share walks further.
     */
    searchByName(viewer: Viewer, words: readonly string[], options: { limit: number; after?: string; username?: string }): Promise<PublicUserRow[]> {
      let query = db
        .selectFrom('users')
        .select(USER_COLUMNS)
        .select(visiblePostCount(viewer))
        // A suspended account is found by admins only (CONTRACT §9); blocks do not hide profiles here (§11).
        .where(userShownTo(viewer))
        .where((eb) => eb.and(words.map((word) => eb('users.search_words', 'like', `% ${word}%`))))
        .orderBy(usernameOrder(db), 'asc')
        .limit(pageLimit(options.limit));
      if (options.after !== undefined) query = query.where(usernameOrder(db), '>', options.after);
      if (options.username !== undefined) query = query.where('username_key', '=', usernameKey(options.username));
      return query.execute();
    },

    /** Throws the driver's unique violation when the username is taken in any letter case. */
    async insert(values: Omit<NewUserRow, 'username_key'>): Promise<number> {
      const row = await db
        .insertInto('users')
        .values({ ...values, username_key: usernameKey(values.username), search_words: userSearchWords(values.username, values.display_name) })
        .returning('id')
        .executeTakeFirstOrThrow();
      return row.id;
    },

    /** False when the user no longer exists. Throws the unique violation on a username clash. */
    async update(id: number, values: { username: string; display_name: string; bio: string; role?: Role; updated_at: string }): Promise<boolean> {
      const result = await db
        .updateTable('users')
        .set({ ...values, username_key: usernameKey(values.username), search_words: userSearchWords(values.username, values.display_name) })
        .where('id', '=', id)
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
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
