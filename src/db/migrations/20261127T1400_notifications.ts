import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// Notifications (CONTRACT §10). A row exists while its cause does: the foreign keys cascade it away with its actor,
// its recipient, its post or its reply; the services delete the rest (an unfollow, a withdrawn recommend, an edit
// that drops a mention). Who may read a row is judged at read time (notifications.repository.ts), so nothing here
// encodes visibility.
export async function up(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  const ts = pg ? 'timestamptz' : 'text';
  const table = db.schema.createTable('notifications');
  await (pg
    ? table.addColumn('id', 'bigint', (c) => c.primaryKey().generatedByDefaultAsIdentity())
    : table.addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
  )
    .addColumn('recipient_id', 'bigint', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('actor_id', 'bigint', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('type', 'text', (c) => c.notNull().check(sql`type in ('follow', 'reply', 'recommend', 'mention')`))
    .addColumn('post_id', 'bigint', (c) => c.references('posts.id').onDelete('cascade'))
    .addColumn('reply_id', 'bigint', (c) => c.references('replies.id').onDelete('cascade'))
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  // Pages newest first and the marker's unread count: one range of this index per recipient.
  await db.schema.createIndex('notifications_recipient').on('notifications').columns(['recipient_id', 'id']).execute();
  // Undoing a follow or a recommend, and the cascades: without these a delete would scan the recipient's rows or
  // (PostgreSQL's foreign key actions) the whole table.
  await db.schema.createIndex('notifications_actor').on('notifications').columns(['actor_id', 'recipient_id']).execute();
  await db.schema.createIndex('notifications_post').on('notifications').column('post_id').execute();
  await db.schema.createIndex('notifications_reply').on('notifications').column('reply_id').execute();

  // A user's read marker; no row means lastReadId 0.
  await db.schema
    .createTable('notification_markers')
    .addColumn('user_id', 'bigint', (c) => c.primaryKey().references('users.id').onDelete('cascade'))
    .addColumn('last_read_id', 'bigint', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('notification_markers').execute();
  await db.schema.dropTable('notifications').execute();
}
