import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { buildTestApp, call, write } from '../../../test/helpers/build-test-app.js';
import { createAdmin, signUp } from '../../../test/helpers/factories.js';
import type { Subscriber } from './hub.js';

/** The event log behind the live streams (CONTRACT §7): written with the post, only when the write commits. */
describe('stream event log', () => {
  const events = (app: Awaited<ReturnType<typeof buildTestApp>>) =>
    app.db.selectFrom('stream_events').select(['id', 'kind', 'post_id', 'visibility', 'previous_visibility']).orderBy('id').execute();

  it('records created, updated and deleted with ids in commit order and without gaps', async () => {
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
    expect(await app.db.selectFrom('stream_position').select('last_id').execute()).toEqual([{ last_id: 3 }]);
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
    const deleted = await app.db.selectFrom('stream_events').select(['id', 'post_id', 'post']).where('kind', '=', 'deleted').orderBy('id').execute();
    const stored = deleted.map((row) => {
      const { followers, followersIn } = JSON.parse(row.post) as { followers?: number[]; followersIn?: number };
      return { post_id: row.post_id, followers, followersIn };
    });
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
    const deleted = await app.db.selectFrom('stream_events').select(['id', 'post_id', 'post']).where('kind', '=', 'deleted').orderBy('id').execute();
    const stored = deleted.map((row) => {
      const { followers, followersIn } = JSON.parse(row.post) as { followers?: number[]; followersIn?: number };
      return { post_id: row.post_id, followers, followersIn };
    });
    expect(stored).toEqual([
      { post_id: ids[0], followers: [fan.id], followersIn: undefined },
      { post_id: ids[1], followers: [], followersIn: undefined },
      { post_id: ids[2], followers: undefined, followersIn: deleted[0]!.id },
    ]);
  });

  it('a write that rolls back leaves no event and gives its id back', async () => {
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
        await app.postChanges.record(tx, { kind: 'created', post: row });
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await events(app)).toEqual([]);
    const row = await write(app, async (db) => db.insertInto('posts').values(post).returningAll().executeTakeFirstOrThrow());
    await app.store.transaction((tx) => app.postChanges.record(tx, { kind: 'created', post: row }));
    expect((await events(app)).map((e) => e.id)).toEqual([1]);
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
      cursor: 0,
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
});
