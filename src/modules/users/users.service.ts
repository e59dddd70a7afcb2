import type { Store, Tx } from '../../db/store.js';
import { updatedAfter, type Precondition } from '../../shared/conditional.js';
import type { Role } from '../../db/types.js';
import { isUniqueViolation } from '../../db/errors.js';
import { AppError } from '../../shared/errors.js';
import { hashPassword } from '../../shared/passwords.js';
import type { DeletedAccount } from '../../shared/post-changes.js';
import { removeAccountNotifications } from '../notifications/notifications.service.js';
import { suspendedAmong } from '../suspensions/suspensions.repository.js';
import { moveShare } from '../suspensions/suspensions.service.js';
import { createTokensRepository } from '../tokens/tokens.repository.js';
import { createUsersRepository } from './users.repository.js';

/**
 * Creates a user inside the caller's transaction and answers its id; a username taken in any letter case is a 409
 * naming `username`. The password comes hashed (`hashPassword`): a slow hash, computed before the transaction.
 */
export async function createUser(
  tx: Tx,
  input: { username: string; passwordHash: string; displayName?: string; bio?: string; role?: Role },
): Promise<number> {
  const now = new Date().toISOString();
  try {
    return await createUsersRepository(tx.db).insert({
      username: input.username,
      display_name: input.displayName ?? '',
      bio: input.bio ?? '',
      role: input.role ?? 'member',
      password_hash: input.passwordHash,
      created_at: now,
      updated_at: now,
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw AppError.conflict('username', 'is already taken');
    throw error;
  }
}

/** Replaces the writable fields; false when the user is gone. A username clash is a 409 naming `username`. */
export async function replaceUser(
  store: Store,
  id: number,
  values: { username: string; displayName: string; bio: string; role?: Role },
  options: { ifMatch?: Precondition } = {},
): Promise<boolean> {
  try {
    return await store.transaction(async (tx) => {
      // If-Match (CONTRACT §6.1) is checked with the row locked, so check and write are one atomic step.
      let seen: string | undefined;
      if (options.ifMatch) {
        if ((await tx.lockRows('users', [id])).length === 0) return false;
        seen = await options.ifMatch(tx.db);
      }
      return createUsersRepository(tx.db).update(id, {
        username: values.username,
        display_name: values.displayName,
        bio: values.bio,
        ...(values.role !== undefined ? { role: values.role } : {}),
        updated_at: updatedAfter(seen),
      });
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw AppError.conflict('username', 'is already taken');
    throw error;
  }
}

/**
 * Sets a new password and revokes every other token of the user in one transaction: the version bump makes every
 * token minted with the old password invalid (also one a concurrent sign-in is minting right now); the caller's
 * own token moves to the new version so this session stays signed in.
 */
export async function changePassword(store: Store, id: number, keepTokenId: number, passwordHash: string): Promise<boolean> {
  return store.transaction(async ({ db }) => {
    const version = await createUsersRepository(db).setPassword(id, passwordHash, new Date().toISOString());
    if (version === undefined) return false;
    await createTokensRepository(db).keepOnly(id, keepTokenId, version);
    return true;
  });
}

/**
 * Deletes a user and everything that is theirs in one transaction. The foreign keys cascade the rows (tokens,
 * follows both ways, posts with their replies and recommends, their replies and recommends elsewhere, boards,
 * feed entries); the counters that other users and other posts keep are corrected here, before the cascade.
 *
 * Every row whose counter moves is locked first, users before posts and each in ascending id (`lockRows`): users
 * who follow each other and delete their accounts at the same moment then queue behind one another instead of
 * deadlocking. A concurrent follow, reply or recommend that points at the user waits and then fails its foreign key.
 * `ifMatch` (If-Match) runs once the user's row is locked.
 */
export async function deleteUser(
  store: Store,
  id: number,
  options: { ifMatch?: Precondition } = {},
): Promise<boolean> {
  return store.transaction(async (tx) => {
    const { db } = tx;
    const repository = createUsersRepository(db);
    const users = new Set([id, ...(await repository.relatedUserIds(id))]);
    if (!(await tx.lockRows('users', [...users])).includes(id)) return false;
    await options.ifMatch?.(db);
    // A suspended account's share of others' counters is out already: put it back, and take it out as for anyone.
    if ((await suspendedAmong(db, [id])).size > 0) await moveShare(tx, id, 1);
    await repository.uncountBlocksAndMutes(id);
    await tx.lockRows('posts', await repository.postsTouchedBy(id, { ownPosts: false }));
    await repository.moveShare(id, -1, { ownPosts: false });
    await removeAccountNotifications(tx, id); // notifications (CONTRACT §10), before the post stream's events
    // The user's posts go with the cascade: live streams hear of each as deleted, like a DELETE /posts/{id}, by
    // who could see it before this transaction (its follows go with it: see DeletedAccount).
    const posts = await repository.postsOf(id);
    if (posts.length > 0) {
      const account: DeletedAccount = { followers: await repository.followerIds(id) };
      for (const post of posts) await tx.recordPostChange({ kind: 'deleted', post, account });
    }
    await repository.remove(id);
    return true;
  });
}

/**
 * Removes every user and, through the cascades, everything that is theirs. No counter survives to correct. Live
 * streams hear of every post as deleted, as when one account is deleted, each with its owner's followers as they
 * were. Posts are read in pages of `DELETED_POSTS_PAGE`; each change is kept in memory until the commit, when the
 * streams hear of it, so this is sized for an admin's reset, not for wiping millions of posts at once.
 */
export async function deleteAllUsers(store: Store): Promise<number> {
  return store.transaction(async (tx) => {
    const repository = createUsersRepository(tx.db);
    await removeAccountNotifications(tx); // notifications (CONTRACT §10), before the post stream's events
    const accounts = new Map<number, DeletedAccount & { followers: number[] }>();
    const accountOf = (owner: number) => {
      let account = accounts.get(owner);
      if (!account) accounts.set(owner, (account = { followers: [] }));
      return account;
    };
    for (const follow of await repository.allFollows()) {
      accountOf(Number(follow.followee_id)).followers.push(Number(follow.follower_id));
    }
    for (let after = 0; ; ) {
      const posts = await repository.postsAfter(after, DELETED_POSTS_PAGE);
      for (const post of posts) await tx.recordPostChange({ kind: 'deleted', post, account: accountOf(Number(post.owner_id)) });
      if (posts.length < DELETED_POSTS_PAGE) break;
      after = Number(posts[posts.length - 1]!.id);
    }
    return repository.removeAll();
  });
}

const DELETED_POSTS_PAGE = 1000;

/**
 * Makes sure an admin account exists. `corkboard create-admin` (`promote`) creates it or promotes the existing user
 * of that name: an operator at the console asks for exactly that. The ADMIN_USERNAME/ADMIN_PASSWORD bootstrap at
 * start-up only creates a user that does not exist yet (CONTRACT §2): whoever signed up under the configured name
 * before a restart must not become an admin with a password of their own choosing.
 */
export async function ensureAdmin(
  store: Store,
  username: string,
  password: string | undefined,
  passwordHashMemoryKib: number,
  { promote }: { promote: boolean },
): Promise<'created' | 'promoted' | 'unchanged' | 'exists as a member'> {
  const existing = await createUsersRepository(store.db).findCredentialsByUsername(username);
  if (existing) {
    if (existing.role === 'admin') return 'unchanged';
    if (!promote) return 'exists as a member';
    await store.transaction(({ db }) => createUsersRepository(db).setRole(existing.id, 'admin', new Date().toISOString()));
    return 'promoted';
  }
  if (password === undefined) throw new Error(`user "${username}" does not exist; a password is needed to create it`);
  try {
    const passwordHash = await hashPassword(password, passwordHashMemoryKib);
    await store.transaction((tx) => createUser(tx, { username, passwordHash, role: 'admin' }));
    return 'created';
  } catch (error) {
    // Two processes bootstrapping at once: the other one created it.
    if (error instanceof AppError && error.statusCode === 409) return 'unchanged';
    throw error;
  }
}
