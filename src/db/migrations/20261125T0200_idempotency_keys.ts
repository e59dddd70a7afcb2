import { PostgresAdapter, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application.
//
// Idempotency keys (CONTRACT §6.2): one row per (caller, request target, key). While the first request with a key
// runs, `claim_token` names it and `status` is null; once its answer is kept, `claim_token` is null and the answer
// (status, content type, Location, ETag, body) is there to replay until `expires_at`. The unique index decides
// races between two requests with the same key, on one process or many. No foreign key to users: ids are never
// reused (AUTOINCREMENT, identity), so a deleted user's keys cannot answer anyone else, and they expire anyway.
export async function up(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  const ts = pg ? 'timestamptz' : 'text';
  await (pg
    ? db.schema.createTable('idempotency_keys').addColumn('id', 'bigint', (c) => c.primaryKey().generatedByDefaultAsIdentity())
    : db.schema.createTable('idempotency_keys').addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement()))
    // The caller's user id; 0 for a sign-up sent without a token.
    .addColumn('caller_id', 'bigint', (c) => c.notNull())
    // Method and path, e.g. `POST /users/7/posts`.
    .addColumn('target', 'text', (c) => c.notNull())
    .addColumn('idempotency_key', 'text', (c) => c.notNull())
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('claim_token', 'text')
    .addColumn('started_at', ts, (c) => c.notNull())
    .addColumn('expires_at', ts, (c) => c.notNull())
    .addColumn('status', 'integer')
    .addColumn('content_type', 'text')
    .addColumn('location', 'text')
    .addColumn('etag', 'text')
    .addColumn('body', 'text')
    .execute();
  await db.schema.createIndex('idempotency_keys_scope').on('idempotency_keys').columns(['caller_id', 'target', 'idempotency_key']).unique().execute();
  // The background purge deletes by expiry.
  await db.schema.createIndex('idempotency_keys_expires_at').on('idempotency_keys').columns(['expires_at', 'id']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('idempotency_keys').execute();
}
