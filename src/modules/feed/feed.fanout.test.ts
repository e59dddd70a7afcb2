import type { FastifyInstance } from 'fastify';
import { describe, expect, it, onTestFinished } from 'vitest';
import { buildApp } from '../../app.js';
import { follow, nextPath, publish, unfollow, type PostJson } from '../../../test/helpers/api.js';
import { buildTestApp, call, testConfig, write } from '../../../test/helpers/build-test-app.js';
import { freshDatabase } from '../../../test/helpers/database.js';
import { signUp, type TestUser } from '../../../test/helpers/factories.js';
import { createFanout } from './feed.fanout.js';

/** Every page of a user's feed, following next links; answers the ids in order and the bodies of the pages. */
async function readFeed(app: FastifyInstance, user: TestUser, limit: number): Promise<{ ids: number[]; bodies: string[] }> {
  let path: string | undefined = `/users/${user.id}/feed?limit=${limit}`;
  const ids: number[] = [];
  const bodies: string[] = [];
  while (path) {
    const res = await call(app, 'GET', path, { token: user.token });
    expect(res.statusCode).toBe(200);
    bodies.push(res.body);
    ids.push(...res.json<PostJson[]>().map((p) => p.id));
    path = nextPath(res.headers.link);
  }
  return { ids, bodies };
}

const queued = (app: FastifyInstance) => app.db.selectFrom('fanout_queue').select(['post_id', 'owner_id']).orderBy('post_id').execute();
const entries = (app: FastifyInstance) =>
  app.db.selectFrom('feed_entries').select(['user_id', 'post_id', 'owner_id']).orderBy('user_id').orderBy('post_id').execute();

/** An app whose own worker is stopped, so that posts stay queued until the test drains them with `worker`. */
async function appWithStoppedWorker() {
  const app = await buildTestApp();
  await app.fanout.close();
  const worker = createFanout(app.store, app.log, { batchSize: 2, sweepMs: 60_000 });
  onTestFinished(() => worker.close());
  return { app, worker };
}

/** The app's store, recording how many feed entries each transaction that wrote some added. */
function countingEntries(app: FastifyInstance) {
  const written: number[] = [];
  let before = 0;
  const store = {
    ...app.store,
    async transaction<T>(work: Parameters<typeof app.store.transaction<T>>[0]): Promise<T> {
      const result = await app.store.transaction(work);
      const now = (await entries(app)).length;
      if (now > before) written.push(now - before);
      before = now;
      return result;
    },
  };
  return { store, written };
}

describe('fan-out worker', () => {
  it('queues a new post with its owner, and writes one feed entry per follower when it drains', async () => {
    const { app, worker } = await appWithStoppedWorker();
    const owner = await signUp(app);
    const [f1, f2] = [await signUp(app), await signUp(app)];
    await follow(app, f1, owner);
    await follow(app, f2, owner);
    const post = await publish(app, owner, 'queued');
    expect(await queued(app)).toEqual([{ post_id: post.id, owner_id: owner.id }]);
    expect(await entries(app)).toEqual([]);

    await worker.drain();
    expect(await queued(app)).toEqual([]);
    expect(await entries(app)).toEqual([
      { user_id: f1.id, post_id: post.id, owner_id: owner.id },
      { user_id: f2.id, post_id: post.id, owner_id: owner.id },
    ]);
  });

  it('serves the same feed pages before and after the queue drains, mixing written and queued posts', async () => {
    const { app, worker } = await appWithStoppedWorker();
    const reader = await signUp(app);
    const [a, b, stranger] = [await signUp(app), await signUp(app), await signUp(app)];
    await follow(app, reader, a);
    await follow(app, reader, b);
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) ids.push((await publish(app, i % 2 ? a : b, `written ${i}`)).id);
    await publish(app, stranger, 'not followed');
    await worker.drain();
    for (let i = 0; i < 4; i++) ids.push((await publish(app, i % 2 ? a : b, `queued ${i}`)).id);
    await publish(app, stranger, 'not followed either');
    expect((await queued(app)).length).toBe(5);

    const before = await readFeed(app, reader, 2);
    expect(before.ids).toEqual([...ids].reverse());
    expect(before.bodies.length).toBe(4);
    await worker.drain();
    expect(await queued(app)).toEqual([]);
    expect((await entries(app)).filter((e) => e.user_id === reader.id).map((e) => e.post_id)).toEqual(ids);
    expect(await readFeed(app, reader, 2)).toEqual(before);
  });

  it('applies visibility to queued posts as to written ones', async () => {
    const { app } = await appWithStoppedWorker();
    const owner = await signUp(app);
    const reader = await signUp(app);
    await follow(app, reader, owner);
    await publish(app, owner, 'public');
    await publish(app, owner, 'for followers', 'followers');
    await publish(app, owner, 'private', 'private');
    expect((await queued(app)).length).toBe(3);
    const feed = await call(app, 'GET', `/users/${reader.id}/feed`, { token: reader.token });
    expect(feed.json<PostJson[]>().map((p) => p.title)).toEqual(['for followers', 'public']);
  });

  it('writes no entry for a follower who unfollowed while the post was queued', async () => {
    const { app, worker } = await appWithStoppedWorker();
    const owner = await signUp(app);
    const [stays, leaves] = [await signUp(app), await signUp(app)];
    await follow(app, stays, owner);
    await follow(app, leaves, owner);
    const post = await publish(app, owner, 'queued');
    const res = await call(app, 'DELETE', `/users/${owner.id}/followers/${leaves.id}`, { token: leaves.token });
    expect(res.statusCode).toBe(200);
    expect((await call(app, 'GET', `/users/${leaves.id}/feed`, { token: leaves.token })).json()).toEqual([]);
    await worker.drain();
    expect(await entries(app)).toEqual([{ user_id: stays.id, post_id: post.id, owner_id: owner.id }]);
  });

  it('drops a post deleted while queued from the queue, and writes nothing for it', async () => {
    const { app, worker } = await appWithStoppedWorker();
    const owner = await signUp(app);
    const reader = await signUp(app);
    await follow(app, reader, owner);
    const post = await publish(app, owner, 'doomed');
    expect((await call(app, 'DELETE', `/posts/${post.id}`, { token: owner.token })).statusCode).toBe(200);
    expect(await queued(app)).toEqual([]);
    await worker.drain();
    expect(await entries(app)).toEqual([]);
    expect((await call(app, 'GET', `/users/${reader.id}/feed`, { token: reader.token })).json()).toEqual([]);
  });

  it('drains, when the next process starts, what a process left queued', async () => {
    const { store, drop } = await freshDatabase();
    onTestFinished(async () => {
      await store.close();
      await drop();
    });
    const first = await buildApp(testConfig(), { store, logger: false });
    await first.ready();
    await first.fanout.close(); // as if the process died before its worker ran
    const owner = await signUp(first);
    const reader = await signUp(first);
    await follow(first, reader, owner);
    const post = await publish(first, owner, 'left behind');
    expect((await queued(first)).length).toBe(1);

    // A second app on the same database: `close()` of an app would close the shared store, so neither is closed.
    const second = await buildApp(testConfig(), { store, logger: false, migrate: false });
    onTestFinished(() => second.fanout.close());
    await second.ready();
    await expect.poll(() => queued(second), { timeout: 10_000 }).toEqual([]);
    expect(await entries(second)).toEqual([{ user_id: reader.id, post_id: post.id, owner_id: owner.id }]);
  });
  it('fans a post of an owner with many followers out in chunks of followers, one transaction each, with the small posts behind it taken first', async () => {
    const app = await buildTestApp();
    await app.fanout.close();
    const owner = await signUp(app);
    const small = await signUp(app);
    const followers: TestUser[] = [];
    for (let i = 0; i < 5; i++) followers.push(await signUp(app));
    for (const f of followers) await follow(app, f, owner);
    const [first, , , fourth, last] = followers as [TestUser, TestUser, TestUser, TestUser, TestUser];
    await follow(app, first, small);
    const big = await publish(app, owner, 'to five followers');
    const behind = await publish(app, small, 'to one follower');

    // The entries of each post after every transaction the worker commits.
    const snapshots: { big: number[]; behind: number[] }[] = [];
    const store = {
      ...app.store,
      async transaction<T>(work: Parameters<typeof app.store.transaction<T>>[0]): Promise<T> {
        const result = await app.store.transaction(work);
        const rows = await entries(app);
        snapshots.push({
          big: rows.filter((e) => e.post_id === big.id).map((e) => e.user_id),
          behind: rows.filter((e) => e.post_id === behind.id).map((e) => e.user_id),
        });
        // Between the first and the second chunk the fourth follower leaves: no entry may be written for them.
        if (snapshots.length === 2) await unfollow(app, fourth, owner);
        return result;
      },
    };
    const worker = createFanout(store, app.log, { batchSize: 64, chunkSize: 2, sweepMs: 60_000 });
    onTestFinished(() => worker.close());

    await worker.drain();
    const ids = (users: TestUser[]) => users.map((u) => u.id);
    // 1: the small post behind the big one; 2: the big post's first two followers; then a small batch with nothing
    // to do and the next chunk, until the last chunk, which takes the post off the queue.
    expect(snapshots[0]).toEqual({ big: [], behind: [first.id] });
    expect(snapshots[1]).toEqual({ big: ids(followers.slice(0, 2)), behind: [first.id] });
    for (let i = 1; i < snapshots.length; i++) {
      expect((snapshots[i]?.big.length ?? 0) - (snapshots[i - 1]?.big.length ?? 0)).toBeLessThanOrEqual(2);
    }
    expect(snapshots.at(-1)?.big).toEqual(ids(followers.filter((f) => f !== fourth)));
    expect(await queued(app)).toEqual([]);
    const feed = await call(app, 'GET', `/users/${last.id}/feed`, { token: last.token });
    expect(feed.json<PostJson[]>().map((p) => p.id)).toEqual([big.id]);
    expect((await call(app, 'GET', `/users/${fourth.id}/feed`, { token: fourth.token })).json()).toEqual([]);
  });

  it('shows a post being fanned out in chunks in the feed of every follower, written or not yet', async () => {
    const { app } = await appWithStoppedWorker();
    const owner = await signUp(app);
    const followers: TestUser[] = [];
    for (let i = 0; i < 3; i++) followers.push(await signUp(app));
    for (const f of followers) await follow(app, f, owner);
    const big = await publish(app, owner, 'to three followers');
    let seen = 0;
    const store = {
      ...app.store,
      async transaction<T>(work: Parameters<typeof app.store.transaction<T>>[0]): Promise<T> {
        const result = await app.store.transaction(work);
        for (const f of followers) {
          const feed = await call(app, 'GET', `/users/${f.id}/feed`, { token: f.token });
          expect(feed.json<PostJson[]>().map((p) => p.id)).toEqual([big.id]);
          seen++;
        }
        return result;
      },
    };
    const worker = createFanout(store, app.log, { chunkSize: 1, sweepMs: 60_000 });
    onTestFinished(() => worker.close());
    await worker.drain();
    expect(seen).toBeGreaterThanOrEqual(3 * 3);
    expect((await entries(app)).map((e) => e.user_id)).toEqual(followers.map((f) => f.id));
  });

  it('takes small posts into one transaction only while their entries fit in it', async () => {
    const { app } = await appWithStoppedWorker();
    const owners = [await signUp(app), await signUp(app), await signUp(app)];
    const readers = [await signUp(app), await signUp(app)];
    for (const o of owners) for (const r of readers) await follow(app, r, o);
    for (const o of owners) await publish(app, o, 'to two followers');
    const { store, written } = countingEntries(app);
    const worker = createFanout(store, app.log, { batchSize: 64, chunkSize: 4, sweepMs: 60_000 });
    onTestFinished(() => worker.close());
    await worker.drain();
    expect(written).toEqual([4, 2]);
    expect(await queued(app)).toEqual([]);
  });

  it.each([
    ['slower than transactionMs: each chunk half the last, down to 100 entries', 1e-9, [400, 200, 100]],
    ['within transactionMs: chunks of chunkSize', 60_000, [400, 300]],
  ])('sizes its transactions by their time, %s', async (_, transactionMs, chunks) => {
    const { app } = await appWithStoppedWorker();
    const owner = await signUp(app);
    // 700 followers made in the database directly: signing 700 users up over the API would take most of a minute.
    const now = new Date().toISOString();
    await write(app, async (db) => {
      const made = await db
        .insertInto('users')
        .values(Array.from({ length: 700 }, (_, i) => ({ username: `fan${i}`, username_key: `fan${i}`, display_name: '', bio: '', role: 'member' as const, password_hash: 'x', created_at: now, updated_at: now })))
        .returning('id')
        .execute();
      await db.insertInto('follows').values(made.map((u) => ({ follower_id: u.id, followee_id: owner.id, created_at: now }))).execute();
      await db.updateTable('users').set({ follower_count: made.length }).where('id', '=', owner.id).execute();
    });
    const post = await publish(app, owner, 'to 700 followers');

    const { store, written } = countingEntries(app);
    const worker = createFanout(store, app.log, { chunkSize: 400, transactionMs, sweepMs: 60_000 });
    onTestFinished(() => worker.close());
    await worker.drain();
    expect(written).toEqual(chunks);
    expect(await queued(app)).toEqual([]);
    expect((await entries(app)).filter((e) => e.post_id === post.id).length).toBe(700);
  });
});
