import type { Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// GET /users/{id}/tokens pages a user's tokens newest first by id. The index on user_id alone serves that on SQLite
// (its entries end with the rowid, which is the id) but not on PostgreSQL, where the page would sort all of the
// user's tokens: (user_id, id) serves the page on both, and the cascade on a user's deletion as the old one did.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('tokens_user_id_id').on('tokens').columns(['user_id', 'id']).execute();
  await db.schema.dropIndex('tokens_user_id').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('tokens_user_id').on('tokens').column('user_id').execute();
  await db.schema.dropIndex('tokens_user_id_id').execute();
}
