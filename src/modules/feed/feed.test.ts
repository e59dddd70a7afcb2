import type { FastifyInstance } from 'fastify';
import { CompiledQuery } from 'kysely';
import { describe, expect, it } from 'vitest';
import { feedPageQuery } from './feed.repository.js';
import { createFanout } from './feed.fanout.js';
import { PUBLIC_URL, buildTestApp, call } from '../../../test/helpers/build-test-app.js';
import { follow, nextPath, publish, unfollow, type PostJson } from '../../../test/helpers/api.js';
import { backend } from '../../../test/helpers/database.js';
import { createAdmin, signUp, type TestUser } from '../../../test/helpers/factories.js';

const PROBLEM = 'application/problem+json; charset=utf-8';

/** The titles on a user's feed, read with `token` (the user's own by default). */
async function feedTitles(app: FastifyInstance, user: TestUser, token = user.token): Promise<string[]> {
  const res = await call(app, 'GET', `/users/${user.id}/feed`, { token });
  if (res.statusCode !== 200) throw new Error(`feed failed: ${res.statusCode} ${res.body}`);
  return res.json<PostJson[]>().map((p) => p.title);
}

describe('GET /users/{user_id}/feed', () => {
  it('lists the posts of followed users, newest first, with the four links that each answer 200', async () => {
    const app = await buildTestApp();
    const reader = await signUp(app);
    const a = await signUp(app);
    const b = await signUp(app);
    const unfollowed = await signUp(app);
    await follow(app, reader, a);
    await follow(app, reader, b);
    const a1 = await publish(app, a, 'a1');
    await publish(app, unfollowed, 'not followed');
    const b1 = await publish(app, b, 'b1');
    await publish(app, reader, 'own post'); // one's own posts are not in one's feed: nobody follows themself
    const a2 = await publish(app, a, 'a2');

    const res = await call(app, 'GET', `/users/${reader.id}/feed`, { token: reader.token });
    expect(res.statusCode).toBe(200);
    const feed = res.json<PostJson[]>();
    expect(feed).toEqual([a2, b1, a1]);
    for (const post of feed) {
      expect(post.links).toEqual([
        { rel: 'self', href: `${PUBLIC_URL}/posts/${post.id}`, method: 'GET' },
        { rel: 'replies', href: `${PUBLIC_URL}/posts/${post.id}/replies`, method: 'GET' },
        { rel: 'recommends', href: `${PUBLIC_URL}/posts/${post.id}/recommends`, method: 'GET' },
        { rel: 'owner', href: `${PUBLIC_URL}/users/${post.ownerId}`, method: 'GET' },
      ]);
      for (const link of post.links) {
        const linked = await call(app, 'GET', link.href.slice(PUBLIC_URL.length), { token: reader.token });
        expect({ rel: link.rel, status: linked.statusCode }).toEqual({ rel: link.rel, status: 200 });
      }
    }
    expect((await call(app, 'GET', `/users/${reader.id}/feed`, { token: reader.token })).body).toBe(res.body);
    // Once the fan-out worker has run, the same feed is read from the entries it wrote.
    await app.fanout.drain();
    expect((await call(app, 'GET', `/users/${reader.id}/feed`, { token: reader.token })).body).toBe(res.body);
    const entries = await app.db.selectFrom('feed_entries').select(['post_id', 'owner_id']).where('user_id', '=', reader.id).orderBy('post_id').execute();
    expect(entries).toEqual([
      { post_id: a1.id, owner_id: a.id },
      { post_id: b1.id, owner_id: b.id },
      { post_id: a2.id, owner_id: a.id },
    ]);
  });

  /**
   * The owner publishes one post of each visibility. The feed shows what its user may see, whoever reads it:
   * an admin reading a member's feed sees the member's view, not the admin's.
   */
  it.each([
    ['a follower, read by themself', 'follower', 'follower', ['fol', 'pub']],
    ['a follower, read by an admin', 'follower', 'admin', ['fol', 'pub']],
    ['an admin who follows the owner, read by themself', 'admin', 'admin', ['priv', 'fol', 'pub']],
    ['a non-follower, read by themself', 'stranger', 'stranger', []],
    ['the owner, read by themself', 'owner', 'owner', []],
  ] as const)('the feed of %s', async (_case, whose, reader, expected) => {
    const app = await buildTestApp();
    const users = {
      owner: await signUp(app),
      follower: await signUp(app),
      stranger: await signUp(app),
      admin: await createAdmin(app),
    };
    await follow(app, users.follower, users.owner);
    await follow(app, users.admin, users.owner);
    await follow(app, users.stranger, users.follower);
    await follow(app, users.owner, users.follower);
    await publish(app, users.owner, 'pub', 'public');
    await publish(app, users.owner, 'fol', 'followers');
    await publish(app, users.owner, 'priv', 'private');
    expect(await feedTitles(app, users[whose], users[reader].token)).toEqual(expected);
  });

  it('applies visibility when read: a post made private leaves the feed, made public again it returns', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const reader = await signUp(app);
    await follow(app, reader, owner);
    const post = await publish(app, owner, 'changing');
    const replace = (visibility: string) =>
      call(app, 'PUT', `/posts/${post.id}`, { token: owner.token, body: { title: 'changing', content: 'c', visibility } });
    expect(await feedTitles(app, reader)).toEqual(['changing']);
    expect((await replace('private')).statusCode).toBe(200);
    expect(await feedTitles(app, reader)).toEqual([]);
    expect((await replace('followers')).statusCode).toBe(200);
    expect(await feedTitles(app, reader)).toEqual(['changing']);
  });

  it('shows a followers-only post as soon as the user follows, and drops it when they unfollow', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const reader = await signUp(app);
    await publish(app, owner, 'for followers', 'followers');
    expect(await feedTitles(app, reader)).toEqual([]);
    await follow(app, reader, owner);
    expect(await feedTitles(app, reader)).toEqual(['for followers']);
    await unfollow(app, reader, owner);
    expect(await feedTitles(app, reader)).toEqual([]);
    expect(await app.db.selectFrom('feed_entries').selectAll().execute()).toEqual([]);
  });

  it('shows the followee\'s posts right after a follow, before the worker has written them, and pages through its catching up', async () => {
    const app = await buildTestApp();
    await app.fanout.close(); // nothing is written until `worker` drains
    const worker = createFanout(app.store, app.log, { sweepMs: 60_000 });
    const reader = await signUp(app);
    const owner = await signUp(app);
    const other = await signUp(app);
    const posts = [
      await publish(app, owner, 'o1'),
      await publish(app, owner, 'hidden', 'private'),
      await publish(app, other, 'x1'),
      await publish(app, owner, 'o2', 'followers'),
      await publish(app, owner, 'o3'),
    ];
    await follow(app, reader, other);
    await worker.drain();
    await follow(app, reader, owner);
    // The follow wrote no entry: its backfill waits for the worker, and the feed merges the owner's posts meanwhile.
    expect(await app.db.selectFrom('feed_backfill').selectAll().execute()).toEqual([{ user_id: reader.id, owner_id: owner.id }]);
    expect(await app.db.selectFrom('feed_entries').select('post_id').where('owner_id', '=', owner.id).execute()).toEqual([]);
    const expected = ['o3', 'o2', 'x1', 'o1'];
    expect(await feedTitles(app, reader)).toEqual(expected);
    const newer = await publish(app, owner, 'o4'); // queued and the pending followee's: shown once
    expect(await feedTitles(app, reader)).toEqual(['o4', ...expected]);

    // A page read before the worker writes the backfill, the next one after: every post once, in order.
    const first = await call(app, 'GET', `/users/${reader.id}/feed?limit=2`, { token: reader.token });
    expect(first.json<PostJson[]>().map((p) => p.title)).toEqual(['o4', 'o3']);
    await worker.drain();
    const second = await call(app, 'GET', nextPath(first.headers.link)!, { token: reader.token });
    expect(second.json<PostJson[]>().map((p) => p.title)).toEqual(['o2', 'x1']);
    expect(await feedTitles(app, reader)).toEqual(['o4', ...expected]);
    expect(await app.db.selectFrom('feed_backfill').selectAll().execute()).toEqual([]);
    const written = await app.db.selectFrom('feed_entries').select('post_id').where('user_id', '=', reader.id).orderBy('post_id').execute();
    expect(written.map((e) => e.post_id)).toEqual([...posts.map((p) => p.id), newer.id]);
    await worker.close();
  });

  it('writes no backfill for a follow undone before the worker reached it', async () => {
    const app = await buildTestApp();
    await app.fanout.close();
    const worker = createFanout(app.store, app.log, { sweepMs: 60_000 });
    const reader = await signUp(app);
    const owner = await signUp(app);
    await publish(app, owner, 'o1');
    await worker.drain();
    await follow(app, reader, owner);
    expect(await feedTitles(app, reader)).toEqual(['o1']);
    await unfollow(app, reader, owner);
    expect(await feedTitles(app, reader)).toEqual([]);
    expect(await app.db.selectFrom('feed_backfill').selectAll().execute()).toEqual([]);
    await worker.drain();
    expect(await app.db.selectFrom('feed_entries').selectAll().execute()).toEqual([]);
    expect(await feedTitles(app, reader)).toEqual([]);
    await worker.close();
  });

  it('drops a deleted post', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const reader = await signUp(app);
    await follow(app, reader, owner);
    const gone = await publish(app, owner, 'gone');
    await publish(app, owner, 'stays');
    expect((await call(app, 'DELETE', `/posts/${gone.id}`, { token: owner.token })).statusCode).toBe(200);
    expect(await feedTitles(app, reader)).toEqual(['stays']);
  });

  it('pages with next links, visiting every post once while new posts arrive', async () => {
    const app = await buildTestApp();
    const reader = await signUp(app);
    const a = await signUp(app);
    const b = await signUp(app);
    await follow(app, reader, a);
    await follow(app, reader, b);
    const before: number[] = [];
    for (let i = 0; i < 5; i++) before.push((await publish(app, i % 2 ? a : b, `p${i}`)).id);
    let path: string | undefined = `/users/${reader.id}/feed?limit=2`;
    const seen: number[] = [];
    const sizes: number[] = [];
    while (path) {
      const res = await call(app, 'GET', path, { token: reader.token });
      expect(res.statusCode).toBe(200);
      const ids = res.json<PostJson[]>().map((p) => p.id);
      sizes.push(ids.length);
      seen.push(...ids);
      path = nextPath(res.headers.link);
      await publish(app, sizes.length % 2 ? a : b, `new ${sizes.length}`);
    }
    expect(seen).toEqual([...before].reverse());
    expect(sizes).toEqual([2, 2, 1]);
  });

  it.each([
    ['no token', 'none', 'self', 401],
    ['a garbage token', 'garbage', 'self', 401],
    ['no token and a malformed user id (400 before 401, CONTRACT §6.1)', 'none', 'abc', 400],
    ['another member', 'other', 'self', 403],
    ['a member asking for a user that does not exist', 'other', 'missing', 404],
    ['an admin asking for a user that does not exist', 'admin', 'missing', 404],
    ['a malformed user id', 'other', 'abc', 400],
    ['limit=0', 'self', 'self?limit=0', 400],
    ['a garbage cursor', 'self', 'self?cursor=garbage', 400],
  ])('answers %s', async (_case, who, target, status) => {
    const app = await buildTestApp();
    const self = await signUp(app);
    const other = await signUp(app);
    const admin = await createAdmin(app);
    const token = { none: undefined, garbage: 'garbage', other: other.token, admin: admin.token, self: self.token }[who];
    const [id, query] = target.split('?');
    const userId = id === 'self' ? self.id : id === 'missing' ? 424242 : id;
    const res = await call(app, 'GET', `/users/${userId}/feed${query ? `?${query}` : ''}`, { token });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (status === 401) expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
  });

  it("rejects a cursor of another user's feed", async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const admin = await createAdmin(app);
    const r1 = await signUp(app);
    const r2 = await signUp(app);
    await follow(app, r1, owner);
    await follow(app, r2, owner);
    await publish(app, owner, 'one');
    await publish(app, owner, 'two');
    const first = await call(app, 'GET', `/users/${r1.id}/feed?limit=1`, { token: r1.token });
    const cursor = new URL(`${PUBLIC_URL}${nextPath(first.headers.link)}`).searchParams.get('cursor');
    expect((await call(app, 'GET', `/users/${r2.id}/feed?limit=1&cursor=${cursor}`, { token: admin.token })).statusCode).toBe(400);
    expect((await call(app, 'GET', `/users/${r1.id}/feed?limit=1&cursor=${cursor}`, { token: admin.token })).statusCode).toBe(200);
  });

  it('loses no feed entry when follows and posts race', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const followers = await Promise.all(Array.from({ length: 6 }, () => signUp(app)));
    const posts = await Promise.all([
      ...followers.map((f) => follow(app, f, owner).then(() => undefined)),
      ...Array.from({ length: 6 }, (_, i) => publish(app, owner, `race ${i}`)),
    ]);
    const postIds = posts.filter((p): p is PostJson => p !== undefined).map((p) => p.id).sort((x, y) => y - x);
    for (const f of followers) {
      const res = await call(app, 'GET', `/users/${f.id}/feed`, { token: f.token });
      expect(res.json<PostJson[]>().map((p) => p.id)).toEqual(postIds);
    }
  });
});

describe('query plan (SQLite): a feed page merges the entries and the queue, each walked by its primary key, and the pending backfills', () => {
  it.skipIf(backend === 'postgres').each(['member', 'admin'] as const)('for the feed of a %s', async (role) => {
    const app = await buildTestApp();
    const { statement, params } = feedPageQuery({ id: 1, role }, 20, 500);
    const plan = await app.db.executeQuery<{ detail: string }>(CompiledQuery.raw(`EXPLAIN QUERY PLAN ${statement.sqlite}`, params));
    const details = plan.rows.map((r) => r.detail);
    // The three branches are merged; the entries and the queue come out in id order (no sort, and the LIMIT stops
    // both), the pending backfills' posts are sorted: a probe of an empty range unless a follow is still pending.
    expect(details.slice(0, 3)).toEqual(['MERGE (UNION ALL)', 'LEFT', 'MERGE (UNION ALL)']);
    // feed_entries is a WITHOUT ROWID table: its composite primary key is the table itself.
    expect(details).toContain('SEARCH feed_entries USING PRIMARY KEY (user_id=? AND post_id<?)');
    // Without statistics SQLite cannot know the queue is small; the plan must not depend on it knowing.
    expect(details).toContain('SEARCH fanout_queue USING INTEGER PRIMARY KEY (rowid<?)');
    expect(details).toContain('SEARCH written USING PRIMARY KEY (user_id=? AND post_id=?)');
    expect(details).toContain('SEARCH feed_backfill USING PRIMARY KEY (user_id=?)');
    expect(details).toContain('SEARCH queued USING INTEGER PRIMARY KEY (rowid=?)');
    expect(details.filter((d) => d.startsWith('SEARCH posts'))).toEqual([
      'SEARCH posts USING INTEGER PRIMARY KEY (rowid=?)',
      'SEARCH posts USING INTEGER PRIMARY KEY (rowid=?)',
      'SEARCH posts USING INDEX posts_owner_id (owner_id=? AND id<?)',
    ]);
    // The one sort: the pending branch's, its last step.
    expect(details.filter((d) => d.includes('TEMP B-TREE'))).toEqual(['USE TEMP B-TREE FOR ORDER BY']);
    expect(details.at(-1)).toBe('USE TEMP B-TREE FOR ORDER BY');
    expect(details.join('\n')).not.toMatch(/MULTI-INDEX|SCAN /);
  });
});
