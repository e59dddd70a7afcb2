import type { Kysely, Transaction } from 'kysely';
import type { Dialect } from './database.js';
import type { Database } from './types.js';
import { groupCommitOf } from './group-commit.js';

// PostgreSQL may abort one of two transactions that wait on each other (deadlock_detected) or that cannot be
// serialised; retrying the loser is the documented remedy. SQLite runs one writer at a time and never needs it.
const RETRYABLE = new Set(['40P01', '40001']);

/**
 * Runs `fn` in a transaction and answers what it answers once the transaction has committed. On SQLite the
 * transactions started in one turn of the event loop are committed together (see group-commit.ts); on PostgreSQL
 * each is its own, retried when PostgreSQL aborted it to break a deadlock or a serialization conflict.
 */
export async function inTransaction<T>(db: Kysely<Database>, fn: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  const group = groupCommitOf(db);
  if (group) return group.run(fn);
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction().execute(fn);
    } catch (error) {
      const code = (error as { code?: string } | null)?.code;
      if (attempt >= 5 || !code || !RETRYABLE.has(code)) throw error;
      await new Promise((r) => setTimeout(r, 5 * attempt * Math.random()));
    }
  }
}

/**
 * Takes the row lock of one row for the rest of the transaction (PostgreSQL `FOR UPDATE`). Writers that
 * reference the row (through a foreign key) wait for it, so a delete and a concurrent insert that points at the
 * deleted row cannot interleave. SQLite's single writer already serialises transactions, so it needs nothing.
 */
export async function lockRow(
  trx: Transaction<Database>,
  dialect: Dialect,
  table: 'users' | 'posts' | 'boards' | 'replies',
  id: number,
): Promise<boolean> {
  const query = trx.selectFrom(table).select('id').where('id', '=', id);
  const row = await (dialect === 'postgres' ? query.forUpdate() : query).executeTakeFirst();
  return row !== undefined;
}
