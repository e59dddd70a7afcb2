import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// 1. `postCount` counts the posts the caller may see (CONTRACT §3), so a user's row keeps one count per visibility
//    it needs: every post (post_count, for the owner and admins), public ones (for everyone) and followers-only
//    ones (added for followers). A counter read by a stranger never reveals that hidden posts exist.
// 2. A password change must revoke every token minted with the old password, also one whose sign-in checked the
//    old password just before the change committed. Each token records the user's password_version at sign-in and
//    is valid only while it is still the user's: a change bumps the version and every older token is dead at once.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('users').addColumn('public_post_count', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('users').addColumn('followers_post_count', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('users').addColumn('password_version', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('tokens').addColumn('password_version', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await sql`
    update users set
      public_post_count = (select count(*) from posts where posts.owner_id = users.id and posts.visibility = 'public'),
      followers_post_count = (select count(*) from posts where posts.owner_id = users.id and posts.visibility = 'followers')
  `.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('tokens').dropColumn('password_version').execute();
  for (const column of ['password_version', 'followers_post_count', 'public_post_count']) {
    await db.schema.alterTable('users').dropColumn(column).execute();
  }
}
