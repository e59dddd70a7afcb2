import type { Store } from '../../db/store.js';
import { hashToken, newTokenSecret } from '../../shared/tokens.js';
import { createUsersRepository } from '../users/users.repository.js';
import { createTokensRepository } from './tokens.repository.js';

/**
 * Mints a token for a user whose password the caller has just verified, bound to the password version read with
 * that hash. If the password changed in between (the version moved), nothing is minted: the token would be dead
 * on arrival. A change committing after this check still revokes it, since lookups compare the versions.
 */
export async function mintToken(
  store: Store,
  user: { id: number; password_version: number },
  ttlSeconds: number,
): Promise<{ id: number; token: string; expiresAt: string; userId: number } | undefined> {
  const secret = newTokenSecret();
  const now = new Date();
  const createdAt = now.toISOString();
  const expiresAt = new Date(now.getTime() + ttlSeconds * 1000).toISOString();
  return store.transaction(async ({ db }) => {
    if ((await createUsersRepository(db).passwordVersion(user.id)) !== user.password_version) return undefined;
    const tokens = createTokensRepository(db);
    const row = await tokens.insert({ userId: user.id, tokenHash: hashToken(secret), passwordVersion: user.password_version, createdAt, expiresAt });
    // Expired tokens are dead weight; sweeping on sign-in keeps the table bounded without a timer.
    await tokens.removeExpired(createdAt);
    return { id: row.id, token: secret, expiresAt: row.expires_at, userId: row.user_id };
  });
}
