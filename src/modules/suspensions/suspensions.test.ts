import type { FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { follow, publish } from '../../../test/helpers/api.js';
import { PUBLIC_URL, buildTestApp, call } from '../../../test/helpers/build-test-app.js';
import { createAdmin, signUp, type TestUser } from '../../../test/helpers/factories.js';

const suspend = (app: FastifyInstance, admin: TestUser, id: number, reason = 'spam') =>
  call(app, 'PUT', `/users/${id}/suspension`, { token: admin.token, body: { reason } });

describe('/users/{id}/suspension (CONTRACT §9)', () => {
  it('is for admins: PUT creates then changes the reason keeping createdAt, GET reads, DELETE lifts; members 403; an admin cannot be suspended', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const other = await createAdmin(app);
    const [member, target] = [await signUp(app), await signUp(app)];
    const path = `/users/${target.id}/suspension`;
    for (const [method, body] of [['PUT', { reason: 'x' }], ['GET', undefined], ['DELETE', undefined]] as const) {
      expect((await call(app, method, path, { token: member.token, body })).statusCode, method).toBe(403);
      expect((await call(app, method, path, { body })).statusCode, method).toBe(401);
    }
    expect((await call(app, 'GET', path, { token: admin.token })).statusCode).toBe(404);
    expect((await call(app, 'DELETE', path, { token: admin.token })).statusCode).toBe(400);

    const first = await suspend(app, admin, target.id, 'spam');
    expect(first.statusCode).toBe(200);
    const created = first.json();
    expect(created).toEqual({
      userId: target.id,
      reason: 'spam',
      createdAt: expect.any(String),
      links: [
        { rel: 'self', href: `${PUBLIC_URL}${path}`, method: 'GET' },
        { rel: 'user', href: `${PUBLIC_URL}/users/${target.id}`, method: 'GET' },
      ],
    });
    const again = await suspend(app, admin, target.id, 'abuse');
    expect(again.json()).toMatchObject({ reason: 'abuse', createdAt: created.createdAt });
    expect((await call(app, 'GET', path, { token: admin.token })).json()).toMatchObject({ reason: 'abuse' });

    expect((await suspend(app, admin, other.id)).statusCode).toBe(403);
    expect((await suspend(app, admin, 999_999)).statusCode).toBe(404);
    expect((await call(app, 'PUT', path, { token: admin.token, body: { reason: '' } })).json()).toMatchObject({ errors: [{ field: 'reason' }] });
    expect((await call(app, 'PUT', path, { token: admin.token, body: { reason: 'x'.repeat(1001) } })).statusCode).toBe(400);
    expect((await call(app, 'PUT', path, { token: admin.token, body: {} })).statusCode).toBe(400);

    expect((await call(app, 'DELETE', path, { token: admin.token })).json()).toEqual({ deleted: 1 });
    expect((await call(app, 'GET', path, { token: admin.token })).statusCode).toBe(404);
    expect((await call(app, 'DELETE', path, { token: admin.token })).statusCode).toBe(400);
  });

  it('revokes every token at once; sign-in with the right password is 403 /suspended, a wrong one still 401; lifting keeps tokens revoked', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const target = await signUp(app);
    expect((await call(app, 'GET', `/users/${target.id}/feed`, { token: target.token })).statusCode).toBe(200);
    await suspend(app, admin, target.id);
    expect((await call(app, 'GET', `/users/${target.id}/feed`, { token: target.token })).statusCode).toBe(401);
    expect(await app.db.selectFrom('tokens').select('id').where('user_id', '=', target.id).execute()).toEqual([]);
    const right = await call(app, 'POST', '/tokens', { body: { username: target.username, password: target.password } });
    expect(right.statusCode).toBe(403);
    expect(right.json().type).toMatch(/\/suspended$/);
    const wrong = await call(app, 'POST', '/tokens', { body: { username: target.username, password: 'not the password' } });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json().type).toBe('about:blank');

    await call(app, 'DELETE', `/users/${target.id}/suspension`, { token: admin.token });
    expect((await call(app, 'GET', `/users/${target.id}/feed`, { token: target.token })).statusCode).toBe(401);
    expect((await call(app, 'POST', '/tokens', { body: { username: target.username, password: target.password } })).statusCode).toBe(201);
  });

  it('hides the account as missing to all but admins, its share of counters too, and shows it all again once lifted', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const [target, friend, fan, viewer] = [await signUp(app), await signUp(app), await signUp(app), await signUp(app)];
    await follow(app, target, friend); // target follows friend
    await follow(app, fan, target); // fan follows target
    const own = await publish(app, target, 'by target');
    const post = await publish(app, friend, 'by friend');
    const reply = (await call(app, 'POST', `/posts/${post.id}/replies`, { token: target.token, body: { content: 'hello' } })).json();
    await call(app, 'POST', `/posts/${post.id}/replies`, { token: target.token, body: { content: 'again' } });
    await call(app, 'POST', `/posts/${post.id}/recommends`, { token: target.token, body: { id: target.id } });

    const state = async (token?: string) => ({
      profile: (await call(app, 'GET', `/users/${target.id}`, { token })).statusCode,
      listed: (await call(app, 'GET', '/users?limit=100', { token })).json().some((u: { id: number }) => u.id === target.id),
      friend: (await call(app, 'GET', `/users/${friend.id}`, { token })).json() as { followerCount: number },
      fan: (await call(app, 'GET', `/users/${fan.id}`, { token })).json() as { followingCount: number },
      followersOfFriend: (await call(app, 'GET', `/users/${friend.id}/followers`, { token })).json().map((u: { id: number }) => u.id),
      followingOfFan: (await call(app, 'GET', `/users/${fan.id}/following`, { token })).json().map((u: { id: number }) => u.id),
      follower: (await call(app, 'GET', `/users/${friend.id}/followers/${target.id}`, { token })).statusCode,
      post: (await call(app, 'GET', `/posts/${post.id}`, { token })).json() as { replyCount: number; recommendCount: number },
      replies: (await call(app, 'GET', `/posts/${post.id}/replies`, { token })).json().length,
      reply: (await call(app, 'GET', `/posts/${post.id}/replies/${reply.id}`, { token })).statusCode,
      recommends: (await call(app, 'GET', `/posts/${post.id}/recommends`, { token })).json().length,
      ownPost: (await call(app, 'GET', `/posts/${own.id}`, { token })).statusCode,
      inList: (await call(app, 'GET', '/posts', { token })).json().some((p: { id: number }) => p.id === own.id),
      userPosts: (await call(app, 'GET', `/users/${target.id}/posts`, { token })).statusCode,
      followersOfTarget: (await call(app, 'GET', `/users/${target.id}/followers`, { token })).statusCode,
    });
    const shown = {
      profile: 200,
      listed: true,
      friend: expect.objectContaining({ followerCount: 1 }),
      fan: expect.objectContaining({ followingCount: 1 }),
      followersOfFriend: [target.id],
      followingOfFan: [target.id],
      follower: 200,
      post: expect.objectContaining({ replyCount: 2, recommendCount: 1 }),
      replies: 2,
      reply: 200,
      recommends: 1,
      ownPost: 200,
      inList: true,
      userPosts: 200,
      followersOfTarget: 200,
    };
    const hidden = {
      profile: 404,
      listed: false,
      friend: expect.objectContaining({ followerCount: 0 }),
      fan: expect.objectContaining({ followingCount: 0 }),
      followersOfFriend: [],
      followingOfFan: [],
      follower: 404,
      post: expect.objectContaining({ replyCount: 0, recommendCount: 0 }),
      replies: 0,
      reply: 404,
      recommends: 0,
      ownPost: 404,
      inList: false,
      userPosts: 404,
      followersOfTarget: 404,
    };
    expect(await state(viewer.token)).toEqual(shown);
    await suspend(app, admin, target.id);
    expect(await state(viewer.token)).toEqual(hidden);
    expect(await state(undefined)).toEqual(hidden);
    // Admins see the account, its rows, and counters that count them (the stored ones leave the account's share out).
    expect(await state(admin.token)).toEqual(shown);
    const adminLists = {
      users: (await call(app, 'GET', '/users?limit=100', { token: admin.token })).json(),
      followers: (await call(app, 'GET', `/users/${friend.id}/followers`, { token: admin.token })).json(),
      posts: (await call(app, 'GET', `/users/${friend.id}/posts`, { token: admin.token })).json(),
    };
    expect(adminLists.users.find((u: { id: number }) => u.id === friend.id)).toMatchObject({ followerCount: 1 });
    expect(adminLists.users.find((u: { id: number }) => u.id === fan.id)).toMatchObject({ followingCount: 1 });
    expect(adminLists.followers).toEqual([expect.objectContaining({ id: target.id, followingCount: 1 })]);
    expect(adminLists.posts).toEqual([expect.objectContaining({ id: post.id, replyCount: 2, recommendCount: 1 })]);
    // Nobody may follow or block an account that is not there for them.
    expect((await call(app, 'POST', `/users/${target.id}/followers`, { token: viewer.token, body: { id: viewer.id } })).statusCode).toBe(404);
    expect((await call(app, 'POST', `/users/${viewer.id}/blocks`, { token: viewer.token, body: { id: target.id } })).statusCode).toBe(400);

    // While suspended, an admin removes one of its replies: the counter, already without it, stays.
    expect((await call(app, 'DELETE', `/posts/${post.id}/replies/${reply.id}`, { token: admin.token })).statusCode).toBe(200);
    expect((await call(app, 'GET', `/posts/${post.id}`, { token: viewer.token })).json()).toMatchObject({ replyCount: 0 });
    expect((await call(app, 'GET', `/posts/${post.id}`, { token: admin.token })).json()).toMatchObject({ replyCount: 1, recommendCount: 1 });

    expect((await call(app, 'DELETE', `/users/${target.id}/suspension`, { token: admin.token })).statusCode).toBe(200);
    expect(await state(viewer.token)).toEqual({ ...shown, post: expect.objectContaining({ replyCount: 1, recommendCount: 1 }), replies: 1, reply: 404 });
  });

  it("a suspended user's block, mute and follow entries are hidden to DELETE too (400, as to GET's 404); an admin removes them", async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const kim = await signUp(app);
    const dan = await signUp(app);
    const eve = await signUp(app);
    for (const path of ['blocks', 'mutes']) expect((await call(app, 'POST', `/users/${kim.id}/${path}`, { token: kim.token, body: { id: dan.id } })).statusCode).toBe(201);
    await follow(app, eve, kim);
    await follow(app, kim, eve);
    expect((await suspend(app, admin, dan.id)).statusCode).toBe(200);
    expect((await suspend(app, admin, eve.id)).statusCode).toBe(200);
    for (const path of ['blocks', 'mutes']) {
      expect((await call(app, 'GET', `/users/${kim.id}/${path}/${dan.id}`, { token: kim.token })).statusCode).toBe(404);
      expect((await call(app, 'DELETE', `/users/${kim.id}/${path}/${dan.id}`, { token: kim.token })).statusCode).toBe(400);
    }
    // eve follows kim and kim follows eve: neither relation can be removed by kim while eve is hidden.
    expect((await call(app, 'DELETE', `/users/${kim.id}/followers/${eve.id}`, { token: kim.token })).statusCode).toBe(400);
    expect((await call(app, 'DELETE', `/users/${eve.id}/followers/${kim.id}`, { token: kim.token })).statusCode).toBe(400);
    // Nothing was removed: lifting the suspensions shows every entry again.
    for (const id of [dan.id, eve.id]) expect((await call(app, 'DELETE', `/users/${id}/suspension`, { token: admin.token })).statusCode).toBe(200);
    for (const path of ['blocks', 'mutes']) expect((await call(app, 'GET', `/users/${kim.id}/${path}/${dan.id}`, { token: kim.token })).statusCode).toBe(200);
    expect((await call(app, 'GET', `/users/${kim.id}/followers/${eve.id}`)).statusCode).toBe(200);
    // An admin sees suspended accounts, and may remove their entries.
    expect((await suspend(app, admin, dan.id)).statusCode).toBe(200);
    expect((await call(app, 'DELETE', `/users/${kim.id}/mutes/${dan.id}`, { token: admin.token })).statusCode).toBe(200);
  });

  it("keeps others' counters right when a suspended account is deleted", async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const [target, friend, fan] = [await signUp(app), await signUp(app), await signUp(app)];
    await follow(app, target, friend);
    await follow(app, fan, target);
    const post = await publish(app, friend, 'by friend');
    await call(app, 'POST', `/posts/${post.id}/replies`, { token: target.token, body: { content: 'hello' } });
    await call(app, 'POST', `/posts/${post.id}/recommends`, { token: target.token, body: { id: target.id } });
    await suspend(app, admin, target.id);
    expect((await call(app, 'DELETE', `/users/${target.id}`, { token: admin.token })).statusCode).toBe(200);
    expect((await call(app, 'GET', `/users/${friend.id}`)).json()).toMatchObject({ followerCount: 0 });
    expect((await call(app, 'GET', `/users/${fan.id}`)).json()).toMatchObject({ followingCount: 0 });
    expect((await call(app, 'GET', `/posts/${post.id}`)).json()).toMatchObject({ replyCount: 0, recommendCount: 0 });
  });
});
