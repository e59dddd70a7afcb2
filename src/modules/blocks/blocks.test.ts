import type { FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { follow, nextPath, publish } from '../../../test/helpers/api.js';
import { PUBLIC_URL, buildTestApp, call } from '../../../test/helpers/build-test-app.js';
import { createAdmin, signUp, type TestUser } from '../../../test/helpers/factories.js';
import { createFanout } from '../feed/feed.fanout.js';

// CONTRACT §9: the routes of blocks and mutes share shapes, statuses and privacy; what each does is tested below.
describe.each(['blocks', 'mutes'] as const)('/users/{id}/%s', (path) => {
  const add = (app: FastifyInstance, by: TestUser, owner: number, id: unknown) =>
    call(app, 'POST', `/users/${owner}/${path}`, { token: by.token, body: { id } });

  it('creates, reads, lists newest first with pages, and lifts; twice 409, oneself 400, no such user 400', async () => {
    const app = await buildTestApp();
    const [me, a, b, c] = [await signUp(app), await signUp(app), await signUp(app), await signUp(app)];
    const created = await add(app, me, me.id, a.id);
    expect(created.statusCode).toBe(201);
    expect(created.headers.location).toBe(`${PUBLIC_URL}/users/${me.id}/${path}/${a.id}`);
    expect(created.json()).toMatchObject({ id: a.id, username: a.username });
    expect((await add(app, me, me.id, a.id)).statusCode).toBe(409);
    expect((await add(app, me, me.id, me.id)).json()).toMatchObject({ status: 400, errors: [{ field: 'id' }] });
    expect((await add(app, me, me.id, 999_999)).json()).toMatchObject({ status: 400, errors: [{ field: 'id', message: 'names no user' }] });
    expect((await add(app, me, me.id, 'x')).statusCode).toBe(400);
    expect((await add(app, me, me.id, c.id)).statusCode).toBe(201);
    expect((await add(app, me, me.id, b.id)).statusCode).toBe(201);

    // Newest first (b, c, a), two to a page, following the next link.
    const first = await call(app, 'GET', `/users/${me.id}/${path}?limit=2`, { token: me.token });
    expect(first.statusCode).toBe(200);
    expect(first.json().map((u: { id: number }) => u.id)).toEqual([b.id, c.id]);
    const second = await call(app, 'GET', nextPath(first.headers.link)!, { token: me.token });
    expect(second.json().map((u: { id: number }) => u.id)).toEqual([a.id]);
    expect(second.headers.link).toBeUndefined();

    const one = await call(app, 'GET', `/users/${me.id}/${path}/${a.id}`, { token: me.token });
    expect(one.statusCode).toBe(200);
    expect(one.json()).toMatchObject({ id: a.id });
    expect(one.headers.etag).toBeDefined();
    expect((await call(app, 'GET', `/users/${me.id}/${path}/${me.id}`, { token: me.token })).statusCode).toBe(404);

    expect((await call(app, 'DELETE', `/users/${me.id}/${path}/${a.id}`, { token: me.token })).json()).toEqual({ deleted: 1 });
    expect((await call(app, 'GET', `/users/${me.id}/${path}/${a.id}`, { token: me.token })).statusCode).toBe(404);
    expect((await call(app, 'DELETE', `/users/${me.id}/${path}/${a.id}`, { token: me.token })).statusCode).toBe(400);
    // The counts that let reads skip the checks follow the rows.
    const counts = await app.db.selectFrom('users').select(['id', 'block_count', 'mute_count']).where('id', 'in', [me.id, a.id, b.id]).orderBy('id').execute();
    const [mine, aRow, bRow] = counts;
    if (path === 'blocks') {
      expect([mine!.block_count, aRow!.block_count, bRow!.block_count]).toEqual([2, 0, 1]);
    } else {
      expect([mine!.mute_count, aRow!.mute_count, bRow!.mute_count]).toEqual([2, 0, 0]);
    }
  });

  it('is known to its author and admins only: others 404 on GET, 400 on DELETE, 403 on POST, 401 without a token', async () => {
    const app = await buildTestApp();
    const [me, target, other] = [await signUp(app), await signUp(app), await signUp(app)];
    const admin = await createAdmin(app);
    expect((await add(app, me, me.id, target.id)).statusCode).toBe(201);
    for (const who of [target, other]) {
      expect((await call(app, 'GET', `/users/${me.id}/${path}`, { token: who.token })).statusCode).toBe(404);
      expect((await call(app, 'GET', `/users/${me.id}/${path}/${target.id}`, { token: who.token })).statusCode).toBe(404);
      expect((await call(app, 'DELETE', `/users/${me.id}/${path}/${target.id}`, { token: who.token })).statusCode).toBe(400);
      expect((await add(app, who, me.id, other.id === who.id ? target.id : other.id)).statusCode).toBe(403);
    }
    for (const [method, url] of [
      ['GET', `/users/${me.id}/${path}`],
      ['GET', `/users/${me.id}/${path}/${target.id}`],
      ['DELETE', `/users/${me.id}/${path}/${target.id}`],
      ['POST', `/users/${me.id}/${path}`],
    ] as const) {
      const res = await call(app, method, url, method === 'POST' ? { body: { id: target.id } } : {});
      expect(res.statusCode, `${method} ${url}`).toBe(401);
    }
    // An admin reads and changes anyone's list; a user that does not exist is 404 to them.
    expect((await call(app, 'GET', `/users/${me.id}/${path}`, { token: admin.token })).json()).toHaveLength(1);
    expect((await call(app, 'GET', `/users/${me.id}/${path}/${target.id}`, { token: admin.token })).statusCode).toBe(200);
    expect((await add(app, admin, me.id, other.id)).statusCode).toBe(201);
    expect((await call(app, 'GET', `/users/999999/${path}`, { token: admin.token })).statusCode).toBe(404);
    expect((await call(app, 'DELETE', `/users/${me.id}/${path}/${other.id}`, { token: admin.token })).statusCode).toBe(200);
    // Crafted ids: malformed is 400 everywhere.
    expect((await call(app, 'GET', `/users/${me.id}/${path}/007`, { token: me.token })).statusCode).toBe(400);
    expect((await call(app, 'DELETE', `/users/abc/${path}/1`, { token: me.token })).statusCode).toBe(400);
  });
});

describe('blocks (CONTRACT §9)', () => {
  const block = async (app: FastifyInstance, by: TestUser, id: number) => {
    const res = await call(app, 'POST', `/users/${by.id}/blocks`, { token: by.token, body: { id } });
    expect(res.statusCode, res.body).toBe(201);
  };

  it('removes the follows both ways in the same transaction, counters and feed entries with them; lifting does not restore them', async () => {
    const app = await buildTestApp();
    const [a, b] = [await signUp(app), await signUp(app)];
    await follow(app, a, b);
    await follow(app, b, a);
    await publish(app, a, 'by a');
    await publish(app, b, 'by b');
    await app.fanout.drain();
    const entries = () => app.db.selectFrom('feed_entries').select(['user_id', 'owner_id']).where('user_id', 'in', [a.id, b.id]).execute();
    expect(await entries()).toHaveLength(2);
    await block(app, a, b.id);
    expect(await app.db.selectFrom('follows').selectAll().execute()).toEqual([]);
    expect(await entries()).toEqual([]);
    for (const user of [a, b]) {
      const profile = (await call(app, 'GET', `/users/${user.id}`)).json();
      expect(profile).toMatchObject({ followerCount: 0, followingCount: 0 });
    }
    expect((await call(app, 'DELETE', `/users/${a.id}/blocks/${b.id}`, { token: a.token })).statusCode).toBe(200);
    expect(await app.db.selectFrom('follows').selectAll().execute()).toEqual([]);
  });

  it('removes only what lies between the two: a one-way follow, its feed entries, queued backfill and notification', async () => {
    const app = await buildTestApp();
    await app.fanout.close(); // nothing is written until `worker` drains
    const worker = createFanout(app.store, app.log, { sweepMs: 60_000 });
    const [a, b, c] = [await signUp(app), await signUp(app), await signUp(app)];
    for (const user of [a, b, c]) await publish(app, user, `by ${user.username}`);
    await worker.drain();
    // b follows a (one way), and both follow c and are followed by c; the follows' backfills are still queued.
    await follow(app, b, a);
    await follow(app, b, c);
    await follow(app, a, c);
    await follow(app, c, a);
    await follow(app, c, b);
    const rows = async (table: 'follows' | 'feed_backfill' | 'notifications') =>
      table === 'follows'
        ? (await app.db.selectFrom('follows').select(['follower_id as from', 'followee_id as to']).execute())
        : table === 'feed_backfill'
          ? (await app.db.selectFrom('feed_backfill').select(['user_id as from', 'owner_id as to']).execute())
          : (await app.db.selectFrom('notifications').select(['actor_id as from', 'recipient_id as to']).where('type', '=', 'follow').execute());
    const pairs = async (table: 'follows' | 'feed_backfill' | 'notifications') =>
      (await rows(table)).map((r) => `${Number(r.from)}>${Number(r.to)}`).sort();
    const others = (list: string[]) => list.filter((p) => p !== `${b.id}>${a.id}`);
    const before = { follows: await pairs('follows'), backfill: await pairs('feed_backfill'), notifications: await pairs('notifications') };
    expect(before.follows).toContain(`${b.id}>${a.id}`);
    expect(before.backfill).toContain(`${b.id}>${a.id}`);
    expect(before.notifications).toContain(`${b.id}>${a.id}`);

    await block(app, a, b.id);
    expect(await pairs('follows')).toEqual(others(before.follows));
    expect(await pairs('feed_backfill')).toEqual(others(before.backfill));
    expect(await pairs('notifications')).toEqual(others(before.notifications));
    await worker.drain();
    await worker.close();
    const feed = await app.db.selectFrom('feed_entries').select(['user_id', 'owner_id']).execute();
    const feedPairs = feed.map((e) => `${Number(e.user_id)}>${Number(e.owner_id)}`).sort();
    expect(feedPairs).toEqual([`${a.id}>${c.id}`, `${b.id}>${c.id}`, `${c.id}>${a.id}`, `${c.id}>${b.id}`]);
    expect((await call(app, 'GET', `/users/${a.id}`)).json()).toMatchObject({ followerCount: 1, followingCount: 1 });
    expect((await call(app, 'GET', `/users/${b.id}`)).json()).toMatchObject({ followerCount: 1, followingCount: 1 });
    expect((await call(app, 'GET', `/users/${c.id}`)).json()).toMatchObject({ followerCount: 2, followingCount: 2 });
  });

  it('refuses a follow across a block either way with 403 and a problem type ending in /blocked', async () => {
    const app = await buildTestApp();
    const [a, b] = [await signUp(app), await signUp(app)];
    const admin = await createAdmin(app);
    await block(app, a, b.id);
    for (const [follower, followee] of [[a, b], [b, a]] as const) {
      const res = await call(app, 'POST', `/users/${followee.id}/followers`, { token: follower.token, body: { id: follower.id } });
      expect(res.statusCode).toBe(403);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.json().type).toMatch(/\/blocked$/);
    }
    // Not even an admin registers such a follow; an unrelated 403 stays about:blank.
    const byAdmin = await call(app, 'POST', `/users/${b.id}/followers`, { token: admin.token, body: { id: a.id } });
    expect(byAdmin.json()).toMatchObject({ status: 403, type: expect.stringMatching(/\/blocked$/) });
    const other = await signUp(app);
    const notYours = await call(app, 'POST', `/users/${b.id}/followers`, { token: other.token, body: { id: a.id } });
    expect(notYours.json()).toMatchObject({ status: 403, type: 'about:blank' });
    await call(app, 'DELETE', `/users/${a.id}/blocks/${b.id}`, { token: a.token });
    expect((await call(app, 'POST', `/users/${b.id}/followers`, { token: a.token, body: { id: a.id } })).statusCode).toBe(201);
  });

  it("hides each one's posts, replies and recommends from the other everywhere, counters included; admins and third parties see all", async () => {
    const app = await buildTestApp();
    const [a, b, third] = [await signUp(app), await signUp(app), await signUp(app)];
    const admin = await createAdmin(app);
    const postOfA = await publish(app, a, 'by a');
    const postOfThird = await publish(app, third, 'by third');
    const replyOfB = (await call(app, 'POST', `/posts/${postOfThird.id}/replies`, { token: b.token, body: { content: 'b says' } })).json();
    expect((await call(app, 'POST', `/posts/${postOfThird.id}/replies`, { token: a.token, body: { content: 'a says' } })).statusCode).toBe(201);
    expect((await call(app, 'POST', `/posts/${postOfThird.id}/recommends`, { token: b.token, body: { id: b.id } })).statusCode).toBe(201);
    expect((await call(app, 'POST', `/posts/${postOfA.id}/recommends`, { token: a.token, body: { id: a.id } })).statusCode).toBe(201);
    await block(app, b, a.id); // b blocks a: it works both ways

    // a no longer sees b's reply or recommend on the third party's post, nor does the counter count them.
    const seenByA = (await call(app, 'GET', `/posts/${postOfThird.id}`, { token: a.token })).json();
    expect(seenByA).toMatchObject({ replyCount: 1, recommendCount: 0 });
    const repliesForA = (await call(app, 'GET', `/posts/${postOfThird.id}/replies`, { token: a.token })).json();
    expect(repliesForA.map((r: { authorId: number }) => r.authorId)).toEqual([a.id]);
    expect((await call(app, 'GET', `/posts/${postOfThird.id}/replies/${replyOfB.id}`, { token: a.token })).statusCode).toBe(404);
    expect((await call(app, 'GET', `/posts/${postOfThird.id}/recommends`, { token: a.token })).json()).toEqual([]);
    expect((await call(app, 'GET', `/posts/${postOfThird.id}/recommends/${b.id}`, { token: a.token })).statusCode).toBe(404);
    // Lists carry the same counters as the single read.
    const inList = (await call(app, 'GET', '/posts', { token: a.token })).json().find((p: { id: number }) => p.id === postOfThird.id);
    expect(inList).toMatchObject({ replyCount: 1, recommendCount: 0 });
    // And b, the blocker, is shown the same of a.
    expect((await call(app, 'GET', `/posts/${postOfThird.id}`, { token: b.token })).json()).toMatchObject({ replyCount: 1, recommendCount: 1 });
    expect((await call(app, 'GET', `/posts/${postOfA.id}`, { token: b.token })).statusCode).toBe(404);
    expect((await call(app, 'DELETE', `/posts/${postOfA.id}/recommends/${a.id}`, { token: b.token })).statusCode).toBe(400);
    // Neither may reply to or recommend the other's posts: the post is not there for them.
    expect((await call(app, 'POST', `/posts/${postOfA.id}/replies`, { token: b.token, body: { content: 'hi' } })).statusCode).toBe(404);
    expect((await call(app, 'POST', `/posts/${postOfA.id}/recommends`, { token: b.token, body: { id: b.id } })).statusCode).toBe(404);
    // a's profile stays readable to b, with no posts counted; followers lists are not filtered.
    expect((await call(app, 'GET', `/users/${a.id}`, { token: b.token })).json()).toMatchObject({ id: a.id, postCount: 0 });
    expect((await call(app, 'GET', `/users/${a.id}`, { token: third.token })).json()).toMatchObject({ postCount: 1 });

    // Third parties and admins see everything.
    for (const who of [third, admin]) {
      expect((await call(app, 'GET', `/posts/${postOfThird.id}`, { token: who.token })).json()).toMatchObject({ replyCount: 2, recommendCount: 1 });
      expect((await call(app, 'GET', `/posts/${postOfThird.id}/replies`, { token: who.token })).json()).toHaveLength(2);
    }
    expect((await call(app, 'GET', `/posts/${postOfA.id}`, { token: admin.token })).statusCode).toBe(200);

    // Lifting restores visibility.
    expect((await call(app, 'DELETE', `/users/${b.id}/blocks/${a.id}`, { token: b.token })).statusCode).toBe(200);
    expect((await call(app, 'GET', `/posts/${postOfThird.id}`, { token: a.token })).json()).toMatchObject({ replyCount: 2, recommendCount: 1 });
    expect((await call(app, 'GET', `/posts/${postOfA.id}`, { token: b.token })).statusCode).toBe(200);
  });
});
