import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// Notifications come in batches (a post naming 20 users makes 20 at once), and the insert trigger of
// 20261127T1400_notifications.ts bumped `notification_position` and wrote a `notification_events` row once for
// each. The one writer of notifications (notifications.repository.ts, `insert`) now logs its whole statement
// itself, in the same transaction: one bump of the position by the number of rows, one multi-row insert of their
// events. The position row is still locked from that bump to the end of the transaction, so ids still follow commit
// order without gaps. Deletions keep their per-row trigger: the cascades of a deleted post, reply or account delete
// notifications without the application seeing them, and they must be logged all the same.
export async function up(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    await sql`drop trigger notification_event on notifications`.execute(db);
    await sql`create trigger notification_event after delete on notifications for each row execute function notification_event()`.execute(db);
  } else {
    await sql`drop trigger notification_created`.execute(db);
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    await sql`drop trigger notification_event on notifications`.execute(db);
    await sql`create trigger notification_event after insert or delete on notifications for each row execute function notification_event()`.execute(db);
  } else {
    await sql
      .raw(
        `create trigger notification_created after insert on notifications begin
           update notification_position set last_id = last_id + 1, tag = lower(hex(randomblob(6))) where id = 1;
           insert into notification_events (id, kind, notification_id, recipient_id, tag, created_at)
           select last_id, 'created', new.id, new.recipient_id, tag, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
           from notification_position where id = 1;
         end`,
      )
      .execute(db);
  }
}
