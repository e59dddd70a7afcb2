import type { Kysely } from 'kysely';
import type { Database } from '../../db/types.js';

/** Bearer tokens, stored only as hashes. Pass a transaction's `db` to use it inside one. */
export function createTokensRepository(db: Kysely<Database>) {
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

    findById(id: number) {
      return db.selectFrom('tokens').select(['id', 'user_id']).where('id', '=', id).executeTakeFirst();
    },

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
