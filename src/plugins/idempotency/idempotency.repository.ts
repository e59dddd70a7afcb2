import type { Kysely } from 'kysely';
import { findKeptAnswer, keepAnswer, type KeptAnswerRow } from '../../db/hot-statements.js';
import type { Store, Tx } from '../../db/store.js';
import type { Database } from '../../db/types.js';

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

/** What a key's row holds for a repeat: the first request's body fingerprint and its answer. */
export type KeyRow = KeptAnswerRow;

/**
 * The idempotency_keys table. Looking a key up and keeping an answer happen on every create sent with a key, so
 * both are plain SQL (db/hot-statements.ts); the purge runs in the background, through the builder.
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
