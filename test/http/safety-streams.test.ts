import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { e2eDatabase, killLeftovers, request, startServer, type E2eDatabase, type ServerProcess } from '../helpers/server-process.js';
import { openSse, type SseEvent, type SseStream } from '../helpers/sse.js';

/**
 * Live streams under CONTRACT §9 against the built server: blocks both ways, mutes and suspensions decide what each
 * subscriber is sent, at the moment it is sent; a suspended member's stream closes with its revoked token.
 */

interface Member {
  id: number;
  token: string;
}

async function signUp(base: string, username: string): Promise<Member> {
  const password = `${username} password`;
  const created = await request(base, 'POST', '/users', { body: { username, password } });
  expect(created.status).toBe(201);
  const token = await request(base, 'POST', '/tokens', { body: { username, password } });
  expect(token.status).toBe(201);
  return { id: created.json<{ id: number }>().id, token: token.json<{ token: string }>().token };
}

async function post(base: string, author: Member, visibility = 'public'): Promise<number> {
  const res = await request(base, 'POST', `/users/${author.id}/posts`, { token: author.token, body: { title: 't', content: 'c', visibility } });
  expect(res.status).toBe(201);
  return res.json<{ id: number }>().id;
}

async function relate(base: string, by: Member, path: string, id: number, status = 201): Promise<void> {
  const res = await request(base, 'POST', `/users/${by.id}/${path}`, { token: by.token, body: { id } });
  expect(res.status, res.text).toBe(status);
}

const isCreated = (id: number) => (e: SseEvent) => e.event === 'post.created' && (JSON.parse(e.data) as { id: number }).id === id;
const created = (stream: SseStream) => stream.events.filter((e) => e.event === 'post.created').map((e) => (JSON.parse(e.data) as { id: number }).id);

describe('event streams and §9', () => {
  let db: E2eDatabase;
  let server: ServerProcess;
  let admin: Member;
  const open: SseStream[] = [];
  const sse = async (path: string, token?: string) => {
    const stream = await openSse(server.url, path, token ? { token } : {});
    expect(stream.status).toBe(200);
    open.push(stream);
    return stream;
  };

  beforeAll(async () => {
    db = await e2eDatabase();
    server = await startServer({
      databaseUrl: db.url,
      env: { STREAM_HEARTBEAT_SECONDS: '1', STREAM_AUTH_RECHECK_SECONDS: '1', ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'root password' },
    });
    const token = await request(server.url, 'POST', '/tokens', { body: { username: 'root', password: 'root password' } });
    admin = { id: token.json<{ userId: number }>().userId, token: token.json<{ token: string }>().token };
  }, 60_000);
  afterAll(async () => {
    for (const stream of open) stream.close();
    await server?.stop();
    await killLeftovers();
    await db?.drop();
  }, 60_000);

  it('sends nothing across a block (either way), nothing muted to the muter, nothing of a suspended author but to admins', async () => {
    const base = server.url;
    const author = await signUp(base, 'ss_author');
    const blocker = await signUp(base, 'ss_blocker');
    const blockedOne = await signUp(base, 'ss_blocked');
    const muter = await signUp(base, 'ss_muter');
    const fan = await signUp(base, 'ss_fan');
    const other = await signUp(base, 'ss_other');
    for (const follower of [muter, fan, blockedOne]) {
      const res = await request(base, 'POST', `/users/${author.id}/followers`, { token: follower.token, body: { id: follower.id } });
      expect(res.status).toBe(201);
    }
    await relate(base, blocker, 'blocks', author.id);
    await relate(base, author, 'blocks', blockedOne.id);
    await relate(base, muter, 'mutes', author.id);

    const streams = {
      blocker: await sse('/posts', blocker.token),
      blocked: await sse('/posts', blockedOne.token),
      muter: await sse('/posts', muter.token),
      muterFeed: await sse(`/users/${muter.id}/feed`, muter.token),
      fan: await sse('/posts', fan.token),
      fanFeed: await sse(`/users/${fan.id}/feed`, fan.token),
      admin: await sse('/posts', admin.token),
      anonymous: await sse('/posts'),
    };
    const authors = await post(base, author);
    const marker = await post(base, other);
    for (const stream of Object.values(streams)) if (stream !== streams.muterFeed && stream !== streams.fanFeed) await stream.next(isCreated(marker));
    await streams.fanFeed.next(isCreated(authors));
    expect(created(streams.blocker)).toEqual([marker]);
    expect(created(streams.blocked)).toEqual([marker]);
    expect(created(streams.muter)).toEqual([marker]);
    expect(created(streams.muterFeed)).toEqual([]);
    expect(created(streams.fan)).toEqual([authors, marker]);
    expect(created(streams.anonymous)).toEqual([authors, marker]);
    expect(created(streams.admin)).toEqual([authors, marker]);

    // Judged when sent: the mute lifted, the muter hears the author again.
    expect((await request(base, 'DELETE', `/users/${muter.id}/mutes/${author.id}`, { token: muter.token })).status).toBe(200);
    const afterMute = await post(base, author);
    await streams.muter.next(isCreated(afterMute));
    await streams.muterFeed.next(isCreated(afterMute));

    // The author's own stream closes once they are suspended (their token is revoked at once).
    const own = await sse('/posts', author.token);
    expect((await request(base, 'PUT', `/users/${author.id}/suspension`, { token: admin.token, body: { reason: 'spam' } })).status).toBe(200);
    await own.ended(10_000);
    // An admin's edit of a suspended author's post reaches admins only.
    const edited = await request(base, 'PUT', `/posts/${afterMute}`, { token: admin.token, body: { title: 'edited', content: 'c', visibility: 'public' } });
    expect(edited.status).toBe(200);
    const lastMarker = await post(base, other);
    for (const stream of [streams.fan, streams.anonymous, streams.admin]) await stream.next(isCreated(lastMarker));
    await streams.admin.next((e) => e.event === 'post.updated');
    expect(streams.fan.events.some((e) => e.event === 'post.updated')).toBe(false);
    expect(streams.anonymous.events.some((e) => e.event === 'post.updated')).toBe(false);
  });

  it("sends each subscriber the counters GET /posts/{id} shows it: a blocked party's reply and recommend left out, a suspended account's counted for admins, live and on replay", async () => {
    const base = server.url;
    const owner = await signUp(base, 'sc_owner');
    const blocker = await signUp(base, 'sc_blocker');
    const blockedOne = await signUp(base, 'sc_blocked');
    const gone = await signUp(base, 'sc_suspended');
    const member = await signUp(base, 'sc_member');
    const postId = await post(base, owner);
    for (const by of [blockedOne, gone]) {
      expect((await request(base, 'POST', `/posts/${postId}/replies`, { token: by.token, body: { content: 'hi' } })).status).toBe(201);
      expect((await request(base, 'POST', `/posts/${postId}/recommends`, { token: by.token, body: { id: by.id } })).status).toBe(201);
    }
    await relate(base, blocker, 'blocks', blockedOne.id);
    expect((await request(base, 'PUT', `/users/${gone.id}/suspension`, { token: admin.token, body: { reason: 'spam' } })).status).toBe(200);
    const counts = (post: { replyCount: number; recommendCount: number }) => [post.replyCount, post.recommendCount];
    const shown = async (token?: string) => counts((await request(base, 'GET', `/posts/${postId}`, token ? { token } : {})).json());
    const expected = { blocker: [0, 0], member: [1, 1], anonymous: [1, 1], admin: [2, 2] };
    expect({ blocker: await shown(blocker.token), member: await shown(member.token), anonymous: await shown(), admin: await shown(admin.token) }).toEqual(expected);

    const streams = { blocker: await sse('/posts', blocker.token), member: await sse('/posts', member.token), anonymous: await sse('/posts'), admin: await sse('/posts', admin.token) };
    // A point to resume from, before the edit.
    const marker = await post(base, member);
    const resumeAt = { blocker: (await streams.blocker.next(isCreated(marker))).id!, admin: (await streams.admin.next(isCreated(marker))).id! };
    const edited = await request(base, 'PUT', `/posts/${postId}`, { token: owner.token, body: { title: 'edited', content: 'c', visibility: 'public' } });
    expect(edited.status).toBe(200);
    const isUpdated = (e: SseEvent) => e.event === 'post.updated' && (JSON.parse(e.data) as { id: number }).id === postId;
    const live: Record<string, number[]> = {};
    for (const [name, stream] of Object.entries(streams)) live[name] = counts(JSON.parse((await stream.next(isUpdated)).data));
    expect(live).toEqual(expected);

    // Resumed from before the edit (Last-Event-ID), the replay judges the counters alike.
    const replayed: Record<string, number[]> = {};
    for (const [name, token] of [['blocker', blocker.token], ['admin', admin.token]] as const) {
      const stream = await openSse(base, '/posts', { token, lastEventId: resumeAt[name] });
      open.push(stream);
      replayed[name] = counts(JSON.parse((await stream.next(isUpdated)).data));
    }
    expect(replayed).toEqual({ blocker: expected.blocker, admin: expected.admin });
  });
});
