import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import { sql } from 'kysely';
import pg from 'pg';
import { describe, expect, it, vi } from 'vitest';
import { buildTestApp, call, write } from '../../../test/helpers/build-test-app.js';
import { backend, testDatabaseName } from '../../../test/helpers/database.js';
import { createAdmin, signUp } from '../../../test/helpers/factories.js';
import { deleteAllUsers, deleteUser } from '../users/users.service.js';
import { purgeEvents, START } from './events.js';
import { MAX_BACKLOG_BYTES, type Subscriber } from './hub.js';

/** The event log behind the live streams (CONTRACT §7): written with the post, only when the write commits. */
describe('stream event log', () => {
  const events = (app: Awaited<ReturnType<typeof buildTestApp>>) =>
    app.db.selectFrom('stream_events').select(['id', 'kind', 'post_id', 'visibility', 'previous_visibility']).orderBy('xid').orderBy('id').execute();

  /**
   * Until every event written is readable: on PostgreSQL a transaction of this database still open holds events
   * back for as long (see HORIZON in events.ts).
   */
  const settled = (app: Awaited<ReturnType<typeof buildTestApp>>) =>
    vi.waitFor(async () => expect(await app.streams['events'].waiting()).toBe(false), { timeout: 10_000, interval: 20 });

  /** The deletions in the log, with the followers they record (DeletedAccount). */
  const deletions = async (app: Awaited<ReturnType<typeof buildTestApp>>) => {
    const rows = await app.db
      .selectFrom('stream_events')
      .select(['id', 'post_id', 'followers', 'followers_in'])
      .where('kind', '=', 'deleted')
      .orderBy('id')
      .execute();
    return rows.map((row) => ({
      id: Number(row.id),
      post_id: Number(row.post_id),
      followers: row.followers === null ? undefined : (JSON.parse(row.followers) as number[]),
      followersIn: row.followers_in === null ? undefined : Number(row.followers_in),
    }));
  };

  // On SQLite the ids come from `stream_position` (its single writer orders commits anyway); on PostgreSQL from a
  // sequence, with the transaction's xid, and the counter's row is left alone (issue 45).
  it('records created, updated and deleted in commit order, each in its transaction', async () => {
    const app = await buildTestApp();
    const user = await signUp(app);
    const created = await call(app, 'POST', `/users/${user.id}/posts`, { token: user.token, body: { title: 't', content: 'c' } });
    const id = created.json().id as number;
    await call(app, 'PUT', `/posts/${id}`, { token: user.token, body: { title: 't', content: 'c', visibility: 'followers' } });
    await call(app, 'DELETE', `/posts/${id}`, { token: user.token });
    expect(await events(app)).toEqual([
      { id: 1, kind: 'created', post_id: id, visibility: 'public', previous_visibility: null },
      { id: 2, kind: 'updated', post_id: id, visibility: 'followers', previous_visibility: 'public' },
      { id: 3, kind: 'deleted', post_id: id, visibility: 'followers', previous_visibility: null },
    ]);
    const pg = app.store.dialect === 'postgres';
    expect(await app.db.selectFrom('stream_position').select('last_id').execute()).toEqual([{ last_id: pg ? 0 : 3 }]);
    const xids = (await app.db.selectFrom('stream_events').select('xid').orderBy('id').execute()).map((row) => BigInt(row.xid));
    if (pg) {
      expect(xids[0]).toBeGreaterThan(0n);
      expect(xids[1]).toBeGreaterThan(xids[0]!);
      expect(xids[2]).toBeGreaterThan(xids[1]!);
    } else {
      expect(xids).toEqual([0n, 0n, 0n]);
    }
  });

  it('an account deleted with its posts: the first deletion lists its followers as they were, the others point at it', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const fan = await signUp(app);
    expect((await call(app, 'POST', `/users/${owner.id}/followers`, { token: fan.token, body: { id: fan.id } })).statusCode).toBe(201);
    const ids: number[] = [];
    for (const visibility of ['public', 'followers', 'followers']) {
      const res = await call(app, 'POST', `/users/${owner.id}/posts`, { token: owner.token, body: { title: 't', content: 'c', visibility } });
      ids.push(res.json().id as number);
    }
    // A post deleted on its own is judged when sent (the follows are still there): nothing is recorded for it.
    await call(app, 'DELETE', `/posts/${ids[0]}`, { token: owner.token });
    expect((await call(app, 'DELETE', `/users/${owner.id}`, { token: owner.token })).statusCode).toBe(200);
    const deleted = await deletions(app);
    const stored = deleted.map(({ post_id, followers, followersIn }) => ({ post_id, followers, followersIn }));
    expect(stored).toEqual([
      { post_id: ids[0], followers: undefined, followersIn: undefined },
      { post_id: ids[1], followers: [fan.id], followersIn: undefined },
      { post_id: ids[2], followers: undefined, followersIn: deleted[1]!.id },
    ]);
  });

  it('every user deleted at once (DELETE /users): each post is deleted in the log, with its owner’s followers as they were', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const owner = await signUp(app);
    const fan = await signUp(app);
    expect((await call(app, 'POST', `/users/${owner.id}/followers`, { token: fan.token, body: { id: fan.id } })).statusCode).toBe(201);
    const ids: number[] = [];
    for (const [author, visibility] of [[owner, 'followers'], [fan, 'public'], [owner, 'followers']] as const) {
      const res = await call(app, 'POST', `/users/${author.id}/posts`, { token: author.token, body: { title: 't', content: 'c', visibility } });
      ids.push(res.json().id as number);
    }
    expect((await call(app, 'DELETE', '/users', { token: admin.token })).json()).toEqual({ deleted: 3 });
    const deleted = await deletions(app);
    const stored = deleted.map(({ post_id, followers, followersIn }) => ({ post_id, followers, followersIn }));
    expect(stored).toEqual([
      { post_id: ids[0], followers: [fan.id], followersIn: undefined },
      { post_id: ids[1], followers: [], followersIn: undefined },
      { post_id: ids[2], followers: undefined, followersIn: deleted[0]!.id },
    ]);
  });

  // A created_at is taken before the counter's lock: under concurrent writes it may be a little out of id order.
  it('the purge deletes every event up to the newest one older than the retention, so what is kept has no gap', async () => {
    const app = await buildTestApp();
    const user = await signUp(app);
    for (let i = 0; i < 4; i++) {
      const res = await call(app, 'POST', `/users/${user.id}/posts`, { token: user.token, body: { title: `t${i}`, content: 'c' } });
      expect(res.statusCode).toBe(201);
    }
    const times = ['2026-01-01T00:00:00.000Z', '2026-01-01T00:00:10.000Z', '2026-01-01T00:00:09.000Z', '2026-01-01T00:00:20.000Z'];
    const ids = (await events(app)).map((e) => e.id);
    expect(ids).toHaveLength(4);
    await write(app, async (db) => {
      for (const [i, created_at] of times.entries()) await db.updateTable('stream_events').set({ created_at }).where('id', '=', ids[i]!).execute();
    });
    await settled(app);
    expect(await purgeEvents(app.store, '2026-01-01T00:00:09.500Z')).toBe(3);
    expect((await events(app)).map((e) => e.id)).toEqual([ids[3]]);
  });

  // Every transaction records post changes (Tx.recordPostChange): a caller of the service cannot leave them out.
  it('deleting users through the services alone records their posts as deleted', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    for (const user of [ann, bob]) {
      expect((await call(app, 'POST', `/users/${user.id}/posts`, { token: user.token, body: { title: 't', content: 'c' } })).statusCode).toBe(201);
    }
    expect(await deleteUser(app.store, ann.id)).toBe(true);
    expect((await events(app)).map((e) => e.kind)).toEqual(['created', 'created', 'deleted']);
    expect(await deleteAllUsers(app.store)).toBe(1);
    expect((await events(app)).map((e) => e.kind)).toEqual(['created', 'created', 'deleted', 'deleted']);
  });

  // SQLite gives the counter's id back; PostgreSQL's sequence does not, which nothing minds (no reader counts ids).
  it('a write that rolls back leaves no event', async () => {
    const app = await buildTestApp();
    const user = await signUp(app);
    const post = {
      owner_id: user.id,
      title: 't',
      content: 'c',
      visibility: 'public' as const,
      created_at: new Date().toISOString(),
      updated_at: new Date().toISOString(),
    };
    await expect(
      app.store.transaction(async (tx) => {
        const row = await tx.db.insertInto('posts').values(post).returningAll().executeTakeFirstOrThrow();
        await tx.recordPostChange({ kind: 'created', post: row });
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await events(app)).toEqual([]);
    const row = await write(app, async (db) => db.insertInto('posts').values(post).returningAll().executeTakeFirstOrThrow());
    await app.store.transaction((tx) => tx.recordPostChange({ kind: 'created', post: row }));
    expect((await events(app)).map((e) => e.id)).toEqual([app.store.dialect === 'postgres' ? 2 : 1]);
  });

  it('the purge keeps the newest event, even older than the retention: where the log ends, which a client may resume from', async () => {
    const app = await buildTestApp();
    const user = await signUp(app);
    for (let i = 0; i < 3; i++) {
      expect((await call(app, 'POST', `/users/${user.id}/posts`, { token: user.token, body: { title: `t${i}`, content: 'c' } })).statusCode).toBe(201);
    }
    const last = (await events(app))[2]!.id;
    await settled(app);
    expect(await purgeEvents(app.store, '2999-01-01T00:00:00.000Z')).toBe(2);
    expect((await events(app)).map((e) => e.id)).toEqual([last]);
    expect(await purgeEvents(app.store, '2999-01-01T00:00:00.000Z')).toBe(0);
  });

  it('is not read back after writes while no stream is open (the hub only notes that it is behind)', async () => {
    const app = await buildTestApp();
    await app.ready();
    const reads = vi.spyOn(app.streams['events'], 'after');
    const user = await signUp(app);
    for (let i = 0; i < 3; i++) {
      const res = await call(app, 'POST', `/users/${user.id}/posts`, { token: user.token, body: { title: `t${i}`, content: 'c' } });
      expect(res.statusCode).toBe(201);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(reads).not.toHaveBeenCalled();
    expect((await events(app)).map((e) => e.id)).toEqual([1, 2, 3]);
  });

  // Issue 45: every post write used to bump the one row of `stream_position`, locked until its commit, so the
  // second writer waited for the first. Now nothing shared is locked: the second commits while the first is open,
  // and readers hold its event back until the first has ended (below the horizon), then take both in (xid, id) order.
  it.runIf(backend === 'postgres')('PostgreSQL: posts by two authors commit with no lock wait between them; readers wait for the horizon', async () => {
    const app = await buildTestApp();
    await app.ready();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const readable = () => app.streams['events'].after(START, 10);
    let release!: () => void;
    const open = new Promise<void>((resolve) => (release = resolve));
    let recorded!: () => void;
    const inside = new Promise<void>((resolve) => (recorded = resolve));
    const now = new Date().toISOString();
    const first = app.store.transaction(async (tx) => {
      const row = await tx.db
        .insertInto('posts')
        .values({ owner_id: ann.id, title: 'first', content: 'c', visibility: 'public', created_at: now, updated_at: now })
        .returningAll()
        .executeTakeFirstOrThrow();
      await tx.recordPostChange({ kind: 'created', post: row });
      recorded();
      await open;
      return row;
    });
    await inside;
    // The service's own create, for another author, while the first transaction holds its event uncommitted.
    const second = call(app, 'POST', `/users/${bob.id}/posts`, { token: bob.token, body: { title: 'second', content: 'c' } });
    const timeout = new Promise<'waited'>((resolve) => setTimeout(() => resolve('waited'), 5_000).unref());
    const answer = await Promise.race([second, timeout]);
    if (answer === 'waited') release();
    expect(answer).not.toBe('waited');
    if (answer === 'waited') return;
    expect(answer.statusCode).toBe(201);
    const secondId = answer.json().id as number;
    // Committed, but above the horizon (the first transaction, older, is still open): not readable yet.
    expect(await app.db.selectFrom('stream_events').select('post_id').execute()).toEqual([{ post_id: secondId }]);
    expect(await readable()).toEqual([]);
    expect(await app.streams['events'].waiting()).toBe(true);
    release();
    const firstRow = await first;
    const both = await readable();
    // The first transaction's xid is the older: its event goes first, though it committed second.
    expect(both.map((e) => e.postId)).toEqual([Number(firstRow.id), secondId]);
    expect(await app.streams['events'].waiting()).toBe(false);
    // Resumable from the first (its id names it), with the second after it.
    const [a, b] = both;
    expect(await app.streams['events'].resumable({ xid: a!.xid, id: a!.id, tag: a!.tag })).toBe(true);
    expect((await app.streams['events'].after(a!.position, 10)).map((e) => e.id)).toEqual([b!.id]);
    expect(await app.streams['events'].end()).toEqual({ position: b!.position, clientId: `${b!.xid}.${b!.id}-${b!.tag}` });
  });

  // The horizon is this database's: a transaction that wrote in another database of the same server (another
  // service, another test worker, a CREATE DATABASE) does not hold our events back, as pg_snapshot_xmin would.
  it.runIf(backend === 'postgres')('PostgreSQL: a transaction open in another database does not hold deliveries back', async () => {
    const app = await buildTestApp();
    await app.ready();
    const ann = await signUp(app);
    const base = new URL(process.env.TEST_DATABASE_URL!);
    const name = testDatabaseName(base.pathname.slice(1), `${process.env.VITEST_POOL_ID ?? '0'}_other`);
    const admin = new pg.Client({ connectionString: base.toString() });
    await admin.connect();
    await admin.query(`drop database if exists ${name}`);
    await admin.query(`create database ${name}`);
    const url = new URL(base);
    url.pathname = `/${name}`;
    const other = new pg.Client({ connectionString: url.toString() });
    await other.connect();
    try {
      await other.query('begin');
      const { rows } = await other.query<{ xid: string }>('select pg_current_xact_id()::text as xid');
      const created = await call(app, 'POST', `/users/${ann.id}/posts`, { token: ann.token, body: { title: 't', content: 'c' } });
      expect(created.statusCode).toBe(201);
      // The cluster's horizon is held back by the other database's transaction (so this test means something)...
      const held = await sql<{ xmin: string }>`select pg_snapshot_xmin(pg_current_snapshot())::text as xmin`.execute(app.db);
      expect(BigInt(held.rows[0]!.xmin)).toBeLessThanOrEqual(BigInt(rows[0]!.xid));
      // ...ours is not: the event is readable, with that transaction still open.
      await vi.waitFor(async () => expect((await app.streams['events'].after(START, 10)).map((e) => e.postId)).toEqual([created.json().id]), {
        timeout: 1_000,
        interval: 20,
      });
      expect(await app.streams['events'].waiting()).toBe(false);
      expect((await other.query<{ open: string }>('select pg_current_xact_id()::text as open')).rows[0]!.open).toBe(rows[0]!.xid);
    } finally {
      await other.query('rollback').catch(() => undefined);
      await other.end();
      await admin.query(`drop database if exists ${name}`);
      await admin.end();
    }
  });

  it('answers JSON without Accept: text/event-stream, and a HEAD gets a stream\'s headers without opening one', async () => {
    const app = await buildTestApp();
    const json = await call(app, 'GET', '/posts');
    expect(json.statusCode).toBe(200);
    expect(json.json()).toEqual([]);
    const jsonHead = await call(app, 'HEAD', '/posts');
    expect(jsonHead.headers['content-type']).toMatch(/^application\/json/);
    const head = await call(app, 'HEAD', '/posts', { headers: { accept: 'text/event-stream' } });
    expect(head.statusCode).toBe(200);
    expect(head.headers['content-type']).toBe('text/event-stream');
    expect(head.headers['cache-control']).toBe('no-store');
    expect(head.headers.etag).toBeUndefined();
    expect(head.body).toBe('');
    expect(app.streams.size).toBe(0);
    const badResume = await call(app, 'HEAD', '/posts', { headers: { accept: 'text/event-stream', 'last-event-id': 'x' } });
    expect(badResume.statusCode).toBe(400);
  });

  it('never registers a stream whose client left while it was opening, and gives its seat back', async () => {
    const app = await buildTestApp();
    await app.streams.start();
    const seat = await app.streamSeats.take({ userId: 1 });
    expect(seat).toBeDefined();
    const released = vi.spyOn(seat!, 'release');
    const out = new PassThrough();
    const sub: Subscriber = {
      kind: 'posts',
      viewer: undefined,
      caller: { id: 1, tokenHash: 'h' },
      seat: seat!,
      cursor: START,
      live: false,
      out,
      res: new ServerResponse(new IncomingMessage(new Socket())),
      lastWrite: Date.now(),
      closed: false,
    };
    // The client's 'close' comes while the stream is still opening (its seat or the log awaited): add() runs after.
    const opening = app.streams.add(sub, undefined);
    app.streams.remove(sub);
    await opening;
    expect(app.streams.size).toBe(0);
    expect(released).toHaveBeenCalled();
    // Its seat is free again: the user may open as many as before.
    const seats = await Promise.all(Array.from({ length: 5 }, () => app.streamSeats.take({ userId: 1 })));
    expect(seats.every(Boolean)).toBe(true);
    expect(await app.streamSeats.take({ userId: 1 })).toBeUndefined();
  });

  // Issue 40, item 2: a resumed stream read 500 events with their posts (~5 MB) ahead of a client that took
  // nothing; a thousand such streams took the process out of memory.
  it('a resumed stream whose client takes nothing holds a bounded amount: what it wrote, and little read ahead of it', async () => {
    const app = await buildTestApp();
    await app.streams.start();
    const user = await signUp(app);
    const content = 'x'.repeat(10_000);
    const create = (title: string) => call(app, 'POST', `/users/${user.id}/posts`, { token: user.token, body: { title, content } });
    expect((await create('first')).statusCode).toBe(201);
    const first = await app.db.selectFrom('stream_events').select(['xid', 'id', 'tag']).executeTakeFirstOrThrow();
    // 3 MB of posts after it.
    for (let i = 0; i < 300; i++) expect((await create(`post ${i}`)).statusCode).toBe(201);
    // All of them readable before the stream opens (PostgreSQL: past the horizon), so the pump has nothing left to
    // read for it: what is measured is the catch-up.
    await vi.waitFor(async () => expect(await app.streams['events'].waiting()).toBe(false), { timeout: 10_000, interval: 20 });

    // Everything the log hands the hub, in bytes (as JSON): what it holds before writing it out.
    let read = 0;
    const repository = app.streams['events'] as unknown as Record<string, unknown>;
    for (const [name, method] of Object.entries(repository)) {
      if (typeof method !== 'function') continue;
      const original = method as (...args: unknown[]) => Promise<unknown>;
      repository[name] = async (...args: unknown[]) => {
        const result = await original.apply(repository, args);
        read += JSON.stringify(result instanceof Map ? [...result.values()] : (result ?? null)).length;
        return result;
      };
    }
    // A client that never reads: nothing takes what is written to `out`.
    const out = new PassThrough();
    const sub: Subscriber = {
      kind: 'posts',
      viewer: undefined,
      caller: undefined,
      cursor: START,
      live: false,
      out,
      res: new ServerResponse(new IncomingMessage(new Socket())),
      lastWrite: Date.now(),
      closed: false,
    };
    // What waits for the client: in the stream's buffer, or queued behind it.
    const waiting = () => out.readableLength + out.writableLength;
    await app.streams.add(sub, { xid: String(first.xid), id: Number(first.id), tag: first.tag });
    // It writes until the client has a little waiting, then waits for it; read no more meanwhile.
    await vi.waitFor(() => expect(waiting()).toBeGreaterThan(64 * 1024), { timeout: 10_000 });
    let before = -1;
    while (read !== before) {
      before = read;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const written = waiting();
    expect(sub.closed).toBe(false);
    // Far less than the 3 MB behind it: about 64 KB, plus one chunk of 8 posts; never near the 1 MiB drop limit.
    expect(written).toBeLessThan(64 * 1024 + 8 * 11_000);
    expect(written).toBeLessThan(MAX_BACKLOG_BYTES / 4);
    // What it read and has not written: the log's rows of one page, no post.
    expect(read - written).toBeLessThan(32 * 1024);
    app.streams.remove(sub);
  }, 60_000);
});
