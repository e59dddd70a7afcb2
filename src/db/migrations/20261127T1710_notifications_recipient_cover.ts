import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// The index every read of a recipient's notifications walks, `(recipient_id, id)`, also carries the columns the
// visibility check reads from the row (type, actor_id, post_id), so the marker's unread count is answered from the
// index alone. On PostgreSQL this is what keeps its plan right: a prepared statement goes to a generic plan, which
// estimates `recipient_id = $1` at the average user's few rows and so chose a bitmap scan of the whole range and a
// sort, probing the posts of every notification the user has (all of them, not the first 1,001); an index-only scan
// in id order is cheaper in that estimate too, and stops at the LIMIT. SQLite has no INCLUDE: the columns are keys.
export async function up(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema.dropIndex('notifications_recipient').execute();
  if (pg) await sql`create index notifications_recipient on notifications (recipient_id, id) include (type, actor_id, post_id)`.execute(db);
  else await db.schema.createIndex('notifications_recipient').on('notifications').columns(['recipient_id', 'id', 'type', 'actor_id', 'post_id']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('notifications_recipient').execute();
  await db.schema.createIndex('notifications_recipient').on('notifications').columns(['recipient_id', 'id']).execute();
}
