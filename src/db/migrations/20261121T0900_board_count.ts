import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// GET /boards/list answers `total`, the number of boards, on every page. Counting the rows on every request made
// each page cost as much as the whole table (bench/README.md). The count is kept instead in a one-row-per-name `counters` table, by triggers,
// so that every way a board comes or goes (its routes, and the cascade when its author is deleted) keeps it true
// inside the same transaction.
export async function up(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema
    .createTable('counters')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('value', 'bigint', (c) => c.notNull())
    .execute();
  await sql`insert into counters (name, value) select 'boards', count(*) from boards`.execute(db);
  if (pg) {
    await sql`
      create function boards_count() returns trigger language plpgsql as $$
      begin
        update counters set value = value + (case when tg_op = 'INSERT' then 1 else -1 end) where name = 'boards';
        return null;
      end $$`.execute(db);
    await sql`create trigger boards_count after insert or delete on boards for each row execute function boards_count()`.execute(db);
  } else {
    await sql`
      create trigger boards_count_insert after insert on boards
      begin update counters set value = value + 1 where name = 'boards'; end`.execute(db);
    await sql`
      create trigger boards_count_delete after delete on boards
      begin update counters set value = value - 1 where name = 'boards'; end`.execute(db);
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  if (pg) {
    await sql`drop trigger boards_count on boards`.execute(db);
    await sql`drop function boards_count()`.execute(db);
  } else {
    await sql`drop trigger boards_count_insert`.execute(db);
    await sql`drop trigger boards_count_delete`.execute(db);
  }
  await db.schema.dropTable('counters').execute();
}
