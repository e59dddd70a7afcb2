import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// Notifications (CONTRACT §10). A row exists while its cause does: the foreign keys cascade it away with its post
// or its reply; the services delete the rest (an account's deletion, an unfollow, a withdrawn recommend, an edit
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
    // No foreign keys to users: checking one would take a share lock on the recipient's row after the post's row
    // that a reply or recommend holds, the reverse of the users-before-posts order every write keeps, and a post
    // deleted meanwhile (owner's row, then post) deadlocked with it. An account's deletion removes its notifications
    // itself (removeAccountNotifications in notifications.service.ts).
    .addColumn('recipient_id', 'bigint', (c) => c.notNull())
    .addColumn('actor_id', 'bigint', (c) => c.notNull())
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

  // The log that notification streams replay (CONTRACT §7, §10), written by triggers so that every way a
  // notification comes or goes (the services, and the cascades of a deleted reply, post or account) is logged in
  // the same transaction. Ids come from the one row of `notification_position`, bumped by each event: the row stays
  // locked until the transaction ends, so ids follow commit order without gaps (as the post stream's log does, see
  // 20261125T0200_stream_events.ts), and a stream that has read id N has seen every event below it. Each event also
// gets a random tag, sent in its id (`<n>-<tag>`), and the position keeps the last one's: after a restore the numbers
// are handed out again with other tags, so an id from before it is answered with a reset (as 20261127T1000 does).
  await db.schema
    .createTable('notification_events')
    .addColumn('id', pg ? 'bigint' : 'integer', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('notification_id', 'bigint', (c) => c.notNull())
    .addColumn('recipient_id', 'bigint', (c) => c.notNull())
    .addColumn('tag', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('notification_events_recipient').on('notification_events').columns(['recipient_id', 'id']).execute();
  await db.schema.createIndex('notification_events_created_at').on('notification_events').column('created_at').execute();
  await db.schema
    .createTable('notification_position')
    .addColumn('id', 'integer', (c) => c.primaryKey())
    .addColumn('last_id', 'bigint', (c) => c.notNull())
    .addColumn('tag', 'text', (c) => c.notNull())
    .execute();
  // 48 random bits as 12 hex digits, the tag format of the post streams' log.
  const random = pg ? 'substr(md5(random()::text || clock_timestamp()::text), 1, 12)' : 'lower(hex(randomblob(6)))';
  await sql`insert into notification_position (id, last_id, tag) values (1, 0, ${sql.raw(random)})`.execute(db);
  if (pg) {
    await sql`
      create function notification_event() returns trigger language plpgsql as $$
      declare
        next_id bigint;
        next_tag text;
        at text := to_char(clock_timestamp() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
      begin
        update notification_position set last_id = last_id + 1, tag = ${sql.raw(random)} where id = 1
        returning last_id, tag into next_id, next_tag;
        if tg_op = 'INSERT' then
          insert into notification_events (id, kind, notification_id, recipient_id, tag, created_at)
          values (next_id, 'created', new.id, new.recipient_id, next_tag, at);
        else
          insert into notification_events (id, kind, notification_id, recipient_id, tag, created_at)
          values (next_id, 'deleted', old.id, old.recipient_id, next_tag, at);
        end if;
        return null;
      end $$`.execute(db);
    await sql`create trigger notification_event after insert or delete on notifications for each row execute function notification_event()`.execute(db);
  } else {
    for (const [kind, operation, row] of [
      ['created', 'insert', 'new'],
      ['deleted', 'delete', 'old'],
    ] as const) {
      await sql
        .raw(
          `create trigger notification_${kind} after ${operation} on notifications begin
             update notification_position set last_id = last_id + 1, tag = ${random} where id = 1;
             insert into notification_events (id, kind, notification_id, recipient_id, tag, created_at)
             select last_id, '${kind}', ${row}.id, ${row}.recipient_id, tag, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
             from notification_position where id = 1;
           end`,
        )
        .execute(db);
    }
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  if (pg) {
    await sql`drop trigger notification_event on notifications`.execute(db);
    await sql`drop function notification_event()`.execute(db);
  } else {
    await sql`drop trigger notification_created`.execute(db);
    await sql`drop trigger notification_deleted`.execute(db);
  }
  await db.schema.dropTable('notification_position').execute();
  await db.schema.dropTable('notification_events').execute();
  await db.schema.dropTable('notification_markers').execute();
  await db.schema.dropTable('notifications').execute();
}
