import type { Kysely } from 'kysely';
import { plain } from '../../db/prepared.js';
import type { PlainStatement, Store, Tx } from '../../db/store.js';
import type { Database, IdempotencyKeyRow } from '../../db/types.js';

/** Whose key it is and for what: the caller (0: a sign-up without a token), method and path, and the key. */
export interface KeyScope {
  callerId: number;
  target: string;
  key: string;
}

/** An answer as it is kept and replayed: the bytes sent, and the headers that describe them. */
export interface KeptAnswer {
  status: number;
  contentType: string;
  location?: string;
  etag?: string;
  body: string;
}

/** A kept answer as an idempotent create reads it back (CONTRACT §6.2). */
export type KeptAnswerRow = Pick<IdempotencyKeyRow, 'fingerprint' | 'expires_at' | 'status' | 'content_type' | 'location' | 'etag' | 'body'>;

const KEPT_ANSWER_SQL =
  'select fingerprint, expires_at, status, content_type, location, etag, body from idempotency_keys ' +
  'where caller_id = ? and target = ? and idempotency_key = ?';
const KEPT_ANSWER: PlainStatement = plain(KEPT_ANSWER_SQL);

/** The row under an Idempotency-Key's scope (caller, method and path, key), on every create that carries a key. */
export function findKeptAnswer(store: Store, callerId: number, target: string, key: string): Promise<KeptAnswerRow | undefined> {
  return store.queryOne<KeptAnswerRow>(KEPT_ANSWER, [callerId, target, key]);
}

/**
 * Inserts the answer, or replaces a row that holds none (`status` null) or has expired by the time the request
 * started (`started_at`); a live answer stays and the statement changes no row. On PostgreSQL a concurrent insert of
 * the same scope makes this wait until that transaction ends. No `RETURNING`: the count of rows changed says the
 * same, and on SQLite `RETURNING` cost this insert more than the insert itself (bench/README.md).
 */
const KEEP_ANSWER_SQL =
  'insert into idempotency_keys (caller_id, target, idempotency_key, fingerprint, claim_token, started_at, expires_at, ' +
  'status, content_type, location, etag, body) values (?, ?, ?, ?, null, ?, ?, ?, ?, ?, ?, ?) ' +
  'on conflict (caller_id, target, idempotency_key) do update set fingerprint = excluded.fingerprint, claim_token = null, ' +
  'started_at = excluded.started_at, expires_at = excluded.expires_at, status = excluded.status, ' +
  'content_type = excluded.content_type, location = excluded.location, etag = excluded.etag, body = excluded.body ' +
  'where idempotency_keys.expires_at <= excluded.started_at or idempotency_keys.status is null';
const KEEP_ANSWER: PlainStatement = plain(KEEP_ANSWER_SQL);

/**
 * Keeps the answer of a create sent with an Idempotency-Key, inside `tx` (the create's own transaction): false when
 * the scope already holds a live answer (see KEEP_ANSWER_SQL).
 */
export async function keepAnswer(
  tx: Tx,
  row: Omit<IdempotencyKeyRow, 'id' | 'claim_token'> & { status: number; body: string },
): Promise<boolean> {
  // In the order of KEEP_ANSWER_SQL's placeholders.
  const params = [
    row.caller_id, row.target, row.idempotency_key, row.fingerprint, row.started_at, row.expires_at,
    row.status, row.content_type, row.location, row.etag, row.body,
  ];
  return (await tx.run(KEEP_ANSWER, params)) > 0;
}

/** What a key's row holds for a repeat: the first request's body fingerprint and its answer. */
export type KeyRow = KeptAnswerRow;

/**
 * The idempotency_keys table. Looking a key up and keeping an answer happen on every create sent with a key, so
 * both are plain SQL (KEPT_ANSWER and KEEP_ANSWER above, see db/prepared.ts); the purge runs in the background,
 * through the builder.
 */
export const idempotencyKeys = {
  /** The row under this scope, if any: a kept answer, one that has expired, or (from earlier versions) none. */
  find(store: Store, scope: KeyScope): Promise<KeyRow | undefined> {
    return findKeptAnswer(store, scope.callerId, scope.target, scope.key);
  },

  /**
   * Keeps the answer of the first request with this key, unless the scope already holds a live answer: false then
   * (another request with the key, in another process, kept its answer first). A row that expired before this
   * request started but is not purged yet is replaced, and so is one without an answer (a claim written by versions
   * before 2026-11-26, when a running request held its key in the table). The unique index decides between two
   * requests keeping at once: on PostgreSQL the second waits for the first to commit or roll back.
   */
  keep(tx: Tx, scope: KeyScope, fingerprint: string, answer: KeptAnswer, startedAt: string, expiresAt: string): Promise<boolean> {
    return keepAnswer(tx, {
      caller_id: scope.callerId,
      target: scope.target,
      idempotency_key: scope.key,
      fingerprint,
      started_at: startedAt,
      expires_at: expiresAt,
      status: answer.status,
      content_type: answer.contentType,
      location: answer.location ?? null,
      etag: answer.etag ?? null,
      body: answer.body,
    });
  },

  /** Deletes up to `limit` rows that expired before `now`; answers how many. Pass a transaction's `db`. */
  async purgeExpired(db: Kysely<Database>, now: string, limit: number): Promise<number> {
    const result = await db
      .deleteFrom('idempotency_keys')
      .where('id', 'in', db.selectFrom('idempotency_keys').select('id').where('expires_at', '<', now).orderBy('expires_at').limit(limit))
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  },
};
