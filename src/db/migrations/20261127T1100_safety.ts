import { PostgresAdapter, sql, type ColumnDefinitionBuilder, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// CONTRACT §9: blocks, mutes and suspensions.
// - `blocks` and `mutes`: one row per (author, target), newest first by id on the author's list. The unique
//   (author, target) constraint serves "does A block B" and the author's list; the (target, author) index serves
//   "who blocks B" (a block works both ways) and the cascade when the target's account goes.
// - `suspensions`: one row per suspended user.
// - `users.block_count` (blocks the user is in, either side) and `users.mute_count` (mutes by the user) let the
//   read path skip the block and mute checks for the many callers who have none: the caller lookup already reads
//   the user's row, so knowing costs nothing.
// - `replies (post_id, author_id)`: a caller with blocks sees a post's replyCount less the replies of the users on
//   the other side of their blocks, each counted by one probe of this index.
export async function up(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  const ts = pg ? 'timestamptz' : 'text';
  const ref = (c: ColumnDefinitionBuilder) => c.notNull().references('users.id').onDelete('cascade');
  for (const [table, author, target] of [
    ['blocks', 'blocker_id', 'blocked_id'],
    ['mutes', 'muter_id', 'muted_id'],
  ] as const) {
    await (pg
      ? db.schema.createTable(table).addColumn('id', 'bigint', (c) => c.primaryKey().generatedByDefaultAsIdentity())
      : db.schema.createTable(table).addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement()))
      .addColumn(author, 'bigint', ref)
      .addColumn(target, 'bigint', ref)
      .addColumn('created_at', ts, (c) => c.notNull())
      .addUniqueConstraint(`${table}_pair`, [author, target])
      .addCheckConstraint(`${table}_not_self`, sql`${sql.ref(author)} <> ${sql.ref(target)}`)
      .execute();
    await db.schema.createIndex(`${table}_target`).on(table).columns([target, author]).execute();
  }
  await db.schema
    .createTable('suspensions')
    .addColumn('user_id', 'bigint', (c) => c.primaryKey().references('users.id').onDelete('cascade'))
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema.alterTable('users').addColumn('block_count', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('users').addColumn('mute_count', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.createIndex('replies_post_author').on('replies').columns(['post_id', 'author_id']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('replies_post_author').execute();
  await db.schema.alterTable('users').dropColumn('mute_count').execute();
  await db.schema.alterTable('users').dropColumn('block_count').execute();
  for (const table of ['suspensions', 'mutes', 'blocks']) await db.schema.dropTable(table).execute();
}
