import { PostgresAdapter, sql, type ColumnDefinitionBuilder, type CreateTableBuilder, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application, so later code changes never alter what it does.

export async function up(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  // SQLite: INTEGER PRIMARY KEY AUTOINCREMENT is the rowid and never reuses the id of a deleted row.
  // PostgreSQL: a 64-bit identity column. Either way ids only grow, which keyset pagination relies on.
  const id = <T extends string>(t: CreateTableBuilder<T, never>) =>
    pg
      ? t.addColumn('id', 'bigint', (c) => c.primaryKey().generatedByDefaultAsIdentity())
      : t.addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement());
  const ts = pg ? 'timestamptz' : 'text';
  const ref = (table: string) => (c: ColumnDefinitionBuilder) => c.notNull().references(`${table}.id`).onDelete('cascade');

  await id(db.schema.createTable('users'))
    .addColumn('username', 'text', (c) => c.notNull())
    .addColumn('username_key', 'text', (c) => c.notNull().unique())
    .addColumn('display_name', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('bio', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('role', 'text', (c) => c.notNull().defaultTo('member').check(sql`role in ('member', 'admin')`))
    .addColumn('password_hash', 'text', (c) => c.notNull())
    .addColumn('follower_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('following_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('post_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();

  await id(db.schema.createTable('tokens'))
    .addColumn('user_id', 'bigint', ref('users'))
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('expires_at', ts, (c) => c.notNull())
    .execute();
  await db.schema.createIndex('tokens_user_id').on('tokens').column('user_id').execute();

  // The primary key serves "followers of X" (followee_id, follower_id); the index serves "whom X follows".
  await db.schema
    .createTable('follows')
    .addColumn('follower_id', 'bigint', ref('users'))
    .addColumn('followee_id', 'bigint', ref('users'))
    .addColumn('created_at', ts, (c) => c.notNull())
    .addPrimaryKeyConstraint('follows_pk', ['followee_id', 'follower_id'])
    .addCheckConstraint('follows_not_self', sql`follower_id <> followee_id`)
    .execute();
  await db.schema.createIndex('follows_follower').on('follows').columns(['follower_id', 'followee_id']).execute();

  await id(db.schema.createTable('posts'))
    .addColumn('owner_id', 'bigint', ref('users'))
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('visibility', 'text', (c) =>
      c.notNull().defaultTo('public').check(sql`visibility in ('public', 'followers', 'private')`),
    )
    .addColumn('reply_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('recommend_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  // Keyset pages of one user's posts, and of public posts for anonymous callers, newest first.
  await db.schema.createIndex('posts_owner_id').on('posts').columns(['owner_id', 'id']).execute();
  await db.schema.createIndex('posts_visibility_id').on('posts').columns(['visibility', 'id']).execute();

  await id(db.schema.createTable('replies'))
    .addColumn('post_id', 'bigint', ref('posts'))
    .addColumn('author_id', 'bigint', ref('users'))
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema.createIndex('replies_post_id').on('replies').columns(['post_id', 'id']).execute();
  await db.schema.createIndex('replies_author_id').on('replies').column('author_id').execute();

  await db.schema
    .createTable('recommends')
    .addColumn('post_id', 'bigint', ref('posts'))
    .addColumn('user_id', 'bigint', ref('users'))
    .addColumn('created_at', ts, (c) => c.notNull())
    .addPrimaryKeyConstraint('recommends_pk', ['post_id', 'user_id'])
    .execute();
  await db.schema.createIndex('recommends_user_id').on('recommends').columns(['user_id', 'post_id']).execute();

  await id(db.schema.createTable('boards'))
    .addColumn('author_id', 'bigint', ref('users'))
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema.createIndex('boards_author_id').on('boards').column('author_id').execute();

  // Home feeds, fanned out when a post is written: one row per (follower, post). Every follower's row lands on a
  // page of its own, so each B-tree this table keeps costs a random page write per follower of every new post; it
  // keeps only two. The primary key serves the feed page (newest first) and, on SQLite, is the table itself
  // (WITHOUT ROWID); the post_id index serves the cascade when a post goes, and only ever appends. An unfollow
  // finds that owner's entries by scanning the follower's own feed (a rare write, bounded by one feed's size)
  // rather than through a third, random-order index: measured on 1M posts, that index alone was more than half
  // of a create's time (bench/README.md, "Figures behind choices in the code").
  await db.schema
    .createTable('feed_entries')
    .addColumn('user_id', 'bigint', ref('users'))
    .addColumn('post_id', 'bigint', ref('posts'))
    .addColumn('owner_id', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('feed_entries_pk', ['user_id', 'post_id'])
    .$call((t) => (pg ? t : t.modifyEnd(sql`without rowid`)))
    .execute();
  await db.schema.createIndex('feed_entries_post_id').on('feed_entries').column('post_id').execute();

  await db.schema
    .createTable('settings')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('value', 'text', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['settings', 'feed_entries', 'boards', 'recommends', 'replies', 'posts', 'follows', 'tokens', 'users']) {
    await db.schema.dropTable(table).execute();
  }
}
