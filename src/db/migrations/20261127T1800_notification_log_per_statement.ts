import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// A post that mentions 20 users writes 20 notifications in one statement (issue 43), and each row cost two indexes
// it never needs and a trigger program of its own for its stream event. Now:
//
// - The log is written once per statement, not once per row. PostgreSQL: statement-level triggers read the rows
//   from transition tables (a foreign key's cascade is a statement too, so it is logged as before). SQLite has no
//   statement-level triggers: its insert trigger goes, and the one place that inserts notifications
//   (notifications.repository.ts, `insertNotifications` and the builder's `insert`) writes the events of its rows
//   with one statement, after bumping `notification_position` once for all of them (same gapless ids, one tag for
//   the statement's events). Its delete trigger stays per row: cascades delete without the repository.
// - `notifications_actor` holds only `follow` and `recommend`, the rows found by their actor and recipient (an
//   unfollow, a withdrawn recommend); an account's deletion finds its `reply` and `mention` rows through its replies
//   and posts. Its key ends with `type`, so the index alone answers them: without it SQLite took the recipient's
//   covering index, a walk of all the recipient's rows. `notifications_reply` holds only rows with a reply: the cascade of a reply's deletion names one, so
//   both backends still use it, and a post's mentions (no reply) skip it.
export async function up(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  if (pg) {
    await sql`drop trigger notification_event on notifications`.execute(db);
    await sql`drop function notification_event()`.execute(db);
    for (const [kind, operation, rows] of [
      ['created', 'insert', 'new'],
      ['deleted', 'delete', 'old'],
    ] as const) {
      await sql
        .raw(
          `create function notification_${kind}() returns trigger language plpgsql as $$
           begin
             insert into notification_events (kind, notification_id, recipient_id, tag, created_at)
             select '${kind}', id, recipient_id, substr(md5(random()::text || clock_timestamp()::text), 1, 12),
               to_char(clock_timestamp() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
             from ${kind}_rows order by id;
             return null;
           end $$`,
        )
        .execute(db);
      await sql
        .raw(
          `create trigger notification_${kind} after ${operation} on notifications referencing ${rows} table as ${kind}_rows
           for each statement execute function notification_${kind}()`,
        )
        .execute(db);
    }
  } else {
    await sql`drop trigger notification_created`.execute(db);
  }
  await db.schema.dropIndex('notifications_actor').execute();
  await sql`create index notifications_actor on notifications (actor_id, recipient_id, type) where type in ('follow', 'recommend')`.execute(db);
  await db.schema.dropIndex('notifications_reply').execute();
  await sql`create index notifications_reply on notifications (reply_id) where reply_id is not null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema.dropIndex('notifications_reply').execute();
  await db.schema.createIndex('notifications_reply').on('notifications').column('reply_id').execute();
  await db.schema.dropIndex('notifications_actor').execute();
  await db.schema.createIndex('notifications_actor').on('notifications').columns(['actor_id', 'recipient_id']).execute();
  if (pg) {
    for (const kind of ['created', 'deleted']) {
      await sql.raw(`drop trigger notification_${kind} on notifications`).execute(db);
      await sql.raw(`drop function notification_${kind}()`).execute(db);
    }
    await sql`
      create function notification_event() returns trigger language plpgsql as $$
      declare
        at text := to_char(clock_timestamp() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
        next_tag text := substr(md5(random()::text || clock_timestamp()::text), 1, 12);
      begin
        if tg_op = 'INSERT' then
          insert into notification_events (kind, notification_id, recipient_id, tag, created_at)
          values ('created', new.id, new.recipient_id, next_tag, at);
        else
          insert into notification_events (kind, notification_id, recipient_id, tag, created_at)
          values ('deleted', old.id, old.recipient_id, next_tag, at);
        end if;
        return null;
      end $$`.execute(db);
    await sql`create trigger notification_event after insert or delete on notifications for each row execute function notification_event()`.execute(db);
  } else {
    await sql`
      create trigger notification_created after insert on notifications begin
        update notification_position set last_id = last_id + 1, tag = lower(hex(randomblob(6))) where id = 1;
        insert into notification_events (id, kind, notification_id, recipient_id, tag, created_at)
        select last_id, 'created', new.id, new.recipient_id, tag, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
        from notification_position where id = 1;
      end`.execute(db);
  }
}
