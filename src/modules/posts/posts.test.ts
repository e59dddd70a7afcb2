import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { describe, expect, it, vi } from 'vitest';
import { PUBLIC_URL, buildTestApp, call, write } from '../../../test/helpers/build-test-app.js';
import { expectCreatedAtInIdOrder, follow, nextPath, publish, unfollow, type PostJson } from '../../../test/helpers/api.js';
import { backend, sqlitePlan } from '../../../test/helpers/database.js';
import { createAdmin, signUp } from '../../../test/helpers/factories.js';
import type { Viewer } from '../../shared/visibility.js';
import type { PostRow } from '../../db/types.js';
import { createPostsRepository } from './posts.repository.js';
import { createPost } from './posts.service.js';

const PROBLEM = 'application/problem+json; charset=utf-8';
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

const postLinks = (id: number, ownerId: number) => [
  { rel: 'self', href: `${PUBLIC_URL}/posts/${id}`, method: 'GET' },
  { rel: 'replies', href: `${PUBLIC_URL}/posts/${id}/replies`, method: 'GET' },
  { rel: 'recommends', href: `${PUBLIC_URL}/posts/${id}/recommends`, method: 'GET' },
  { rel: 'owner', href: `${PUBLIC_URL}/users/${ownerId}`, method: 'GET' },
];

/** Exactly the four links, and each of them answers 200 for the same caller (PUBLIC_URL stripped, injected). */
async function expectWorkingLinks(app: FastifyInstance, post: PostJson, token?: string): Promise<void> {
  expect(post.links).toEqual(postLinks(post.id, post.ownerId));
  for (const link of post.links) {
    const res = await call(app, 'GET', link.href.slice(PUBLIC_URL.length), { token });
    expect({ rel: link.rel, status: res.statusCode }).toEqual({ rel: link.rel, status: 200 });
  }
}

const postCount = async (app: FastifyInstance, userId: number) =>
  (await app.db.selectFrom('users').select('post_count').where('id', '=', userId).executeTakeFirstOrThrow()).post_count;
const postRows = (app: FastifyInstance) => app.db.selectFrom('posts').selectAll().orderBy('id').execute();

describe('POST /users/{user_id}/posts', () => {
  it('takes whitespace as content, but not as a title (CONTRACT §3: the title only must not be blank)', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const res = await call(app, 'POST', `/users/${owner.id}/posts`, { token: owner.token, body: { title: 'Spaces', content: ' \n ' } });
    expect(res.statusCode).toBe(201);
    expect(res.json().content).toBe(' \n ');
    const blank = await call(app, 'POST', `/users/${owner.id}/posts`, { token: owner.token, body: { title: ' \t', content: 'x' } });
    expect(blank.statusCode).toBe(400);
    expect(blank.json().errors).toEqual([{ field: 'title', message: 'must not be blank, nor contain U+0000 or unpaired surrogates' }]);
    // One problem per field: an empty title is empty, not also blank.
    const empty = await call(app, 'POST', `/users/${owner.id}/posts`, { token: owner.token, body: { title: '', content: '' } });
    expect(empty.statusCode).toBe(400);
    expect(empty.json().errors).toEqual([
      { field: 'title', message: 'must not be empty' },
      { field: 'content', message: 'must not be empty' },
    ]);
    expect((await postRows(app)).map((r) => r.content)).toEqual([' \n ']);
  });

  it('publishes: 201, Location, the representation, post_count and one feed entry per follower', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const f1 = await signUp(app);
    const f2 = await signUp(app);
    const stranger = await signUp(app);
    await follow(app, f1, owner);
    await follow(app, f2, owner);
    await follow(app, owner, stranger); // owner follows the stranger: not a reason to put the post in their feed

    const res = await call(app, 'POST', `/users/${owner.id}/posts`, { token: owner.token, body: { title: 'Hello', content: 'World' } });
    expect(res.statusCode).toBe(201);
    const post = res.json<PostJson>();
    expect(res.headers.location).toBe(`${PUBLIC_URL}/posts/${post.id}`);
    expect(post).toEqual({
      id: expect.any(Number),
      title: 'Hello',
      content: 'World',
      visibility: 'public',
      ownerId: owner.id,
      replyCount: 0,
      recommendCount: 0,
      createdAt: expect.stringMatching(ISO),
      updatedAt: post.createdAt,
      links: postLinks(post.id, owner.id),
    });
    await expectWorkingLinks(app, post);
    expect(await postRows(app)).toEqual([
      {
        id: post.id,
        owner_id: owner.id,
        title: 'Hello',
        content: 'World',
        visibility: 'public',
        reply_count: 0,
        recommend_count: 0,
        created_at: post.createdAt,
        updated_at: post.createdAt,
      },
    ]);
    expect(await postCount(app, owner.id)).toBe(1);
    // Queued with the post, then written by the fan-out worker.
    await app.fanout.drain();
    expect(await app.db.selectFrom('fanout_queue').selectAll().execute()).toEqual([]);
    const entries = await app.db.selectFrom('feed_entries').selectAll().orderBy('user_id').execute();
    expect(entries).toEqual([
      { user_id: f1.id, post_id: post.id, owner_id: owner.id },
      { user_id: f2.id, post_id: post.id, owner_id: owner.id },
    ]);
  });

  it.each(['public', 'followers', 'private'])('stores visibility %s', async (visibility) => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const post = await publish(app, owner, 'T', visibility);
    expect(post.visibility).toBe(visibility);
    expect((await postRows(app)).map((r) => r.visibility)).toEqual([visibility]);
  });

  it.each([
    ['no token', 'none', 'self', { title: 'T', content: 'C' }, 401, undefined],
    ['a garbage token', 'garbage', 'self', { title: 'T', content: 'C' }, 401, undefined],
    ['no token and an invalid body (400 before 401, CONTRACT §6.1)', 'none', 'self', { title: '' }, 400, 'title'],
    ['another member', 'other', 'self', { title: 'T', content: 'C' }, 403, undefined],
    ['an admin for another user', 'admin', 'self', { title: 'T', content: 'C' }, 403, undefined],
    ['a user that does not exist', 'other', 'missing', { title: 'T', content: 'C' }, 404, undefined],
    ['a user that does not exist (admin)', 'admin', 'missing', { title: 'T', content: 'C' }, 404, undefined],
    ['a malformed user id', 'self', 'abc', { title: 'T', content: 'C' }, 400, 'user_id'],
    ['a missing title', 'self', 'self', { content: 'C' }, 400, 'title'],
    ['a blank title', 'self', 'self', { title: '   ', content: 'C' }, 400, 'title'],
    ['an empty title', 'self', 'self', { title: '', content: 'C' }, 400, 'title'],
    ['a title of 201 characters', 'self', 'self', { title: 'x'.repeat(201), content: 'C' }, 400, 'title'],
    ['a missing content', 'self', 'self', { title: 'T' }, 400, 'content'],
    ['a content of 10001 characters', 'self', 'self', { title: 'T', content: 'x'.repeat(10001) }, 400, 'content'],
    ['U+0000 in the content', 'self', 'self', { title: 'T', content: 'a\u0000b' }, 400, 'content'],
    ['a numeric title', 'self', 'self', { title: 5, content: 'C' }, 400, 'title'],
    ['an unknown visibility', 'self', 'self', { title: 'T', content: 'C', visibility: 'friends' }, 400, 'visibility'],
    ['an unknown field', 'self', 'self', { title: 'T', content: 'C', ownerId: 1 }, 400, 'ownerId'],
  ])('answers %s', async (_case, who, target, body, status, field) => {
    const app = await buildTestApp();
    const self = await signUp(app);
    const other = await signUp(app);
    const admin = await createAdmin(app);
    const token = { none: undefined, garbage: 'garbage', self: self.token, other: other.token, admin: admin.token }[who];
    const id = target === 'self' ? self.id : target === 'missing' ? 424242 : target;
    const res = await call(app, 'POST', `/users/${id}/posts`, { token, body });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (status === 401) expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    if (field) expect(res.json().errors.map((e: { field: string }) => e.field)).toContain(field);
    expect(await postRows(app)).toEqual([]);
    expect(await postCount(app, self.id)).toBe(0);
  });

  it('accepts the longest title and content', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const body = { title: 't'.repeat(200), content: 'c'.repeat(10000) };
    const res = await call(app, 'POST', `/users/${owner.id}/posts`, { token: owner.token, body });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject(body);
  });
});

describe('GET /posts/{post_id}', () => {
  it('reads a post; the same GET twice gives the same body', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const created = await publish(app, owner, 'Read me');
    const one = await call(app, 'GET', `/posts/${created.id}`);
    const again = await call(app, 'GET', `/posts/${created.id}`);
    expect(one.statusCode).toBe(200);
    expect(one.json()).toEqual(created);
    expect(again.body).toBe(one.body);
    await expectWorkingLinks(app, one.json());
  });

  it.each([
    ['abc', 400],
    ['1.5', 400],
    ['-3', 400],
    ['007', 400],
    ['9223372036854775808', 400],
    ['9223372036854775807', 404],
    ['0', 404],
    ['424242', 404],
  ])('GET /posts/%s answers %i', async (id, status) => {
    const app = await buildTestApp();
    const res = await call(app, 'GET', `/posts/${id}`);
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (status === 400) expect(res.json().errors[0].field).toBe('post_id');
  });

  it('answers 401 for an invalid token, even on a public post', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const post = await publish(app, owner, 'Public');
    const res = await call(app, 'GET', `/posts/${post.id}`, { token: 'garbage' });
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
  });
});

/**
 * The visibility fixture: the owner's public, followers-only and private posts, plus a followers-only post of
 * another user whom nobody follows (the follows lookup must be correlated with each post's owner).
 */
async function visibilityFixture(app: FastifyInstance) {
  const owner = await signUp(app);
  const follower = await signUp(app);
  const stranger = await signUp(app);
  const other = await signUp(app);
  const admin = await createAdmin(app);
  await follow(app, follower, owner);
  await follow(app, stranger, follower); // the stranger follows someone, just not the owner
  const posts = {
    pub: await publish(app, owner, 'pub', 'public'),
    fol: await publish(app, owner, 'fol', 'followers'),
    priv: await publish(app, owner, 'priv', 'private'),
    otherFol: await publish(app, other, 'otherFol', 'followers'),
  };
  const tokens = { anonymous: undefined, follower: follower.token, stranger: stranger.token, owner: owner.token, admin: admin.token };
  return { owner, follower, stranger, other, admin, posts, tokens };
}

describe('visibility of posts', () => {
  // Newest first. Titles stand for the posts of the fixture above.
  it.each([
    ['anonymous', ['pub']],
    ['follower', ['fol', 'pub']],
    ['stranger', ['pub']],
    ['owner', ['priv', 'fol', 'pub']],
    ['admin', ['otherFol', 'priv', 'fol', 'pub']],
  ] as const)('%s sees %j on GET /posts, GET /posts/{id} and GET /users/{id}/posts', async (viewer, visible) => {
    const app = await buildTestApp();
    const { owner, posts, tokens } = await visibilityFixture(app);
    const token = tokens[viewer];

    const all = await call(app, 'GET', '/posts', { token });
    expect(all.statusCode).toBe(200);
    const listed = all.json<PostJson[]>();
    expect(listed.map((p) => p.title)).toEqual(visible);
    expect(listed).toEqual(visible.map((title) => posts[title]));
    expect((await call(app, 'GET', '/posts', { token })).body).toBe(all.body);
    for (const post of listed) await expectWorkingLinks(app, post, token);

    const mine = await call(app, 'GET', `/users/${owner.id}/posts`, { token });
    expect(mine.statusCode).toBe(200);
    const ownersVisible = visible.filter((t) => t !== 'otherFol');
    expect(mine.json<PostJson[]>().map((p) => p.title)).toEqual(ownersVisible);
    expect(mine.json()).toEqual(ownersVisible.map((title) => posts[title]));
    expect((await call(app, 'GET', `/users/${owner.id}/posts`, { token })).body).toBe(mine.body);
    for (const post of mine.json<PostJson[]>()) await expectWorkingLinks(app, post, token);

    for (const [title, post] of Object.entries(posts)) {
      const one = await call(app, 'GET', `/posts/${post.id}`, { token });
      const seen = (visible as readonly string[]).includes(title);
      expect({ title, status: one.statusCode }).toEqual({ title, status: seen ? 200 : 404 });
      if (seen) expect(one.json()).toEqual(post);
    }
  });

  it('shows a followers-only post as soon as the viewer follows, and hides it again when they unfollow', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const reader = await signUp(app);
    const post = await publish(app, owner, 'for followers', 'followers');
    const sees = async () => ({
      list: (await call(app, 'GET', '/posts', { token: reader.token })).json<PostJson[]>().map((p) => p.id),
      one: (await call(app, 'GET', `/posts/${post.id}`, { token: reader.token })).statusCode,
      owners: (await call(app, 'GET', `/users/${owner.id}/posts`, { token: reader.token })).json<PostJson[]>().map((p) => p.id),
    });
    expect(await sees()).toEqual({ list: [], one: 404, owners: [] });
    await follow(app, reader, owner);
    expect(await sees()).toEqual({ list: [post.id], one: 200, owners: [post.id] });
    await unfollow(app, reader, owner);
    expect(await sees()).toEqual({ list: [], one: 404, owners: [] });
  });
});

describe('GET /posts and GET /users/{user_id}/posts: pages', () => {
  it.each(['/posts', '/users/:owner/posts'])(
    '%s: following next links visits every post once, newest first, while posts are being added',
    async (template) => {
      const app = await buildTestApp();
      const owner = await signUp(app);
      const reader = await signUp(app);
      const before: number[] = [];
      for (let i = 0; i < 7; i++) before.push((await publish(app, owner, `p${i}`)).id);
      let path: string | undefined = `${template.replace(':owner', String(owner.id))}?limit=3`;
      const seen: number[] = [];
      const pages: number[] = [];
      while (path) {
        const res = await call(app, 'GET', path, { token: reader.token });
        expect(res.statusCode).toBe(200);
        const ids = res.json<PostJson[]>().map((p) => p.id);
        pages.push(ids.length);
        seen.push(...ids);
        path = nextPath(res.headers.link);
        if (path) expect(res.headers.link).toMatch(new RegExp(`^<${PUBLIC_URL}/.*[?&]cursor=[^&>]+.*>; rel="next"$`));
        // New posts are newer than every cursor: they belong before the first page, never inside a later one.
        await publish(app, owner, `new after page ${pages.length}`);
      }
      expect(seen).toEqual([...before].reverse());
      expect(pages).toEqual([3, 3, 1]);
    },
  );

  it('gives no next link when the last page is exactly full', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    await publish(app, owner, 'a');
    await publish(app, owner, 'b');
    const res = await call(app, 'GET', '/posts?limit=2');
    expect(res.json()).toHaveLength(2);
    expect(res.headers.link).toBeUndefined();
  });

  it.each([
    ['/posts?limit=0', 'limit'],
    ['/posts?limit=101', 'limit'],
    ['/posts?limit=abc', 'limit'],
    ['/posts?cursor=garbage', 'cursor'],
    ['/posts?cursor=MQ.AAAAAAAAAAAAAAAA', 'cursor'],
    ['/users/:owner/posts?limit=0', 'limit'],
    ['/users/:owner/posts?cursor=garbage', 'cursor'],
  ])('rejects %s with 400 naming the field', async (template, field) => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const res = await call(app, 'GET', template.replace(':owner', String(owner.id)));
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toBe(PROBLEM);
    expect(res.json().errors[0].field).toBe(field);
  });

  it("rejects a cursor from another collection (another user's posts, or all posts)", async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const b = await signUp(app);
    await publish(app, a, 'a1');
    await publish(app, a, 'a2');
    await publish(app, b, 'b1');
    const cursorOf = (link: unknown) => new URL(`${PUBLIC_URL}${nextPath(link)}`).searchParams.get('cursor');
    const userCursor = cursorOf((await call(app, 'GET', `/users/${a.id}/posts?limit=1`)).headers.link);
    const allCursor = cursorOf((await call(app, 'GET', '/posts?limit=1')).headers.link);
    expect((await call(app, 'GET', `/users/${b.id}/posts?cursor=${userCursor}`)).statusCode).toBe(400);
    expect((await call(app, 'GET', `/posts?cursor=${userCursor}`)).statusCode).toBe(400);
    expect((await call(app, 'GET', `/users/${a.id}/posts?cursor=${allCursor}`)).statusCode).toBe(400);
    expect((await call(app, 'GET', `/users/${a.id}/posts?cursor=${userCursor}`)).statusCode).toBe(200);
  });

  it.each([
    ['a user without posts', 200, 'empty'],
    ['a user that does not exist', 404, '424242'],
    ['a malformed user id', 400, 'abc'],
    ['an invalid token', 401, 'garbage-token'],
  ])('GET /users/{user_id}/posts for %s answers %i', async (_case, status, target) => {
    const app = await buildTestApp();
    const user = await signUp(app);
    const id = target === 'empty' || target === 'garbage-token' ? user.id : target;
    const res = await call(app, 'GET', `/users/${id}/posts`, { token: target === 'garbage-token' ? 'garbage' : undefined });
    expect(res.statusCode).toBe(status);
    if (status === 200) expect(res.json()).toEqual([]);
    else expect(res.headers['content-type']).toBe(PROBLEM);
  });

  it('GET /posts answers 401 for an invalid token', async () => {
    const app = await buildTestApp();
    const res = await call(app, 'GET', '/posts', { token: 'garbage' });
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
  });
});

describe('PUT /posts/{post_id}', () => {
  const replacement = { title: 'New title', content: 'New content', visibility: 'followers' };

  it('replaces the post for its owner, ignoring read-only fields sent back', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const created = await publish(app, owner, 'Old');
    const body = { ...created, ...replacement, replyCount: 99, recommendCount: 7, ownerId: 12345, createdAt: 'x', links: [] };
    const res = await call(app, 'PUT', `/posts/${created.id}`, { token: owner.token, body });
    expect(res.statusCode).toBe(200);
    const updated = res.json<PostJson>();
    expect(updated).toEqual({
      ...created,
      ...replacement,
      updatedAt: expect.stringMatching(ISO),
    });
    expect(updated.updatedAt >= created.createdAt).toBe(true);
    await expectWorkingLinks(app, updated, owner.token);
    expect(await postRows(app)).toEqual([
      expect.objectContaining({
        id: created.id,
        owner_id: owner.id,
        title: 'New title',
        content: 'New content',
        visibility: 'followers',
        reply_count: 0,
        recommend_count: 0,
        created_at: created.createdAt,
        updated_at: updated.updatedAt,
      }),
    ]);
    expect((await call(app, 'GET', `/posts/${created.id}`, { token: owner.token })).json()).toEqual(updated);
  });

  it("lets an admin replace another user's private post", async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const admin = await createAdmin(app);
    const created = await publish(app, owner, 'Secret', 'private');
    const res = await call(app, 'PUT', `/posts/${created.id}`, { token: admin.token, body: { ...replacement, visibility: 'public' } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ id: created.id, ownerId: owner.id, title: 'New title', visibility: 'public' });
    expect((await call(app, 'GET', `/posts/${created.id}`)).statusCode).toBe(200);
  });

  it.each([
    ['no token', 'none', 'public', {}, 401, undefined],
    ['a garbage token', 'garbage', 'public', {}, 401, undefined],
    ['no token and an invalid body (400 before 401, CONTRACT §6.1)', 'none', 'public', { title: undefined }, 400, 'title'],
    ['a missing visibility (not a patch)', 'owner', 'public', { visibility: undefined }, 400, 'visibility'],
    ['a missing title (not a patch)', 'owner', 'public', { title: undefined }, 400, 'title'],
    ['an unknown field', 'owner', 'public', { pinned: true }, 400, 'pinned'],
    ['an id that differs from the path', 'owner', 'public', { id: 424242 }, 400, 'id'],
    ['another member on a post they see', 'stranger', 'public', {}, 403, undefined],
    ['another member on a post they do not see', 'stranger', 'private', {}, 404, undefined],
    ['a follower on a followers-only post', 'follower', 'followers', {}, 403, undefined],
    ['a post that does not exist', 'owner', 'missing', {}, 404, undefined],
    ['a malformed id', 'owner', 'abc', {}, 400, 'post_id'],
  ])('answers %s', async (_case, who, target, change, status, field) => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const stranger = await signUp(app);
    const follower = await signUp(app);
    await follow(app, follower, owner);
    const post = await publish(app, owner, 'Unchanged', target === 'followers' || target === 'private' ? target : 'public');
    const token = { none: undefined, garbage: 'garbage', owner: owner.token, stranger: stranger.token, follower: follower.token }[who];
    const id = target === 'missing' ? 424242 : target === 'abc' ? 'abc' : post.id;
    const res = await call(app, 'PUT', `/posts/${id}`, { token, body: { ...replacement, ...change } });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (status === 401) expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    if (field) expect(res.json().errors.map((e: { field: string }) => e.field)).toContain(field);
    expect((await postRows(app)).map((r) => [r.title, r.updated_at])).toEqual([['Unchanged', post.updatedAt]]);
  });
});

describe('DELETE /posts/{post_id}', () => {
  it('removes the post with its replies, recommends and feed entries, and counts it off its owner', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const follower = await signUp(app);
    await follow(app, follower, owner);
    const doomed = await publish(app, owner, 'doomed');
    const kept = await publish(app, owner, 'kept');
    const now = new Date().toISOString();
    for (const post of [doomed, kept]) {
      await write(app, (db) => db.insertInto('replies').values({ post_id: post.id, author_id: follower.id, content: 'r', created_at: now, updated_at: now }).execute());
      await write(app, (db) => db.insertInto('recommends').values({ post_id: post.id, user_id: follower.id, created_at: now }).execute());
    }
    expect(await postCount(app, owner.id)).toBe(2);

    await app.fanout.drain();
    const res = await call(app, 'DELETE', `/posts/${doomed.id}`, { token: owner.token });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.json()).toEqual({ deleted: 1 });
    expect((await call(app, 'GET', `/posts/${doomed.id}`)).statusCode).toBe(404);
    expect((await postRows(app)).map((r) => r.id)).toEqual([kept.id]);
    expect(await postCount(app, owner.id)).toBe(1);
    for (const table of ['replies', 'recommends', 'feed_entries'] as const) {
      const rows = await app.db.selectFrom(table).select('post_id').execute();
      expect({ table, posts: rows.map((r) => r.post_id) }).toEqual({ table, posts: [kept.id] });
    }
    // Deleting it again: it does not exist any more (seed §7).
    expect((await call(app, 'DELETE', `/posts/${doomed.id}`, { token: owner.token })).statusCode).toBe(400);
    expect(await postCount(app, owner.id)).toBe(1);
  });

  it("lets an admin delete another user's private post", async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const admin = await createAdmin(app);
    const post = await publish(app, owner, 'Secret', 'private');
    const res = await call(app, 'DELETE', `/posts/${post.id}`, { token: admin.token });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ deleted: 1 });
    expect(await postRows(app)).toEqual([]);
    expect(await postCount(app, owner.id)).toBe(0);
  });

  it.each([
    ['no token', 'none', 'public', 401],
    ['a garbage token', 'garbage', 'public', 401],
    ['no token and a malformed id (400 before 401, CONTRACT §6.1)', 'none', 'abc', 400],
    ['another member on a post they see', 'stranger', 'public', 403],
    ['a follower on a followers-only post', 'follower', 'followers', 403],
    ['another member on a post they do not see (as if missing: 400)', 'stranger', 'private', 400],
    ['a post that does not exist (seed §7)', 'owner', 'missing', 400],
    ['a malformed id', 'owner', 'abc', 400],
  ])('answers %s', async (_case, who, target, status) => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const stranger = await signUp(app);
    const follower = await signUp(app);
    await follow(app, follower, owner);
    const post = await publish(app, owner, 'Kept', target === 'followers' || target === 'private' ? target : 'public');
    const token = { none: undefined, garbage: 'garbage', owner: owner.token, stranger: stranger.token, follower: follower.token }[who];
    const id = target === 'missing' ? 424242 : target === 'abc' ? 'abc' : post.id;
    await app.fanout.drain();
    const res = await call(app, 'DELETE', `/posts/${id}`, { token });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (status === 401) expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    expect((await postRows(app)).map((r) => r.id)).toEqual([post.id]);
    expect(await postCount(app, owner.id)).toBe(1);
    expect(await app.db.selectFrom('feed_entries').select('user_id').execute()).toEqual([{ user_id: follower.id }]);
  });
});

describe('post_count', () => {
  it('stays exact under concurrent creates and deletes', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const other = await signUp(app);
    const created = await Promise.all(Array.from({ length: 12 }, (_, i) => publish(app, i % 3 ? owner : other, `c${i}`)));
    expect(await postCount(app, owner.id)).toBe(8);
    expect(await postCount(app, other.id)).toBe(4);
    const owners = created.filter((p) => p.ownerId === owner.id);
    const deletions = await Promise.all([
      ...owners.slice(0, 5).map((p) => call(app, 'DELETE', `/posts/${p.id}`, { token: owner.token })),
      // The same post twice at once: exactly one of the two deletes it.
      ...[0, 1].map(() => call(app, 'DELETE', `/posts/${owners[5]!.id}`, { token: owner.token })),
      ...Array.from({ length: 3 }, (_, i) => publish(app, owner, `late${i}`).then(() => ({ statusCode: 201 }))),
    ]);
    expect(deletions.map((r) => r.statusCode).sort()).toEqual([200, 200, 200, 200, 200, 200, 201, 201, 201, 400]);
    const rows = await postRows(app);
    expect(await postCount(app, owner.id)).toBe(rows.filter((r) => r.owner_id === owner.id).length);
    expect(await postCount(app, owner.id)).toBe(8 - 6 + 3);
    expect(await postCount(app, other.id)).toBe(4);
  });
});

describe('createdAt of concurrent posts', () => {
  it("follows the order of an author's post ids, newest first in their list as in time", async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    await Promise.all(Array.from({ length: 30 }, (_, i) => publish(app, owner, `p${i}`)));
    const res = await call(app, 'GET', `/users/${owner.id}/posts?limit=100`);
    const listed = res.json() as PostJson[];
    expect(listed).toHaveLength(30);
    expectCreatedAtInIdOrder(listed, 'newest first');
  });
});

// Issue 45: a create takes its owner's row (the post counter) last, just before COMMIT. Posts by other authors never
// wait for it; a second post by the same author runs its inserts meanwhile and waits only at the counter, and the
// time it drew before that is moved so that the author's posts keep createdAt in id order.
describe('creates on PostgreSQL: the lock on the author (the post counter) is taken last', () => {
  /** Runs createPost for `ownerId` in a transaction held open once createPost is done; `release` commits it. */
  function heldCreate(app: FastifyInstance, ownerId: number, title: string) {
    let release!: () => void;
    const open = new Promise<void>((resolve) => (release = resolve));
    let created!: (post: PostRow) => void;
    const done = new Promise<PostRow>((resolve) => (created = resolve));
    const committed = app.store.transaction(async (tx) => {
      const post = await createPost(tx, ownerId, { title, content: 'c' });
      created(post!);
      await open;
      return post!;
    });
    return { done, release, committed };
  }
  const waitingOnUsers = async (app: FastifyInstance) =>
    (
      await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock' and query like 'update "users" set "post_count"%'`.execute(app.db)
    ).rows[0]!.n;

  it.runIf(backend === 'postgres')("another author's create commits while the first is still open", async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const first = heldCreate(app, ann.id, 'first');
    await first.done;
    const second = call(app, 'POST', `/users/${bob.id}/posts`, { token: bob.token, body: { title: 'second', content: 'c' } });
    const timeout = new Promise<'waited'>((resolve) => setTimeout(() => resolve('waited'), 5_000).unref());
    const answer = await Promise.race([second, timeout]);
    first.release();
    expect(answer).not.toBe('waited');
    if (answer === 'waited') return;
    expect(answer.statusCode).toBe(201);
    await first.committed;
    expect(await postCount(app, ann.id)).toBe(1);
    expect(await postCount(app, bob.id)).toBe(1);
  });

  it.runIf(backend === 'postgres')('the same author: the second waits only at the counter, then dates its post in id order', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    // The first draws the smaller id and the later time; the second, the larger id and the earlier time (near
    // now: the tokens must stay valid).
    const base = Math.floor(Date.now() / 1000) * 1000;
    const later = new Date(base + 1000).toISOString();
    vi.useFakeTimers({ toFake: ['Date'] });
    let first: ReturnType<typeof heldCreate> | undefined;
    try {
      vi.setSystemTime(base + 1000);
      first = heldCreate(app, ann.id, 'first');
      const firstPost = await first.done;
      vi.setSystemTime(base);
      const second = call(app, 'POST', `/users/${ann.id}/posts`, { token: ann.token, body: { title: 'second', content: 'c' } });
      // The second's post, search entry and event are written; it waits at the counter UPDATE.
      await expect.poll(() => waitingOnUsers(app), { timeout: 5_000 }).toBe(1);
      first.release();
      const answer = await second;
      expect(answer.statusCode).toBe(201);
      await first.committed;
      const secondPost = answer.json() as PostJson;
      expect(secondPost.id).toBeGreaterThan(firstPost.id);
      expect(secondPost.createdAt).toBe(later);
      const listed = (await call(app, 'GET', `/users/${ann.id}/posts`)).json() as PostJson[];
      expect(listed.map((p) => [p.id, p.createdAt, p.updatedAt])).toEqual([
        [secondPost.id, later, later],
        [firstPost.id, later, later],
      ]);
      expect(await postCount(app, ann.id)).toBe(2);
    } finally {
      first?.release();
      vi.useRealTimers();
    }
  });
});

describe('page queries', () => {
  it('write the page size into the SQL text, not as a parameter (SQLite re-prepares a join planned from a bound LIMIT)', async () => {
    const app = await buildTestApp();
    const posts = createPostsRepository(app.db);
    const member = { id: 42, role: 'member' } as const;
    for (const compiled of [posts.listQuery(member, { limit: 37, after: 500 }).compile(), posts.listByOwnerQuery(2, member, { limit: 37 }).compile()]) {
      expect(compiled.sql).toMatch(/ limit 38$/);
      expect(compiled.parameters).not.toContain(38);
    }
  });
});

describe('query plans (SQLite): deep pages walk an index, never sort', () => {
  const member = (id: number): Viewer => ({ id, role: 'member' });
  it.skipIf(backend === 'postgres').each([
    ['GET /posts, anonymous', (r: ReturnType<typeof createPostsRepository>) => r.listQuery(undefined, { limit: 20, after: 500 }), 'USING INDEX posts_visibility_id (visibility=? AND id<?)'],
    ['GET /posts, signed in', (r: ReturnType<typeof createPostsRepository>) => r.listQuery(member(1), { limit: 20, after: 500 }), 'USING INTEGER PRIMARY KEY (rowid<?)'],
    ['GET /posts, admin', (r: ReturnType<typeof createPostsRepository>) => r.listQuery({ id: 1, role: 'admin' }, { limit: 20, after: 500 }), 'USING INTEGER PRIMARY KEY (rowid<?)'],
    ['GET /users/{id}/posts, anonymous', (r: ReturnType<typeof createPostsRepository>) => r.listByOwnerQuery(2, undefined, { limit: 20, after: 500 }), 'USING INDEX posts_owner_id (owner_id=? AND id<?)'],
    ['GET /users/{id}/posts, signed in', (r: ReturnType<typeof createPostsRepository>) => r.listByOwnerQuery(2, member(1), { limit: 20, after: 500 }), 'USING INDEX posts_owner_id (owner_id=? AND id<?)'],
  ])('%s', async (_case, build, expected) => {
    const app = await buildTestApp();
    const details = await sqlitePlan(app.db, build(createPostsRepository(app.db)));
    expect(details.find((d) => d.startsWith('SEARCH posts '))).toBe(`SEARCH posts ${expected}`);
    expect(details.join('\n')).not.toMatch(/TEMP B-TREE|SCAN posts|MULTI-INDEX/);
  });
});
