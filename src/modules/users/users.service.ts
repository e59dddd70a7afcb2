import type { Kysely } from 'kysely';
import type { Dialect } from '../../db/database.js';
import type { Database, Role } from '../../db/types.js';
import { inTransaction, lockRow } from '../../db/transaction.js';
import { isUniqueViolation } from '../../db/errors.js';
import { AppError } from '../../shared/errors.js';
import { hashPassword } from '../../shared/passwords.js';
import { createUsersRepository, type PublicUserRow } from './users.repository.js';
import { nowIso } from '../../shared/clock.js';

/** Creates a user; a username taken in any letter case is a 409 naming `username`. */
export async function createUser(
  db: Kysely<Database>,
  input: { username: string; password: string; displayName?: string; bio?: string; role?: Role },
  passwordHashMemoryKib: number,
): Promise<PublicUserRow> {
  const now = nowIso();
  const passwordHash = await hashPassword(input.password, passwordHashMemoryKib);
  try {
    return await createUsersRepository(db).insert({
      username: input.username,
      display_name: input.displayName ?? '',
      bio: input.bio ?? '',
      role: input.role ?? 'member',
      password_hash: passwordHash,
      created_at: now,
      updated_at: now,
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw AppError.conflict('username', 'is already taken');
    throw error;
  }
}

/**
 * Deletes a user and everything that is theirs in one transaction. The foreign keys cascade the rows (tokens,
 * follows both ways, posts with their replies and recommends, their replies and recommends elsewhere, boards,
 * feed entries); the counters that other users and other posts keep are corrected here, before the cascade.
 * The user's row is locked first, so a concurrent follow, reply or recommend that points at them waits and then
 * fails its foreign key instead of leaving a counter off by one.
 */
export async function deleteUser(db: Kysely<Database>, dialect: Dialect, id: number): Promise<boolean> {
  return inTransaction(db, async (trx) => {
    if (!(await lockRow(trx, dialect, 'users', id))) return false;
    await trx
      .updateTable('users')
      .set((eb) => ({ follower_count: eb('follower_count', '-', 1) }))
      .where('id', 'in', trx.selectFrom('follows').select('followee_id').where('follower_id', '=', id))
      .execute();
    await trx
      .updateTable('users')
      .set((eb) => ({ following_count: eb('following_count', '-', 1) }))
      .where('id', 'in', trx.selectFrom('follows').select('follower_id').where('followee_id', '=', id))
      .execute();
    await trx
      .updateTable('posts')
      .set((eb) => ({
        reply_count: eb(
          'reply_count',
          '-',
          eb
            .selectFrom('replies')
            .select(eb.fn.countAll<number>().as('n'))
            .whereRef('replies.post_id', '=', 'posts.id')
            .where('replies.author_id', '=', id),
        ),
      }))
      .where('owner_id', '<>', id)
      .where('id', 'in', trx.selectFrom('replies').select('post_id').where('author_id', '=', id))
      .execute();
    await trx
      .updateTable('posts')
      .set((eb) => ({ recommend_count: eb('recommend_count', '-', 1) }))
      .where('owner_id', '<>', id)
      .where('id', 'in', trx.selectFrom('recommends').select('post_id').where('user_id', '=', id))
      .execute();
    await trx.deleteFrom('users').where('id', '=', id).execute();
    return true;
  });
}

/** Removes every user and, through the cascades, everything that is theirs. No counter survives to correct. */
export async function deleteAllUsers(db: Kysely<Database>): Promise<number> {
  return inTransaction(db, async (trx) => {
    const result = await trx.deleteFrom('users').executeTakeFirst();
    return Number(result.numDeletedRows);
  });
}

/**
 * Makes sure an admin account exists: creates it, or promotes the existing user of that name. Used by the
 * ADMIN_USERNAME/ADMIN_PASSWORD bootstrap at start-up and by `corkboard create-admin`.
 */
export async function ensureAdmin(
  db: Kysely<Database>,
  username: string,
  password: string | undefined,
  passwordHashMemoryKib: number,
): Promise<'created' | 'promoted' | 'unchanged'> {
  const users = createUsersRepository(db);
  const existing = await users.findCredentialsByUsername(username);
  if (existing) {
    if (existing.role === 'admin') return 'unchanged';
    await users.setRole(existing.id, 'admin', nowIso());
    return 'promoted';
  }
  if (password === undefined) throw new Error(`user "${username}" does not exist; a password is needed to create it`);
  try {
    await createUser(db, { username, password, role: 'admin' }, passwordHashMemoryKib);
    return 'created';
  } catch (error) {
    // Two processes bootstrapping at once: the other one created it.
    if (error instanceof AppError && error.statusCode === 409) return 'unchanged';
    throw error;
  }
}
