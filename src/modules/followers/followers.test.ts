import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { PUBLIC_URL, buildTestApp, call, type Response, write } from '../../../test/helpers/build-test-app.js';
import { backend } from '../../../test/helpers/database.js';
import { createAdmin, signUp, type TestUser } from '../../../test/helpers/factories.js';
import { nextPath } from '../../../test/helpers/api.js';
import type { Visibility } from '../../db/types.js';
import { FEED_PROBED_POSTS, createFollowersRepository } from './followers.repository.js';

const PROBLEM = 'application/problem+json; charset=utf-8';

/** Registers `follower` as a follower of `followee` over the API, as the follower. */
async function follow(app: FastifyInstance, followee: TestUser, follower: TestUser) {
  const res = await call(app, 'POST', `/users/${followee.id}/followers`, { token: follower.token, body: { id: follower.id } });
  if (res.statusCode !== 201) throw new Error(`follow failed: ${res.statusCode} ${res.body}`);
  return res;
}

/** A post written straight into the table (the posts module is not under test here). */
async function insertPost(app: FastifyInstance, ownerId: number, visibility: Visibility = 'public'): Promise<number> {
  const now = new Date().toISOString();
  const row = await write(app, (db) =>
    db
      .insertInto('posts')
      .values({ owner_id: ownerId, title: 't', content: 'c', visibility, created_at: now, updated_at: now })
      .returning('id')
      .executeTakeFirstOrThrow(),
  );
  return row.id;
}

async function storedCounts(app: FastifyInstance, id: number) {
  const row = await app.db.selectFrom('users').select(['follower_count', 'following_count']).where('id', '=', id).executeTakeFirstOrThrow();
  return { followerCount: row.follower_count, followingCount: row.following_count };
}

async function apiCounts(app: FastifyInstance, id: number) {
  const { followerCount, followingCount } = (await call(app, 'GET', `/users/${id}`)).json();
  return { followerCount, followingCount };
}

/** Asserts both counters of a user, through the API and in the database. */
async function expectCounts(app: FastifyInstance, user: TestUser, followerCount: number, followingCount: number) {
  expect(await apiCounts(app, user.id)).toEqual({ followerCount, followingCount });
  expect(await storedCounts(app, user.id)).toEqual({ followerCount, followingCount });
}

const followRows = (app: FastifyInstance) =>
  app.db.selectFrom('follows').select(['follower_id', 'followee_id']).orderBy('followee_id').orderBy('follower_id').execute();

/**
 * The feed entries once the fan-out worker has caught up: a follow leaves its followee's posts to the worker
 * (feed.test.ts reads a feed before it has), so the entries are asserted after it drains.
 */
const feedRows = async (app: FastifyInstance) => {
  await app.fanout.drain();
  return app.db.selectFrom('feed_entries').select(['user_id', 'post_id', 'owner_id']).orderBy('user_id').orderBy('post_id').execute();
};

/** Follows whose backfill the worker has still to write. */
const pendingRows = (app: FastifyInstance) =>
  app.db.selectFrom('feed_backfill').select(['user_id', 'owner_id']).orderBy('user_id').orderBy('owner_id').execute();

const ids = (body: { id: number }[]) => body.map((u) => u.id);

describe('POST /users/{user_id}/followers', () => {
  it('lets a user follow: 201, Location, the follower with counters moved, the relation and feed entries stored', async () => {
    const app = await buildTestApp();
    const followee = await signUp(app);
    const follower = await signUp(app);
    const other = await signUp(app);
    const p1 = await insertPost(app, followee.id, 'public');
    const p2 = await insertPost(app, followee.id, 'private');
    await insertPost(app, other.id);

    const res = await call(app, 'POST', `/users/${followee.id}/followers`, { token: follower.token, body: { id: follower.id } });
    expect(res.statusCode).toBe(201);
    expect(res.headers.location).toBe(`${PUBLIC_URL}/users/${followee.id}/followers/${follower.id}`);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.json()).toMatchObject({ id: follower.id, username: follower.username, followerCount: 0, followingCount: 1 });
    // The answer is the follower's representation, exactly as GET /users/{follower_id} now gives it.
    expect(res.body).toBe((await call(app, 'GET', `/users/${follower.id}`)).body);

    await expectCounts(app, followee, 1, 0);
    await expectCounts(app, follower, 0, 1);
    await expectCounts(app, other, 0, 0);
    expect(await followRows(app)).toEqual([{ follower_id: follower.id, followee_id: followee.id }]);
    // Every post of the followee, whatever its visibility (applied when the feed is read), and nobody else's.
    expect(await feedRows(app)).toEqual([
      { user_id: follower.id, post_id: p1, owner_id: followee.id },
      { user_id: follower.id, post_id: p2, owner_id: followee.id },
    ]);
    expect(await pendingRows(app)).toEqual([]);
  });

  it('follows in eight statements: the caller, the rows held, one read of what it must know, then one write each, the counters last, a row at a time in id order', async () => {
    const seen: string[] = [];
    const app = await buildTestApp({}, { onStatement: ({ sql: text }) => void seen.push(text) });
    const followee = await signUp(app);
    const follower = await signUp(app);
    await insertPost(app, followee.id);
    await app.fanout.close(); // the worker's backfill is not the request's
    seen.length = 0;
    await follow(app, followee, follower);
    const statements = seen.filter((text) => !/^(begin|commit|rollback|savepoint|release)\b/i.test(text.trim()));
    // The caller's token; both users held; the follower's row with the suspensions, a block, a mute; the relation;
    // the backfill; the notification (its log row is the trigger's); last, the two users' counters in id order (see
    // moveCounts: one statement for both locked them in the heap's order, and concurrent follows deadlocked).
    expect(statements.map((text) => text.trim().split(/\s+/)[0]!.toLowerCase())).toEqual(['select', 'select', 'select', 'insert', 'insert', 'insert', 'update', 'update']);
    expect(await pendingRows(app)).toEqual([{ user_id: follower.id, owner_id: followee.id }]);
  });

  it('lets an admin register another user as a follower', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const followee = await signUp(app);
    const follower = await signUp(app);
    const res = await call(app, 'POST', `/users/${followee.id}/followers`, { token: admin.token, body: { id: follower.id } });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ id: follower.id, followingCount: 1 });
    await expectCounts(app, followee, 1, 0);
    await expectCounts(app, follower, 0, 1);
    await expectCounts(app, admin, 0, 0);
  });

  it('accepts the follower representation read from GET /users/{id} as the body, ignoring its read-only fields', async () => {
    const app = await buildTestApp();
    const followee = await signUp(app);
    const follower = await signUp(app);
    const read = (await call(app, 'GET', `/users/${follower.id}`)).json();
    const res = await call(app, 'POST', `/users/${followee.id}/followers`, { token: follower.token, body: { ...read, followingCount: 42 } });
    expect(res.statusCode).toBe(201);
    expect(res.json().followingCount).toBe(1);
    expect(await followRows(app)).toEqual([{ follower_id: follower.id, followee_id: followee.id }]);
  });

  // Users: `a` (the would-be follower), `b` (the followee), `c` (a third member), an admin. Order of the checks:
  // 400 (malformed: path, body) → 401 → 404 (path user) → 403 → 400 (self) → 400 (no such follower) → 409.
  it.each([
    ['no token', 'none', 'b', { id: 'a' }, 401, undefined],
    ['a garbage token', 'garbage', 'b', { id: 'a' }, 401, undefined],
    ['no token and an invalid body (400 first, CONTRACT §6.1)', 'none', 'b', { id: 'a', extra: 1 }, 400, 'extra'],
    ['no token and a path user that does not exist', 'none', 'missing', { id: 'a' }, 401, undefined],
    ['a missing id', 'a', 'b', {}, 400, 'id'],
    ['a string id', 'a', 'b', { id: 'a', asString: true }, 400, 'id'],
    ['id 0', 'a', 'b', { id: 0 }, 400, 'id'],
    ['a negative id', 'a', 'b', { id: -1 }, 400, 'id'],
    ['a fractional id', 'a', 'b', { id: 1.5 }, 400, 'id'],
    ['an id beyond 2^53', 'a', 'b', { id: 2 ** 60 }, 400, 'id'],
    ['an unknown field', 'a', 'b', { id: 'a', followee: 3 }, 400, 'followee'],
    ['a malformed path id', 'a', 'abc', { id: 'a' }, 400, 'user_id'],
    ['a path user that does not exist', 'a', 'missing', { id: 'a' }, 404, undefined],
    ['a path user that does not exist, for someone else (404 before 403)', 'a', 'missing', { id: 'c' }, 404, undefined],
    ['a member registering someone else', 'a', 'b', { id: 'c' }, 403, undefined],
    ['a member registering the followee itself', 'a', 'b', { id: 'b' }, 403, undefined],
    ['a user following themself', 'b', 'b', { id: 'b' }, 400, 'id'],
    ['an admin making a user follow themself', 'admin', 'b', { id: 'b' }, 400, 'id'],
    ['an admin naming no user', 'admin', 'b', { id: 424242 }, 400, 'id'],
    ['a user already following', 'c', 'b', { id: 'c' }, 409, 'id'],
    ['an admin repeating an existing follow', 'admin', 'b', { id: 'c' }, 409, 'id'],
  ])('answers %s', async (_case, who, target, rawBody, status, field) => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const users: Record<string, TestUser> = { a: await signUp(app), b: await signUp(app), c: await signUp(app), admin };
    // The only relation beforehand: c follows b (with one post of b in c's feed).
    const post = await insertPost(app, users.b!.id);
    await follow(app, users.b!, users.c!);
    const before = { follows: await followRows(app), feed: await feedRows(app) };
    expect(before.feed).toEqual([{ user_id: users.c!.id, post_id: post, owner_id: users.b!.id }]);

    const token = who === 'none' ? undefined : who === 'garbage' ? 'garbage' : users[who]!.token;
    const path = target === 'missing' ? '424242' : target === 'abc' ? 'abc' : String(users[target]!.id);
    const { asString, ...body } = rawBody as Record<string, unknown>;
    if (typeof body.id === 'string' && users[body.id]) body.id = asString ? String(users[body.id]!.id) : users[body.id]!.id;

    const res = await call(app, 'POST', `/users/${path}/followers`, { token, body });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    expect(res.headers.location).toBeUndefined();
    expect(res.json()).toMatchObject({ status, instance: `/users/${path}/followers` });
    if (status === 401) expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    if (field) expect(res.json().errors.map((e: { field: string }) => e.field)).toContain(field);
    else expect(res.json().errors).toBeUndefined();

    expect(await followRows(app)).toEqual(before.follows);
    expect(await feedRows(app)).toEqual(before.feed);
    await expectCounts(app, users.a!, 0, 0);
    await expectCounts(app, users.b!, 1, 0);
    await expectCounts(app, users.c!, 0, 1);
  });

  it('answers 400 to a body that is not JSON before asking for a token (a malformed request comes first)', async () => {
    const app = await buildTestApp();
    const b = await signUp(app);
    const res = await app.inject({ method: 'POST', url: `/users/${b.id}/followers`, payload: '{"id":', headers: { 'content-type': 'application/json' } });
    expect(res.statusCode).toBe(400);
    expect(res.headers['www-authenticate']).toBeUndefined();
    expect(res.json().errors).toEqual([expect.objectContaining({ field: 'body' })]);
    expect(await followRows(app)).toEqual([]);
  });

  it('of two identical follows racing, one is 201 and the other 409, and the counters move once', async () => {
    const app = await buildTestApp();
    const followee = await signUp(app);
    const follower = await signUp(app);
    const post = await insertPost(app, followee.id);
    for (let round = 0; round < 5; round++) {
      const send = () => call(app, 'POST', `/users/${followee.id}/followers`, { token: follower.token, body: { id: follower.id } });
      const statuses = (await Promise.all([send(), send(), send()])).map((r) => r.statusCode).sort();
      expect(statuses).toEqual([201, 409, 409]);
      await expectCounts(app, followee, 1, 0);
      await expectCounts(app, follower, 0, 1);
      expect(await feedRows(app)).toEqual([{ user_id: follower.id, post_id: post, owner_id: followee.id }]);
      expect((await call(app, 'DELETE', `/users/${followee.id}/followers/${follower.id}`, { token: follower.token })).statusCode).toBe(200);
    }
  });

  it('lets users follow each other all at the same instant: exact counters, and no deadlock on PostgreSQL', async () => {
    const app = await buildTestApp();
    const users = [await signUp(app), await signUp(app), await signUp(app), await signUp(app)];
    const deadlocks = async () =>
      app.store.dialect === 'postgres'
        ? Number((await sql<{ n: number }>`select deadlocks as n from pg_stat_database where datname = current_database()`.execute(app.db)).rows[0]?.n)
        : 0;
    const before = await deadlocks();
    // Every ordered pair at once: each user's row is updated by six concurrent transactions, A→B beside B→A.
    const pairs = users.flatMap((x) => users.filter((y) => y !== x).map((y) => [x, y] as const));
    const results = await Promise.all(
      pairs.map(([followee, follower]) =>
        call(app, 'POST', `/users/${followee.id}/followers`, { token: follower.token, body: { id: follower.id } }),
      ),
    );
    expect(results.map((r) => r.statusCode)).toEqual(pairs.map(() => 201));
    for (const user of users) await expectCounts(app, user, 3, 3);
    expect((await followRows(app)).length).toBe(12);
    if (app.store.dialect === 'postgres') {
      // The store would retry a deadlock and hide it; the server's counter does not. Backends publish their
      // statistics within about a second of going idle. (Updating the two rows in a fixed order matters: without
      // it this run reliably shows several.)
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect((await deadlocks()) - before).toBe(0);
    }
  });

  it.runIf(backend === 'postgres')('answers 404 when the followed user is deleted while the follow waits on it', async () => {
    const app = await buildTestApp();
    const followee = await signUp(app);
    const follower = await signUp(app);
    let response: Promise<Response> | undefined;
    await app.db.transaction().execute(async (trx) => {
      // Hold the followee's row as a user delete does, let the follow's hold on it wait, then delete and commit.
      await trx.selectFrom('users').select('id').where('id', '=', followee.id).forUpdate().execute();
      response = call(app, 'POST', `/users/${followee.id}/followers`, { token: follower.token, body: { id: follower.id } });
      let blocked = false;
      for (let i = 0; i < 500 && !blocked; i++) {
        const { rows } = await sql<{ n: number }>`
          select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock' and query like 'select "id" from "users"%for key share'`.execute(app.db);
        blocked = rows[0]!.n > 0;
        if (!blocked) await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(blocked).toBe(true);
      await trx.deleteFrom('users').where('id', '=', followee.id).execute();
    });
    const res = await response!;
    expect(res.statusCode).toBe(404);
    expect(res.headers['content-type']).toBe(PROBLEM);
    expect(await followRows(app)).toEqual([]);
    await expectCounts(app, follower, 0, 0);
  });
});

describe('GET /users/{user_id}/followers/{follower_id}', () => {
  it('answers exactly what GET /users/{follower_id} answers, the same on every repeat', async () => {
    const app = await buildTestApp();
    const followee = await signUp(app);
    const follower = await signUp(app, { displayName: 'Fan', bio: 'Follows things' });
    await follow(app, followee, follower);
    const res = await call(app, 'GET', `/users/${followee.id}/followers/${follower.id}`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    const direct = await call(app, 'GET', `/users/${follower.id}`);
    expect(res.body).toBe(direct.body);
    expect(res.json()).toMatchObject({ id: follower.id, displayName: 'Fan', bio: 'Follows things', followingCount: 1 });
    expect((await call(app, 'GET', `/users/${followee.id}/followers/${follower.id}`)).body).toBe(res.body);
  });

  it.each([
    ['the user does not follow user_id', (a: TestUser, b: TestUser, c: TestUser) => `/users/${a.id}/followers/${c.id}`, 404],
    ['the relation runs the other way', (a: TestUser, b: TestUser) => `/users/${b.id}/followers/${a.id}`, 404],
    ['user_id does not exist', (a: TestUser) => `/users/424242/followers/${a.id}`, 404],
    ['follower_id does not exist', (a: TestUser) => `/users/${a.id}/followers/424242`, 404],
    ['a malformed user_id', (a: TestUser, b: TestUser) => `/users/x1/followers/${b.id}`, 400],
    ['a malformed follower_id', (a: TestUser) => `/users/${a.id}/followers/01`, 400],
  ])('answers when %s', async (_case, url, status) => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const b = await signUp(app);
    const c = await signUp(app);
    await follow(app, a, b); // b follows a
    const res = await call(app, 'GET', url(a, b, c));
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    expect(res.json().status).toBe(status);
  });
});

describe('removePostsFromFeed', () => {
  // Two ways to find a followee's entries in a feed (by key through their posts, or walking the feed): each must
  // remove exactly theirs from exactly that feed.
  it.each([
    ['by key (a followee with few posts)', FEED_PROBED_POSTS],
    ['walking the feed (a followee with many posts)', FEED_PROBED_POSTS + 1],
  ])('drops the followee’s entries from the follower’s feed only, %s', async (_, followeePosts) => {
    const app = await buildTestApp();
    const [followee, follower, third] = [await signUp(app), await signUp(app), await signUp(app)];
    const gone = [await insertPost(app, followee.id), await insertPost(app, followee.id, 'followers')];
    const kept = await insertPost(app, third.id);
    await follow(app, followee, follower);
    await follow(app, third, follower);
    await follow(app, followee, third);
    expect((await feedRows(app)).length).toBe(5);

    await write(app, (db) => createFollowersRepository(db).removePostsFromFeed(followee.id, follower.id, followeePosts));
    const feed = await feedRows(app);
    expect(feed.filter((e) => e.user_id === follower.id)).toEqual([{ user_id: follower.id, post_id: kept, owner_id: third.id }]);
    expect(feed.filter((e) => e.user_id === third.id).map((e) => e.post_id)).toEqual(gone);
  });
});

describe('DELETE /users/{user_id}/followers/{follower_id}', () => {
  it.each([['the follower'], ['the followed user'], ['an admin']])(
    'lets %s remove the relation: 200, counters back, the feed entries of that user gone',
    async (who) => {
      const app = await buildTestApp();
      const admin = await createAdmin(app);
      const followee = await signUp(app);
      const follower = await signUp(app);
      const third = await signUp(app);
      await insertPost(app, followee.id);
      await insertPost(app, followee.id, 'followers');
      const kept = await insertPost(app, third.id);
      await follow(app, followee, follower);
      await follow(app, third, follower);
      await follow(app, followee, third);
      expect((await feedRows(app)).length).toBe(5);

      const token = { 'the follower': follower, 'the followed user': followee, 'an admin': admin }[who]!.token;
      const res = await call(app, 'DELETE', `/users/${followee.id}/followers/${follower.id}`, { token });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ deleted: 1 });

      await expectCounts(app, followee, 1, 0);
      await expectCounts(app, follower, 0, 1);
      await expectCounts(app, third, 1, 1);
      expect(await followRows(app)).toEqual(
        [
          { follower_id: follower.id, followee_id: third.id },
          { follower_id: third.id, followee_id: followee.id },
        ].sort((x, y) => x.followee_id - y.followee_id),
      );
      const feed = await feedRows(app);
      expect(feed.filter((e) => e.user_id === follower.id)).toEqual([{ user_id: follower.id, post_id: kept, owner_id: third.id }]);
      expect(feed.filter((e) => e.user_id === third.id).length).toBe(2);
      expect((await call(app, 'GET', `/users/${followee.id}/followers/${follower.id}`)).statusCode).toBe(404);
    },
  );

  it.each([
    ['no token', 'none', 'b', 'a', 401],
    ['a garbage token', 'garbage', 'b', 'a', 401],
    ['a third member', 'c', 'b', 'a', 403],
    ['a third member, for a relation that does not exist', 'c', 'a', 'b', 400],
    ['the follower, for the reverse relation that does not exist', 'a', 'a', 'b', 400],
    ['an admin, for a relation that does not exist', 'admin', 'c', 'a', 400],
    ['a user_id that does not exist', 'admin', 'missing', 'a', 400],
    ['a follower_id that does not exist', 'b', 'b', 'missing', 400],
    ['a malformed user_id', 'a', 'abc', 'a', 400],
    ['a malformed follower_id', 'a', 'b', '-1', 400],
  ])('answers %s', async (_case, who, target, followerRef, status) => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const users: Record<string, TestUser> = { a: await signUp(app), b: await signUp(app), c: await signUp(app), admin };
    await insertPost(app, users.b!.id);
    await follow(app, users.b!, users.a!); // a follows b: the only relation
    const idOf = (ref: string) => (users[ref] ? String(users[ref]!.id) : ref === 'missing' ? '424242' : ref);
    const token = who === 'none' ? undefined : who === 'garbage' ? 'garbage' : users[who]!.token;
    const res = await call(app, 'DELETE', `/users/${idOf(target)}/followers/${idOf(followerRef)}`, { token });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (status === 401) expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    if (status === 400) expect(res.json().errors[0].field).toMatch(/^(user_id|follower_id)$/);
    expect(await followRows(app)).toEqual([{ follower_id: users.a!.id, followee_id: users.b!.id }]);
    expect((await feedRows(app)).length).toBe(1);
    await expectCounts(app, users.a!, 0, 1);
    await expectCounts(app, users.b!, 1, 0);
  });

  it('answers 400 to a second DELETE of the same relation, and the counters move once', async () => {
    const app = await buildTestApp();
    const followee = await signUp(app);
    const follower = await signUp(app);
    await follow(app, followee, follower);
    const url = `/users/${followee.id}/followers/${follower.id}`;
    const statuses = (await Promise.all([1, 2, 3].map(() => call(app, 'DELETE', url, { token: follower.token })))).map((r) => r.statusCode);
    expect(statuses.sort()).toEqual([200, 400, 400]);
    await expectCounts(app, followee, 0, 0);
    await expectCounts(app, follower, 0, 0);
  });
});

describe.each([
  ['followers', (target: TestUser, other: TestUser) => [target, other] as const],
  ['following', (target: TestUser, other: TestUser) => [other, target] as const],
])('GET /users/{user_id}/%s', (collection, orient) => {
  /** Makes `target` and `other` related in the direction the collection lists. */
  const relate = (app: FastifyInstance, target: TestUser, other: TestUser) => {
    const [followee, follower] = orient(target, other);
    return follow(app, followee, follower);
  };

  it('lists the related users in id order as user representations, the same on every repeat', async () => {
    const app = await buildTestApp();
    const target = await signUp(app);
    const others = [await signUp(app), await signUp(app), await signUp(app)];
    const unrelated = await signUp(app);
    // Noise: a relation with `unrelated` in the opposite direction, and one not involving `target` at all.
    const [followee, follower] = orient(target, unrelated);
    await follow(app, follower, followee);
    await follow(app, unrelated, others[0]!);
    for (const other of [others[2]!, others[0]!, others[1]!]) await relate(app, target, other);

    const res = await call(app, 'GET', `/users/${target.id}/${collection}`);
    expect(res.statusCode).toBe(200);
    expect(res.headers.link).toBeUndefined();
    expect(ids(res.json())).toEqual(others.map((u) => u.id));
    const direct = await Promise.all(others.map(async (u) => (await call(app, 'GET', `/users/${u.id}`)).json()));
    expect(res.json()).toEqual(direct);
    expect((await call(app, 'GET', `/users/${target.id}/${collection}`)).body).toBe(res.body);
  });

  it('answers an empty array for a user with none', async () => {
    const app = await buildTestApp();
    const target = await signUp(app);
    const res = await call(app, 'GET', `/users/${target.id}/${collection}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual([]);
  });

  it('pages with limit and Link rel="next", visiting every user exactly once even while more are added', async () => {
    const app = await buildTestApp();
    const target = await signUp(app);
    const others: TestUser[] = [];
    for (let i = 0; i < 5; i++) others.push(await signUp(app));
    for (const other of others) await relate(app, target, other);

    const seen: number[] = [];
    const sizes: number[] = [];
    let path: string | undefined = `/users/${target.id}/${collection}?limit=2`;
    while (path) {
      const res = await call(app, 'GET', path);
      expect(res.statusCode).toBe(200);
      seen.push(...ids(res.json()));
      sizes.push(res.json().length);
      const next = nextPath(res.headers.link);
      if (next) expect(next).toMatch(new RegExp(`^/users/${target.id}/${collection}\\?limit=2&cursor=`));
      if (seen.length === 2) {
        // A user related after the first page (a higher id) is still reached, once.
        const late = await signUp(app);
        others.push(late);
        await relate(app, target, late);
      }
      path = next;
    }
    expect(sizes).toEqual([2, 2, 2]);
    expect(seen).toEqual(others.map((u) => u.id));
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['cursor=garbage', 'cursor'],
  ])('rejects ?%s with 400 naming the field', async (query, field) => {
    const app = await buildTestApp();
    const target = await signUp(app);
    const res = await call(app, 'GET', `/users/${target.id}/${collection}?${query}`);
    expect(res.statusCode).toBe(400);
    expect(res.json().errors[0].field).toBe(field);
  });

  it('rejects a cursor of another user or of the other collection with 400', async () => {
    const app = await buildTestApp();
    const target = await signUp(app);
    const second = await signUp(app);
    const x = await signUp(app);
    const y = await signUp(app);
    for (const other of [x, y]) {
      await follow(app, target, other);
      await follow(app, other, target);
    }
    const first = await call(app, 'GET', `/users/${target.id}/${collection}?limit=1`);
    const cursor = new URLSearchParams(nextPath(first.headers.link)!.split('?')[1]).get('cursor');
    expect((await call(app, 'GET', `/users/${target.id}/${collection}?limit=1&cursor=${cursor}`)).statusCode).toBe(200);
    const otherCollection = collection === 'followers' ? 'following' : 'followers';
    for (const url of [`/users/${second.id}/${collection}?cursor=${cursor}`, `/users/${target.id}/${otherCollection}?cursor=${cursor}`]) {
      const res = await call(app, 'GET', url);
      expect(res.statusCode).toBe(400);
      expect(res.json().errors[0].field).toBe('cursor');
    }
  });

  it.each([
    ['424242', 404],
    ['0', 404],
    ['abc', 400],
    ['007', 400],
  ])('answers /users/%s/… with %i', async (id, status) => {
    const app = await buildTestApp();
    const res = await call(app, 'GET', `/users/${id}/${collection}`);
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
  });
});

describe('deleting a user', () => {
  it('removes their relations both ways and corrects the counters of the users they followed and who followed them', async () => {
    const app = await buildTestApp();
    const gone = await signUp(app);
    const b = await signUp(app);
    const c = await signUp(app);
    await insertPost(app, gone.id);
    await insertPost(app, b.id);
    await follow(app, b, gone); // gone follows b
    await follow(app, gone, b); // b follows gone
    await follow(app, gone, c); // c follows gone
    await follow(app, b, c); // c follows b (survives)
    await expectCounts(app, b, 2, 1);
    await expectCounts(app, c, 0, 2);

    expect((await call(app, 'DELETE', `/users/${gone.id}`, { token: gone.token })).statusCode).toBe(200);

    await expectCounts(app, b, 1, 0);
    await expectCounts(app, c, 0, 1);
    expect(await followRows(app)).toEqual([{ follower_id: c.id, followee_id: b.id }]);
    expect((await feedRows(app)).every((e) => e.user_id !== gone.id && e.owner_id !== gone.id)).toBe(true);
    expect(ids((await call(app, 'GET', `/users/${b.id}/followers`)).json())).toEqual([c.id]);
    expect((await call(app, 'GET', `/users/${b.id}/following`)).json()).toEqual([]);
    expect((await call(app, 'GET', `/users/${gone.id}/followers`)).statusCode).toBe(404);
  });
});
