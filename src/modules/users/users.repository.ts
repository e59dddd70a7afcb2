import { sql, type Kysely } from 'kysely';
import type { Database, NewUserRow, PostRow, Role } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';
import { userSearchWords, userWords } from '../search/search.text.js';
import { POST_COLUMNS, userShownTo, userColumns, type PublicUserRow, type Viewer } from '../../shared/visibility.js';

export const usernameKey = (username: string) => username.toLowerCase();

/** After this many code points, a query word is looked up by its start and checked whole by `search_words`. */
export const USER_PREFIX_MAX = 20;

/**
 * The prefixes (1 to `USER_PREFIX_MAX` code points) of a user's words (search.text.ts), each once: the rows of
 * `user_words`, so that "a word of theirs starts with w" is `word = w`, one range of the primary key already in
 * username order.
 */
export function userWordPrefixes(username: string, displayName: string): string[] {
  const prefixes = new Set<string>();
  for (const word of userWords(username, displayName)) {
    const codePoints = [...word];
    for (let n = 1; n <= Math.min(codePoints.length, USER_PREFIX_MAX); n++) prefixes.add(codePoints.slice(0, n).join(''));
  }
  return [...prefixes];
}

/** Writes a user's rows of `user_words`, in the transaction that writes the user. */
async function writeUserWords(db: Kysely<Database>, userId: number, username: string, displayName: string): Promise<void> {
  const key = usernameKey(username);
  const rows = userWordPrefixes(username, displayName).map((word) => ({ word, username_key: key, user_id: userId }));
  // A few hundred rows a statement at most: SQLite takes at most 32,766 parameters.
  for (let i = 0; i < rows.length; i += 500) await db.insertInto('user_words').values(rows.slice(i, i + 500)).execute();
}

/**
 * User rows. Reads answer `PublicUserRow` (no password hash; `post_count` as the viewer may see it). Pass a
 * transaction's `db` to use it inside one.
 */
export function createUsersRepository(db: Kysely<Database>) {
  /** The other sides of a user's blocks (both ways) and those who mute the user: each keeps a count of them (Viewer.hasBlocks). */
  const blockersOf = (id: number) => db.selectFrom('blocks').select('blocker_id as other').where('blocked_id', '=', id);
  const blockedBy = (id: number) => db.selectFrom('blocks').select('blocked_id as other').where('blocker_id', '=', id);
  const mutersOf = (id: number) => db.selectFrom('mutes').select('muter_id as other').where('muted_id', '=', id);

  /**
   * The statement of GET /users?q= (exposed so that a test can EXPLAIN exactly what the route runs). One
   * statement: the longest query word's rows of `user_words` (`word = w`: the users with a word starting with `w`),
   * one range of its primary key already in username order, walked past the cursor, each joined to its user by key
   * and filtered by the other words (`search_words`); the LIMIT stops the walk at the page's end. A page costs its
   * rows, for a name few users have as for a prefix thousands share; two short words shared by many users but
   * rarely together walk the driving word's range until the page fills. One statement rather than the index's
   * batch and then its users by a list of ids: a page's cost is mostly per statement (bench/README.md).
   */
  function searchByNameQuery(viewer: Viewer, words: readonly string[], options: { limit: number; after?: string; username?: string }) {
    const driver = words.reduce((longest, word) => ([...word].length > [...longest].length ? word : longest));
    const key = [...driver].slice(0, USER_PREFIX_MAX).join('');
    // The other words, and the driver itself when its lookup was only its start.
    const others = words.filter((word) => word !== driver || key !== driver);
    let query = db
      .selectFrom('user_words')
      .innerJoin('users', 'users.id', 'user_words.user_id')
      .select(userColumns(viewer))
      .where('user_words.word', '=', key)
      // A suspended account is found by admins only (CONTRACT §9); blocks do not hide profiles here (§11).
      .where(userShownTo(viewer))
      // The index's own order (its second column): the walk stops at the page's end, nothing is sorted.
      .orderBy('user_words.username_key', 'asc')
      .limit(pageLimit(options.limit));
    if (options.after !== undefined) query = query.where('user_words.username_key', '>', options.after);
    // One user by name: a point of the same range.
    if (options.username !== undefined) query = query.where('user_words.username_key', '=', usernameKey(options.username));
    if (others.length > 0) query = query.where((eb) => eb.and(others.map((word) => eb('users.search_words', 'like', `% ${word}%`))));
    return query;
  }

  return {
    searchByNameQuery,

    /** The user as `viewer` may see them: a suspended account is missing to all but admins (CONTRACT §9). */
    findById(id: number, viewer: Viewer): Promise<PublicUserRow | undefined> {
      return db
        .selectFrom('users')
        .select(userColumns(viewer))
        .where('users.id', '=', id)
        .where(userShownTo(viewer))
        .executeTakeFirst();
    },

    /** Whether the user exists for `viewer` (a suspended account does not, but to admins). */
    exists(id: number, viewer: Viewer): Promise<boolean> {
      return db
        .selectFrom('users')
        .select('users.id')
        .where('users.id', '=', id)
        .where(userShownTo(viewer))
        .executeTakeFirst()
        .then((row) => row !== undefined);
    },

    findCredentialsByUsername(username: string) {
      return db
        .selectFrom('users')
        .select(['id', 'role', 'password_hash', 'password_version'])
        .where('username_key', '=', usernameKey(username))
        .executeTakeFirst();
    },

    findPasswordHash(id: number) {
      return db.selectFrom('users').select('password_hash').where('id', '=', id).executeTakeFirst();
    },

    /** The user's current password version (a token minted with another no longer signs in), if the user exists. */
    async passwordVersion(id: number): Promise<number | undefined> {
      const row = await db.selectFrom('users').select('password_version').where('id', '=', id).executeTakeFirst();
      return row?.password_version;
    },

    /** Users in id order, `limit + 1` rows after `after` (keyset). */
    list(viewer: Viewer, options: { limit: number; after?: number; username?: string }): Promise<PublicUserRow[]> {
      let query = db
        .selectFrom('users')
        .select(userColumns(viewer))
        .where(userShownTo(viewer))
        .orderBy('users.id', 'asc')
        .limit(pageLimit(options.limit));
      if (options.after !== undefined) query = query.where('users.id', '>', options.after);
      if (options.username !== undefined) query = query.where('username_key', '=', usernameKey(options.username));
      return query.execute();
    },

    /**
     * GET /users?q= (CONTRACT §11): the users each of whose `words` (search.query.ts) starts a word of their
     * username or display name, in lower-cased username order, `limit + 1` rows after `after` (a username_key).
     * See `searchByNameQuery`.
     */
    searchByName(viewer: Viewer, words: readonly string[], options: { limit: number; after?: string; username?: string }): Promise<PublicUserRow[]> {
      return searchByNameQuery(viewer, words, options).execute();
    },

    /** Throws the driver's unique violation when the username is taken in any letter case. */
    async insert(values: Omit<NewUserRow, 'username_key'>): Promise<number> {
      const row = await db
        .insertInto('users')
        .values({ ...values, username_key: usernameKey(values.username), search_words: userSearchWords(values.username, values.display_name) })
        .returning('id')
        .executeTakeFirstOrThrow();
      await writeUserWords(db, row.id, values.username, values.display_name);
      return row.id;
    },

    /** False when the user no longer exists. Throws the unique violation on a username clash. */
    async update(id: number, values: { username: string; display_name: string; bio: string; role?: Role; updated_at: string }): Promise<boolean> {
      const result = await db
        .updateTable('users')
        .set({ ...values, username_key: usernameKey(values.username), search_words: userSearchWords(values.username, values.display_name) })
        .where('id', '=', id)
        .executeTakeFirst();
      if (result.numUpdatedRows === 0n) return false;
      await db.deleteFrom('user_words').where('user_id', '=', id).execute();
      await writeUserWords(db, id, values.username, values.display_name);
      return true;
    },

    /** Sets a new password hash and bumps the password version; answers the new version. */
    async setPassword(id: number, passwordHash: string, now: string): Promise<number | undefined> {
      const row = await db
        .updateTable('users')
        .set({ password_hash: passwordHash, password_version: sql`password_version + 1`, updated_at: now })
        .where('id', '=', id)
        .returning('password_version')
        .executeTakeFirst();
      return row?.password_version;
    },

    async setRole(id: number, role: Role, now: string): Promise<void> {
      await db.updateTable('users').set({ role, updated_at: now }).where('id', '=', id).execute();
    },

    // Deleting accounts (users.service.ts): the rows whose counters move, the corrections, the deletes.

    /**
     * The users whose counters deleting `id` moves: the other side of each of their follows, of their blocks either
     * way, and those who mute them (repeats included).
     */
    async relatedUserIds(id: number): Promise<number[]> {
      const relations = await db
        .selectFrom('follows')
        .select(['follower_id', 'followee_id'])
        .where((eb) => eb.or([eb('follower_id', '=', id), eb('followee_id', '=', id)]))
        .execute();
      const others = await blockersOf(id).unionAll(blockedBy(id)).unionAll(mutersOf(id)).execute();
      return [...relations.map((r) => (r.follower_id === id ? r.followee_id : r.follower_id)), ...others.map((r) => Number(r.other))];
    },

    /** Takes the user out of the block counts of the other sides of their blocks and the mute counts of their muters. */
    async uncountBlocksAndMutes(id: number): Promise<void> {
      for (const others of [blockersOf(id), blockedBy(id)]) {
        await db.updateTable('users').set((eb) => ({ block_count: eb('block_count', '-', 1) })).where('id', 'in', others).execute();
      }
      await db.updateTable('users').set((eb) => ({ mute_count: eb('mute_count', '-', 1) })).where('id', 'in', mutersOf(id)).execute();
    },

    /**
     * The posts whose counters the user's replies and recommends are counted in (to lock before `moveShare`); with
     * `ownPosts: false`, not the user's own.
     */
    async postsTouchedBy(id: number, { ownPosts }: { ownPosts: boolean }): Promise<number[]> {
      const rows = await db
        .selectFrom('posts')
        .select('posts.id')
        .$if(!ownPosts, (qb) => qb.where('posts.owner_id', '<>', id))
        .where((eb) =>
          eb.or([
            eb('posts.id', 'in', eb.selectFrom('replies').select('post_id').where('author_id', '=', id)),
            eb('posts.id', 'in', eb.selectFrom('recommends').select('post_id').where('user_id', '=', id)),
          ]),
        )
        .execute();
      return rows.map((p) => Number(p.id));
    },

    /**
     * Moves the user's share of the counters others keep by `delta`: follower_count of whom they follow,
     * following_count of their followers, reply_count and recommend_count of the posts they replied to or recommend.
     * With `ownPosts: false` the counters of the user's own posts stay as they are (a deleted account's posts go
     * with it; a suspension moves them too, so lifting it puts back exactly what it took). The caller has locked
     * those rows (`relatedUserIds`, `postsTouchedBy`).
     */
    async moveShare(id: number, delta: 1 | -1, { ownPosts }: { ownPosts: boolean }): Promise<void> {
      const op = delta > 0 ? '+' : '-';
      await db
        .updateTable('users')
        .set((eb) => ({ follower_count: eb('follower_count', op, 1) }))
        .where('id', 'in', db.selectFrom('follows').select('followee_id').where('follower_id', '=', id))
        .execute();
      await db
        .updateTable('users')
        .set((eb) => ({ following_count: eb('following_count', op, 1) }))
        .where('id', 'in', db.selectFrom('follows').select('follower_id').where('followee_id', '=', id))
        .execute();
      await db
        .updateTable('posts')
        .set((eb) => ({
          reply_count: eb(
            'reply_count',
            op,
            eb.selectFrom('replies').select(eb.fn.countAll<number>().as('n')).whereRef('replies.post_id', '=', 'posts.id').where('replies.author_id', '=', id),
          ),
        }))
        .$if(!ownPosts, (qb) => qb.where('owner_id', '<>', id))
        .where('id', 'in', db.selectFrom('replies').select('post_id').where('author_id', '=', id))
        .execute();
      await db
        .updateTable('posts')
        .set((eb) => ({ recommend_count: eb('recommend_count', op, 1) }))
        .$if(!ownPosts, (qb) => qb.where('owner_id', '<>', id))
        .where('id', 'in', db.selectFrom('recommends').select('post_id').where('user_id', '=', id))
        .execute();
    },

    /** The user's posts in id order. */
    postsOf(id: number): Promise<PostRow[]> {
      return db.selectFrom('posts').select(POST_COLUMNS).where('posts.owner_id', '=', id).orderBy('posts.id').execute();
    },

    /** The ids of the user's followers. */
    async followerIds(id: number): Promise<number[]> {
      const rows = await db.selectFrom('follows').select('follower_id').where('followee_id', '=', id).execute();
      return rows.map((row) => Number(row.follower_id));
    },

    /** Every follow, by follower. */
    allFollows(): Promise<Array<{ follower_id: number; followee_id: number }>> {
      return db.selectFrom('follows').select(['follower_id', 'followee_id']).orderBy('follower_id').execute();
    },

    /** Up to `limit` posts with ids above `after`, in id order: every post, a page at a time. */
    postsAfter(after: number, limit: number): Promise<PostRow[]> {
      return db.selectFrom('posts').select(POST_COLUMNS).where('posts.id', '>', after).orderBy('posts.id').limit(limit).execute();
    },

    /** Deletes the user; the foreign keys cascade what is theirs. */
    async remove(id: number): Promise<void> {
      await db.deleteFrom('users').where('id', '=', id).execute();
    },

    /** Deletes every user; answers how many. */
    async removeAll(): Promise<number> {
      const result = await db.deleteFrom('users').executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}

export type UsersRepository = ReturnType<typeof createUsersRepository>;
