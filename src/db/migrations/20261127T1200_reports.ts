import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// Reports (CONTRACT §9): a member flags a post, a reply or a user; admins resolve or dismiss it. A report outlives
// its subject and its reporter (admins keep the record), so it holds their ids without foreign keys: deleting a
// user, a post or every user never touches or waits for this table. Ids are never reused (AUTOINCREMENT, identity),
// so a stored id cannot come to name someone else. A reply's post id is kept with it: the reply's path includes it.
//
// One open report per reporter and subject: a partial unique index over the open ones (both engines have them), so
// the database decides between two racing creates, and between a create and an admin reopening an older report.
export async function up(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  const ts = pg ? 'timestamptz' : 'text';
  await (pg
    ? db.schema.createTable('reports').addColumn('id', 'bigint', (c) => c.primaryKey().generatedByDefaultAsIdentity())
    : db.schema.createTable('reports').addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement()))
    .addColumn('reporter_id', 'bigint', (c) => c.notNull())
    .addColumn('subject_type', 'text', (c) => c.notNull().check(sql`subject_type in ('post', 'reply', 'user')`))
    .addColumn('subject_id', 'bigint', (c) => c.notNull())
    // Set exactly for a reply: the post it was written under.
    .addColumn('subject_post_id', 'bigint')
    .addColumn('reason', 'text', (c) => c.notNull().check(sql`reason in ('spam', 'abuse', 'illegal', 'other')`))
    .addColumn('comment', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('open').check(sql`status in ('open', 'resolved', 'dismissed')`))
    .addColumn('resolution', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .addCheckConstraint('reports_reply_has_post', sql`(subject_type = 'reply') = (subject_post_id is not null)`)
    .execute();
  await db.schema
    .createIndex('reports_one_open')
    .on('reports')
    .columns(['reporter_id', 'subject_type', 'subject_id'])
    .unique()
    .where(sql.ref('status'), '=', sql.lit('open'))
    .execute();
  // GET /reports?status=…, newest first (the unfiltered list walks the primary key backwards).
  await db.schema.createIndex('reports_status_id').on('reports').columns(['status', 'id']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('reports').execute();
}
