import type { Kysely } from 'kysely';
import type { Database, SuspensionRow } from '../../db/types.js';

/** Which of `ids` are suspended accounts: one probe of the primary key each. */
export async function suspendedAmong(db: Kysely<Database>, ids: readonly number[]): Promise<Set<number>> {
  if (ids.length === 0) return new Set();
  const rows = await db.selectFrom('suspensions').select('user_id').where('user_id', 'in', [...ids]).execute();
  return new Set(rows.map((row) => Number(row.user_id)));
}

export function createSuspensionsRepository(db: Kysely<Database>) {
  return {
    find(userId: number): Promise<SuspensionRow | undefined> {
      return db.selectFrom('suspensions').selectAll().where('user_id', '=', userId).executeTakeFirst();
    },
  };
}
