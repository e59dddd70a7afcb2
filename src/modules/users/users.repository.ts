import type { Kysely } from 'kysely';
import type { Database, NewUserRow, UserRow } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';

/** Every column but the password hash: what reads return, so the hash never travels further than it must. */
export const USER_COLUMNS = [
  'users.id',
  'users.username',
  'users.display_name',
  'users.bio',
  'users.role',
  'users.follower_count',
  'users.following_count',
  'users.post_count',
  'users.created_at',
  'users.updated_at',
] as const;
export type PublicUserRow = Omit<UserRow, 'password_hash' | 'username_key'>;

export const usernameKey = (username: string) => username.toLowerCase();

export function createUsersRepository(db: Kysely<Database>) {
  return {
    findById(id: number): Promise<PublicUserRow | undefined> {
      return db.selectFrom('users').select(USER_COLUMNS).where('id', '=', id).executeTakeFirst();
    },

    findCredentialsByUsername(username: string) {
      return db
        .selectFrom('users')
        .select(['id', 'role', 'password_hash'])
        .where('username_key', '=', usernameKey(username))
        .executeTakeFirst();
    },

    findPasswordHash(id: number) {
      return db.selectFrom('users').select('password_hash').where('id', '=', id).executeTakeFirst();
    },

    /** Users in id order, `limit + 1` rows after `after` (keyset). */
    list(options: { limit: number; after?: number; username?: string }): Promise<PublicUserRow[]> {
      let query = db.selectFrom('users').select(USER_COLUMNS).orderBy('id', 'asc').limit(pageLimit(options.limit));
      if (options.after !== undefined) query = query.where('id', '>', options.after);
      if (options.username !== undefined) query = query.where('username_key', '=', usernameKey(options.username));
      return query.execute();
    },

    insert(values: Omit<NewUserRow, 'username_key'>): Promise<PublicUserRow> {
      return db
        .insertInto('users')
        .values({ ...values, username_key: usernameKey(values.username) })
        .returning(USER_COLUMNS)
        .executeTakeFirstOrThrow();
    },

    update(
      id: number,
      values: { username: string; display_name: string; bio: string; role?: UserRow['role']; updated_at: string },
    ): Promise<PublicUserRow | undefined> {
      return db
        .updateTable('users')
        .set({ ...values, username_key: usernameKey(values.username) })
        .where('id', '=', id)
        .returning(USER_COLUMNS)
        .executeTakeFirst();
    },

    async setPassword(id: number, passwordHash: string, now: string) {
      await db.updateTable('users').set({ password_hash: passwordHash, updated_at: now }).where('id', '=', id).execute();
    },

    async setRole(id: number, role: UserRow['role'], now: string) {
      await db.updateTable('users').set({ role, updated_at: now }).where('id', '=', id).execute();
    },
  };
}

export type UsersRepository = ReturnType<typeof createUsersRepository>;
