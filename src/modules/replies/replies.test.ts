import type { FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { PUBLIC_URL, buildTestApp, call } from '../../../test/helpers/build-test-app.js';
import { signUp } from '../../../test/helpers/factories.js';
import {
  VISIBILITY_CASES,
  buildWorld,
  insertFollow,
  insertPost,
  postCounters,
  removeFollow,
} from '../../../test/helpers/posts.js';
import { expectCreatedAtInIdOrder, nextPath } from '../../../test/helpers/api.js';
import { createReply } from './replies.service.js';

const PROBLEM = 'application/problem+json; charset=utf-8';
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** A reply written over the API; fails the test unless it is created. */
async function postReply(app: FastifyInstance, postId: number, token: string, content = 'A reply') {
  const res = await call(app, 'POST', `/posts/${postId}/replies`, { token, body: { content } });
  expect(res.statusCode).toBe(201);
  return res.json() as { id: number; postId: number; authorId: number; content: string; createdAt: string; updatedAt: string };
}

const replyRows = (app: FastifyInstance, postId: number) =>
  app.db.selectFrom('replies').selectAll().where('post_id', '=', postId).orderBy('id').execute();

describe('POST /posts/{post_id}/replies', () => {
  it('creates the reply: 201, Location, the representation, the row and reply_count + 1', async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts.public;
    const res = await call(app, 'POST', `/posts/${postId}/replies`, { token: w.stranger.token, body: { content: 'Nice post' } });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(res.headers.location).toBe(`${PUBLIC_URL}/posts/${postId}/replies/${body.id}`);
    expect(body).toEqual({
      id: expect.any(Number),
      postId,
      authorId: w.stranger.id,
      content: 'Nice post',
      createdAt: expect.stringMatching(ISO),
      updatedAt: body.createdAt,
      links: [
        { rel: 'self', href: `${PUBLIC_URL}/posts/${postId}/replies/${body.id}`, method: 'GET' },
        { rel: 'post', href: `${PUBLIC_URL}/posts/${postId}`, method: 'GET' },
        { rel: 'owner', href: `${PUBLIC_URL}/users/${w.stranger.id}`, method: 'GET' },
      ],
    });
    expect(await replyRows(app, postId)).toEqual([
      { id: body.id, post_id: postId, author_id: w.stranger.id, content: 'Nice post', created_at: body.createdAt, updated_at: body.createdAt },
    ]);
    expect(await postCounters(app, postId)).toEqual({ replies: 1, recommends: 0 });

    // Location and every link lead somewhere real.
    const self = await call(app, 'GET', res.headers.location!.slice(PUBLIC_URL.length));
    expect(self.statusCode).toBe(200);
    expect(self.json()).toEqual(body);
    const owner = await call(app, 'GET', body.links[2].href.slice(PUBLIC_URL.length));
    expect(owner.statusCode).toBe(200);
    expect(owner.json().id).toBe(w.stranger.id);
    // The `post` link is fetched once the posts module serves GET /posts/{post_id}; its href is asserted above.
    if (app.hasRoute({ method: 'GET', url: '/posts/:post_id' })) {
      const post = await call(app, 'GET', body.links[1].href.slice(PUBLIC_URL.length));
      expect(post.statusCode).toBe(200);
      expect(post.json()).toMatchObject({ id: postId, replyCount: 1 });
    }
  });

  it('takes whitespace as content: only a post title must not be blank (CONTRACT §3)', async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const res = await call(app, 'POST', `/posts/${w.posts.public}/replies`, { token: w.owner.token, body: { content: ' \n\t ' } });
    expect(res.statusCode).toBe(201);
    expect((await replyRows(app, w.posts.public)).map((r) => r.content)).toEqual([' \n\t ']);
  });

  it('accepts content of exactly 2000 characters', async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const res = await call(app, 'POST', `/posts/${w.posts.public}/replies`, { token: w.owner.token, body: { content: 'x'.repeat(2000) } });
    expect(res.statusCode).toBe(201);
    expect(res.json().content).toHaveLength(2000);
  });

  it.each(VISIBILITY_CASES)('on a %s post, the %s: created when they may see it', async (visibility, viewer, sees) => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts[visibility];
    const res = await call(app, 'POST', `/posts/${postId}/replies`, { token: w.token(viewer), body: { content: 'Hello' } });
    const expected = viewer === 'anonymous' ? 401 : sees ? 201 : 404;
    expect(res.statusCode).toBe(expected);
    if (expected === 201) {
      expect(res.json()).toMatchObject({ postId, authorId: w.user(viewer)!.id, content: 'Hello' });
    } else {
      expect(res.headers['content-type']).toBe(PROBLEM);
      // A post the caller may not see answers exactly as a missing one does.
      if (expected === 404) {
        const missing = await call(app, 'POST', '/posts/424242/replies', { token: w.token(viewer), body: { content: 'Hello' } });
        expect({ status: res.json().status, detail: res.json().detail }).toEqual({ status: 404, detail: missing.json().detail });
      }
    }
    expect((await replyRows(app, postId)).length).toBe(expected === 201 ? 1 : 0);
    expect(await postCounters(app, postId)).toEqual({ replies: expected === 201 ? 1 : 0, recommends: 0 });
  });

  it.each([
    ['no token', { token: 'none' }, 401, undefined],
    ['a garbage token', { token: 'garbage' }, 401, undefined],
    ['a missing content', { body: {} }, 400, 'content'],
    ['an empty content', { body: { content: '' } }, 400, 'content'],
    ['content over 2000 characters', { body: { content: 'x'.repeat(2001) } }, 400, 'content'],
    ['U+0000 in the content', { body: { content: 'a\u0000b' } }, 400, 'content'],
    ['a numeric content', { body: { content: 42 } }, 400, 'content'],
    ['an unknown field', { body: { content: 'ok', authorId: 1 } }, 400, 'authorId'],
    ['a JSON array body', { body: ['content'] }, 400, 'body'],
    ['a malformed post id', { path: '/posts/abc/replies' }, 400, 'post_id'],
    ['a post id beyond 64 bits', { path: '/posts/9223372036854775808/replies' }, 400, 'post_id'],
    ['a post that does not exist', { path: '/posts/424242/replies' }, 404, undefined],
  ])('answers %s', async (_case, change: { token?: string; body?: unknown; path?: string }, status, field) => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const token = change.token === 'none' ? undefined : (change.token ?? w.follower.token);
    const res = await call(app, 'POST', change.path ?? `/posts/${w.posts.public}/replies`, {
      token,
      body: 'body' in change ? change.body : { content: 'ok' },
    });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (status === 401) expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    if (field) expect(res.json().errors.map((e: { field: string }) => e.field)).toContain(field);
    expect(await app.db.selectFrom('replies').selectAll().execute()).toEqual([]);
    expect(await postCounters(app, w.posts.public)).toEqual({ replies: 0, recommends: 0 });
  });

  it('answers 415 for a body that is not JSON', async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const res = await app.inject({
      method: 'POST',
      url: `/posts/${w.posts.public}/replies`,
      payload: 'content=hi',
      headers: { authorization: `Bearer ${w.owner.token}`, 'content-type': 'text/plain' },
    });
    expect(res.statusCode).toBe(415);
  });

  it('reports a post deleted between the visibility check and the insert as missing (foreign key)', async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    expect(await app.store.transaction((tx) => createReply(tx, { postId: 424242, authorId: w.owner.id, content: 'late' }))).toBeUndefined();
    expect(await app.db.selectFrom('replies').selectAll().execute()).toEqual([]);
  });

  it('keeps reply_count exact under concurrent replies', async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const authors = [w.owner, w.follower, w.stranger, w.admin];
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        call(app, 'POST', `/posts/${w.posts.public}/replies`, { token: authors[i % 4]!.token, body: { content: `r${i}` } }),
      ),
    );
    expect(results.map((r) => r.statusCode)).toEqual(Array(20).fill(201));
    expect((await replyRows(app, w.posts.public)).length).toBe(20);
    expect(await postCounters(app, w.posts.public)).toEqual({ replies: 20, recommends: 0 });
  });
});

describe('GET /posts/{post_id}/replies', () => {
  it.each(VISIBILITY_CASES)('on a %s post, the %s: listed when they may see it', async (visibility, viewer, sees) => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts[visibility];
    const first = await postReply(app, postId, w.owner.token, 'first');
    const second = await postReply(app, postId, w.admin.token, 'second');
    const res = await call(app, 'GET', `/posts/${postId}/replies`, { token: w.token(viewer) });
    expect(res.statusCode).toBe(sees ? 200 : 404);
    if (sees) {
      expect(res.json()).toEqual([
        { ...first, links: expect.any(Array) },
        { ...second, links: expect.any(Array) },
      ]);
      expect(res.headers.link).toBeUndefined();
      const again = await call(app, 'GET', `/posts/${postId}/replies`, { token: w.token(viewer) });
      expect(again.body).toBe(res.body);
    } else {
      expect(res.headers['content-type']).toBe(PROBLEM);
      expect(res.body).not.toContain('first');
    }
  });

  it('lists oldest first and pages with Link rel=next, visiting every reply once, also while replies are added', async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts.public;
    const otherPost = await insertPost(app, w.owner.id);
    await postReply(app, otherPost, w.owner.token, 'elsewhere');
    const ids: number[] = [];
    for (let i = 0; i < 7; i++) ids.push((await postReply(app, postId, w.follower.token, `reply ${i}`)).id);

    const seen: number[] = [];
    let path: string | undefined = `/posts/${postId}/replies?limit=3`;
    let pages = 0;
    while (path) {
      const res = await call(app, 'GET', path);
      expect(res.statusCode).toBe(200);
      seen.push(...res.json().map((r: { id: number }) => r.id));
      if (pages === 0) {
        // A reply added while paging is met at the end, once.
        ids.push((await postReply(app, postId, w.stranger.token, 'late')).id);
        expect(res.headers.link).toMatch(new RegExp(`^<${PUBLIC_URL}/posts/${postId}/replies\\?limit=3&cursor=[^>]+>; rel="next"$`));
      }
      path = nextPath(res.headers.link);
      pages++;
    }
    expect(seen).toEqual(ids);
    expect(pages).toBe(3);
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['cursor=garbage', 'cursor'],
  ])('rejects ?%s with 400', async (query, field) => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const res = await call(app, 'GET', `/posts/${w.posts.public}/replies?${query}`);
    expect(res.statusCode).toBe(400);
    expect(res.json().errors[0].field).toBe(field);
  });

  it("rejects another post's cursor with 400", async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const other = await insertPost(app, w.owner.id);
    await postReply(app, w.posts.public, w.owner.token);
    await postReply(app, w.posts.public, w.owner.token);
    const first = await call(app, 'GET', `/posts/${w.posts.public}/replies?limit=1`);
    const cursor = new URL(`${PUBLIC_URL}${nextPath(first.headers.link)!}`).searchParams.get('cursor');
    expect((await call(app, 'GET', `/posts/${other}/replies?cursor=${cursor}`)).statusCode).toBe(400);
    expect((await call(app, 'GET', `/users?cursor=${cursor}`)).statusCode).toBe(400);
  });

  it.each([
    ['abc', 400],
    ['007', 400],
    ['424242', 404],
  ])('GET /posts/%s/replies answers %i', async (id, status) => {
    const app = await buildTestApp();
    const res = await call(app, 'GET', `/posts/${id}/replies`);
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
  });
});

describe('createdAt of concurrent replies', () => {
  it("follows the order of the post's reply ids, oldest first in its list as in time, whoever writes them", async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts.public;
    const writers = [w.owner, w.admin, await signUp(app)];
    await Promise.all(Array.from({ length: 60 }, (_, i) => postReply(app, postId, writers[i % 3]!.token, `r${i}`)));
    const res = await call(app, 'GET', `/posts/${postId}/replies?limit=100`);
    const listed = res.json() as { id: number; createdAt: string }[];
    expect(listed).toHaveLength(60);
    expectCreatedAtInIdOrder(listed, 'oldest first');
    expect((await postCounters(app, postId)).replies).toBe(60);
  });
});

describe('GET /posts/{post_id}/replies/{reply_id}', () => {
  it.each(VISIBILITY_CASES)('on a %s post, the %s: readable when they may see it', async (visibility, viewer, sees) => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts[visibility];
    const created = await postReply(app, postId, w.owner.token, 'secretish');
    const res = await call(app, 'GET', `/posts/${postId}/replies/${created.id}`, { token: w.token(viewer) });
    expect(res.statusCode).toBe(sees ? 200 : 404);
    if (sees) {
      expect(res.json()).toEqual(created);
      const again = await call(app, 'GET', `/posts/${postId}/replies/${created.id}`, { token: w.token(viewer) });
      expect(again.body).toBe(res.body);
    } else {
      expect(res.body).not.toContain('secretish');
    }
  });

  it.each([
    ['a reply of another post', 'other', 404],
    ['a reply that does not exist', 'missing', 404],
    ['a post that does not exist', 'no-post', 404],
    ['a malformed reply id', 'malformed', 400],
  ])('answers %s (%s) with %i', async (_case, target, status) => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const other = await insertPost(app, w.owner.id);
    const reply = await postReply(app, other, w.owner.token);
    const path = {
      other: `/posts/${w.posts.public}/replies/${reply.id}`,
      missing: `/posts/${w.posts.public}/replies/424242`,
      'no-post': `/posts/424242/replies/${reply.id}`,
      malformed: `/posts/${w.posts.public}/replies/1.5`,
    }[target]!;
    const res = await call(app, 'GET', path);
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (status === 400) expect(res.json().errors[0].field).toBe('reply_id');
  });
});

describe('PUT /posts/{post_id}/replies/{reply_id}', () => {
  it('replaces the content for its author, ignoring the read-only fields sent back', async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts.followers;
    const created = await postReply(app, postId, w.follower.token, 'before');
    await new Promise((r) => setTimeout(r, 5));
    const res = await call(app, 'PUT', `/posts/${postId}/replies/${created.id}`, {
      token: w.follower.token,
      body: { ...created, content: 'after', postId: 999, authorId: 999, createdAt: 'ignored' },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toEqual({ ...created, content: 'after', updatedAt: expect.stringMatching(ISO) });
    expect(body.updatedAt > created.updatedAt).toBe(true);
    expect(await replyRows(app, postId)).toEqual([
      { id: created.id, post_id: postId, author_id: w.follower.id, content: 'after', created_at: created.createdAt, updated_at: body.updatedAt },
    ]);
    expect(await postCounters(app, postId)).toEqual({ replies: 1, recommends: 0 });
    expect((await call(app, 'GET', `/posts/${postId}/replies/${created.id}`, { token: w.owner.token })).json()).toEqual(body);
  });

  it.each([
    ['no token', 'none', {}, 'own', 401],
    ['another member who sees the post', 'other-follower', {}, 'own', 403],
    ['a member who may not see the post', 'stranger', {}, 'own', 404],
    ["the post's owner", 'owner', {}, 'own', 403],
    ['an admin (only the author edits)', 'admin', {}, 'own', 403],
    ['an id that differs from the path', 'author', { id: 999 }, 'own', 400],
    ['a missing content', 'author', { content: undefined }, 'own', 400],
    ['an unknown field', 'author', { extra: 1 }, 'own', 400],
    ['a reply of another post', 'author', {}, 'other-post', 404],
    ['a reply that does not exist', 'author', {}, 'missing', 404],
    ['a post that does not exist', 'author', {}, 'no-post', 404],
    ['a post the author can no longer see', 'author', {}, 'unfollowed', 404],
  ])('answers %s', async (_case, who, change, target, status) => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts.followers;
    const own = await postReply(app, postId, w.follower.token, 'original');
    const otherPost = await insertPost(app, w.owner.id);
    const otherFollower = await signUp(app);
    await insertFollow(app, otherFollower.id, w.owner.id);
    if (target === 'unfollowed') await removeFollow(app, w.follower.id, w.owner.id);
    const path = {
      own: `/posts/${postId}/replies/${own.id}`,
      unfollowed: `/posts/${postId}/replies/${own.id}`,
      'other-post': `/posts/${otherPost}/replies/${own.id}`,
      missing: `/posts/${postId}/replies/424242`,
      'no-post': `/posts/424242/replies/${own.id}`,
    }[target]!;
    const token = {
      none: undefined,
      author: w.follower.token,
      'other-follower': otherFollower.token,
      stranger: w.stranger.token,
      owner: w.owner.token,
      admin: w.admin.token,
    }[who];
    const res = await call(app, 'PUT', path, { token, body: { content: 'changed', ...change } });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (status === 401) expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    const row = await app.db.selectFrom('replies').selectAll().where('id', '=', own.id).executeTakeFirstOrThrow();
    expect(row.content).toBe('original');
    expect(row.updated_at).toBe(own.updatedAt);
  });
});

describe('DELETE /posts/{post_id}/replies/{reply_id}', () => {
  it.each([
    ['its author', 'author'],
    ["the post's owner", 'owner'],
    ['an admin', 'admin'],
  ])('lets %s delete it: 200 {deleted:1}, the row gone, reply_count - 1', async (_case, who) => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts.followers;
    const doomed = await postReply(app, postId, w.follower.token, 'doomed');
    const kept = await postReply(app, postId, w.owner.token, 'kept');
    expect(await postCounters(app, postId)).toEqual({ replies: 2, recommends: 0 });
    const token = who === 'author' ? w.follower.token : w[who as 'owner' | 'admin'].token;
    const res = await call(app, 'DELETE', `/posts/${postId}/replies/${doomed.id}`, { token });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ deleted: 1 });
    expect((await replyRows(app, postId)).map((r) => r.id)).toEqual([kept.id]);
    expect(await postCounters(app, postId)).toEqual({ replies: 1, recommends: 0 });
    expect((await call(app, 'GET', `/posts/${postId}/replies/${doomed.id}`, { token })).statusCode).toBe(404);
    // Deleting it again is deleting something that does not exist (seed §7); the counter does not move.
    expect((await call(app, 'DELETE', `/posts/${postId}/replies/${doomed.id}`, { token })).statusCode).toBe(400);
    expect(await postCounters(app, postId)).toEqual({ replies: 1, recommends: 0 });
  });

  it.each([
    ['no token', 'none', 'own', 401],
    ['a garbage token', 'garbage', 'own', 401],
    ['another member who sees the post', 'other-follower', 'own', 403],
    ['a reply that does not exist', 'admin', 'missing', 400],
    ['a reply of another post', 'admin', 'other-post', 400],
    ['a post that does not exist', 'admin', 'no-post', 400],
    ['a post the caller may not see', 'stranger', 'own', 400],
    ['a post its author can no longer see', 'author', 'unfollowed', 400],
    ['a malformed reply id', 'author', 'malformed', 400],
  ])('answers %s', async (_case, who, target, status) => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts.followers;
    const own = await postReply(app, postId, w.follower.token, 'stays');
    const otherPost = await insertPost(app, w.owner.id);
    const otherFollower = await signUp(app);
    await insertFollow(app, otherFollower.id, w.owner.id);
    if (target === 'unfollowed') await removeFollow(app, w.follower.id, w.owner.id);
    const path = {
      own: `/posts/${postId}/replies/${own.id}`,
      unfollowed: `/posts/${postId}/replies/${own.id}`,
      'other-post': `/posts/${otherPost}/replies/${own.id}`,
      missing: `/posts/${postId}/replies/424242`,
      'no-post': `/posts/424242/replies/${own.id}`,
      malformed: `/posts/${postId}/replies/-1`,
    }[target]!;
    const token = {
      none: undefined,
      garbage: 'garbage',
      author: w.follower.token,
      'other-follower': otherFollower.token,
      admin: w.admin.token,
      stranger: w.stranger.token,
    }[who];
    const res = await call(app, 'DELETE', path, { token });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (status === 401) expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    expect((await replyRows(app, postId)).map((r) => r.id)).toEqual([own.id]);
    expect(await postCounters(app, postId)).toEqual({ replies: 1, recommends: 0 });
  });

  it('decrements once when the same reply is deleted by concurrent requests', async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts.public;
    const doomed = await postReply(app, postId, w.follower.token);
    await postReply(app, postId, w.follower.token);
    const tokens = [w.follower.token, w.owner.token, w.admin.token, w.follower.token, w.admin.token, w.owner.token];
    const results = await Promise.all(tokens.map((token) => call(app, 'DELETE', `/posts/${postId}/replies/${doomed.id}`, { token })));
    const statuses = results.map((r) => r.statusCode).sort();
    expect(statuses).toEqual([200, 400, 400, 400, 400, 400]);
    expect(await postCounters(app, postId)).toEqual({ replies: 1, recommends: 0 });
  });
});
