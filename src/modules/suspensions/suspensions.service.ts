import type { Tx, Store } from '../../db/store.js';
import type { SuspensionRow } from '../../db/types.js';
import { createUsersRepository } from '../users/users.repository.js';
import { createSuspensionsRepository } from './suspensions.repository.js';

/**
 * Suspensions (CONTRACT §9) and the counters they touch.
 *
 * A suspended account is hidden from everyone but admins: its profile, its content and its entries in lists are
 * filtered at read by the rule in shared/visibility.ts (a probe of `suspensions`'s primary key). The counters that
 * other users and other posts keep are not filtered at read: the suspension takes the account's share out of
 * them in its own transaction, and lifting it puts the share back. So each stored counter counts the rows of
 * accounts not suspended:
 * - `follower_count` of every user the account follows, `following_count` of every user following it;
 * - `reply_count` of every post the account replied to, `recommend_count` of every post it recommends.
 * Reads stay as cheap as before whatever the number of suspensions. Every write that moves one of those counters
 * for a suspended account's row while it stands (an admin removing its reply, recommend or follow; its account
 * deleted) leaves the counter alone, since its share is already out (`suspendedAmong` at each such write).
 * Admins, who see the account's rows, get its share added back at read (`userColumns`, `withVisibleCounts`).
 * The account's own counters (its followers, followings and posts) stay: only admins see its profile meanwhile.
 */

/**
 * Locks the account's row with those of everyone it follows or is followed by, in one ascending pass (lockRows), as
 * account deletion does: a follow between the account and a user of lower id, running at the same moment, then
 * queues behind this instead of deadlocking with it. False when the account does not exist.
 */
async function lockAccount(tx: Tx, userId: number): Promise<boolean> {
  const others = await createSuspensionsRepository(tx.db).relatedUserIds(userId);
  return (await tx.lockRows('users', [userId, ...others])).includes(userId);
}

/**
 * Takes the account's share out of (`-1`) or back into (`+1`) the counters others keep, inside `tx`, which holds the
 * account's row and those of its follow relations (lockAccount; users before posts, as every writer takes them).
 */
export async function moveShare(tx: Tx, userId: number, delta: 1 | -1): Promise<void> {
  const users = createUsersRepository(tx.db);
  await tx.lockRows('posts', await users.postsTouchedBy(userId, { ownPosts: true }));
  await users.moveShare(userId, delta, { ownPosts: true });
}

export type SuspendResult = { outcome: 'suspended'; suspension: SuspensionRow } | { outcome: 'missing' } | { outcome: 'admin' };

/**
 * Suspends a member, or changes the reason of a standing suspension (its createdAt stays), in one transaction:
 * the row, every token of the user revoked (the password version moves, so a sign-in racing this is dead too), and
 * the account's share out of the counters others keep (`moveShare`). An admin cannot be suspended.
 */
export async function suspend(store: Store, userId: number, reason: string): Promise<SuspendResult> {
  return store.transaction(async (tx) => {
    if (!(await lockAccount(tx, userId))) return { outcome: 'missing' };
    const suspensions = createSuspensionsRepository(tx.db);
    if ((await suspensions.roleOf(userId)) === 'admin') return { outcome: 'admin' };
    const now = new Date().toISOString();
    if (await suspensions.find(userId)) {
      await suspensions.updateReason(userId, reason, now);
    } else {
      await suspensions.insert(userId, reason, now);
      await suspensions.revokeTokens(userId);
      await moveShare(tx, userId, -1);
    }
    return { outcome: 'suspended', suspension: (await suspensions.find(userId))! };
  });
}

/** Lifts a suspension: its share goes back into the counters; tokens stay revoked. False when there was none. */
export async function lift(store: Store, userId: number): Promise<boolean> {
  return store.transaction(async (tx) => {
    if (!(await lockAccount(tx, userId))) return false;
    if (!(await createSuspensionsRepository(tx.db).remove(userId))) return false;
    await moveShare(tx, userId, 1);
    return true;
  });
}
