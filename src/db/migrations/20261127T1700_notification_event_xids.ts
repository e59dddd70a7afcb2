import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// The notification log without a row every notification writer waits on (issue 45), as 20261127T1600 did for the
// post streams' log. On PostgreSQL the trigger no longer takes an event's id from the one row of
// `notification_position` (an UPDATE whose lock was held until the commit, so every transaction that wrote or removed
// a notification, for any user, in any process, committed after the one before it): the id comes from a sequence
// (unique, not in commit order) and the row records its writing transaction's id (`xid`, pg_current_xact_id()).
// Readers take events in (xid, id) order and only below the horizon under which no transaction of this database is
// still open (src/modules/streams/events.ts, HORIZON), so a reader that went past an event never misses one before
// it. See src/modules/notifications/notifications.stream.ts.
//
// SQLite's single writer already orders commits: its triggers keep drawing gapless ids from `notification_position`,
// and their xid stays 0.
//
// Existing events get xid 0: they come before every new one (any real xid is above 0), and their ids, as clients hold
// them (`<id>-<tag>`), still name them. The position row stays: on PostgreSQL it keeps the last id handed out before
// this migration, with its tag, which is where an empty log starts.
export async function up(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  if (pg) {
    await sql`alter table notification_events add column xid xid8 not null default '0'`.execute(db);
    await sql`alter table notification_events alter column xid set default pg_current_xact_id()`.execute(db);
    await sql`create sequence notification_events_id_seq owned by notification_events.id`.execute(db);
    await sql`select setval('notification_events_id_seq', greatest(
      (select last_id from notification_position where id = 1), (select max(id) from notification_events), 0) + 1, false)`.execute(db);
    await sql`alter table notification_events alter column id set default nextval('notification_events_id_seq')`.execute(db);
    // The same events as before, with the id and the xid left to the columns' defaults: nothing shared is locked.
    await sql`
      create or replace function notification_event() returns trigger language plpgsql as $$
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
  } else {
    await db.schema.alterTable('notification_events').addColumn('xid', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  }
  // A stream reads its recipient's events in delivery order; the scan for new events reads all of them in that order.
  await db.schema.dropIndex('notification_events_recipient').execute();
  await db.schema.createIndex('notification_events_recipient').on('notification_events').columns(['recipient_id', 'xid', 'id']).execute();
  await db.schema.createIndex('notification_events_order').on('notification_events').columns(['xid', 'id']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema.dropIndex('notification_events_order').execute();
  await db.schema.dropIndex('notification_events_recipient').execute();
  await db.schema.createIndex('notification_events_recipient').on('notification_events').columns(['recipient_id', 'id']).execute();
  if (pg) {
    // The counter goes on from the highest id drawn; ids keep their (xid, id) order only where xid was 0.
    await sql`update notification_position set last_id = greatest(last_id, (select coalesce(max(id), 0) from notification_events)) where id = 1`.execute(db);
    await sql`
      create or replace function notification_event() returns trigger language plpgsql as $$
      declare
        next_id bigint;
        next_tag text;
        at text := to_char(clock_timestamp() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
      begin
        update notification_position set last_id = last_id + 1, tag = substr(md5(random()::text || clock_timestamp()::text), 1, 12) where id = 1
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
    await sql`alter table notification_events alter column id drop default`.execute(db);
    await sql`drop sequence notification_events_id_seq`.execute(db);
  }
  await db.schema.alterTable('notification_events').dropColumn('xid').execute();
}
