import type { Kysely } from 'kysely';
import type { Database, IdempotencyKeyRow } from '../../db/types.js';

/** Whose key it is and for what: the caller (0: a sign-up without a token), method and path, and the key. */
export interface KeyScope {
  callerId: number;
  target: string;
  key: string;
}

/** A running request's claim on a key. */
export interface Claim {
  fingerprint: string;
  token: string;
  startedAt: string;
  expiresAt: string;
}

/** An answer as it is kept and replayed: the bytes sent, and the headers that describe them. */
export interface KeptAnswer {
  status: number;
  contentType: string;
  location?: string;
  etag?: string;
  body: string;
}

const ROW_COLUMNS = ['id', 'fingerprint', 'claim_token', 'started_at', 'expires_at', 'status', 'content_type', 'location', 'etag', 'body'] as const;
export type KeyRow = Pick<IdempotencyKeyRow, (typeof ROW_COLUMNS)[number]>;

/** SQL for the idempotency_keys table; pass a transaction's `db` for writes. */
export function createIdempotencyRepository(db: Kysely<Database>) {
  return {
    /** Claims an unused key; undefined when the scope already has a row (the unique index decides races). */
    async insertClaim(scope: KeyScope, claim: Claim): Promise<number | undefined> {
      const row = await db
        .insertInto('idempotency_keys')
        .values({
          caller_id: scope.callerId,
          target: scope.target,
          idempotency_key: scope.key,
          fingerprint: claim.fingerprint,
          claim_token: claim.token,
          started_at: claim.startedAt,
          expires_at: claim.expiresAt,
        })
        .onConflict((oc) => oc.columns(['caller_id', 'target', 'idempotency_key']).doNothing())
        .returning('id')
        .executeTakeFirst();
      return row?.id;
    },

    find(scope: KeyScope): Promise<KeyRow | undefined> {
      return db
        .selectFrom('idempotency_keys')
        .select(ROW_COLUMNS)
        .where('caller_id', '=', scope.callerId)
        .where('target', '=', scope.target)
        .where('idempotency_key', '=', scope.key)
        .executeTakeFirst();
    },

    /**
     * Starts over on a row that expired or whose request died (compare-and-set: false when it changed since it was
     * read, e.g. another request took it over first, or its request finished meanwhile).
     */
    async takeOver(row: KeyRow, claim: Claim): Promise<boolean> {
      const result = await db
        .updateTable('idempotency_keys')
        .set({
          fingerprint: claim.fingerprint,
          claim_token: claim.token,
          started_at: claim.startedAt,
          expires_at: claim.expiresAt,
          status: null,
          content_type: null,
          location: null,
          etag: null,
          body: null,
        })
        .where('id', '=', row.id)
        .where((eb) =>
          row.claim_token === null
            ? eb.and([eb('claim_token', 'is', null), eb('expires_at', '=', row.expires_at)])
            : eb('claim_token', '=', row.claim_token),
        )
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    },

    /** Keeps the answer of the request holding the claim; false when it no longer holds it (taken over). */
    async keep(id: number, token: string, answer: KeptAnswer, expiresAt: string): Promise<boolean> {
      const result = await db
        .updateTable('idempotency_keys')
        .set({
          claim_token: null,
          expires_at: expiresAt,
          status: answer.status,
          content_type: answer.contentType,
          location: answer.location ?? null,
          etag: answer.etag ?? null,
          body: answer.body,
        })
        .where('id', '=', id)
        .where('claim_token', '=', token)
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    },

    /** Gives the key up (the answer is not kept): the next request with it runs afresh. */
    async release(id: number, token: string): Promise<void> {
      await db.deleteFrom('idempotency_keys').where('id', '=', id).where('claim_token', '=', token).execute();
    },

    /** Deletes up to `limit` rows that expired before `now`; answers how many. */
    async purgeExpired(now: string, limit: number): Promise<number> {
      const result = await db
        .deleteFrom('idempotency_keys')
        .where('id', 'in', db.selectFrom('idempotency_keys').select('id').where('expires_at', '<', now).orderBy('expires_at').limit(limit))
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}
