import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import {
  E2E_PUBLIC_URL,
  e2eDatabase,
  killLeftovers,
  request,
  startServer,
  type E2eDatabase,
  type HttpResponse,
  type ServerProcess,
} from '../helpers/server-process.js';
import { openSse, type SseEvent, type SseStream } from '../helpers/sse.js';

/**
 * CONTRACT §9 (blocks, mutes, suspensions) and §10 (notifications) across two server processes on one PostgreSQL
 * database: every write goes through process A and every read through process B, over real sockets. Whatever A
 * commits holds on B at once (single reads, collections, feeds, sign-in, tokens), and B's streams hear A's writes.
 * SQLite is one process's embedded file, so this applies to PostgreSQL only (and behind PgBouncer in that project).
 */

interface Member {
  id: number;
  username: string;
  password: string;
  token: string;
}

interface Notification {
  id: number;
  type: string;
  actorId: number;
  postId?: number;
}

const ADMIN = { username: 'xp_root', password: 'xp root password' };
/** The shortest re-check of an open stream's token that config.ts allows, so a suspended user's stream ends fast. */
const RECHECK_SECONDS = 1;

const ids = (res: HttpResponse) => res.json<Array<{ id: number }>>().map((item) => item.id);
const isPostCreated = (id: number) => (e: SseEvent) => e.event === 'post.created' && (JSON.parse(e.data) as { id: number }).id === id;
const postsCreated = (stream: SseStream) => stream.events.filter((e) => e.event === 'post.created').map((e) => (JSON.parse(e.data) as { id: number }).id);
const notificationOf = (e: SseEvent) => JSON.parse(e.data) as Notification;

describe.skipIf(backend !== 'postgres')('§9 and §10 across two server processes: written through A, read through B', () => {
  let db: E2eDatabase;
  let a: ServerProcess;
  let b: ServerProcess;
  let admin: Member;
  const streams: SseStream[] = [];

  beforeAll(async () => {
    db = await e2eDatabase();
    // The same configuration for both, as a deployment would have: both bootstrap the admin, one of them creates it.
    const env = { ADMIN_USERNAME: ADMIN.username, ADMIN_PASSWORD: ADMIN.password, STREAM_AUTH_RECHECK_SECONDS: String(RECHECK_SECONDS) };
    // Two processes migrating one database at once on a busy machine: more time to come up than the default.
    const start = () => startServer({ databaseUrl: db.url, env, timeoutMs: 60_000 });
    [a, b] = await Promise.all([start(), start()]);
    admin = await signIn(a, { id: 0, ...ADMIN, token: '' });
  }, 120_000);
  afterAll(async () => {
    for (const stream of streams) stream.close();
    const exits = await Promise.all([a?.stop(), b?.stop()]);
    await killLeftovers();
    await db?.drop();
    expect(exits).toEqual([
      { code: 0, signal: null },
      { code: 0, signal: null },
    ]);
  }, 120_000);

  async function signIn(server: ServerProcess, member: Member): Promise<Member> {
    const res = await request(server.url, 'POST', '/tokens', { body: { username: member.username, password: member.password } });
    expect(res.status, res.text).toBe(201);
    const { userId, token } = res.json<{ userId: number; token: string }>();
    return { ...member, id: userId, token };
  }

  async function signUp(username: string): Promise<Member> {
    const password = `${username} password`;
    const created = await request(a.url, 'POST', '/users', { body: { username, password } });
    expect(created.status, created.text).toBe(201);
    return signIn(a, { id: created.json<{ id: number }>().id, username, password, token: '' });
  }

  async function post(author: Member, content = 'some content'): Promise<number> {
    const res = await request(a.url, 'POST', `/users/${author.id}/posts`, { token: author.token, body: { title: 'a title', content, visibility: 'public' } });
    expect(res.status, res.text).toBe(201);
    return res.json<{ id: number }>().id;
  }

  async function follow(follower: Member, followee: Member): Promise<void> {
    const res = await request(a.url, 'POST', `/users/${followee.id}/followers`, { token: follower.token, body: { id: follower.id } });
    expect(res.status, res.text).toBe(201);
  }

  /** Opens a stream on `server` and checks that it is open (200). */
  async function sse(server: ServerProcess, path: string, token: string): Promise<SseStream> {
    const stream = await openSse(server.url, path, { token });
    expect(stream.status, stream.body).toBe(200);
    expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
    streams.push(stream);
    return stream;
  }

  /** Through B, anonymously: the status of GET of the relation `followerId` follows `followeeId` (404: there is none). */
  const followStatus = (followeeId: number, followerId: number) => request(b.url, 'GET', `/users/${followeeId}/followers/${followerId}`).then((r) => r.status);

  const notificationsOn = async (server: ServerProcess, recipient: Member, as = recipient) => {
    const res = await request(server.url, 'GET', `/users/${recipient.id}/notifications?limit=100`, { token: as.token });
    expect(res.status, res.text).toBe(200);
    return res.json<Notification[]>();
  };

  it('a block made through A holds on B at once: single reads, GET /posts, the feed, follows, notifications and streams', async () => {
    const blocker = await signUp('xb_blocker');
    const blocked = await signUp('xb_blocked');
    const third = await signUp('xb_third');
    await follow(blocked, blocker);
    await follow(blocker, blocked);
    await follow(third, blocker);
    const blockersPost = await post(blocker);
    const blockedsPost = await post(blocked, 'hello @XB_Blocker');

    // Before the block, through B: each sees the other's post everywhere, the follows and the mention are there.
    expect((await request(b.url, 'GET', `/posts/${blockersPost}`, { token: blocked.token })).status).toBe(200);
    expect((await request(b.url, 'GET', `/posts/${blockedsPost}`, { token: blocker.token })).status).toBe(200);
    expect(ids(await request(b.url, 'GET', '/posts?limit=100', { token: blocked.token }))).toContain(blockersPost);
    expect(ids(await request(b.url, 'GET', `/users/${blocked.id}/feed?limit=100`, { token: blocked.token }))).toContain(blockersPost);
    expect([await followStatus(blocker.id, blocked.id), await followStatus(blocked.id, blocker.id)]).toEqual([200, 200]);
    expect((await notificationsOn(b, blocker)).filter((n) => n.actorId === blocked.id).map((n) => n.type).sort()).toEqual(['follow', 'mention']);

    // Streams on B: one the blocked user opened before the block, one the third user holds.
    const blockedBefore = await sse(b, '/posts', blocked.token);
    const thirdStream = await sse(b, '/posts', third.token);

    const res = await request(a.url, 'POST', `/users/${blocker.id}/blocks`, { token: blocker.token, body: { id: blocked.id } });
    expect(res.status, res.text).toBe(201);
    expect(res.json()).toMatchObject({ id: blocked.id, username: 'xb_blocked' });
    expect(res.headers.get('location')).toBe(`${E2E_PUBLIC_URL}/users/${blocker.id}/blocks/${blocked.id}`);

    // At once on B, both ways: a single read answers as for a missing post, the collections and the feed leave it out.
    const hidden = await request(b.url, 'GET', `/posts/${blockersPost}`, { token: blocked.token });
    expect(hidden.status).toBe(404);
    expect(hidden.text).not.toContain('a title');
    expect((await request(b.url, 'GET', `/posts/${blockedsPost}`, { token: blocker.token })).status).toBe(404);
    expect(ids(await request(b.url, 'GET', '/posts?limit=100', { token: blocked.token }))).not.toContain(blockersPost);
    expect(ids(await request(b.url, 'GET', '/posts?limit=100', { token: blocker.token }))).not.toContain(blockedsPost);
    expect(ids(await request(b.url, 'GET', `/users/${blocked.id}/feed?limit=100`, { token: blocked.token }))).not.toContain(blockersPost);
    // Only the two are concerned: the third user and anonymous readers still see it on B.
    expect((await request(b.url, 'GET', `/posts/${blockersPost}`, { token: third.token })).status).toBe(200);
    expect(ids(await request(b.url, 'GET', '/posts?limit=100'))).toEqual(expect.arrayContaining([blockersPost, blockedsPost]));
    expect(ids(await request(b.url, 'GET', `/users/${third.id}/feed?limit=100`, { token: third.token }))).toContain(blockersPost);

    // The block itself reads through B, for its author only.
    const read = await request(b.url, 'GET', `/users/${blocker.id}/blocks/${blocked.id}`, { token: blocker.token });
    expect(read.status).toBe(200);
    expect(read.json()).toMatchObject({ id: blocked.id });
    expect((await request(b.url, 'GET', `/users/${blocker.id}/blocks/${blocked.id}`, { token: blocked.token })).status).toBe(404);

    // Following across it through B, either way: 403 with the /blocked problem type.
    for (const [follower, followee] of [
      [blocked, blocker],
      [blocker, blocked],
    ] as const) {
      const refused = await request(b.url, 'POST', `/users/${followee.id}/followers`, { token: follower.token, body: { id: follower.id } });
      expect(refused.status, refused.text).toBe(403);
      expect(refused.json<{ type: string }>().type).toMatch(/\/blocked$/);
    }
    // The follows went both ways with the block (and were not made again by the refused attempts), counters too.
    expect([await followStatus(blocker.id, blocked.id), await followStatus(blocked.id, blocker.id)]).toEqual([404, 404]);
    expect(ids(await request(b.url, 'GET', `/users/${blocker.id}/followers?limit=100`))).toEqual([third.id]);
    expect(ids(await request(b.url, 'GET', `/users/${blocker.id}/following?limit=100`))).toEqual([]);
    expect((await request(b.url, 'GET', `/users/${blocked.id}`)).json()).toMatchObject({ followerCount: 0, followingCount: 0 });
    // Notifications between the two, those from before the block included, are left out.
    expect((await notificationsOn(b, blocker)).filter((n) => n.actorId === blocked.id)).toEqual([]);

    // A stream opened on B after the block, too.
    const blockedAfter = await sse(b, '/posts', blocked.token);
    const newPost = await post(blocker);
    // The third user's stream on B hears it; then a marker post by the third user reaches every stream, after where
    // the blocker's post would have been: so the blocked user's streams, which have the marker, did not get it.
    await thirdStream.next(isPostCreated(newPost), 5000);
    const marker = await post(third);
    for (const stream of [thirdStream, blockedBefore, blockedAfter]) await stream.next(isPostCreated(marker), 5000);
    expect(postsCreated(thirdStream)).toEqual([newPost, marker]);
    expect(postsCreated(blockedBefore)).toEqual([marker]);
    expect(postsCreated(blockedAfter)).toEqual([marker]);
  });

  it('a mute made through A holds on B at once: the muter’s GET /posts, feed and stream leave the muted user out, reads by id work', async () => {
    const muter = await signUp('xm_muter');
    const muted = await signUp('xm_muted');
    const other = await signUp('xm_other');
    await follow(muter, muted);
    await follow(muter, other);
    const mutedPost = await post(muted, 'hello @xm_muter');
    expect(ids(await request(b.url, 'GET', '/posts?limit=100', { token: muter.token }))).toContain(mutedPost);
    expect((await notificationsOn(b, muter)).map((n) => [n.type, n.postId])).toEqual([['mention', mutedPost]]);
    expect(ids(await request(b.url, 'GET', `/users/${muter.id}/feed?limit=100`, { token: muter.token }))).toContain(mutedPost);
    const feedStream = await sse(b, `/users/${muter.id}/feed`, muter.token);

    const res = await request(a.url, 'POST', `/users/${muter.id}/mutes`, { token: muter.token, body: { id: muted.id } });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('location')).toBe(`${E2E_PUBLIC_URL}/users/${muter.id}/mutes/${muted.id}`);

    expect(ids(await request(b.url, 'GET', '/posts?limit=100', { token: muter.token }))).not.toContain(mutedPost);
    expect(ids(await request(b.url, 'GET', `/users/${muter.id}/feed?limit=100`, { token: muter.token }))).not.toContain(mutedPost);
    // Not filtered: the read by id, the muted user's own listing, the follow; and nobody else's view.
    const byId = await request(b.url, 'GET', `/posts/${mutedPost}`, { token: muter.token });
    expect(byId.status).toBe(200);
    expect(byId.json()).toMatchObject({ id: mutedPost, ownerId: muted.id });
    expect(ids(await request(b.url, 'GET', `/users/${muted.id}/posts?limit=100`, { token: muter.token }))).toContain(mutedPost);
    expect(await followStatus(muted.id, muter.id)).toBe(200);
    expect(ids(await request(b.url, 'GET', '/posts?limit=100', { token: other.token }))).toContain(mutedPost);
    // The muted user is not told.
    expect((await request(b.url, 'GET', `/users/${muter.id}/mutes/${muted.id}`, { token: muted.token })).status).toBe(404);

    // The muter's feed stream on B (opened before the mute) hears the other followee, not the muted one; and the
    // muted user's mention written after the mute notifies nobody (the one from before is not its concern here).
    const mentionAfter = await post(muted, 'hello again @xm_muter');
    const marker = await post(other);
    await feedStream.next(isPostCreated(marker), 5000);
    expect(postsCreated(feedStream)).toEqual([marker]);
    expect((await notificationsOn(b, muter)).map((n) => n.postId)).not.toContain(mentionAfter);
  });

  it('a suspension made through A holds on B at once: tokens, sign-in, visibility, open streams; lifting it restores visibility', async () => {
    const member = await signUp('xs_member');
    const other = await signUp('xs_other');
    const secondToken = (await signIn(b, member)).token;
    const suspendedPost = await post(member);
    const feed = (token: string) => request(b.url, 'GET', `/users/${member.id}/feed`, { token });
    expect([(await feed(member.token)).status, (await feed(secondToken)).status]).toEqual([200, 200]);
    expect((await request(b.url, 'GET', `/posts/${suspendedPost}`, { token: other.token })).status).toBe(200);
    // Streams the member holds on B (posts and notifications), and one of another member that must stay open.
    const postStream = await sse(b, '/posts', member.token);
    const notificationStream = await sse(b, `/users/${member.id}/notifications`, secondToken);
    const othersStream = await sse(b, '/posts', other.token);

    const res = await request(a.url, 'PUT', `/users/${member.id}/suspension`, { token: admin.token, body: { reason: 'spam' } });
    expect(res.status, res.text).toBe(200);
    expect(res.json()).toMatchObject({ userId: member.id, reason: 'spam' });
    const suspendedAt = Date.now();

    // Every token refused on B at once.
    for (const token of [member.token, secondToken]) {
      const refused = await feed(token);
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toMatch(/^Bearer/);
    }
    // Sign-in on B: the right password tells of the suspension, a wrong one does not.
    const right = await request(b.url, 'POST', '/tokens', { body: { username: member.username, password: member.password } });
    expect(right.status, right.text).toBe(403);
    expect(right.json<{ type: string }>().type).toMatch(/\/suspended$/);
    const wrong = await request(b.url, 'POST', '/tokens', { body: { username: member.username, password: 'not the password' } });
    expect(wrong.status).toBe(401);
    expect(wrong.text).not.toMatch(/suspend/i);

    // Hidden on B from everyone but admins.
    expect((await request(b.url, 'GET', `/posts/${suspendedPost}`, { token: other.token })).status).toBe(404);
    expect((await request(b.url, 'GET', `/posts/${suspendedPost}`)).status).toBe(404);
    expect(ids(await request(b.url, 'GET', '/posts?limit=100', { token: other.token }))).not.toContain(suspendedPost);
    expect((await request(b.url, 'GET', `/users/${member.id}`, { token: other.token })).status).toBe(404);
    const asAdmin = await request(b.url, 'GET', `/posts/${suspendedPost}`, { token: admin.token });
    expect(asAdmin.status).toBe(200);
    expect(asAdmin.json()).toMatchObject({ id: suspendedPost, ownerId: member.id });
    expect(ids(await request(b.url, 'GET', '/posts?limit=100', { token: admin.token }))).toContain(suspendedPost);
    expect((await request(b.url, 'GET', `/users/${member.id}/suspension`, { token: admin.token })).json()).toMatchObject({ userId: member.id, reason: 'spam' });

    // The member's streams on B end within 60 s (here, with a re-check every second, within a few seconds).
    await postStream.ended(15_000);
    await notificationStream.ended(15_000);
    expect(Date.now() - suspendedAt).toBeLessThan(60_000);
    expect(othersStream.isEnded()).toBe(false);

    // Lifted through A: visible on B again; the tokens stay revoked, a new sign-in works.
    const lifted = await request(a.url, 'DELETE', `/users/${member.id}/suspension`, { token: admin.token });
    expect(lifted.status, lifted.text).toBe(200);
    expect(lifted.json()).toEqual({ deleted: 1 });
    const back = await request(b.url, 'GET', `/posts/${suspendedPost}`, { token: other.token });
    expect(back.status).toBe(200);
    expect(back.json()).toMatchObject({ id: suspendedPost });
    expect((await request(b.url, 'GET', `/posts/${suspendedPost}`)).status).toBe(200);
    expect(ids(await request(b.url, 'GET', '/posts?limit=100', { token: other.token }))).toContain(suspendedPost);
    expect((await request(b.url, 'GET', `/users/${member.id}`)).status).toBe(200);
    expect((await request(b.url, 'GET', `/users/${member.id}/suspension`, { token: admin.token })).status).toBe(404);
    expect((await feed(member.token)).status).toBe(401);
    const again = await signIn(b, member);
    expect((await feed(again.token)).status).toBe(200);
  }, 60_000);

  it('notifications written through A: read on B, streamed on B within a second, removed on B when the cause is undone', async () => {
    const recipient = await signUp('xn_recipient');
    const actor = await signUp('xn_actor');
    expect(await notificationsOn(b, recipient)).toEqual([]);
    const stream = await sse(b, `/users/${recipient.id}/notifications`, recipient.token);
    // Well past the first poll of the log on B (see notifications.stream.ts): the stream is live by then.
    await new Promise((r) => setTimeout(r, 300));

    await follow(actor, recipient);
    const followed = Date.now(); // the 201 is sent once the follow (and its notification) has committed
    const followEvent = await stream.next((e) => e.event === 'notification.created' && notificationOf(e).type === 'follow', 1000);
    expect(Date.now() - followed).toBeLessThan(1000);
    const followNotification = notificationOf(followEvent);
    expect(followNotification).toMatchObject({ type: 'follow', actorId: actor.id });
    const listed = await notificationsOn(b, recipient);
    expect(listed).toEqual([expect.objectContaining({ id: followNotification.id, type: 'follow', actorId: actor.id })]);
    expect((await request(b.url, 'GET', `/users/${recipient.id}/notifications/${followNotification.id}`, { token: recipient.token })).status).toBe(200);

    const mentioning = await post(actor, 'what do you think, @XN_Recipient?');
    const mentioned = Date.now();
    const mentionEvent = await stream.next((e) => e.event === 'notification.created' && notificationOf(e).type === 'mention', 1000);
    expect(Date.now() - mentioned).toBeLessThan(1000);
    expect(notificationOf(mentionEvent)).toMatchObject({ type: 'mention', actorId: actor.id, postId: mentioning });

    const unfollowed = await request(a.url, 'DELETE', `/users/${recipient.id}/followers/${actor.id}`, { token: actor.token });
    expect(unfollowed.status, unfollowed.text).toBe(200);
    const remaining = await notificationsOn(b, recipient);
    expect(remaining.map((n) => n.type)).toEqual(['mention']);
    expect(remaining.map((n) => n.id)).not.toContain(followNotification.id);
    expect((await request(b.url, 'GET', `/users/${recipient.id}/notifications/${followNotification.id}`, { token: recipient.token })).status).toBe(404);
    const deleted = await stream.next((e) => e.event === 'notification.deleted', 5000);
    expect(JSON.parse(deleted.data)).toEqual({ id: followNotification.id });
  });
});
