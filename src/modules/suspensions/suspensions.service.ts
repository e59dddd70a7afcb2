import type { Tx, Store } from '../../db/store.js';
import type { SuspensionRow } from '../../db/types.js';
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
 * Admins, who see the account's rows, see the same counters as everyone (they count what members are shown).
 * The account's own counters (its followers, followings and posts) stay: only admins see its profile meanwhile.
 */

/**
 * Locks the account's row with those of everyone it follows or is followed by, in one ascending pass (lockRows), as
 * account deletion does: a follow between the account and a user of lower id, running at the same moment, then
 * queues behind this instead of deadlocking with it. False when the account does not exist.
 */
async function lockAccount(tx: Tx, userId: number): Promise<boolean> {
  const relations = await tx.db
    .selectFrom('follows')
    .select(['follower_id', 'followee_id'])
    .where((eb) => eb.or([eb('follower_id', '=', userId), eb('followee_id', '=', userId)]))
    .execute();
  const others = relations.map((r) => (Number(r.follower_id) === userId ? Number(r.followee_id) : Number(r.follower_id)));
  return (await tx.lockRows('users', [userId, ...others])).includes(userId);
}

/**
 * Takes the account's share out of (`-1`) or back into (`+1`) the counters others keep, inside `tx`, which holds the
 * account's row and those of its follow relations (lockAccount; users before posts, as every writer takes them).
 */
export async function moveShare(tx: Tx, userId: number, delta: 1 | -1): Promise<void> {
  const { db } = tx;
  const touchedPosts = await db
    .selectFrom('posts')
    .select('posts.id')
    .where((eb) =>
      eb.or([
        eb('posts.id', 'in', eb.selectFrom('replies').select('post_id').where('author_id', '=', userId)),
        eb('posts.id', 'in', eb.selectFrom('recommends').select('post_id').where('user_id', '=', userId)),
      ]),
    )
    .execute();
  await tx.lockRows('posts', touchedPosts.map((p) => Number(p.id)));
  const op = delta > 0 ? '+' : '-';
  await db
    .updateTable('users')
    .set((eb) => ({ follower_count: eb('follower_count', op, 1) }))
    .where('id', 'in', db.selectFrom('follows').select('followee_id').where('follower_id', '=', userId))
    .execute();
  await db
    .updateTable('users')
    .set((eb) => ({ following_count: eb('following_count', op, 1) }))
    .where('id', 'in', db.selectFrom('follows').select('follower_id').where('followee_id', '=', userId))
    .execute();
  await db
    .updateTable('posts')
    .set((eb) => ({
      reply_count: eb(
        'reply_count',
        op,
        eb.selectFrom('replies').select(eb.fn.countAll<number>().as('n')).whereRef('replies.post_id', '=', 'posts.id').where('replies.author_id', '=', userId),
      ),
    }))
    .where('id', 'in', db.selectFrom('replies').select('post_id').where('author_id', '=', userId))
    .execute();
  await db
    .updateTable('posts')
    .set((eb) => ({ recommend_count: eb('recommend_count', op, 1) }))
    .where('id', 'in', db.selectFrom('recommends').select('post_id').where('user_id', '=', userId))
    .execute();
}

export type SuspendResult = { outcome: 'suspended'; suspension: SuspensionRow } | { outcome: 'missing' } | { outcome: 'admin' };

/**
 * Suspends a member, or changes the reason of a standing suspension (its createdAt stays), in one transaction:
 * the row, every token of the user revoked (the password version moves, so a sign-in racing this is dead too), and
 * the account's share out of the counters others keep (`moveShare`). An admin cannot be suspended.
 */
export async function suspend(store: Store, userId: number, reason: string): Promise<SuspendResult> {
  return store.transaction(async (tx) => {
    const { db } = tx;
    if (!(await lockAccount(tx, userId))) return { outcome: 'missing' };
    const user = await db.selectFrom('users').select('role').where('id', '=', userId).executeTakeFirstOrThrow();
    if (user.role === 'admin') return { outcome: 'admin' };
    const now = new Date().toISOString();
    const suspensions = createSuspensionsRepository(db);
    if (await suspensions.find(userId)) {
      await db.updateTable('suspensions').set({ reason, updated_at: now }).where('user_id', '=', userId).execute();
    } else {
      await db.insertInto('suspensions').values({ user_id: userId, reason, created_at: now, updated_at: now }).execute();
      await db.updateTable('users').set((eb) => ({ password_version: eb('password_version', '+', 1) })).where('id', '=', userId).execute();
      await db.deleteFrom('tokens').where('user_id', '=', userId).execute();
      await moveShare(tx, userId, -1);
    }
    return { outcome: 'suspended', suspension: (await suspensions.find(userId))! };
  });
}

/** Lifts a suspension: its share goes back into the counters; tokens stay revoked. False when there was none. */
export async function lift(store: Store, userId: number): Promise<boolean> {
  return store.transaction(async (tx) => {
    if (!(await lockAccount(tx, userId))) return false;
    const result = await tx.db.deleteFrom('suspensions').where('user_id', '=', userId).executeTakeFirst();
    if (result.numDeletedRows === 0n) return false;
    await moveShare(tx, userId, 1);
    return true;
  });
}
