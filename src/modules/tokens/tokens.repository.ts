import type { Kysely } from 'kysely';
import type { Database } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';

/** What a token shows of itself: never its hash, nor the password version it was minted with. */
export interface SessionRow {
  id: number;
  user_id: number;
  created_at: string;
  expires_at: string;
}

/** Bearer tokens, stored only as hashes. Pass a transaction's `db` to use it inside one. */
export function createTokensRepository(db: Kysely<Database>) {
  /**
   * Tokens that still sign in (CALLER_BY_TOKEN_HASH in hot-statements.ts): not expired, and minted with the user's
   * current password version (a sign-in that raced a password change leaves a superseded row behind).
   */
  const live = (now: string) =>
    db
      .selectFrom('tokens')
      .innerJoin('users', (join) => join.onRef('users.id', '=', 'tokens.user_id').onRef('users.password_version', '=', 'tokens.password_version'))
      .select(['tokens.id', 'tokens.user_id', 'tokens.created_at', 'tokens.expires_at'])
      .where('tokens.expires_at', '>', now);

  /** A user's live tokens, newest first, a range of the `(user_id, id)` index. Exposed for the EXPLAIN test. */
  function listLiveQuery(userId: number, now: string, { limit, after }: { limit: number; after?: number }) {
    let query = live(now).where('tokens.user_id', '=', userId);
    if (after !== undefined) query = query.where('tokens.id', '<', after);
    return query.orderBy('tokens.id', 'desc').limit(pageLimit(limit));
  }

  return {
    insert(values: { userId: number; tokenHash: string; passwordVersion: number; createdAt: string; expiresAt: string }) {
      return db
        .insertInto('tokens')
        .values({
          user_id: values.userId,
          token_hash: values.tokenHash,
          password_version: values.passwordVersion,
          created_at: values.createdAt,
          expires_at: values.expiresAt,
        })
        .returning(['id', 'user_id', 'expires_at'])
        .executeTakeFirstOrThrow();
    },

    /** The token with this id while it still signs its user in: the same rule as the bearer lookup (hot-statements.ts). */
    findLive(id: number, now: string): Promise<SessionRow | undefined> {
      return live(now).where('tokens.id', '=', id).executeTakeFirst();
    },

    listLiveQuery,

    listLive: (userId: number, now: string, page: { limit: number; after?: number }): Promise<SessionRow[]> =>
      listLiveQuery(userId, now, page).execute(),

    async remove(id: number): Promise<boolean> {
      const result = await db.deleteFrom('tokens').where('id', '=', id).executeTakeFirst();
      return result.numDeletedRows > 0n;
    },

    /** After a password change: the caller's own token carries the new version; every other token goes. */
    async keepOnly(userId: number, tokenId: number, passwordVersion: number): Promise<void> {
      await db.updateTable('tokens').set({ password_version: passwordVersion }).where('id', '=', tokenId).execute();
      await db.deleteFrom('tokens').where('user_id', '=', userId).where('id', '<>', tokenId).execute();
    },

    /** Expired tokens are useless; dropping them keeps the table small. */
    async removeExpired(now: string): Promise<void> {
      await db.deleteFrom('tokens').where('expires_at', '<=', now).execute();
    },
  };
}

export type TokensRepository = ReturnType<typeof createTokensRepository>;
