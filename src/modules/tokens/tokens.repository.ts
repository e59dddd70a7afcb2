import type { Kysely } from 'kysely';
import { plain } from '../../db/prepared.js';
import type { PlainStatement, Store } from '../../db/store.js';
import type { Database, Role } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';

/** What a token shows of itself: never its hash, nor the password version it was minted with. */
export interface SessionRow {
  id: number;
  user_id: number;
  created_at: string;
  expires_at: string;
}

/** A valid token's user (`from tokens` on the left): the user's current password version minted it. */
export const TOKEN_USER_JOIN = 'inner join users on users.id = tokens.user_id and users.password_version = tokens.password_version';
/** The token of this hash, unexpired at a time (both parameters). */
export const TOKEN_BY_HASH = 'where tokens.token_hash = ? and tokens.expires_at > ?';

const CALLER_BY_TOKEN_HASH_SQL =
  'select tokens.id as "tokenId", users.id as id, users.role as role, users.block_count as blocks, users.mute_count as mutes from tokens ' +
  `${TOKEN_USER_JOIN} ${TOKEN_BY_HASH}`;
const CALLER_BY_TOKEN_HASH: PlainStatement = plain(CALLER_BY_TOKEN_HASH_SQL);

/** A signed-in caller: the token, the user, and whether the visibility rule must check their blocks and mutes. */
export interface TokenCaller {
  tokenId: number;
  id: number;
  role: Role;
  hasBlocks: boolean;
  hasMutes: boolean;
}

/**
 * The caller behind a bearer token's hash, on every signed-in request: the token exists, has not expired (`now`,
 * an ISO timestamp), and was minted with the user's current password version. Plain SQL (db/prepared.ts): the
 * builder has no version of it, so its tests check what it answers (tokens.repository.test.ts). The user's block
 * and mute counts come with the row at no cost, and let every read of this request skip checks that cannot match
 * (Viewer).
 */
export async function findCallerByTokenHash(store: Store, tokenHash: string, now: string): Promise<TokenCaller | undefined> {
  const row = await store.queryOne<{ tokenId: number; id: number; role: Role; blocks: number; mutes: number }>(CALLER_BY_TOKEN_HASH, [tokenHash, now]);
  if (!row) return undefined;
  return { tokenId: row.tokenId, id: row.id, role: row.role, hasBlocks: Number(row.blocks) > 0, hasMutes: Number(row.mutes) > 0 };
}

/** Bearer tokens, stored only as hashes. Pass a transaction's `db` to use it inside one. */
export function createTokensRepository(db: Kysely<Database>) {
  /**
   * Tokens that still sign in (CALLER_BY_TOKEN_HASH above): not expired, and minted with the user's
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

    /** The token with this id while it still signs its user in: the same rule as the bearer lookup (findCallerByTokenHash). */
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
