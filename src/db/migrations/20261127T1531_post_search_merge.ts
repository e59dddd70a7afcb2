import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// SQLite only: FTS5 writes each transaction's new entries as a segment of its own, and a query reads every segment
// that holds its words. Its automatic merging (on each write, while a level holds 4 segments) stays as it is: it
// does a bounded amount of work per write, where turning it off would leave the writes' "crisis merge" (16
// segments on a level, merged at once inside a write) as the bound. Background merges (src/modules/search/
// search.merge.ts) merge further, and `usermerge` 2 lets them merge two segments of a level, so readers find about
// one segment per level instead of up to three. PostgreSQL's GIN index needs nothing of the kind (autovacuum
// empties its pending list).
export async function up(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) return;
  await sql`insert into post_search (post_search, rank) values ('usermerge', 2)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) return;
  await sql`insert into post_search (post_search, rank) values ('usermerge', 4)`.execute(db);
}
