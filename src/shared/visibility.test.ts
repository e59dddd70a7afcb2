import type { FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { follow, publish, type PostJson } from '../../test/helpers/api.js';
import { buildTestApp, call } from '../../test/helpers/build-test-app.js';
import { createAdmin, signUp, type TestUser } from '../../test/helpers/factories.js';
import type { Visibility } from '../db/types.js';
import { createFeedRepository } from '../modules/feed/feed.repository.js';
import { findCallerAndReadablePost, findReadablePost } from '../modules/posts/posts.repository.js';
import { ownerRelations } from '../modules/streams/events.js';
import { findCallerByTokenHash } from '../modules/tokens/tokens.repository.js';
import { hashToken } from './tokens.js';
import { findVisiblePost, seesPost, withVisibleCounts, type Viewer } from './visibility.js';

// The rule is exercised through the API by the posts, replies, recommends, blocks and suspensions tests; this pins
// every consumer of it against one expectation table: the Kysely predicate (single reads, collections, counters),
// the compiled plain SQL (GET /posts/{id}, the feed) and the in-memory predicate of streams.

const CALLERS = ['anonymous', 'stranger', 'follower', 'blocked', 'blocker', 'muter', 'admin', 'owner'] as const;
type Caller = (typeof CALLERS)[number];
const VISIBILITIES = ['public', 'followers', 'private'] as const;

/**
 * What each caller is shown of an author's post of each visibility: `read` by id (and GET /users/{id}/posts,
 * recommends lists, counters), `listed` in GET /posts, feeds, replies lists and streams (mutes apply there).
 * The author `owner` is followed by `follower`, `muter` and `admin`; `blocked` followed them before the author
 * blocked them; `blocker` blocks the author; `muter` mutes the author. Of a suspended author, only admins see
 * anything (the `suspended` column).
 */
const EXPECTED: Record<Caller, Record<Visibility, { read: boolean; listed: boolean }> & { suspended: boolean }> = {
  anonymous: { public: { read: true, listed: true }, followers: { read: false, listed: false }, private: { read: false, listed: false }, suspended: false },
  stranger: { public: { read: true, listed: true }, followers: { read: false, listed: false }, private: { read: false, listed: false }, suspended: false },
  follower: { public: { read: true, listed: true }, followers: { read: true, listed: true }, private: { read: false, listed: false }, suspended: false },
  blocked: { public: { read: false, listed: false }, followers: { read: false, listed: false }, private: { read: false, listed: false }, suspended: false },
  blocker: { public: { read: false, listed: false }, followers: { read: false, listed: false }, private: { read: false, listed: false }, suspended: false },
  muter: { public: { read: true, listed: false }, followers: { read: true, listed: false }, private: { read: false, listed: false }, suspended: false },
  admin: { public: { read: true, listed: true }, followers: { read: true, listed: true }, private: { read: true, listed: true }, suspended: true },
  owner: { public: { read: true, listed: true }, followers: { read: true, listed: true }, private: { read: true, listed: true }, suspended: false },
};
/** Who follows the author (and so has the author's posts in their feed when they may list them). */
const FOLLOWS: ReadonlySet<Caller> = new Set(['follower', 'muter', 'admin']);

interface World {
  app: FastifyInstance;
  users: Record<Caller, TestUser | undefined>;
  author: TestUser;
  suspended: TestUser;
  posts: Record<Visibility, PostJson>;
  suspendedPosts: Record<Visibility, PostJson>;
}

async function buildWorld(): Promise<World> {
  const app = await buildTestApp();
  const author = await signUp(app);
  const suspended = await signUp(app);
  const admin = await createAdmin(app);
  const users: Record<Caller, TestUser | undefined> = {
    anonymous: undefined,
    stranger: await signUp(app),
    follower: await signUp(app),
    blocked: await signUp(app),
    blocker: await signUp(app),
    muter: await signUp(app),
    admin,
    owner: author,
  };
  for (const caller of ['follower', 'muter', 'admin', 'blocked'] as const) {
    await follow(app, users[caller]!, author);
    await follow(app, users[caller]!, suspended);
  }
  const make = async (user: TestUser) => {
    const posts = {} as Record<Visibility, PostJson>;
    for (const visibility of VISIBILITIES) {
      posts[visibility] = await publish(app, user, `${visibility} by ${user.username}`, visibility);
      // The author replies to and recommends their own post: the replies and recommends lists show them or not.
      const replied = await call(app, 'POST', `/posts/${posts[visibility].id}/replies`, { token: user.token, body: { content: 'by the author' } });
      expect(replied.statusCode).toBe(201);
      const recommended = await call(app, 'POST', `/posts/${posts[visibility].id}/recommends`, { token: user.token, body: { id: user.id } });
      expect(recommended.statusCode).toBe(201);
    }
    return posts;
  };
  const posts = await make(author);
  const suspendedPosts = await make(suspended);
  const ok = (res: { statusCode: number; body: string }, status: number) => expect(res.statusCode, res.body).toBe(status);
  ok(await call(app, 'POST', `/users/${author.id}/blocks`, { token: author.token, body: { id: users.blocked!.id } }), 201);
  ok(await call(app, 'POST', `/users/${users.blocker!.id}/blocks`, { token: users.blocker!.token, body: { id: author.id } }), 201);
  ok(await call(app, 'POST', `/users/${users.muter!.id}/mutes`, { token: users.muter!.token, body: { id: author.id } }), 201);
  ok(await call(app, 'PUT', `/users/${suspended.id}/suspension`, { token: admin.token, body: { reason: 'spam' } }), 200);
  return { app, users, author, suspended, posts, suspendedPosts };
}

/** The viewer as the caller lookup makes it (with its block and mute flags), or as a route builds it bare. */
async function viewerOf(app: FastifyInstance, user: TestUser | undefined, bare: boolean): Promise<Viewer> {
  if (!user) return undefined;
  const caller = await findCallerByTokenHash(app.store, hashToken(user.token), new Date().toISOString());
  if (!caller) throw new Error('no caller');
  return bare ? { id: caller.id, role: caller.role } : caller;
}

/** The ids of a collection's items; none for an error answer (a 404 of a missing post or user). */
const ids = (res: { statusCode: number; json(): unknown }) => (res.statusCode === 200 ? (res.json() as Array<{ id: number }>).map((item) => item.id) : []);

describe('who sees what, every consumer against one table (CONTRACT §3, §9)', () => {
  it('single reads, collections, feeds, replies, recommends, counters, search and the stream predicate agree with the table', async () => {
    const world = await buildWorld();
    const { app, users } = world;
    const seen: Record<string, unknown> = {};
    const expected: Record<string, unknown> = {};

    for (const caller of CALLERS) {
      const user = users[caller];
      const token = user?.token;
      const list = ids(await call(app, 'GET', '/posts?limit=100', { token }));
      const byAuthor = ids(await call(app, 'GET', `/users/${world.author.id}/posts?limit=100`, { token }));
      const feed = user && caller !== 'anonymous' ? ids(await call(app, 'GET', `/users/${user.id}/feed?limit=100`, { token })) : [];
      const viewer = await viewerOf(app, user, false);
      // Search (CONTRACT §11) lists through the listing rule: every title starts with its visibility's word.
      const searched = new Map<string, number[]>();
      for (const visibility of VISIBILITIES) {
        searched.set(visibility, ids(await call(app, 'GET', `/posts?q=${visibility}&limit=100`, { token })));
      }

      for (const [author, posts, suspended] of [
        [world.author, world.posts, false],
        [world.suspended, world.suspendedPosts, true],
      ] as const) {
        for (const visibility of VISIBILITIES) {
          const post = posts[visibility];
          const rule = EXPECTED[caller];
          const read = suspended ? rule.suspended : rule[visibility].read;
          const listed = suspended ? rule.suspended : rule[visibility].listed;
          const inFeed = listed && FOLLOWS.has(caller);
          const key = `${caller} × ${suspended ? 'suspended ' : ''}${visibility}`;
          expected[key] = { read, listed, byAuthor: read, feed: inFeed, replies: read ? listed : 404, recommends: read ? read : 404, stream: listed, search: listed, searchByAuthor: listed };

          const single = await call(app, 'GET', `/posts/${post.id}`, { token });
          const replies = await call(app, 'GET', `/posts/${post.id}/replies`, { token });
          const recommends = await call(app, 'GET', `/posts/${post.id}/recommends`, { token });
          // The stream's predicate, fed by the same lookups the hub makes for an event of this post.
          const relations = await ownerRelations(app.db, author.id, viewer ? [viewer.id] : []);
          const follows = viewer !== undefined && (await app.db.selectFrom('follows').select('follower_id').where('followee_id', '=', author.id).where('follower_id', '=', viewer.id).executeTakeFirst()) !== undefined;
          const stream = seesPost(viewer, { ownerId: author.id, visibility }, {
            follows,
            blocked: viewer !== undefined && relations.blocked.has(viewer.id),
            mutes: viewer !== undefined && relations.muting.has(viewer.id),
            ownerSuspended: relations.ownerSuspended,
          }, true);
          seen[key] = {
            read: single.statusCode === 200,
            listed: list.includes(post.id),
            byAuthor: suspended ? ids(await call(app, 'GET', `/users/${author.id}/posts?limit=100`, { token })).includes(post.id) : byAuthor.includes(post.id),
            feed: feed.includes(post.id),
            replies: replies.statusCode === 404 ? 404 : ids(replies).length === 1,
            recommends: recommends.statusCode === 404 ? 404 : ids(recommends).includes(author.id),
            stream,
            search: searched.get(visibility)!.includes(post.id),
            searchByAuthor: ids(await call(app, 'GET', `/users/${author.id}/posts?q=${visibility}&limit=100`, { token })).includes(post.id),
          };
          if (single.statusCode !== 404) expect(single.statusCode).toBe(200);
          if (suspended && caller !== 'admin') {
            // Not even GET /users/{id}/posts reveals a suspended account: its owner is missing.
            expect((await call(app, 'GET', `/users/${author.id}/posts`, { token })).statusCode).toBe(404);
          }

          // The builder and the compiled plain statement answer alike, for the viewer with its flags and without.
          for (const bare of [false, true]) {
            const v = await viewerOf(app, user, bare);
            const byBuilder = await findVisiblePost(app.db, post.id, v);
            // The route adds the counters this viewer may see (rule 5) to the plain statement's row.
            const plain = await findReadablePost(app.store, post.id, v);
            expect(plain && (await withVisibleCounts(app.db, v, [plain]))[0]).toEqual(byBuilder);
            expect(byBuilder !== undefined, `${key} builder, bare=${bare}`).toBe(read);
            if (user && !bare) {
              // Signed in, GET /posts/{id} finds the caller and the post in one statement: the same caller, the same post.
              const both = await findCallerAndReadablePost(app.store, hashToken(user.token), new Date().toISOString(), post.id);
              expect(both?.caller, `${key} caller and post`).toEqual(v);
              expect(both?.post, `${key} caller and post`).toEqual(await findReadablePost(app.store, post.id, v));
            }
            if (v && caller !== 'anonymous') {
              const feedRows = await createFeedRepository(app.store).page(v, { limit: 100 });
              expect(feedRows.some((row) => row.id === post.id), `${key} feed statement, bare=${bare}`).toBe(inFeed);
            }
          }
        }
      }

      // Counters: postCount as this caller is shown it (profiles of suspended accounts are missing but to admins).
      const profile = await call(app, 'GET', `/users/${world.author.id}`, { token });
      seen[`${caller} × postCount`] = profile.json<{ postCount: number }>().postCount;
      expected[`${caller} × postCount`] = VISIBILITIES.filter((visibility) => EXPECTED[caller][visibility].read).length;
      const suspendedProfile = await call(app, 'GET', `/users/${world.suspended.id}`, { token });
      seen[`${caller} × suspended profile`] = suspendedProfile.statusCode;
      expected[`${caller} × suspended profile`] = caller === 'admin' ? 200 : 404;
    }
    expect(seen).toEqual(expected);
  });
});
