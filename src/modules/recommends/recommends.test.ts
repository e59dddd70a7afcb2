import type { FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { PUBLIC_URL, buildTestApp, call } from '../../../test/helpers/build-test-app.js';
import { signUp, type TestUser } from '../../../test/helpers/factories.js';
import {
  VISIBILITY_CASES,
  buildWorld,
  insertFollow,
  insertPost,
  postCounters,
  removeFollow,
} from '../../../test/helpers/posts.js';
import { nextPath } from '../../../test/helpers/api.js';
import { createRecommend } from './recommends.service.js';

const PROBLEM = 'application/problem+json; charset=utf-8';

/** A recommend made over the API by the user themself; fails the test unless it is created. */
async function recommend(app: FastifyInstance, postId: number, user: TestUser) {
  const res = await call(app, 'POST', `/posts/${postId}/recommends`, { token: user.token, body: { id: user.id } });
  expect(res.statusCode).toBe(201);
}

const recommenderIds = async (app: FastifyInstance, postId: number) =>
  (await app.db.selectFrom('recommends').select('user_id').where('post_id', '=', postId).orderBy('user_id').execute()).map(
    (r) => r.user_id,
  );

describe('POST /posts/{post_id}/recommends', () => {
  it('records the recommend: 201, Location, the user (as GET /users/{id}), the row and recommend_count + 1', async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts.public;
    const res = await call(app, 'POST', `/posts/${postId}/recommends`, { token: w.stranger.token, body: { id: w.stranger.id } });
    expect(res.statusCode).toBe(201);
    expect(res.headers.location).toBe(`${PUBLIC_URL}/posts/${postId}/recommends/${w.stranger.id}`);
    const user = await call(app, 'GET', `/users/${w.stranger.id}`);
    expect(res.json()).toEqual(user.json());
    expect(res.json()).toMatchObject({
      id: w.stranger.id,
      username: w.stranger.username,
      links: [
        { rel: 'self', href: `${PUBLIC_URL}/users/${w.stranger.id}`, method: 'GET' },
        { rel: 'followers', href: `${PUBLIC_URL}/users/${w.stranger.id}/followers`, method: 'GET' },
        { rel: 'following', href: `${PUBLIC_URL}/users/${w.stranger.id}/following`, method: 'GET' },
        { rel: 'posts', href: `${PUBLIC_URL}/users/${w.stranger.id}/posts`, method: 'GET' },
      ],
    });
    expect(await app.db.selectFrom('recommends').selectAll().execute()).toEqual([
      { post_id: postId, user_id: w.stranger.id, created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) },
    ]);
    expect(await postCounters(app, postId)).toEqual({ replies: 0, recommends: 1 });

    // Location and the self link lead to the same user.
    const located = await call(app, 'GET', res.headers.location!.slice(PUBLIC_URL.length));
    expect(located.statusCode).toBe(200);
    expect(located.body).toBe(user.body);
    const self = await call(app, 'GET', res.json().links[0].href.slice(PUBLIC_URL.length));
    expect(self.body).toBe(user.body);
  });

  it.each(VISIBILITY_CASES)('on a %s post, the %s: recorded when they may see it', async (visibility, viewer, sees) => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts[visibility];
    const user = w.user(viewer);
    const res = await call(app, 'POST', `/posts/${postId}/recommends`, { token: user?.token, body: { id: user?.id ?? w.owner.id } });
    const expected = viewer === 'anonymous' ? 401 : sees ? 201 : 404;
    expect(res.statusCode).toBe(expected);
    if (expected === 201) expect(res.json().id).toBe(user!.id);
    else expect(res.headers['content-type']).toBe(PROBLEM);
    expect(await recommenderIds(app, postId)).toEqual(expected === 201 ? [user!.id] : []);
    expect(await postCounters(app, postId)).toEqual({ replies: 0, recommends: expected === 201 ? 1 : 0 });
  });

  it.each([
    ['no token', { who: 'none' }, 401, undefined],
    ['a garbage token', { who: 'garbage' }, 401, undefined],
    ['another user named in the body', { body: 'owner' }, 403, undefined],
    ['an admin naming another user (a recommend is personal)', { who: 'admin', body: 'follower' }, 403, undefined],
    ['a missing id', { body: {} }, 400, 'id'],
    ['an id as a string', { body: 'string-id' }, 400, 'id'],
    ['an id of 0', { body: { id: 0 } }, 400, 'id'],
    ['a fractional id', { body: { id: 1.5 } }, 400, 'id'],
    ['an id beyond 2^53 (no exact JSON number)', { body: { id: 1e20 } }, 400, 'id'],
    ['an unknown field', { body: 'extra-field' }, 400, 'userId'],
    ['a malformed post id', { path: '/posts/01/recommends' }, 400, 'post_id'],
    ['a post that does not exist', { path: '/posts/424242/recommends' }, 404, undefined],
  ])('answers %s', async (_case, change: { who?: string; body?: unknown; path?: string }, status, field) => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const caller = change.who === 'admin' ? w.admin : w.follower;
    const token = change.who === 'none' ? undefined : change.who === 'garbage' ? 'garbage' : caller.token;
    const body =
      change.body === undefined
        ? { id: caller.id }
        : change.body === 'owner'
          ? { id: w.owner.id }
          : change.body === 'follower'
            ? { id: w.follower.id }
            : change.body === 'string-id'
              ? { id: String(caller.id) }
              : change.body === 'extra-field'
                ? { id: caller.id, userId: caller.id }
                : change.body;
    const res = await call(app, 'POST', change.path ?? `/posts/${w.posts.public}/recommends`, { token, body });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (status === 401) expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    if (field) expect(res.json().errors.map((e: { field: string }) => e.field)).toContain(field);
    expect(await app.db.selectFrom('recommends').selectAll().execute()).toEqual([]);
    expect(await postCounters(app, w.posts.public)).toEqual({ replies: 0, recommends: 0 });
  });

  it('answers 409 naming `id` when the user already recommends the post, and counts once', async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    await recommend(app, w.posts.public, w.follower);
    const again = await call(app, 'POST', `/posts/${w.posts.public}/recommends`, { token: w.follower.token, body: { id: w.follower.id } });
    expect(again.statusCode).toBe(409);
    expect(again.headers['content-type']).toBe(PROBLEM);
    expect(again.json()).toMatchObject({ status: 409, errors: [{ field: 'id' }] });
    expect(await recommenderIds(app, w.posts.public)).toEqual([w.follower.id]);
    expect(await postCounters(app, w.posts.public)).toEqual({ replies: 0, recommends: 1 });
  });

  it('gives one 201 and the rest 409 when identical requests race, and counts once', async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts.public;
    const results = await Promise.all(
      Array.from({ length: 6 }, () => call(app, 'POST', `/posts/${postId}/recommends`, { token: w.follower.token, body: { id: w.follower.id } })),
    );
    expect(results.map((r) => r.statusCode).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    expect(await recommenderIds(app, postId)).toEqual([w.follower.id]);
    expect(await postCounters(app, postId)).toEqual({ replies: 0, recommends: 1 });
  });

  it('keeps recommend_count exact when many users recommend at once', async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const users = [w.owner, w.follower, w.stranger, w.admin];
    for (let i = 0; i < 8; i++) users.push(await signUp(app));
    const results = await Promise.all(
      users.map((u) => call(app, 'POST', `/posts/${w.posts.public}/recommends`, { token: u.token, body: { id: u.id } })),
    );
    expect(results.map((r) => r.statusCode)).toEqual(Array(12).fill(201));
    expect(await postCounters(app, w.posts.public)).toEqual({ replies: 0, recommends: 12 });
  });

  it('reports a post deleted between the visibility check and the insert as gone (foreign key)', async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    await expect(app.store.transaction((tx) => createRecommend(tx, 424242, w.owner.id, undefined))).rejects.toMatchObject({ statusCode: 404 });
    expect(await app.db.selectFrom('recommends').selectAll().execute()).toEqual([]);
  });
});

describe('GET /posts/{post_id}/recommends', () => {
  it.each(VISIBILITY_CASES)('on a %s post, the %s: listed when they may see it', async (visibility, viewer, sees) => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts[visibility];
    await recommend(app, postId, w.admin);
    await recommend(app, postId, w.owner);
    const res = await call(app, 'GET', `/posts/${postId}/recommends`, { token: w.token(viewer) });
    expect(res.statusCode).toBe(sees ? 200 : 404);
    if (sees) {
      const expected = [w.owner, w.admin].sort((a, b) => a.id - b.id);
      const users = await Promise.all(expected.map(async (u) => (await call(app, 'GET', `/users/${u.id}`, { token: w.token(viewer) })).json()));
      expect(res.json()).toEqual(users);
      expect(res.headers.link).toBeUndefined();
      const again = await call(app, 'GET', `/posts/${postId}/recommends`, { token: w.token(viewer) });
      expect(again.body).toBe(res.body);
    } else {
      expect(res.headers['content-type']).toBe(PROBLEM);
      expect(res.body).not.toContain(w.admin.username);
    }
  });

  it('lists in user id order and pages with Link rel=next, visiting every user once, also while users recommend', async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts.public;
    const otherPost = await insertPost(app, w.owner.id);
    await recommend(app, otherPost, w.stranger);
    const users: TestUser[] = [];
    for (let i = 0; i < 7; i++) users.push(await signUp(app));
    // Recommended in reverse order: the list is by user id, not by time.
    for (const u of [...users].reverse()) await recommend(app, postId, u);

    const seen: number[] = [];
    let path: string | undefined = `/posts/${postId}/recommends?limit=3`;
    let pages = 0;
    while (path) {
      const res = await call(app, 'GET', path);
      expect(res.statusCode).toBe(200);
      seen.push(...res.json().map((u: { id: number }) => u.id));
      if (pages === 0) {
        const late = await signUp(app);
        users.push(late);
        await recommend(app, postId, late);
        expect(res.headers.link).toMatch(new RegExp(`^<${PUBLIC_URL}/posts/${postId}/recommends\\?limit=3&cursor=[^>]+>; rel="next"$`));
      }
      path = nextPath(res.headers.link);
      pages++;
    }
    expect(seen).toEqual(users.map((u) => u.id));
    expect(pages).toBe(3);
    expect(await postCounters(app, postId)).toEqual({ replies: 0, recommends: 8 });
  });

  it("rejects another post's cursor, or a garbage one, with 400", async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const other = await insertPost(app, w.owner.id);
    await recommend(app, w.posts.public, w.owner);
    await recommend(app, w.posts.public, w.follower);
    const first = await call(app, 'GET', `/posts/${w.posts.public}/recommends?limit=1`);
    const cursor = new URL(`${PUBLIC_URL}${nextPath(first.headers.link)!}`).searchParams.get('cursor');
    expect((await call(app, 'GET', `/posts/${w.posts.public}/recommends?cursor=${cursor}`)).statusCode).toBe(200);
    expect((await call(app, 'GET', `/posts/${other}/recommends?cursor=${cursor}`)).statusCode).toBe(400);
    expect((await call(app, 'GET', `/posts/${w.posts.public}/replies?cursor=${cursor}`)).statusCode).toBe(400);
    const garbage = await call(app, 'GET', `/posts/${w.posts.public}/recommends?cursor=garbage`);
    expect(garbage.statusCode).toBe(400);
    expect(garbage.json().errors[0].field).toBe('cursor');
    expect((await call(app, 'GET', `/posts/${w.posts.public}/recommends?limit=101`)).statusCode).toBe(400);
  });

  it.each([
    ['abc', 400],
    ['-1', 400],
    ['424242', 404],
  ])('GET /posts/%s/recommends answers %i', async (id, status) => {
    const app = await buildTestApp();
    const res = await call(app, 'GET', `/posts/${id}/recommends`);
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
  });
});

describe('GET /posts/{post_id}/recommends/{user_id}', () => {
  it.each(VISIBILITY_CASES)('on a %s post, the %s: readable when they may see it', async (visibility, viewer, sees) => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts[visibility];
    await recommend(app, postId, w.owner);
    const res = await call(app, 'GET', `/posts/${postId}/recommends/${w.owner.id}`, { token: w.token(viewer) });
    expect(res.statusCode).toBe(sees ? 200 : 404);
    if (sees) {
      // The same representation as GET /users/{id} for the same caller (postCount counts what they may see).
      expect(res.body).toBe((await call(app, 'GET', `/users/${w.owner.id}`, { token: w.token(viewer) })).body);
      const again = await call(app, 'GET', `/posts/${postId}/recommends/${w.owner.id}`, { token: w.token(viewer) });
      expect(again.body).toBe(res.body);
    } else {
      expect(res.body).not.toContain(w.owner.username);
    }
  });

  it.each([
    ['a user who did not recommend the post', 'not-recommended', 404],
    ['a user who recommended another post', 'other-post', 404],
    ['a user that does not exist', 'no-user', 404],
    ['a post that does not exist', 'no-post', 404],
    ['a malformed user id', 'malformed', 400],
  ])('answers %s (%s) with %i', async (_case, target, status) => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const other = await insertPost(app, w.owner.id);
    await recommend(app, w.posts.public, w.owner);
    await recommend(app, other, w.follower);
    const path = {
      'not-recommended': `/posts/${w.posts.public}/recommends/${w.stranger.id}`,
      'other-post': `/posts/${w.posts.public}/recommends/${w.follower.id}`,
      'no-user': `/posts/${w.posts.public}/recommends/424242`,
      'no-post': `/posts/424242/recommends/${w.owner.id}`,
      malformed: `/posts/${w.posts.public}/recommends/x1`,
    }[target]!;
    const res = await call(app, 'GET', path);
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (status === 400) expect(res.json().errors[0].field).toBe('user_id');
  });
});

describe('DELETE /posts/{post_id}/recommends/{user_id}', () => {
  it.each([
    ['the recommending user', 'self'],
    ['an admin', 'admin'],
  ])('lets %s withdraw it: 200 {deleted:1}, the row gone, recommend_count - 1', async (_case, who) => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts.followers;
    await recommend(app, postId, w.follower);
    await recommend(app, postId, w.owner);
    expect(await postCounters(app, postId)).toEqual({ replies: 0, recommends: 2 });
    const token = who === 'self' ? w.follower.token : w.admin.token;
    const res = await call(app, 'DELETE', `/posts/${postId}/recommends/${w.follower.id}`, { token });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ deleted: 1 });
    expect(await recommenderIds(app, postId)).toEqual([w.owner.id]);
    expect(await postCounters(app, postId)).toEqual({ replies: 0, recommends: 1 });
    expect((await call(app, 'GET', `/posts/${postId}/recommends/${w.follower.id}`, { token })).statusCode).toBe(404);
    // Withdrawing it again is deleting something that does not exist (seed §7); the counter does not move.
    expect((await call(app, 'DELETE', `/posts/${postId}/recommends/${w.follower.id}`, { token })).statusCode).toBe(400);
    expect(await postCounters(app, postId)).toEqual({ replies: 0, recommends: 1 });
    // And it may be made again.
    await recommend(app, postId, w.follower);
    expect(await postCounters(app, postId)).toEqual({ replies: 0, recommends: 2 });
  });

  it.each([
    ['no token', 'none', 'recommended', 401],
    ['a garbage token', 'garbage', 'recommended', 401],
    ["another member (even the post's owner)", 'owner', 'recommended', 403],
    ['a user who did not recommend the post', 'self', 'not-recommended', 400],
    ['another member, for a recommend that does not exist', 'owner', 'not-recommended', 400],
    ['a post that does not exist', 'admin', 'no-post', 400],
    ['a post the caller may not see', 'stranger', 'stranger-recommended', 400],
    ['a post the user can no longer see', 'self', 'unfollowed', 400],
    ['a malformed user id', 'self', 'malformed', 400],
  ])('answers %s', async (_case, who, target, status) => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts.followers;
    await recommend(app, postId, w.follower);
    const otherFollower = await signUp(app);
    await insertFollow(app, otherFollower.id, w.owner.id);
    if (target === 'unfollowed') await removeFollow(app, w.follower.id, w.owner.id);
    const path = {
      recommended: `/posts/${postId}/recommends/${w.follower.id}`,
      unfollowed: `/posts/${postId}/recommends/${w.follower.id}`,
      'stranger-recommended': `/posts/${postId}/recommends/${w.follower.id}`,
      'not-recommended': `/posts/${postId}/recommends/${otherFollower.id}`,
      'no-post': `/posts/424242/recommends/${w.follower.id}`,
      malformed: `/posts/${postId}/recommends/1e3`,
    }[target]!;
    const token = {
      none: undefined,
      garbage: 'garbage',
      self: target === 'not-recommended' ? otherFollower.token : w.follower.token,
      owner: w.owner.token,
      admin: w.admin.token,
      stranger: w.stranger.token,
    }[who];
    const res = await call(app, 'DELETE', path, { token });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (status === 401) expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(await recommenderIds(app, postId)).toEqual([w.follower.id]);
    expect(await postCounters(app, postId)).toEqual({ replies: 0, recommends: 1 });
  });

  it('decrements once when the same recommend is withdrawn by concurrent requests', async () => {
    const app = await buildTestApp();
    const w = await buildWorld(app);
    const postId = w.posts.public;
    await recommend(app, postId, w.follower);
    await recommend(app, postId, w.owner);
    const tokens = [w.follower.token, w.admin.token, w.follower.token, w.admin.token, w.follower.token];
    const results = await Promise.all(tokens.map((token) => call(app, 'DELETE', `/posts/${postId}/recommends/${w.follower.id}`, { token })));
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 400, 400, 400, 400]);
    expect(await recommenderIds(app, postId)).toEqual([w.owner.id]);
    expect(await postCounters(app, postId)).toEqual({ replies: 0, recommends: 1 });
  });
});
