import type { Kysely } from 'kysely';
import type { Database, Role, SuspensionRow } from '../../db/types.js';

/** Which of `ids` are suspended accounts: one probe of the primary key each. */
export async function suspendedAmong(db: Kysely<Database>, ids: readonly number[]): Promise<Set<number>> {
  if (ids.length === 0) return new Set();
  const rows = await db.selectFrom('suspensions').select('user_id').where('user_id', 'in', [...ids]).execute();
  return new Set(rows.map((row) => Number(row.user_id)));
}

/**
 * Suspension rows (the counters a suspension moves are the users repository's `moveShare`; suspensions.service.ts
 * says why). Pass a transaction's `db` to write.
 */
export function createSuspensionsRepository(db: Kysely<Database>) {
  return {
    find(userId: number): Promise<SuspensionRow | undefined> {
      return db.selectFrom('suspensions').selectAll().where('user_id', '=', userId).executeTakeFirst();
    },

    /** The ids of everyone the user follows or is followed by (the rows lockAccount locks with the user's). */
    async relatedUserIds(userId: number): Promise<number[]> {
      const relations = await db
        .selectFrom('follows')
        .select(['follower_id', 'followee_id'])
        .where((eb) => eb.or([eb('follower_id', '=', userId), eb('followee_id', '=', userId)]))
        .execute();
      return relations.map((r) => (Number(r.follower_id) === userId ? Number(r.followee_id) : Number(r.follower_id)));
    },

    /** The user's role (the user exists: the caller has locked their row). */
    async roleOf(userId: number): Promise<Role> {
      const user = await db.selectFrom('users').select('role').where('id', '=', userId).executeTakeFirstOrThrow();
      return user.role;
    },

    /** A standing suspension's new reason (its createdAt stays). */
    async updateReason(userId: number, reason: string, now: string): Promise<void> {
      await db.updateTable('suspensions').set({ reason, updated_at: now }).where('user_id', '=', userId).execute();
    },

    async insert(userId: number, reason: string, now: string): Promise<void> {
      await db.insertInto('suspensions').values({ user_id: userId, reason, created_at: now, updated_at: now }).execute();
    },

    /** Revokes every token of the user; the password version moves, so a sign-in racing this is dead too. */
    async revokeTokens(userId: number): Promise<void> {
      await db.updateTable('users').set((eb) => ({ password_version: eb('password_version', '+', 1) })).where('id', '=', userId).execute();
      await db.deleteFrom('tokens').where('user_id', '=', userId).execute();
    },

    /** True when there was a suspension and it is now gone. */
    async remove(userId: number): Promise<boolean> {
      const result = await db.deleteFrom('suspensions').where('user_id', '=', userId).executeTakeFirst();
      return result.numDeletedRows !== 0n;
    },
  };
}
