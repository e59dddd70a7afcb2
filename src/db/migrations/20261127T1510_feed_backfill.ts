import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// A follow leaves the followee's existing posts to a background job: the follow's transaction records the pair
// here, and the fan-out worker (src/modules/feed/feed.fanout.ts) writes the posts' feed entries after it commits.
// Until then a feed read merges the followee's posts from `posts` itself, so the feed is whole from the moment the
// follow commits. Writing ~100 entries inside the request was ~9 ms of SQLite's one writer a follow at 10M posts
// (bench/README.md). Keyed (user_id, owner_id): the feed read finds its reader's pending followees by prefix.
export async function up(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema
    .createTable('feed_backfill')
    .addColumn('user_id', 'bigint', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('owner_id', 'bigint', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addPrimaryKeyConstraint('feed_backfill_pk', ['user_id', 'owner_id'])
    .$call((t) => (pg ? t : t.modifyEnd(sql`without rowid`)))
    .execute();
  // The owner's side: deleting a user cascades here by owner_id too.
  await db.schema.createIndex('feed_backfill_owner_id').on('feed_backfill').column('owner_id').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('feed_backfill').execute();
}
