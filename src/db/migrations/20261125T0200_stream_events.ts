import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// Live streams (CONTRACT §7) replay from a durable log of post events. Each writing transaction takes the next
// event id from the single row of `stream_position` (an UPDATE … RETURNING, which holds that row's lock until the
// transaction ends), so ids are handed out in commit order and without gaps on PostgreSQL as on SQLite: a reader
// that has seen id N has seen every committed id below it. See src/modules/streams/events.ts.
export async function up(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema
    .createTable('stream_events')
    .addColumn('id', pg ? 'bigint' : 'integer', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('post_id', 'bigint', (c) => c.notNull())
    .addColumn('owner_id', 'bigint', (c) => c.notNull())
    .addColumn('visibility', 'text', (c) => c.notNull())
    .addColumn('previous_visibility', 'text')
    // The post as it was written (the representation's fields), so a replay shows what the live stream showed.
    .addColumn('post', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('stream_events_created_at').on('stream_events').column('created_at').execute();
  await db.schema
    .createTable('stream_position')
    .addColumn('id', 'integer', (c) => c.primaryKey())
    .addColumn('last_id', 'bigint', (c) => c.notNull())
    .execute();
  await sql`insert into stream_position (id, last_id) values (1, 0)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('stream_position').execute();
  await db.schema.dropTable('stream_events').execute();
}
