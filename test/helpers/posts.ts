import type { FastifyInstance } from 'fastify';
import type { Visibility } from '../../src/db/types.js';
import { write } from './build-test-app.js';
import { createAdmin, signUp, type TestUser } from './factories.js';

/**
 * Posts and follows written straight into the database, so that the replies and recommends tests depend on
 * neither the posts nor the followers routes. The counters are kept as the real routes keep them.
 */
export async function insertPost(
  app: FastifyInstance,
  ownerId: number,
  fields: { visibility?: Visibility; title?: string; content?: string } = {},
): Promise<number> {
  const now = new Date().toISOString();
  const visibility = fields.visibility ?? 'public';
  const row = await write(app, (db) => db
    .insertInto('posts')
    .values({
      owner_id: ownerId,
      title: fields.title ?? 'A post',
      content: fields.content ?? 'Its content',
      visibility,
      created_at: now,
      updated_at: now,
    })
    .returning('id')
    .executeTakeFirstOrThrow());
  const counter = visibility === 'public' ? 'public_post_count' : visibility === 'followers' ? 'followers_post_count' : undefined;
  await write(app, (db) =>
    db
      .updateTable('users')
      .set((eb) => ({ post_count: eb('post_count', '+', 1), ...(counter ? { [counter]: eb(counter, '+', 1) } : {}) }))
      .where('id', '=', ownerId)
      .execute(),
  );
  return row.id;
}

export async function insertFollow(app: FastifyInstance, followerId: number, followeeId: number): Promise<void> {
  await write(app, async (db) => {
    await db.insertInto('follows').values({ follower_id: followerId, followee_id: followeeId, created_at: new Date().toISOString() }).execute();
    await db.updateTable('users').set((eb) => ({ following_count: eb('following_count', '+', 1) })).where('id', '=', followerId).execute();
    await db.updateTable('users').set((eb) => ({ follower_count: eb('follower_count', '+', 1) })).where('id', '=', followeeId).execute();
  });
}

export async function removeFollow(app: FastifyInstance, followerId: number, followeeId: number): Promise<void> {
  await write(app, async (db) => {
    await db.deleteFrom('follows').where('follower_id', '=', followerId).where('followee_id', '=', followeeId).execute();
    await db.updateTable('users').set((eb) => ({ following_count: eb('following_count', '-', 1) })).where('id', '=', followerId).execute();
    await db.updateTable('users').set((eb) => ({ follower_count: eb('follower_count', '-', 1) })).where('id', '=', followeeId).execute();
  });
}

/** The post's denormalised counters as stored. */
export async function postCounters(app: FastifyInstance, postId: number): Promise<{ replies: number; recommends: number }> {
  const row = await app.db
    .selectFrom('posts')
    .select(['reply_count', 'recommend_count'])
    .where('id', '=', postId)
    .executeTakeFirstOrThrow();
  return { replies: row.reply_count, recommends: row.recommend_count };
}

export const VIEWERS = ['anonymous', 'follower', 'stranger', 'owner', 'admin'] as const;
export type Viewer = (typeof VIEWERS)[number];

/** Who sees a post of each visibility (CONTRACT §3), as the tests expect it. */
export const SEES: Record<Visibility, Record<Viewer, boolean>> = {
  public: { anonymous: true, follower: true, stranger: true, owner: true, admin: true },
  followers: { anonymous: false, follower: true, stranger: false, owner: true, admin: true },
  private: { anonymous: false, follower: false, stranger: false, owner: true, admin: true },
};

/** Every (visibility, viewer) pair, for `it.each`. */
export const VISIBILITY_CASES = (['public', 'followers', 'private'] as const).flatMap((visibility) =>
  VIEWERS.map((viewer) => [visibility, viewer, SEES[visibility][viewer]] as const),
);

export interface World {
  owner: TestUser;
  follower: TestUser;
  /** Signed in and follows someone (the follower), just not the owner. */
  stranger: TestUser;
  admin: TestUser;
  posts: Record<Visibility, number>;
  /** The viewer's user (undefined for anonymous). */
  user(viewer: Viewer): TestUser | undefined;
  token(viewer: Viewer): string | undefined;
}

/** An owner with a post of each visibility, a follower of the owner, a stranger and an admin. */
export async function buildWorld(app: FastifyInstance): Promise<World> {
  const owner = await signUp(app);
  const follower = await signUp(app);
  const stranger = await signUp(app);
  const admin = await createAdmin(app);
  await insertFollow(app, follower.id, owner.id);
  await insertFollow(app, stranger.id, follower.id);
  const posts = {
    public: await insertPost(app, owner.id, { visibility: 'public', title: 'Public' }),
    followers: await insertPost(app, owner.id, { visibility: 'followers', title: 'Followers' }),
    private: await insertPost(app, owner.id, { visibility: 'private', title: 'Private' }),
  };
  const users: Record<Viewer, TestUser | undefined> = { anonymous: undefined, follower, stranger, owner, admin };
  return { owner, follower, stranger, admin, posts, user: (v) => users[v], token: (v) => users[v]?.token };
}
