import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// Fan-out leaves the request: creating a post queues it here, in the same transaction, and a background worker
// writes its feed entries in batches (see src/modules/feed/feed.fanout.ts). Feed reads merge the queued posts, so
// nothing waits for the worker. Writing ten followers' entries inside the request touched ten scattered pages of
// `feed_entries` per post; SQLite's commit of those pages was most of a create's time (bench/README.md).
// On SQLite `integer primary key` makes post_id the rowid itself: one b-tree, appended at its end.
// A trigger queues every new post, however it is inserted, inside the inserting statement: no post can miss it.
export async function up(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema
    .createTable('fanout_queue')
    .addColumn('post_id', pg ? 'bigint' : 'integer', (c) => c.primaryKey().references('posts.id').onDelete('cascade'))
    .addColumn('owner_id', 'bigint', (c) => c.notNull())
    .execute();
  if (pg) {
    await sql`
      create function posts_queue_fanout() returns trigger language plpgsql as $$
      begin
        insert into fanout_queue (post_id, owner_id) values (new.id, new.owner_id);
        return null;
      end $$`.execute(db);
    await sql`create trigger posts_queue_fanout after insert on posts for each row execute function posts_queue_fanout()`.execute(db);
  } else {
    await sql`
      create trigger posts_queue_fanout after insert on posts
      begin insert into fanout_queue (post_id, owner_id) values (new.id, new.owner_id); end`.execute(db);
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  await sql`drop trigger posts_queue_fanout${pg ? sql` on posts` : sql``}`.execute(db);
  if (pg) await sql`drop function posts_queue_fanout()`.execute(db);
  await db.schema.dropTable('fanout_queue').execute();
}
