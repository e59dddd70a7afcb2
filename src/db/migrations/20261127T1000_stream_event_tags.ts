import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// Live streams (CONTRACT §7, issue 40):
// - Every event gets a random `tag`, sent in its id (`<n>-<tag>`), and `stream_position` keeps the tag of the last
//   id handed out. A resume is accepted only when the event it names is kept with that tag (or is the last one):
//   after any restore (`corkboard restore`, pg_restore, a copied file) the numbers are handed out again, but with
//   other tags, so an id from before it gets `event: reset` instead of silently skipping what was written since.
// - The post's stored JSON goes: a replay renders each post from its current row, never from the log (an old
//   representation of a post since hidden or deleted must not be sent again). What a deleted account's posts need
//   (who followed the owner before) moves to columns of its own.
export async function up(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  // 48 random bits as 12 hex digits, the format events.ts writes.
  const random = pg ? sql`substr(md5(random()::text || clock_timestamp()::text), 1, 12)` : sql`lower(hex(randomblob(6)))`;
  await db.schema.alterTable('stream_events').addColumn('tag', 'text', (c) => c.notNull().defaultTo('')).execute();
  await db.schema.alterTable('stream_events').addColumn('followers', 'text').execute();
  await db.schema.alterTable('stream_events').addColumn('followers_in', 'bigint').execute();
  await sql`update stream_events set tag = ${random}`.execute(db);
  if (pg) {
    await sql`update stream_events set followers = (post::jsonb -> 'followers')::text, followers_in = (post::jsonb ->> 'followersIn')::bigint
      where kind = 'deleted'`.execute(db);
  } else {
    await sql`update stream_events set followers = json_extract(post, '$.followers'), followers_in = json_extract(post, '$.followersIn')
      where kind = 'deleted'`.execute(db);
  }
  await db.schema.alterTable('stream_events').dropColumn('post').execute();
  await db.schema.alterTable('stream_position').addColumn('tag', 'text', (c) => c.notNull().defaultTo('')).execute();
  await sql`update stream_position set tag = ${random}`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  // The posts' JSON cannot come back: replays of older events show nothing until they are purged.
  await db.schema.alterTable('stream_events').addColumn('post', 'text', (c) => c.notNull().defaultTo('{}')).execute();
  await db.schema.alterTable('stream_events').dropColumn('followers_in').execute();
  await db.schema.alterTable('stream_events').dropColumn('followers').execute();
  await db.schema.alterTable('stream_events').dropColumn('tag').execute();
  await db.schema.alterTable('stream_position').dropColumn('tag').execute();
}
