import { createHash, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { reusable } from '../../db/compiled.js';
import { readCompiled } from '../../db/database.js';
import type { Database, Role } from '../../db/types.js';

/** Bearer tokens are 256 random bits with a recognisable prefix (so secret scanners can spot leaked ones). */
export function newTokenSecret(): string {
  return `cb_${randomBytes(32).toString('base64url')}`;
}

/** Only this hash is stored: a leaked database does not leak usable tokens. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

export interface TokenOwner {
  tokenId: number;
  userId: number;
  role: Role;
  expiresAt: string;
}

/** Stands in for the hash in the lookup compiled ahead of time; a real hash is 43 base64url characters. */
const HASH_STAND_IN = '<token hash>';

export function createTokensRepository(db: Kysely<Database>) {
  // Every authenticated request runs this lookup, so it is compiled once (see `reusable`).
  const findOwner = reusable(
    db
      .selectFrom('tokens')
      .innerJoin('users', 'users.id', 'tokens.user_id')
      .select(['tokens.id as tokenId', 'users.id as userId', 'users.role as role', 'tokens.expires_at as expiresAt'])
      .where('tokens.token_hash', '=', HASH_STAND_IN)
      .compile(),
    [HASH_STAND_IN],
  );

  return {
    async insert(userId: number, tokenHash: string, now: Date, ttlSeconds: number) {
      const expiresAt = new Date(now.getTime() + ttlSeconds * 1000).toISOString();
      const row = await db
        .insertInto('tokens')
        .values({ user_id: userId, token_hash: tokenHash, created_at: now.toISOString(), expires_at: expiresAt })
        .returning(['id', 'user_id', 'expires_at'])
        .executeTakeFirstOrThrow();
      return row;
    },

    /** The token and its user, if the token exists (expiry is checked by the caller against its clock). */
    async findOwnerByHash(tokenHash: string): Promise<TokenOwner | undefined> {
      const [row] = await readCompiled(db, findOwner([tokenHash]));
      return row;
    },

    findById(id: number) {
      return db.selectFrom('tokens').select(['id', 'user_id']).where('id', '=', id).executeTakeFirst();
    },

    async remove(id: number): Promise<boolean> {
      const result = await db.deleteFrom('tokens').where('id', '=', id).executeTakeFirst();
      return Number(result.numDeletedRows) > 0;
    },

    /** Revokes every token of a user except one (after a password change the current session stays signed in). */
    async removeAllOfUserExcept(userId: number, keepTokenId: number) {
      await db.deleteFrom('tokens').where('user_id', '=', userId).where('id', '<>', keepTokenId).execute();
    },

    /** Expired tokens are useless; dropping them keeps the table small. */
    async removeExpired(now: Date) {
      await db.deleteFrom('tokens').where('expires_at', '<=', now.toISOString()).execute();
    },
  };
}

export type TokensRepository = ReturnType<typeof createTokensRepository>;
