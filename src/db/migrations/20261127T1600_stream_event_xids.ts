import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// Live streams without a row every post writer waits on (issue 45). On PostgreSQL an event no longer takes its id
// from the one row of `stream_position` (an UPDATE that held the row's lock until the commit, so post commits of the
// whole service went one at a time): its id comes from a sequence (unique, not in commit order), and the row
// records its writing transaction's id (`xid`, pg_current_xact_id()). Readers deliver in (xid, id) order and only
// below a horizon under which no transaction of this database is still open: nothing can commit there any more,
// so a reader that went past an event never misses one before it. See
// src/modules/streams/events.ts.
//
// SQLite's single writer already orders commits: its events keep drawing their id from `stream_position`, and
// their xid stays 0.
//
// Existing events get xid 0: they come before every new one (any real xid is above 0), and their ids, as clients
// hold them (`<id>-<tag>`), still name them.
export async function up(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  if (pg) {
    await sql`alter table stream_events add column xid xid8 not null default '0'`.execute(db);
    await sql`alter table stream_events alter column xid set default pg_current_xact_id()`.execute(db);
    await sql`create sequence stream_events_id_seq owned by stream_events.id`.execute(db);
    await sql`select setval('stream_events_id_seq', greatest(
      (select last_id from stream_position where id = 1), (select max(id) from stream_events), 0) + 1, false)`.execute(db);
    await sql`alter table stream_events alter column id set default nextval('stream_events_id_seq')`.execute(db);
  } else {
    await db.schema.alterTable('stream_events').addColumn('xid', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  }
  await db.schema.createIndex('stream_events_order').on('stream_events').columns(['xid', 'id']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema.dropIndex('stream_events_order').execute();
  if (pg) {
    // The counter goes on from the highest id drawn; ids keep their (xid, id) order only where xid was 0.
    await sql`update stream_position set last_id = greatest(last_id, (select coalesce(max(id), 0) from stream_events)) where id = 1`.execute(db);
    await sql`alter table stream_events alter column id drop default`.execute(db);
    await sql`drop sequence stream_events_id_seq`.execute(db);
  }
  await db.schema.alterTable('stream_events').dropColumn('xid').execute();
}
