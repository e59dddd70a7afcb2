import { PostgresAdapter, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// The board list is offset-paged (the seed's start/end). Skipping `start` boards over SQLite's rowid table walks
// the table's leaf pages, which hold the whole rows, so deep pages cost more the deeper they are. A narrow index of
// the ids lets the skip run over ids alone, many times faster (bench/README.md), after which only the page's rows are read. On
// PostgreSQL the primary key's index already serves that skip (an index-only scan), so it needs nothing.
export async function up(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) return;
  await db.schema.createIndex('boards_id').on('boards').column('id').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) return;
  await db.schema.dropIndex('boards_id').execute();
}
