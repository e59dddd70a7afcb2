import { Migrator, PostgresAdapter, sql, type Kysely } from 'kysely';
import type { Database } from './types.js';
import { migrations } from './migrations/index.js';

/** The newest migration this build knows: the schema version it expects. */
export const EXPECTED_SCHEMA = Object.keys(migrations).sort().at(-1) as string;

/** Brings the schema up to date. Safe to run from several processes at once: Kysely takes a lock. */
export async function migrateToLatest(db: Kysely<Database>): Promise<string[]> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    // On PostgreSQL the migrator otherwise finds its bookkeeping tables in *any* schema of the database, and then
    // fails when another schema (another deployment, a parallel test) has them and the current one does not.
    migrationTableSchema: await currentSchema(db),
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/**
 * True when the database answers and its newest applied migration is the one this build expects: an empty
 * database, or one migrated by an older or newer build, is not one this process can serve.
 */
export async function isSchemaCurrent(db: Kysely<Database>): Promise<boolean> {
  try {
    const { rows } = await sql<{ name: string }>`select max(name) as name from kysely_migration`.execute(db);
    return rows[0]?.name === EXPECTED_SCHEMA;
  } catch {
    return false;
  }
}

async function currentSchema(db: Kysely<Database>): Promise<string | undefined> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return undefined;
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
  return rows[0]?.schema;
}
