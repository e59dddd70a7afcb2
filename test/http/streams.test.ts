import http from 'node:http';
import net from 'node:net';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../src/db/types.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { recordStreamEvent } from '../../src/modules/streams/events.js';
import { backend } from '../helpers/database.js';
import {
  e2eDatabase,
  killLeftovers,
  openDatabase,
  request,
  startServer,
  type E2eDatabase,
  type ServerProcess,
} from '../helpers/server-process.js';
import { openSse, type SseEvent, type SseStream } from '../helpers/sse.js';

/**
 * Live streams (CONTRACT §7) against the built server over real sockets: what each subscriber sees, resuming,
 * limits, slow readers, revocation, shutdown; on PostgreSQL also commits out of id order and a second process.
 */

interface Member {
  id: number;
  token: string;
  tokenId: number;
}

async function signUp(base: string, username: string): Promise<Member> {
  const password = `${username} password`;
  const created = await request(base, 'POST', '/users', { body: { username, password } });
  expect(created.status).toBe(201);
  return signIn(base, username, password, created.json<{ id: number }>().id);
}

async function signIn(base: string, username: string, password: string, id?: number): Promise<Member> {
  const token = await request(base, 'POST', '/tokens', { body: { username, password } });
  expect(token.status).toBe(201);
  const body = token.json<{ id: number; token: string; userId?: number }>();
  return { id: id ?? (await request(base, 'GET', `/users?username=${username}`).then((r) => r.json<Array<{ id: number }>>()[0]!.id)), token: body.token, tokenId: body.id };
}

async function post(base: string, author: Member, fields: { title?: string; content?: string; visibility?: string } = {}) {
  const res = await request(base, 'POST', `/users/${author.id}/posts`, {
    token: author.token,
    body: { title: fields.title ?? 'A title', content: fields.content ?? 'Some content', ...(fields.visibility ? { visibility: fields.visibility } : {}) },
  });
  expect(res.status).toBe(201);
  return res.json<{ id: number; title: string; content: string; visibility: string }>();
}

async function follow(base: string, followee: Member, follower: Member) {
  const res = await request(base, 'POST', `/users/${followee.id}/followers`, { token: follower.token, body: { id: follower.id } });
  expect(res.status).toBe(201);
}

/**
 * An event id's parts (`<xid>.<id>-<tag>`, or `<id>-<tag>` where the xid is 0; see events.ts): the writing
 * transaction's id and the row's.
 */
const parts = (id: string | undefined) => {
  const match = /^(?:(\d+)\.)?(\d+)(?:-[0-9a-f]{12})?$/.exec(id ?? '');
  return match ? { xid: BigInt(match[1] ?? 0), id: Number(match[2]) } : { xid: -1n, id: NaN };
};
/** Where an event id stands in delivery order, as one number: ids are opaque, but (xid, id) increases. */
const seq = (id: string | undefined) => {
  const { xid, id: row } = parts(id);
  return xid < 0n ? -1n : (xid << 64n) + BigInt(row);
};
/** Deletes the events before (or after) the one of this id in delivery order, as a purge (or a restore) would. */
const deleteEvents = (db: Kysely<Database>, than: 'before' | 'after', id: string | undefined) => {
  const { xid, id: row } = parts(id);
  const at = backend === 'postgres' ? sql`(${String(xid)}::xid8, ${row}::bigint)` : sql`(${xid}, ${row})`;
  return sql`delete from stream_events where (xid, id) ${than === 'before' ? sql`<` : sql`>`} ${at}`.execute(db);
};

const isPost = (kind: string, id: number) => (e: SseEvent) => e.event === kind && (JSON.parse(e.data) as { id: number }).id === id;
const postIds = (stream: SseStream, kind = 'post.created') =>
  stream.events.filter((e) => e.event === kind).map((e) => (JSON.parse(e.data) as { id: number }).id);

async function metric(base: string, name: string): Promise<number> {
  const text = (await request(base, 'GET', '/metrics')).text;
  const line = text.split('\n').find((l) => l.startsWith(name));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

describe('event streams', () => {
  let db: E2eDatabase;
  let server: ServerProcess;
  let admin: Member;
  const open: SseStream[] = [];
  const sse = async (...args: Parameters<typeof openSse>) => {
    const stream = await openSse(...args);
    open.push(stream);
    return stream;
  };

  beforeAll(async () => {
    db = await e2eDatabase();
    server = await startServer({
      databaseUrl: db.url,
      env: { STREAM_HEARTBEAT_SECONDS: '1', STREAM_AUTH_RECHECK_SECONDS: '1', ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'root password' },
    });
    admin = await signIn(server.url, 'root', 'root password');
  }, 60_000);
  afterAll(async () => {
    for (const stream of open) stream.close();
    await server?.stop();
    await killLeftovers();
    await db?.drop();
  }, 60_000);

  it('negotiates on Accept (q-values) and says Vary: Accept on both answers', async () => {
    const stream = await sse(server.url, '/posts', { headers: { accept: 'application/json;q=0.5, text/event-stream' } });
    expect(stream.headers['content-type']).toBe('text/event-stream');
    expect(stream.headers.vary).toMatch(/\bAccept\b/);
    stream.close();
    for (const accept of ['text/event-stream;q=0', 'application/json, text/event-stream;q=0.5', '*/*', 'application/json']) {
      const res = await request(server.url, 'GET', '/posts', { headers: { accept } });
      expect(res.headers.get('content-type'), accept).toBe('application/json; charset=utf-8');
      expect(res.headers.get('vary'), accept).toMatch(/\bAccept\b/);
    }
  });

  it('answers 200 text/event-stream with a retry line, keep-alives, and each post as GET /posts/{id} shows it', async () => {
    const author = await signUp(server.url, 'st_author');
    // The client accepts compression: an event stream is never compressed (nor held back by a compressor).
    const stream = await sse(server.url, '/posts', { headers: { 'accept-encoding': 'br, gzip' } });
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toBe('text/event-stream');
    expect(stream.headers['cache-control']).toBe('no-store');
    expect(stream.headers['content-encoding']).toBeUndefined();

    const created = await post(server.url, author, { title: 'Streamed' });
    const event = await stream.next(isPost('post.created', created.id));
    expect(event.id).toMatch(/^(?:[1-9][0-9]*\.)?[1-9][0-9]*-[0-9a-f]{12}$/);
    expect(stream.retry).toBeGreaterThan(0);
    // Byte for byte what a read of the post answers (field order included).
    expect(event.data).toBe((await request(server.url, 'GET', `/posts/${created.id}`)).text);

    const updated = await request(server.url, 'PUT', `/posts/${created.id}`, {
      token: author.token,
      body: { title: 'Renamed', content: 'Some content', visibility: 'public' },
    });
    const updateEvent = await stream.next(isPost('post.updated', created.id));
    expect(updateEvent.data).toBe(updated.text);
    expect(seq(updateEvent.id)).toBeGreaterThan(seq(event.id));

    expect((await request(server.url, 'DELETE', `/posts/${created.id}`, { token: author.token })).status).toBe(200);
    const deleted = await stream.next((e) => e.event === 'post.deleted');
    expect(JSON.parse(deleted.data)).toEqual({ id: created.id });

    // An account deleted with its posts: each post is a post.deleted on the stream, as if deleted one by one.
    const leaver = await signUp(server.url, 'st_leaver');
    const kept = await post(server.url, leaver, { title: 'Gone with the account' });
    await stream.next(isPost('post.created', kept.id));
    expect((await request(server.url, 'DELETE', `/users/${leaver.id}`, { token: leaver.token })).status).toBe(200);
    expect(JSON.parse((await stream.next(isPost('post.deleted', kept.id))).data)).toEqual({ id: kept.id });

    // Quiet for over STREAM_HEARTBEAT_SECONDS: a comment keeps the connection alive.
    await expect.poll(() => stream.comments, { timeout: 10_000, interval: 200 }).toContain(': keep-alive');

    // Without the Accept header the route still answers JSON.
    const json = await request(server.url, 'GET', '/posts');
    expect(json.status).toBe(200);
    expect(json.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await metric(server.url, 'corkboard_streams_open')).toBeGreaterThanOrEqual(1);
    expect(await metric(server.url, 'corkboard_stream_events_sent_total')).toBeGreaterThanOrEqual(3);
  });

  it('shows each subscriber what it may see: anonymous, follower, stranger, owner, admin, and the follower’s feed', async () => {
    const owner = await signUp(server.url, 'vis_owner');
    const fan = await signUp(server.url, 'vis_fan');
    const stranger = await signUp(server.url, 'vis_stranger');
    await follow(server.url, owner, fan);

    const streams = {
      anonymous: await sse(server.url, '/posts'),
      fan: await sse(server.url, '/posts', { token: fan.token }),
      stranger: await sse(server.url, '/posts', { token: stranger.token }),
      owner: await sse(server.url, '/posts', { token: owner.token }),
      admin: await sse(server.url, '/posts', { token: admin.token }),
      fanFeed: await sse(server.url, `/users/${fan.id}/feed`, { token: fan.token }),
      strangerFeed: await sse(server.url, `/users/${stranger.id}/feed`, { token: stranger.token }),
    };
    const pub = await post(server.url, owner, { visibility: 'public' });
    const fol = await post(server.url, owner, { visibility: 'followers' });
    const priv = await post(server.url, owner, { visibility: 'private' });
    const strangers = await post(server.url, stranger, { visibility: 'public' });
    // A last public post by the owner: once a stream has it, it has had every event before it.
    const sentinel = await post(server.url, owner, { visibility: 'public' });
    for (const [name, stream] of Object.entries(streams)) {
      if (name !== 'strangerFeed') await stream.next(isPost('post.created', sentinel.id));
    }
    expect(postIds(streams.anonymous)).toEqual([pub.id, strangers.id, sentinel.id]);
    expect(postIds(streams.stranger)).toEqual([pub.id, strangers.id, sentinel.id]);
    expect(postIds(streams.fan)).toEqual([pub.id, fol.id, strangers.id, sentinel.id]);
    expect(postIds(streams.owner)).toEqual([pub.id, fol.id, priv.id, strangers.id, sentinel.id]);
    expect(postIds(streams.admin)).toEqual([pub.id, fol.id, priv.id, strangers.id, sentinel.id]);
    // The feed: posts by the people the feed's owner follows (not their own, not strangers').
    expect(postIds(streams.fanFeed)).toEqual([pub.id, fol.id, sentinel.id]);
    expect(postIds(streams.strangerFeed)).toEqual([]);

    // The public post turns private: who saw it is told it is gone; the owner sees the update.
    const res = await request(server.url, 'PUT', `/posts/${pub.id}`, {
      token: owner.token,
      body: { title: 'Hidden now', content: 'Some content', visibility: 'private' },
    });
    expect(res.status).toBe(200);
    for (const stream of [streams.anonymous, streams.fan, streams.stranger, streams.fanFeed]) {
      const gone = await stream.next((e) => e.event === 'post.deleted');
      expect(JSON.parse(gone.data)).toEqual({ id: pub.id });
    }
    expect((await streams.owner.next(isPost('post.updated', pub.id))).data).toBe(res.text);

    // After an unfollow the fan gets no more followers-only posts, and the owner leaves the fan's feed.
    expect((await request(server.url, 'DELETE', `/users/${owner.id}/followers/${fan.id}`, { token: fan.token })).status).toBe(200);
    const hiddenNow = await post(server.url, owner, { visibility: 'followers' });
    const marker = await post(server.url, stranger, { visibility: 'public' });
    await streams.fan.next(isPost('post.created', marker.id));
    await streams.owner.next(isPost('post.created', marker.id));
    expect(postIds(streams.fan)).not.toContain(hiddenNow.id);
    expect(postIds(streams.owner)).toContain(hiddenNow.id);
    expect(postIds(streams.fanFeed)).not.toContain(hiddenNow.id);
    for (const stream of Object.values(streams)) stream.close();
  });

  // The account's follows go in the same transaction as its posts: who could see those posts is the follows as
  // they were before it, not after it committed.
  it('an account deleted with its posts: its followers hear of its followers-only posts, their feeds of all its posts', async () => {
    const leaver = await signUp(server.url, 'acct_leaver');
    const fan = await signUp(server.url, 'acct_fan');
    const stranger = await signUp(server.url, 'acct_stranger');
    await follow(server.url, leaver, fan);
    const streams = {
      fan: await sse(server.url, '/posts', { token: fan.token }),
      fanFeed: await sse(server.url, `/users/${fan.id}/feed`, { token: fan.token }),
      stranger: await sse(server.url, '/posts', { token: stranger.token }),
    };
    const pub = await post(server.url, leaver, { visibility: 'public' });
    const fol1 = await post(server.url, leaver, { visibility: 'followers' });
    const fol2 = await post(server.url, leaver, { visibility: 'followers' });
    await streams.fan.next(isPost('post.created', fol2.id));
    await streams.fanFeed.next(isPost('post.created', fol2.id));
    await streams.stranger.next(isPost('post.created', pub.id));

    expect((await request(server.url, 'DELETE', `/users/${leaver.id}`, { token: leaver.token })).status).toBe(200);
    for (const stream of [streams.fan, streams.fanFeed]) {
      await stream.next(isPost('post.deleted', fol2.id), 10_000);
      expect(postIds(stream, 'post.deleted')).toEqual([pub.id, fol1.id, fol2.id]);
    }
    // Nobody else is told of the followers-only ones.
    const marker = await post(server.url, stranger, { visibility: 'public' });
    await streams.stranger.next(isPost('post.created', marker.id));
    expect(postIds(streams.stranger, 'post.deleted')).toEqual([pub.id]);

    // A resume from the first of those deletions replays the others to the follower too.
    const firstGone = await streams.fan.next(isPost('post.deleted', pub.id));
    const resumed = await sse(server.url, '/posts', { token: fan.token, lastEventId: firstGone.id! });
    await resumed.next(isPost('post.created', marker.id));
    expect(postIds(resumed, 'post.deleted')).toEqual([fol1.id, fol2.id]);
    for (const stream of [...Object.values(streams), resumed]) stream.close();
  });

  it('an admin may stream another user’s feed; a member may not (403), nor without a token (401)', async () => {
    const member = await signUp(server.url, 'feed_member');
    const other = await signUp(server.url, 'feed_other');
    const forbidden = await sse(server.url, `/users/${member.id}/feed`, { token: other.token });
    await forbidden.ended();
    expect(forbidden.status).toBe(403);
    const anonymous = await sse(server.url, `/users/${member.id}/feed`);
    await anonymous.ended();
    expect(anonymous.status).toBe(401);
    const byAdmin = await sse(server.url, `/users/${member.id}/feed`, { token: admin.token });
    expect(byAdmin.status).toBe(200);
    byAdmin.close();
  });

  it('resumes from Last-Event-ID with what was written meanwhile, in order, then goes on live, without duplicates', async () => {
    const author = await signUp(server.url, 'resume_author');
    const first = await sse(server.url, '/posts');
    const a = await post(server.url, author);
    const seen = await first.next(isPost('post.created', a.id));
    first.close();

    const b = await post(server.url, author);
    const c = await post(server.url, author, { visibility: 'private' });
    const d = await post(server.url, author);
    const resumed = await sse(server.url, '/posts', { lastEventId: seen.id! });
    expect(resumed.status).toBe(200);
    await resumed.next(isPost('post.created', d.id));
    const e = await post(server.url, author);
    await resumed.next(isPost('post.created', e.id));
    const ids = postIds(resumed);
    expect(ids).toEqual([b.id, d.id, e.id]);
    expect(ids).not.toContain(c.id);
    const eventIds = resumed.events.map((ev) => seq(ev.id));
    expect([...eventIds].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0))).toEqual(eventIds);
    expect(new Set(eventIds).size).toBe(eventIds.length);
    resumed.close();
  });

  // Far more than the 1 MiB a subscriber may leave waiting: the replay must wait for the client instead of writing
  // it all at once (which once cut the stream as "slow" on PostgreSQL, and before its answer even started on SQLite).
  it('resumes over more than 1 MiB of missed events: all of them, in order, then live, and the reader is not dropped', async () => {
    const author = await signUp(server.url, 'bulk_resume_author');
    const droppedBefore = await metric(server.url, 'corkboard_stream_subscribers_dropped_total{reason="slow"}');
    const first = await sse(server.url, '/posts');
    const a = await post(server.url, author);
    const seen = await first.next(isPost('post.created', a.id));
    first.close();

    const content = 'x'.repeat(10_000);
    const missed: number[] = [];
    for (let i = 0; i < 300; i += 10) {
      const created = await Promise.all(Array.from({ length: 10 }, () => post(server.url, author, { content })));
      missed.push(...created.map((p) => p.id).sort((x, y) => x - y));
    }
    const resumed = await sse(server.url, '/posts', { lastEventId: seen.id! });
    expect(resumed.status).toBe(200);
    await resumed.next(isPost('post.created', missed.at(-1)!), 60_000);
    const live = await post(server.url, author);
    await resumed.next(isPost('post.created', live.id), 10_000);
    expect(postIds(resumed).sort((x, y) => x - y)).toEqual([...missed, live.id].sort((x, y) => x - y));
    const eventIds = resumed.events.map((ev) => seq(ev.id));
    expect([...eventIds].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0))).toEqual(eventIds);
    expect(new Set(eventIds).size).toBe(eventIds.length);
    expect(resumed.isEnded()).toBe(false);
    expect(await metric(server.url, 'corkboard_stream_subscribers_dropped_total{reason="slow"}')).toBe(droppedBefore);
    resumed.close();
  }, 120_000);

  // Many big events committed at once reach the pump in one read: a client that keeps reading must get them all,
  // not be cut off because the server wrote faster than any socket drains.
  it('delivers a burst of more than 1 MiB to a live reader that keeps up, without dropping it', async () => {
    const author = await signUp(server.url, 'burst_author');
    const droppedBefore = await metric(server.url, 'corkboard_stream_subscribers_dropped_total{reason="slow"}');
    const reader = await sse(server.url, '/posts');
    const handle = openDatabase(db.url);
    let burst: number[];
    try {
      // 300 posts of 10,000 characters in one transaction: one commit, one wake-up, one read by the pump.
      burst = await handle.transaction(async (tx) => {
        const ids: number[] = [];
        for (let i = 0; i < 300; i++) {
          const now = new Date().toISOString();
          const row = await tx.db
            .insertInto('posts')
            .values({ owner_id: author.id, title: `burst ${i}`, content: 'y'.repeat(10_000), visibility: 'public', created_at: now, updated_at: now })
            .returningAll()
            .executeTakeFirstOrThrow();
          await recordStreamEvent(tx, { kind: 'created', post: row });
          ids.push(row.id);
        }
        return ids;
      });
    } finally {
      await handle.close();
    }
    // A post through the server wakes its pump on SQLite too (the direct write above notified nobody there).
    const sentinel = await post(server.url, author);
    await reader.next(isPost('post.created', sentinel.id), 60_000);
    expect(postIds(reader)).toEqual([...burst, sentinel.id]);
    expect(reader.isEnded()).toBe(false);
    expect(await metric(server.url, 'corkboard_stream_subscribers_dropped_total{reason="slow"}')).toBe(droppedBefore);
    reader.close();
  }, 120_000);

  it('a stream the client closes gets its access line, with the request, like every request', async () => {
    const before = await metric(server.url, 'corkboard_http_request_duration_seconds_count{method="GET",route="/posts",status_code="200"}');
    const stream = await sse(server.url, '/posts');
    const id = stream.headers['x-request-id'];
    stream.close();
    const line = await server.waitForLog((l) => l.reqId === id && l.msg === 'request completed');
    expect(line).toMatchObject({ level: 30, closedByClient: true, req: { method: 'GET', url: '/posts' }, res: { statusCode: 200 } });
    expect(line.responseTime).toEqual(expect.any(Number));
    expect(server.logs().filter((l) => l.msg === 'stream closed prematurely')).toEqual([]);
    const after = await metric(server.url, 'corkboard_http_request_duration_seconds_count{method="GET",route="/posts",status_code="200"}');
    expect(after).toBeGreaterThan(before);
  });

  it('answers a malformed Last-Event-ID with 400 before opening the stream', async () => {
    // The tag is 12 lowercase hex digits, after the number and one hyphen.
    const tags = ['1-ABCDEF012345', '1-abcdef01234', '1-abcdef0123456', '1-', '-abcdef012345', '1-abcdef012345-x', '1 abcdef012345', '007-abcdef012345'];
    for (const bad of ['abc', '-1', '1.', '.5', '1.5.6', '01.5', '007', '9007199254740992', '99999999999999999999', '9223372036854775808.1-abcdef012345', ...tags]) {
      const res = await sse(server.url, '/posts', { lastEventId: bad });
      await res.ended();
      expect([bad, res.status]).toEqual([bad, 400]);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(res.body)).toMatchObject({ status: 400, errors: [{ field: 'Last-Event-ID' }] });
    }
    // A malformed request is a 400 whoever sends it: before the 401 of a feed without a token, or of a bad token.
    for (const [path, token] of [['/users/1/feed', undefined], ['/posts', 'not-a-token']] as const) {
      const res = await sse(server.url, path, { lastEventId: 'abc', ...(token ? { token } : {}) });
      await res.ended();
      expect([path, res.status]).toEqual([path, 400]);
      expect(JSON.parse(res.body)).toMatchObject({ status: 400, errors: [{ field: 'Last-Event-ID' }] });
    }
  });

  it('sends event: reset first for an id whose events are no longer kept, then goes on live from the end of the log', async () => {
    const author = await signUp(server.url, 'reset_author');
    const watcher = await sse(server.url, '/posts');
    const old = await post(server.url, author);
    const oldEvent = await watcher.next(isPost('post.created', old.id));
    const purged = await post(server.url, author);
    const kept = await post(server.url, author);
    const keptEvent = await watcher.next(isPost('post.created', kept.id));
    watcher.close();
    // What the background purge does to events older than the retention.
    const handle = openDatabase(db.url);
    try {
      await handle.transaction((tx) => deleteEvents(tx.db, 'before', keptEvent.id));
    } finally {
      await handle.close();
    }
    const resumed = await sse(server.url, '/posts', { lastEventId: oldEvent.id! });
    const reset = await resumed.next((e) => e.event === 'reset');
    expect(resumed.events[0]).toBe(reset);
    // The reset has an id too: the end of the log, from which the stream goes on live (refetch, then carry on).
    expect(reset).toMatchObject({ event: 'reset', data: '{}' });
    expect(seq(reset.id)).toBeGreaterThanOrEqual(seq(keptEvent.id));
    const next = await post(server.url, author);
    await resumed.next(isPost('post.created', next.id));
    expect(postIds(resumed)).toEqual([next.id]);
    expect(postIds(resumed)).not.toContain(purged.id);
    resumed.close();
    // Resuming from the reset's id is no reset: the stream goes on with what was written after it.
    const again = await sse(server.url, '/posts', { lastEventId: reset.id! });
    await again.next(isPost('post.created', next.id));
    expect(again.events.map((e) => e.event)).not.toContain('reset');
    again.close();

    // An id this database never handed out is a reset too: a number past the end, up to the largest there can be
    // (2^53 - 1), with or without a tag; 0; a bare number (no tag: nothing vouches that it is this database's);
    // a kept number with another tag.
    const lastTag = /-(\w+)$/.exec(keptEvent.id!)![1]!;
    const otherTag = lastTag === '000000000000' ? '111111111111' : '000000000000';
    const keptParts = parts(keptEvent.id);
    const others = [String(keptParts.id), `${keptParts.id}-${otherTag}`, `${keptParts.xid}.${keptParts.id}`, `${keptParts.xid}.${keptParts.id}-${otherTag}`, `${keptParts.xid + 1n}.${keptParts.id}-${lastTag}`];
    for (const never of ['0', '999999999', '9007199254740991', `999999999-${lastTag}`, `9223372036854775807.1-${lastTag}`, ...others]) {
      const unknown = await sse(server.url, '/posts', { lastEventId: never });
      const first = await unknown.next(() => true);
      expect([never, first.event]).toEqual([never, 'reset']);
      expect(seq(first.id)).toBeGreaterThanOrEqual(seq(keptEvent.id));
      unknown.close();
    }
  });

  // Issue 40, item 1: a replay judged the stored old representation against today's follow graph.
  it('a replay sends each post as it is now: never a post hidden or deleted since, in its old form, to anyone', async () => {
    const alice = await signUp(server.url, 'leak_alice');
    const watcher = await sse(server.url, '/posts');
    const marker = await post(server.url, alice, { visibility: 'public', title: 'marker' });
    const from = (await watcher.next(isPost('post.created', marker.id))).id!;
    watcher.close();
    const p = await post(server.url, alice, { visibility: 'followers', title: 'P secret title', content: 'P secret content' });
    const q = await post(server.url, alice, { visibility: 'public', title: 'Q secret title', content: 'Q secret content' });
    const hide = await request(server.url, 'PUT', `/posts/${p.id}`, {
      token: alice.token,
      body: { title: 'P secret title', content: 'P secret content', visibility: 'private' },
    });
    expect(hide.status).toBe(200);
    expect((await request(server.url, 'DELETE', `/posts/${q.id}`, { token: alice.token })).status).toBe(200);
    const after = await post(server.url, alice, { visibility: 'public', title: 'after' });
    // A user created afterwards follows Alice: P is not theirs to see, Q is no one's.
    const late = await signUp(server.url, 'leak_late');
    await follow(server.url, alice, late);
    expect((await request(server.url, 'GET', `/posts/${p.id}`, { token: late.token })).status).toBe(404);
    expect((await request(server.url, 'GET', `/posts/${q.id}`)).status).toBe(404);

    const sentinels: number[] = [];
    for (const [who, token] of [['follower', late.token], ['anonymous', undefined]] as const) {
      for (const lastEventId of [from, '0']) {
        const resumed = await sse(server.url, '/posts', { lastEventId, ...(token ? { token } : {}) });
        const label = `${who} from ${lastEventId}`;
        if (lastEventId === '0') {
          // 0 was never handed out: a reset, then live from the end of the log (nothing replayed).
          const sentinel = await post(server.url, alice, { visibility: 'public', title: 'sentinel' });
          sentinels.push(sentinel.id);
          await resumed.next(isPost('post.created', sentinel.id));
          expect([label, resumed.events.map((e) => e.event)]).toEqual([label, ['reset', 'post.created']]);
        } else {
          // Public posts that are still there: sent as they are.
          const expected = [after.id, ...sentinels];
          await resumed.next(isPost('post.created', expected.at(-1)!));
          expect([label, [...postIds(resumed), ...postIds(resumed, 'post.updated')]]).toEqual([label, expected]);
          // Gone, or hidden from them: at most its id, as post.deleted, and only to whom could see it (Q: anyone;
          // P, followers-only when made: the follower).
          expect([label, [...new Set(postIds(resumed, 'post.deleted'))].sort()]).toEqual([label, who === 'follower' ? [p.id, q.id].sort() : [q.id]]);
        }
        for (const event of resumed.events) expect([label, event.data]).not.toEqual([label, expect.stringMatching(/secret/)]);
        resumed.close();
      }
    }
    // Alice herself sees P as it is now (private, the current representation), under its events' names.
    const own = await sse(server.url, '/posts', { lastEventId: from, token: alice.token });
    await own.next(isPost('post.created', sentinels.at(-1)!));
    const current = (await request(server.url, 'GET', `/posts/${p.id}`, { token: alice.token })).text;
    expect(own.events.filter((e) => (JSON.parse(e.data) as { id?: number }).id === p.id).map((e) => [e.event, e.data])).toEqual([
      ['post.created', current],
      ['post.updated', current],
    ]);
    own.close();
  });

  it('closes a stream within seconds once its token is revoked', async () => {
    const member = await signUp(server.url, 'revoked_member');
    const stream = await sse(server.url, '/posts', { token: member.token });
    expect(stream.status).toBe(200);
    expect((await request(server.url, 'DELETE', `/tokens/${member.tokenId}`, { token: member.token })).status).toBe(200);
    await stream.ended(5000);
    expect(await metric(server.url, 'corkboard_stream_subscribers_dropped_total{reason="revoked"}')).toBeGreaterThanOrEqual(1);
  });

  it('disconnects a subscriber that does not read once more than 1 MiB waits for it', async () => {
    const author = await signUp(server.url, 'slow_author');
    const reader = await sse(server.url, '/posts');
    // A client that sends its request and never reads: the kernel's buffers fill, then the server's.
    const socket = net.connect(server.port, '127.0.0.1');
    socket.pause();
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write('GET /posts HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n');
    await new Promise((r) => setTimeout(r, 300));
    const content = 'x'.repeat(10_000);
    const slow = () => metric(server.url, 'corkboard_stream_subscribers_dropped_total{reason="slow"}');
    const before = await slow();
    // Posts keep coming until it is dropped: once more than 1 MiB waits for it and it takes nothing for a few
    // seconds (the reader below, which keeps up, is not).
    let dropped = before;
    for (const deadline = Date.now() + 90_000; Date.now() < deadline && dropped === before; ) {
      await Promise.all(Array.from({ length: 8 }, () => post(server.url, author, { content })));
      dropped = await slow();
    }
    expect(dropped).toBe(before + 1);
    socket.destroy();
    // The reader that keeps up is still served. Its events so far are set aside first: on a fast machine thousands of
    // 10 KB posts go out before the drop, and `next` parses every event it holds on each arrival, which stalled this
    // test's own process past the wait below (CI of d3682c7), not the server.
    reader.events.length = 0;
    const last = await post(server.url, author);
    await reader.next(isPost('post.created', last.id), 10_000);
    reader.close();
  }, 120_000);

  it.skipIf(backend !== 'postgres')('delivers in commit order: an event whose transaction commits later is not skipped by a resume', async () => {
    const author = await signUp(server.url, 'order_author');
    const watcher = await sse(server.url, '/posts');
    const handle = openDatabase(db.url);
    try {
      const row = (title: string) => ({
        id: 0,
        owner_id: author.id,
        title,
        content: 'c',
        visibility: 'public' as const,
        reply_count: 0,
        recommend_count: 0,
        created_at: new Date().toISOString(),
        updated_at: new Date().toISOString(),
      });
      // T1 starts first and takes its event id; T2 writes its event while T1 is still open; T1 commits last.
      let releaseFirst!: () => void;
      const firstMayCommit = new Promise<void>((r) => (releaseFirst = r));
      let firstRecorded!: () => void;
      const firstHasRecorded = new Promise<void>((r) => (firstRecorded = r));
      let secondDone = false;
      const t1 = handle.transaction(async (tx) => {
        const inserted = await tx.db.insertInto('posts').values({ ...row('first'), id: undefined } as never).returningAll().executeTakeFirstOrThrow();
        await recordStreamEvent(tx, { kind: 'created', post: inserted });
        firstRecorded();
        await firstMayCommit;
        return inserted.id;
      });
      await firstHasRecorded;
      const t2 = handle
        .transaction(async (tx) => {
          const inserted = await tx.db.insertInto('posts').values({ ...row('second'), id: undefined } as never).returningAll().executeTakeFirstOrThrow();
          await recordStreamEvent(tx, { kind: 'created', post: inserted });
          return inserted.id;
        })
        .then((id) => {
          secondDone = true;
          return id;
        });
      // T2 commits while T1 is open (issue 45: no row every post writer waits on)...
      await t2;
      expect(secondDone).toBe(true);
      // ...but is not delivered before T1, whose xid is older, has ended (the horizon: see events.ts).
      await new Promise((r) => setTimeout(r, 300));
      expect(postIds(watcher)).toEqual([]);
      releaseFirst();
      const [firstId, secondId] = await Promise.all([t1, t2]);
      const firstEvent = await watcher.next(isPost('post.created', firstId));
      const secondEvent = await watcher.next(isPost('post.created', secondId));
      expect(seq(firstEvent.id)).toBeLessThan(seq(secondEvent.id));
      expect(watcher.events.indexOf(firstEvent)).toBeLessThan(watcher.events.indexOf(secondEvent));
      // A client that had only the first-delivered event resumes and still receives the other.
      const resumed = await sse(server.url, '/posts', { lastEventId: firstEvent.id! });
      await resumed.next(isPost('post.created', secondId));
      resumed.close();
    } finally {
      await handle.close();
    }
    watcher.close();
  });
});

/**
 * Server processes for the tests of one describe block, on a fresh database of their own (several need PostgreSQL):
 * started before them, stopped after.
 */
function ownServers(count: number, env: Record<string, string> = {}): { readonly servers: ServerProcess[]; readonly databaseUrl: string } {
  let db: E2eDatabase | undefined;
  const servers: ServerProcess[] = [];
  beforeAll(async () => {
    db = await e2eDatabase();
    const url = db.url;
    // Each one kept as soon as it is up, so that afterAll stops it even if another fails to start.
    await Promise.all(Array.from({ length: count }, async () => servers.push(await startServer({ databaseUrl: url, env }))));
  }, 60_000);
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    await killLeftovers();
    await db?.drop();
  }, 60_000);
  return {
    get servers() {
      if (servers.length < count) throw new Error('the servers have not started');
      return servers;
    },
    get databaseUrl() {
      if (!db) throw new Error('the database has not been made');
      return db.url;
    },
  };
}

/** One server process of the block's own (see ownServers). */
function ownServer(env: Record<string, string> = {}): { readonly server: ServerProcess } {
  const own = ownServers(1, env);
  return {
    get server() {
      return own.servers[0]!;
    },
  };
}

describe('event streams after a time with none open', () => {
  const own = ownServer();

  // With no stream open the server does not read the event log back after each write; a stream that opens later
  // must still start at the end of the log, and a resume must still replay everything after its id.
  it('a new stream starts at the end of the log and gets the next post; a resume replays what was written meanwhile', async () => {
    const { server } = own;
    const author = await signUp(server.url, 'idle_author');
    const first = await openSse(server.url, '/posts');
    const before = await post(server.url, author, { title: 'seen live' });
    const seen = await first.next(isPost('post.created', before.id));
    first.close();
    await expect.poll(() => metric(server.url, 'corkboard_streams_open'), { timeout: 10_000, interval: 100 }).toBe(0);

    const meanwhile = [await post(server.url, author), await post(server.url, author), await post(server.url, author)];
    const fresh = await openSse(server.url, '/posts');
    expect(fresh.status).toBe(200);
    const next = await post(server.url, author, { title: 'after opening' });
    await fresh.next(isPost('post.created', next.id));
    expect(postIds(fresh)).toEqual([next.id]);

    const resumed = await openSse(server.url, '/posts', { lastEventId: seen.id });
    await resumed.next(isPost('post.created', next.id));
    expect(postIds(resumed)).toEqual([...meanwhile.map((p) => p.id), next.id]);
    expect(resumed.events.every((e) => e.event !== 'reset')).toBe(true);
    fresh.close();
    resumed.close();
  });
});

// Issue 40, item 4: a restore handed the same ids out again, and a resume from before it missed what followed.
describe('event streams across a restore of the database', () => {
  let db: E2eDatabase;
  let server: ServerProcess | undefined;
  beforeAll(async () => {
    db = await e2eDatabase();
    server = await startServer({ databaseUrl: db.url });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    await killLeftovers();
    await db?.drop();
  }, 60_000);

  it('an id from before a restore gets event: reset, though its number is handed out again; one the backup holds resumes', async () => {
    const author = await signUp(server!.url, 'restore_author');
    const handle = openDatabase(db.url);
    try {
      const watcher = await openSse(server!.url, '/posts');
      const written: number[] = [];
      let backup: Record<string, unknown> | undefined;
      let sequence: { last_value: string; is_called: boolean } | undefined;
      for (let i = 0; i < 8; i++) {
        written.push((await post(server!.url, author, { title: `before ${i}` })).id);
        // The backup, taken after the third: the log's counter as it was then (the events up to it stay as they are).
        if (i === 2) backup = await handle.db.selectFrom('stream_position').selectAll().executeTakeFirstOrThrow();
        // PostgreSQL: the events' ids come from a sequence, which a backup holds too.
        if (i === 2 && backend === 'postgres') {
          sequence = (await sql<{ last_value: string; is_called: boolean }>`select last_value, is_called from stream_events_id_seq`.execute(handle.db)).rows[0];
        }
      }
      await watcher.next(isPost('post.created', written[7]!));
      const seen = written.map((id) => watcher.events.find(isPost('post.created', id))!.id!);
      watcher.close();

      // The restore, with the service stopped: what was written after the backup is gone, the counter is back.
      await server!.stop();
      server = undefined;
      await handle.transaction(async (tx) => {
        await deleteEvents(tx.db, 'after', seen[2]);
        if (sequence) await sql`select setval('stream_events_id_seq', ${sequence.last_value}::bigint, ${sequence.is_called})`.execute(tx.db);
        await tx.db.deleteFrom('posts').where('id', 'in', written.slice(3)).execute();
        await tx.db.updateTable('stream_position').set(backup!).where('id', '=', 1).execute();
      });
      server = await startServer({ databaseUrl: db.url });

      const live = await openSse(server.url, '/posts');
      const again: number[] = [];
      for (let i = 0; i < 6; i++) again.push((await post(server.url, author, { title: `after ${i}` })).id);
      await live.next(isPost('post.created', again[5]!));
      const reissued = live.events.map((e) => e.id!);
      live.close();
      // The numbers 4..8 were handed out again, each with another tag (on PostgreSQL another xid too): no id repeats.
      const number = (id: string | undefined) => parts(id).id;
      expect(reissued.map(number)).toEqual(seen.slice(3).map(number).concat(number(seen[7]) + 1));
      for (const id of reissued) expect(seen).not.toContain(id);

      // The client that saw up to the 8th: a reset first (it missed five posts), then live from the end.
      const stale = await openSse(server.url, '/posts', { lastEventId: seen[7]! });
      const reset = await stale.next(() => true);
      expect(reset).toMatchObject({ event: 'reset', data: '{}', id: reissued[5] });
      const next = await post(server.url, author, { title: 'next' });
      await stale.next(isPost('post.created', next.id));
      expect(postIds(stale)).toEqual([next.id]);
      stale.close();

      // A client that had seen only what the backup holds resumes: everything written since the restore.
      const inBackup = await openSse(server.url, '/posts', { lastEventId: seen[2]! });
      await inBackup.next(isPost('post.created', next.id));
      expect(inBackup.events.map((e) => e.event)).not.toContain('reset');
      expect(postIds(inBackup)).toEqual([...again, next.id]);
      inBackup.close();
    } finally {
      await handle.close();
    }
  }, 60_000);
});

describe('event streams when an admin deletes every user', () => {
  const own = ownServer({ ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'root password' });

  it('an anonymous stream hears of every public post as deleted, and of no followers-only one', async () => {
    const { server } = own;
    const admin = await signIn(server.url, 'root', 'root password');
    const first = await signUp(server.url, 'wipe_first');
    const second = await signUp(server.url, 'wipe_second');
    await follow(server.url, first, second);
    const anonymous = await openSse(server.url, '/posts');
    const pub1 = await post(server.url, first, { visibility: 'public' });
    await post(server.url, first, { visibility: 'followers' });
    const pub2 = await post(server.url, second, { visibility: 'public' });
    await anonymous.next(isPost('post.created', pub2.id));

    const wiped = await request(server.url, 'DELETE', '/users', { token: admin.token });
    expect(wiped.status).toBe(200);
    expect(wiped.json()).toEqual({ deleted: 3 });
    await anonymous.next(isPost('post.deleted', pub2.id), 10_000);
    expect(postIds(anonymous, 'post.deleted')).toEqual([pub1.id, pub2.id]);
    anonymous.close();
  });
});

describe('event stream limits and shutdown', () => {
  const own = ownServer({ STREAM_MAX_PER_USER: '2', STREAM_MAX: '3' });

  it('answers 429 past STREAM_MAX_PER_USER and 503 with Retry-After past STREAM_MAX; SIGTERM ends every stream and exits 0', async () => {
    const { server } = own;
    const member = await signUp(server.url, 'limit_member');
    const streams = [await openSse(server.url, '/posts', { token: member.token }), await openSse(server.url, '/posts', { token: member.token })];
    expect(streams.map((s) => s.status)).toEqual([200, 200]);
    const third = await openSse(server.url, '/posts', { token: member.token });
    await third.ended();
    expect(third.status).toBe(429);
    streams.push(await openSse(server.url, '/posts'));
    expect(streams[2]!.status).toBe(200);
    const over = await openSse(server.url, '/posts');
    await over.ended();
    expect(over.status).toBe(503);
    expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);

    // A closed stream frees its place.
    streams[0]!.close();
    await expect.poll(() => metric(server.url, 'corkboard_streams_open'), { timeout: 10_000, interval: 100 }).toBe(2);
    streams[0] = await openSse(server.url, '/posts', { token: member.token });
    expect(streams[0].status).toBe(200);

    const exit = server.stop();
    await Promise.all(streams.map((s) => s.ended(5000)));
    expect(await exit).toEqual({ code: 0, signal: null });
  });
});

describe('event streams whose client leaves while its token is looked up', () => {
  const own = ownServer({ STREAM_MAX_PER_USER: '2' });

  it('are never registered: no stream stays open and the user\'s seats come back', async () => {
    const { server } = own;
    const member = await signUp(server.url, 'early_leaver');
    // Sent and cut off within a few milliseconds, at every moment of the opening (before, during and after the token
    // lookup, which on PostgreSQL is a round trip the client can leave during).
    for (let i = 0; i < 40; i++) {
      await new Promise<void>((resolve) => {
        const socket = net.connect(server.port, '127.0.0.1', () => {
          socket.write(`GET /posts HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer ${member.token}\r\n\r\n`);
          setTimeout(() => {
            socket.destroy();
            resolve();
          }, i % 4);
        });
        socket.on('error', () => resolve());
      });
    }
    await expect.poll(() => metric(server.url, 'corkboard_streams_open'), { timeout: 10_000, interval: 100 }).toBe(0);
    // The gauge says 0 also while some of the 40 requests are still being read (a loaded machine serves the metric
    // first): their seats come back once the server sees each client gone. So the user's two seats must come back
    // within the poll's time, not at once; a seat kept by a stream that never registered would fail it.
    await expect
      .poll(
        async () => {
          const streams = [await openSse(server.url, '/posts', { token: member.token }), await openSse(server.url, '/posts', { token: member.token })];
          for (const stream of streams) stream.close();
          return streams.map((s) => s.status);
        },
        { timeout: 10_000, interval: 500 },
      )
      .toEqual([200, 200]);
    await expect.poll(() => metric(server.url, 'corkboard_streams_open'), { timeout: 10_000, interval: 100 }).toBe(0);
  });
});

const WAKEUPS: Array<{ through: string; env: Record<string, string> }> = [
  { through: 'PostgreSQL LISTEN/NOTIFY', env: {} },
  { through: 'Redis pub/sub (REDIS_URL)', env: { REDIS_URL: 'redis://127.0.0.1:6379', REDIS_KEY_PREFIX: `corkboard-sse-${process.pid}:` } },
  // REDIS_URL set but nothing listening there: streams are still served, and still within a second.
  { through: 'the fallback while Redis is unreachable', env: { REDIS_URL: 'redis://127.0.0.1:6390', REDIS_KEY_PREFIX: `corkboard-sse-${process.pid}:` } },
];

describe.skipIf(backend !== 'postgres').each(WAKEUPS)('event streams across two processes, through $through', ({ env }) => {
  const own = ownServers(2, env);
  let a: ServerProcess;
  let b: ServerProcess;
  beforeAll(() => {
    [a, b] = own.servers as [ServerProcess, ServerProcess];
  });

  it('a post written through one process reaches a stream held by the other within a second', async () => {
    const author = await signUp(a.url, 'xp_author');
    const stream = await openSse(b.url, '/posts');
    // Well past the first: the other process's wake-up connection is in place by then.
    await new Promise((r) => setTimeout(r, 300));
    for (let i = 0; i < 3; i++) {
      // Within a second of the commit (CONTRACT §7): timed from the 201, which is sent once the write has committed.
      const created = await post(a.url, author);
      const committed = Date.now();
      await stream.next(isPost('post.created', created.id), 1000);
      expect(Date.now() - committed).toBeLessThan(1000);
    }
    stream.close();
  });

  it.runIf(env.REDIS_URL === undefined)('still within a second while the LISTEN connection is lost and reconnecting', async () => {
    const author = await signUp(a.url, 'xp_lost_listen');
    const stream = await openSse(b.url, '/posts');
    await new Promise((r) => setTimeout(r, 300));
    const handle = openDatabase(own.databaseUrl);
    try {
      for (let i = 0; i < 3; i++) {
        // Both processes' LISTEN sessions end (as on a failover or an idle-session timeout); each reconnects.
        const { rows } = await sql<{ n: number }>`
          select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
          where datname = current_database() and query ilike 'listen %' and pid <> pg_backend_pid()`.execute(handle.db);
        expect(rows[0]!.n).toBeGreaterThan(0);
        const created = await post(a.url, author);
        const committed = Date.now();
        await stream.next(isPost('post.created', created.id), 1000);
        expect(Date.now() - committed).toBeLessThan(1000);
        await new Promise((r) => setTimeout(r, 1500)); // reconnected before the next round
      }
    } finally {
      await handle.close();
      stream.close();
    }
  }, 30_000);
});

// Two processes need PostgreSQL; the per-user count is shared through Redis, as the rate limits are.
describe.skipIf(backend !== 'postgres')('STREAM_MAX_PER_USER across two processes sharing REDIS_URL', () => {
  const prefix = `corkboard-seats-e2e-${process.pid}-${Date.now()}:`;
  const own = ownServers(2, { REDIS_URL: 'redis://127.0.0.1:6379', REDIS_KEY_PREFIX: prefix, STREAM_MAX_PER_USER: '2' });
  let a: ServerProcess;
  let b: ServerProcess;
  beforeAll(() => {
    [a, b] = own.servers as [ServerProcess, ServerProcess];
  });

  it('counts a user’s streams on both processes together, and a closed stream frees a place on either', async () => {
    const member = await signUp(a.url, 'seats_member');
    const first = await openSse(a.url, '/posts', { token: member.token });
    const second = await openSse(b.url, '/posts', { token: member.token });
    expect([first.status, second.status]).toEqual([200, 200]);
    for (const server of [a, b]) {
      const over = await openSse(server.url, '/posts', { token: member.token });
      await over.ended();
      expect(over.status).toBe(429);
      expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);
    }
    // Another member and anonymous readers are not held back by this one's streams.
    const other = await signUp(b.url, 'seats_other');
    const others = [await openSse(b.url, '/posts', { token: other.token }), await openSse(a.url, '/posts')];
    expect(others.map((s) => s.status)).toEqual([200, 200]);

    // A HEAD is checked against the same count, and holds no seat.
    const head = () => request(b.url, 'HEAD', '/posts', { token: member.token, headers: { accept: 'text/event-stream' } });
    expect((await head()).status).toBe(429);

    // The stream on process a closes: process b takes the place it freed.
    first.close();
    await expect.poll(() => metric(a.url, 'corkboard_streams_open'), { timeout: 10_000, interval: 100 }).toBe(1);
    expect((await head()).status).toBe(200);
    expect((await head()).status).toBe(200);
    const third = await openSse(b.url, '/posts', { token: member.token });
    expect(third.status).toBe(200);
    for (const s of [second, third, ...others]) s.close();
  });
});

/** A HEAD asking for a stream: checked against the limits as a GET is, and holding no seat. */
function headStream(base: string, options: { headers?: Record<string, string>; localAddress?: string } = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}/posts`, {
      method: 'HEAD',
      agent: false,
      ...(options.localAddress ? { localAddress: options.localAddress } : {}),
      headers: { accept: 'text/event-stream', ...options.headers },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.end();
  });
}

/** Asks for a stream that the server should refuse: its status, Retry-After and problem detail (opened: closed at once). */
async function refused(...args: Parameters<typeof openSse>) {
  const stream = await openSse(...args);
  if (stream.status === 200) {
    stream.close();
    return { status: 200 };
  }
  await stream.ended();
  return { status: stream.status, retryAfter: Number(stream.headers['retry-after']), detail: (JSON.parse(stream.body) as { detail: string }).detail };
}

describe('event streams without a token: STREAM_MAX_PER_USER per client address', () => {
  const own = ownServer({ STREAM_MAX_PER_USER: '2' });

  it('the third from one address is 429 whatever X-Forwarded-For says; another address, a signed-in user and a closed stream’s seat are not held back', async () => {
    const { server } = own;
    const held = [await openSse(server.url, '/posts'), await openSse(server.url, '/posts')];
    expect(held.map((s) => s.status)).toEqual([200, 200]);
    // Without TRUST_PROXY the address is the peer's: headers naming another one give no fresh count.
    const spoofs: Array<Record<string, string>> = [
      {},
      { 'x-forwarded-for': '203.0.113.9' },
      { 'x-forwarded-for': '203.0.113.9, 198.51.100.4' },
      { forwarded: 'for=203.0.113.10', 'x-real-ip': '203.0.113.11' },
    ];
    for (const headers of spoofs) {
      expect(await refused(server.url, '/posts', { headers })).toEqual({ status: 429, retryAfter: 5, detail: 'At most 2 event streams per client address without a token' });
    }
    expect(await headStream(server.url)).toBe(429);
    // Another address has a count of its own.
    const elsewhere = await openSse(server.url, '/posts', { localAddress: '127.0.0.2' });
    expect(elsewhere.status).toBe(200);
    // A signed-in user at the same address is counted as the user.
    const member = await signUp(server.url, 'anon_limit_member');
    const mine = [await openSse(server.url, '/posts', { token: member.token }), await openSse(server.url, `/users/${member.id}/feed`, { token: member.token })];
    expect(mine.map((s) => s.status)).toEqual([200, 200]);

    // A closed stream gives its seat back (the refusals and the HEAD held none), and only one.
    held[0]!.close();
    await expect.poll(() => headStream(server.url), { timeout: 10_000, interval: 100 }).toBe(200);
    held[0] = await openSse(server.url, '/posts');
    expect(held[0].status).toBe(200);
    expect((await refused(server.url, '/posts')).status).toBe(429);
    for (const stream of [...held, elsewhere, ...mine]) stream.close();
  });
});

describe('event streams without a token behind a trusted proxy, and the part of STREAM_MAX they cannot take', () => {
  // TRUST_PROXY=1: the test client plays the proxy, and the last X-Forwarded-For entry is the client's address.
  const own = ownServer({ TRUST_PROXY: '1', STREAM_MAX_PER_USER: '2', STREAM_MAX: '10' });
  const via = (...chain: string[]) => ({ headers: { 'x-forwarded-for': chain.join(', ') } });
  // Each test starts with no stream open, whatever the one before it left.
  const opened: SseStream[] = [];
  const sse = async (...args: Parameters<typeof openSse>) => {
    const stream = await openSse(...args);
    opened.push(stream);
    return stream;
  };
  afterEach(async () => {
    for (const stream of opened.splice(0)) stream.close();
    await expect.poll(() => metric(own.server.url, 'corkboard_streams_open'), { timeout: 10_000, interval: 100 }).toBe(0);
  });

  it('counts the rightmost untrusted X-Forwarded-For entry, whatever the client puts before it; IPv6 by its /64', async () => {
    const { server } = own;
    const held = [await sse(server.url, '/posts', via('10.9.9.1', '198.51.100.1')), await sse(server.url, '/posts', via('10.9.9.2', '198.51.100.1'))];
    expect(held.map((s) => s.status)).toEqual([200, 200]);
    expect((await refused(server.url, '/posts', via('10.9.9.3', '198.51.100.1'))).status).toBe(429);
    expect((await refused(server.url, '/posts', via('198.51.100.1'))).status).toBe(429);
    held.push(await sse(server.url, '/posts', via('198.51.100.1', '198.51.100.2')));
    expect(held[2]!.status).toBe(200);
    held.push(await sse(server.url, '/posts', via('2001:db8:1:2::1')), await sse(server.url, '/posts', via('2001:db8:1:2::ffff')));
    expect(held.slice(3).map((s) => s.status)).toEqual([200, 200]);
    expect((await refused(server.url, '/posts', via('2001:db8:1:2:abcd::7'))).status).toBe(429);
    held.push(await sse(server.url, '/posts', via('2001:db8:1:3::1')));
    expect(held[5]!.status).toBe(200);
  });

  it('anonymous streams hold at most 9 of STREAM_MAX=10 (more: 503 with Retry-After); a signed-in user still opens the 10th', async () => {
    const { server } = own;
    const anonymous = [];
    for (let i = 0; i < 9; i++) anonymous.push(await sse(server.url, '/posts', via(`192.0.2.${Math.floor(i / 2) + 1}`)));
    expect(anonymous.map((s) => s.status)).toEqual(Array(9).fill(200));
    const tenth = await refused(server.url, '/posts', via('192.0.2.100'));
    expect(tenth).toEqual({ status: 503, retryAfter: 5, detail: 'Too many event streams without a token on this server; sign in, or retry later' });
    expect(await headStream(server.url, via('192.0.2.100'))).toBe(503);

    const member = await signUp(server.url, 'reserve_member');
    const signedIn = await sse(server.url, '/posts', { token: member.token });
    expect(signedIn.status).toBe(200);
    // Now STREAM_MAX itself is reached, for everyone.
    const full = await refused(server.url, '/posts', { token: member.token });
    expect([full.status, full.retryAfter]).toEqual([503, 5]);

    // An anonymous stream that closes gives its place back to anonymous streams.
    anonymous.shift()!.close();
    await expect.poll(() => headStream(server.url, via('192.0.2.100')), { timeout: 10_000, interval: 100 }).toBe(200);
    anonymous.push(await sse(server.url, '/posts', via('192.0.2.100')));
    expect(anonymous[8]!.status).toBe(200);
    expect((await refused(server.url, '/posts', via('192.0.2.101'))).status).toBe(503);
  });
});

describe.skipIf(backend !== 'postgres')('anonymous streams per client address across two processes sharing REDIS_URL', () => {
  const prefix = `corkboard-seats-anon-${process.pid}-${Date.now()}:`;
  const own = ownServers(2, { REDIS_URL: 'redis://127.0.0.1:6379', REDIS_KEY_PREFIX: prefix, STREAM_MAX_PER_USER: '2' });
  let a: ServerProcess;
  let b: ServerProcess;
  beforeAll(() => {
    [a, b] = own.servers as [ServerProcess, ServerProcess];
  });

  it('counts an address’s streams on both processes together, and a closed stream frees a place on either', async () => {
    const first = await openSse(a.url, '/posts');
    const second = await openSse(b.url, '/posts');
    expect([first.status, second.status]).toEqual([200, 200]);
    for (const server of [a, b]) expect(await refused(server.url, '/posts')).toMatchObject({ status: 429, retryAfter: 5 });
    // A signed-in user at that address, and another address, are counted apart.
    const member = await signUp(a.url, 'anon_seats_member');
    const others = [await openSse(b.url, '/posts', { token: member.token }), await openSse(a.url, '/posts', { localAddress: '127.0.0.2' })];
    expect(others.map((s) => s.status)).toEqual([200, 200]);

    first.close();
    await expect.poll(() => headStream(b.url), { timeout: 10_000, interval: 100 }).toBe(200);
    const third = await openSse(b.url, '/posts');
    expect(third.status).toBe(200);
    expect((await refused(a.url, '/posts')).status).toBe(429);
    for (const stream of [second, third, ...others]) stream.close();
  });
});
