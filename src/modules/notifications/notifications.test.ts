import type { FastifyInstance } from 'fastify';
import { describe, expect, it, onTestFinished } from 'vitest';
import { CompiledQuery, type Kysely } from 'kysely';
import { PUBLIC_URL, buildTestApp, call, testConfig, write } from '../../../test/helpers/build-test-app.js';
import { follow, nextPath, publish, unfollow, type PostJson } from '../../../test/helpers/api.js';
import { backend, sqlitePlan, storeBeforeMigration, workerDatabaseUrl } from '../../../test/helpers/database.js';
import { buildApp } from '../../app.js';
import { openStore } from '../../db/open.js';
import type { Store } from '../../db/store.js';
import type { Database } from '../../db/types.js';
import { createAdmin, signUp, type TestUser } from '../../../test/helpers/factories.js';
import { openSse } from '../../../test/helpers/sse.js';
import { createNotificationsRepository, visibleNotifications } from './notifications.repository.js';
import { mentionedNames } from './notifications.service.js';

const PROBLEM = 'application/problem+json; charset=utf-8';

interface NotificationJson {
  id: number;
  type: string;
  actorId: number;
  postId?: number;
  replyId?: number;
  createdAt: string;
  links: { rel: string; href: string; method: string }[];
}

/** The user's notifications (first page, or `query`), read with their own token unless another is given. */
async function notes(app: FastifyInstance, user: TestUser, query = '', token = user.token): Promise<NotificationJson[]> {
  const res = await call(app, 'GET', `/users/${user.id}/notifications${query}`, { token });
  if (res.statusCode !== 200) throw new Error(`notifications failed: ${res.statusCode} ${res.body}`);
  return res.json();
}

/** What a notification is, without its id and time: `type:actor[:post[:reply]]`. */
const gist = (n: NotificationJson) => [n.type, n.actorId, n.postId, n.replyId].filter((part) => part !== undefined).join(':');
const gists = async (app: FastifyInstance, user: TestUser) => (await notes(app, user)).map(gist);

/** Rows in the table for this recipient (whatever the read rule shows). */
const stored = (app: FastifyInstance, recipientId: number) =>
  app.db.selectFrom('notifications').select(['type', 'actor_id']).where('recipient_id', '=', recipientId).execute();

async function post(app: FastifyInstance, user: TestUser, body: { title: string; content: string; visibility?: string }): Promise<PostJson> {
  const res = await call(app, 'POST', `/users/${user.id}/posts`, { token: user.token, body });
  if (res.statusCode !== 201) throw new Error(`post failed: ${res.statusCode} ${res.body}`);
  return res.json();
}

async function edit(app: FastifyInstance, user: TestUser, id: number, body: { title: string; content: string; visibility: string }): Promise<void> {
  const res = await call(app, 'PUT', `/posts/${id}`, { token: user.token, body });
  if (res.statusCode !== 200) throw new Error(`edit failed: ${res.statusCode} ${res.body}`);
}

async function replyTo(app: FastifyInstance, user: TestUser, postId: number, content: string): Promise<{ id: number }> {
  const res = await call(app, 'POST', `/posts/${postId}/replies`, { token: user.token, body: { content } });
  if (res.statusCode !== 201) throw new Error(`reply failed: ${res.statusCode} ${res.body}`);
  return res.json();
}

async function recommend(app: FastifyInstance, user: TestUser, postId: number): Promise<void> {
  const res = await call(app, 'POST', `/posts/${postId}/recommends`, { token: user.token, body: { id: user.id } });
  if (res.statusCode !== 201) throw new Error(`recommend failed: ${res.statusCode} ${res.body}`);
}

describe('mentionedNames', () => {
  it.each([
    ['hi @ann', ['ann']],
    ['@Ann and @ANN and @ann', ['ann']],
    ['ann@example.com', []],
    ['x_@ann', []],
    ['(@ann), @bob! @carl.', ['ann', 'bob', 'carl']],
    ['@ab is too short, @a_name_of_thirty_three_characters too long', []],
    ['@ann_x is not @ann', ['ann_x', 'ann']],
    ['@@ann', ['ann']],
    ['é@ann', ['ann']],
  ])('%s', (text, expected) => {
    expect(mentionedNames(text)).toEqual(expected);
  });

  it('reads the title before the content, and never joins them into one name', () => {
    expect(mentionedNames('about @bob', '@ann')).toEqual(['bob', 'ann']);
    expect(mentionedNames('@an', 'n')).toEqual([]);
  });
});

describe('notifications', () => {
  it('follow: the followee is told, with self and actor links that answer 200; unfollow removes it', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    await follow(app, bob, ann);

    const res = await call(app, 'GET', `/users/${ann.id}/notifications`, { token: ann.token });
    expect(res.statusCode).toBe(200);
    const [note, ...rest] = res.json<NotificationJson[]>();
    expect(rest).toEqual([]);
    expect(note).toEqual({
      id: expect.any(Number),
      type: 'follow',
      actorId: bob.id,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      links: [
        { rel: 'self', href: `${PUBLIC_URL}/users/${ann.id}/notifications/${note!.id}`, method: 'GET' },
        { rel: 'actor', href: `${PUBLIC_URL}/users/${bob.id}`, method: 'GET' },
      ],
    });
    for (const link of note!.links) {
      expect((await call(app, 'GET', link.href.slice(PUBLIC_URL.length), { token: ann.token })).statusCode).toBe(200);
    }
    const one = await call(app, 'GET', `/users/${ann.id}/notifications/${note!.id}`, { token: ann.token });
    expect(one.json()).toEqual(note);
    expect(await gists(app, bob)).toEqual([]);

    await unfollow(app, bob, ann);
    expect(await gists(app, ann)).toEqual([]);
    expect(await stored(app, ann.id)).toEqual([]);
    expect((await call(app, 'GET', `/users/${ann.id}/notifications/${note!.id}`, { token: ann.token })).statusCode).toBe(404);
  });

  it('a write that is refused creates nothing: a second follow is a 409 and leaves one notification', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    await follow(app, bob, ann);
    const again = await call(app, 'POST', `/users/${ann.id}/followers`, { token: bob.token, body: { id: bob.id } });
    expect(again.statusCode).toBe(409);
    expect(await stored(app, ann.id)).toEqual([{ type: 'follow', actor_id: bob.id }]);
  });

  it('reply: the post owner is told with post and reply links; none for replying to oneself; deleting the reply removes it', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const p = await publish(app, ann, 'hello');
    const r = await replyTo(app, bob, p.id, 'nice');
    await replyTo(app, ann, p.id, 'thanks');

    const [note, ...rest] = await notes(app, ann);
    expect(rest).toEqual([]);
    expect(note).toMatchObject({ type: 'reply', actorId: bob.id, postId: p.id, replyId: r.id });
    expect(note!.links.slice(2)).toEqual([
      { rel: 'post', href: `${PUBLIC_URL}/posts/${p.id}`, method: 'GET' },
      { rel: 'reply', href: `${PUBLIC_URL}/posts/${p.id}/replies/${r.id}`, method: 'GET' },
    ]);
    for (const link of note!.links) {
      expect((await call(app, 'GET', link.href.slice(PUBLIC_URL.length), { token: ann.token })).statusCode).toBe(200);
    }
    expect(await gists(app, bob)).toEqual([]);

    expect((await call(app, 'DELETE', `/posts/${p.id}/replies/${r.id}`, { token: bob.token })).statusCode).toBe(200);
    expect(await gists(app, ann)).toEqual([]);
    expect(await stored(app, ann.id)).toEqual([]);
  });

  it('a reply that mentions the post owner is one reply, not two; others it mentions get a mention with the reply', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const carl = await signUp(app);
    const p = await publish(app, ann, 'hello');
    const r = await replyTo(app, bob, p.id, `@${ann.username} and @${carl.username.toUpperCase()} look, and @${bob.username} myself`);
    expect(await gists(app, ann)).toEqual([`reply:${bob.id}:${p.id}:${r.id}`]);
    expect(await gists(app, carl)).toEqual([`mention:${bob.id}:${p.id}:${r.id}`]);
    expect(await gists(app, bob)).toEqual([]);
  });

  it('recommend: the owner is told; withdrawing removes it; recommending one\'s own post tells nobody', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const p = await publish(app, ann, 'hello');
    await recommend(app, bob, p.id);
    await recommend(app, ann, p.id);
    expect(await gists(app, ann)).toEqual([`recommend:${bob.id}:${p.id}`]);
    expect((await call(app, 'DELETE', `/posts/${p.id}/recommends/${bob.id}`, { token: bob.token })).statusCode).toBe(200);
    expect(await gists(app, ann)).toEqual([]);
    expect(await stored(app, ann.id)).toEqual([]);
  });

  it('mention in a post: title or content, case-insensitive, each user once, never oneself, not in an address', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const carl = await signUp(app);
    const dora = await signUp(app);
    const p = await post(app, ann, {
      title: `hi @${bob.username.toUpperCase()}`,
      content: `@${bob.username} again, @${carl.username}; mail x${dora.username}@example.com or ${dora.username}@x, and @${ann.username}`,
    });
    expect(await gists(app, bob)).toEqual([`mention:${ann.id}:${p.id}`]);
    expect(await gists(app, carl)).toEqual([`mention:${ann.id}:${p.id}`]);
    expect(await gists(app, dora)).toEqual([]);
    expect(await gists(app, ann)).toEqual([]);
  });

  it('hostile text: a post of the longest content made of mentions is a 201 and notifies at most 20', async () => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const named = await signUp(app);
    let content = `@${named.username} `;
    for (let i = 0; content.length < 9990; i++) content += `@n${i.toString(36).padStart(3, '0')} `;
    const res = await call(app, 'POST', `/users/${author.id}/posts`, { token: author.token, body: { title: 't', content: content.slice(0, 10000) } });
    expect(res.statusCode).toBe(201);
    expect(await gists(app, named)).toEqual([`mention:${author.id}:${res.json().id}`]);
    const bad = await call(app, 'GET', `/users/${named.id}/notifications?types=follow%00`, { token: named.token });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().errors[0].field).toMatch(/types/);
  });

  it('the first 20 distinct names that name users notify; names of nobody do not count', async () => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const users: TestUser[] = [];
    for (let i = 0; i < 22; i++) users.push(await signUp(app));
    const names = ['@nobody_here_1', '@nobody_here_2', ...users.map((u) => `@${u.username}`)];
    const p = await post(app, author, { title: 'many', content: names.join(' ') });
    for (const [i, user] of users.entries()) {
      expect({ i, told: (await stored(app, user.id)).length }).toEqual({ i, told: i < 20 ? 1 : 0 });
    }
    // Written in the order named (one statement for all of them): their ids follow the text.
    const rows = await app.db.selectFrom('notifications').select('recipient_id').where('post_id', '=', p.id).orderBy('id').execute();
    expect(rows.map((row) => Number(row.recipient_id))).toEqual(users.slice(0, 20).map((u) => u.id));
    // The same within the limit (the names judged in the one statement, no lookup first).
    const few = await post(app, author, { title: 'few', content: users.slice(0, 20).reverse().map((u) => `@${u.username}`).join(' ') });
    const fewRows = await app.db.selectFrom('notifications').select('recipient_id').where('post_id', '=', few.id).orderBy('id').execute();
    expect(fewRows.map((row) => Number(row.recipient_id))).toEqual(users.slice(0, 20).reverse().map((u) => u.id));
  });

  it('none about a post the mentioned user may not see; a follower of a followers-only post is told', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const fan = await signUp(app);
    const stranger = await signUp(app);
    await follow(app, fan, ann);
    const text = `@${fan.username} @${stranger.username}`;
    await post(app, ann, { title: 'friends', content: text, visibility: 'followers' });
    await post(app, ann, { title: 'diary', content: text, visibility: 'private' });
    expect((await stored(app, fan.id)).map((r) => r.type)).toEqual(['mention']);
    expect(await stored(app, stranger.id)).toEqual([]);
    // Following later shows nothing: no notification was made.
    await follow(app, stranger, ann);
    expect(await gists(app, stranger)).toEqual([]);
  });

  it('an edit that adds a mention notifies, one that removes it removes it; a mention kept is not repeated', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const carl = await signUp(app);
    const p = await post(app, ann, { title: 't', content: `@${bob.username}` });
    const before = await notes(app, bob);
    await edit(app, ann, p.id, { title: 't', content: `@${bob.username} @${carl.username}`, visibility: 'public' });
    expect(await notes(app, bob)).toEqual(before);
    expect(await gists(app, carl)).toEqual([`mention:${ann.id}:${p.id}`]);
    await edit(app, ann, p.id, { title: 't', content: `@${carl.username}`, visibility: 'public' });
    expect(await stored(app, bob.id)).toEqual([]);
    expect(await gists(app, carl)).toEqual([`mention:${ann.id}:${p.id}`]);
  });

  it('a reply edit adds and removes its mentions', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const carl = await signUp(app);
    const p = await publish(app, ann, 'hello');
    const r = await replyTo(app, bob, p.id, 'plain');
    expect(await gists(app, carl)).toEqual([]);
    const put = (content: string) => call(app, 'PUT', `/posts/${p.id}/replies/${r.id}`, { token: bob.token, body: { content } });
    expect((await put(`cc @${carl.username}`)).statusCode).toBe(200);
    expect(await gists(app, carl)).toEqual([`mention:${bob.id}:${p.id}:${r.id}`]);
    expect((await put(`cc @${ann.username}`)).statusCode).toBe(200);
    expect(await stored(app, carl.id)).toEqual([]);
    // The owner mentioned in an edit still has the one reply.
    expect(await gists(app, ann)).toEqual([`reply:${bob.id}:${p.id}:${r.id}`]);
  });

  it('deleting a post removes every notification about it', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const carl = await signUp(app);
    const p = await post(app, ann, { title: 't', content: `@${carl.username}` });
    await replyTo(app, bob, p.id, `@${carl.username}`);
    await recommend(app, bob, p.id);
    expect((await stored(app, ann.id)).length).toBe(2);
    expect((await stored(app, carl.id)).length).toBe(2);
    expect((await call(app, 'DELETE', `/posts/${p.id}`, { token: ann.token })).statusCode).toBe(200);
    expect(await stored(app, ann.id)).toEqual([]);
    expect(await stored(app, carl.id)).toEqual([]);
  });

  it('a deleted account takes its notifications, as actor and as recipient', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const carl = await signUp(app);
    await follow(app, bob, ann);
    await follow(app, ann, bob);
    await follow(app, carl, ann);
    expect((await call(app, 'DELETE', `/users/${bob.id}`, { token: bob.token })).statusCode).toBe(200);
    expect(await gists(app, ann)).toEqual([`follow:${carl.id}`]);
    const left = await app.db.selectFrom('notifications').select(['recipient_id', 'actor_id']).execute();
    expect(left).toEqual([{ recipient_id: ann.id, actor_id: carl.id }]);
  });

  it('one about a post the recipient can no longer see is left out (404 by id, not counted) and shows again once visible', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    await follow(app, bob, ann);
    const p = await post(app, ann, { title: 't', content: `hi @${bob.username}`, visibility: 'followers' });
    const [note] = await notes(app, bob);
    const marker = async () => (await call(app, 'GET', `/users/${bob.id}/notifications/marker`, { token: bob.token })).json();
    expect(await marker()).toEqual({ lastReadId: 0, unreadCount: 1 });

    await unfollow(app, bob, ann);
    expect(await notes(app, bob)).toEqual([]);
    expect((await call(app, 'GET', `/users/${bob.id}/notifications/${note!.id}`, { token: bob.token })).statusCode).toBe(404);
    expect(await marker()).toEqual({ lastReadId: 0, unreadCount: 0 });
    await follow(app, bob, ann);
    expect(await notes(app, bob)).toEqual([note]);

    await edit(app, ann, p.id, { title: 't', content: `hi @${bob.username}`, visibility: 'private' });
    expect(await notes(app, bob)).toEqual([]);
    // An admin reading bob's notifications sees what bob may see, not what the admin may.
    const admin = await createAdmin(app);
    expect(await notes(app, bob, '', admin.token)).toEqual([]);
    await edit(app, ann, p.id, { title: 't', content: `hi @${bob.username}`, visibility: 'public' });
    expect(await notes(app, bob)).toEqual([note]);
    expect(await notes(app, bob, '', admin.token)).toEqual([note]);
  });

  it('pages newest first with Link next, every item once; types filters; an unknown type or a tampered cursor is a 400', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const fans: TestUser[] = [];
    for (let i = 0; i < 7; i++) {
      const fan = await signUp(app);
      await follow(app, fan, ann);
      fans.push(fan);
    }
    const p = await publish(app, ann, 'hello');
    await recommend(app, fans[0]!, p.id);
    const all = await notes(app, ann, '?limit=100');
    expect(all.map((n) => n.id)).toEqual([...all.map((n) => n.id)].sort((a, b) => b - a));
    expect(all.map(gist)).toEqual([`recommend:${fans[0]!.id}:${p.id}`, ...fans.map((f) => `follow:${f.id}`).reverse()]);

    const seen: number[] = [];
    let path: string | undefined = `/users/${ann.id}/notifications?limit=3`;
    let pages = 0;
    while (path) {
      const res = await call(app, 'GET', path, { token: ann.token });
      expect(res.statusCode).toBe(200);
      seen.push(...res.json<NotificationJson[]>().map((n) => n.id));
      path = nextPath(res.headers.link);
      pages++;
    }
    expect(pages).toBe(3);
    expect(seen).toEqual(all.map((n) => n.id));

    expect((await notes(app, ann, '?types=recommend,mention')).map(gist)).toEqual([`recommend:${fans[0]!.id}:${p.id}`]);
    expect((await notes(app, ann, '?types=follow&limit=2')).map(gist)).toEqual(fans.slice(5).map((f) => `follow:${f.id}`).reverse());
    for (const types of ['bogus', 'follow,bogus', '', 'follow,']) {
      const res = await call(app, 'GET', `/users/${ann.id}/notifications?types=${types}`, { token: ann.token });
      expect({ types, status: res.statusCode, type: res.headers['content-type'] }).toEqual({ types, status: 400, type: PROBLEM });
      expect(res.json().errors).toEqual([expect.objectContaining({ field: 'types' })]);
    }
    const first = await call(app, 'GET', `/users/${ann.id}/notifications?limit=3`, { token: ann.token });
    const cursor = new URL(/<([^>]+)>/.exec(String(first.headers.link))![1]!).searchParams.get('cursor')!;
    const tampered = `${Number(cursor.split('.')[0]) + 1}.${cursor.split('.')[1]}`;
    const bad = await call(app, 'GET', `/users/${ann.id}/notifications?cursor=${tampered}`, { token: ann.token });
    expect(bad.statusCode).toBe(400);
    expect((await call(app, 'GET', `/users/${ann.id}/notifications?limit=0`, { token: ann.token })).statusCode).toBe(400);
    expect((await call(app, 'GET', `/users/${ann.id}/notifications?page=2`, { token: ann.token })).statusCode).toBe(400);
  });

  it('who may read: self and admins; 401 without a token, 403 for another member, 404 for another user\'s notification id', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const admin = await createAdmin(app);
    await follow(app, bob, ann);
    await follow(app, ann, bob);
    const [annNote] = await notes(app, ann);
    const routes = [`/users/${ann.id}/notifications`, `/users/${ann.id}/notifications/${annNote!.id}`, `/users/${ann.id}/notifications/marker`];
    for (const url of routes) {
      expect({ url, status: (await call(app, 'GET', url)).statusCode }).toEqual({ url, status: 401 });
      expect({ url, status: (await call(app, 'GET', url, { token: bob.token })).statusCode }).toEqual({ url, status: 403 });
      expect({ url, status: (await call(app, 'GET', url, { token: admin.token })).statusCode }).toEqual({ url, status: 200 });
    }
    expect((await call(app, 'GET', `/users/${ann.id}/notifications/${annNote!.id}`, { token: admin.token })).json()).toEqual(annNote);
    // Ann's notification read through bob's path (his own): not his.
    expect((await call(app, 'GET', `/users/${bob.id}/notifications/${annNote!.id}`, { token: bob.token })).statusCode).toBe(404);
    expect((await call(app, 'GET', `/users/999999/notifications`, { token: admin.token })).statusCode).toBe(404);
    for (const id of ['abc', '007', '-1', '1.5', '99999999999999999999']) {
      expect({ id, status: (await call(app, 'GET', `/users/${ann.id}/notifications/${id}`, { token: ann.token })).statusCode }).toEqual({ id, status: 400 });
    }
    expect((await call(app, 'GET', `/users/${ann.id}/notifications/9223372036854775807`, { token: ann.token })).statusCode).toBe(404);
  });

  it('marker: starts at 0, moves forward only, counts unread; PUT is the user\'s own, validated', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const admin = await createAdmin(app);
    const fans: TestUser[] = [];
    for (let i = 0; i < 3; i++) {
      const fan = await signUp(app);
      await follow(app, fan, ann);
      fans.push(fan);
    }
    const ids = (await notes(app, ann)).map((n) => n.id).reverse();
    const url = `/users/${ann.id}/notifications/marker`;
    expect((await call(app, 'GET', url, { token: ann.token })).json()).toEqual({ lastReadId: 0, unreadCount: 3 });

    const put = (body: unknown, token = ann.token) => call(app, 'PUT', url, { token, body });
    const moved = await put({ lastReadId: ids[1] });
    expect(moved.statusCode).toBe(200);
    expect(moved.json()).toEqual({ lastReadId: ids[1], unreadCount: 1 });
    const back = await put({ lastReadId: ids[0], unreadCount: 3 });
    expect(back.statusCode).toBe(200);
    expect(back.json()).toEqual({ lastReadId: ids[1], unreadCount: 1 });
    expect((await call(app, 'GET', url, { token: admin.token })).json()).toEqual({ lastReadId: ids[1], unreadCount: 1 });
    const row = await app.db.selectFrom('notification_markers').select(['user_id', 'last_read_id']).execute();
    expect(row.map((r) => ({ user_id: Number(r.user_id), last_read_id: Number(r.last_read_id) }))).toEqual([{ user_id: ann.id, last_read_id: ids[1] }]);

    expect((await put({ lastReadId: ids[2] }, admin.token)).statusCode).toBe(403);
    expect((await put({ lastReadId: ids[2] }, fans[0]!.token)).statusCode).toBe(403);
    expect((await call(app, 'PUT', url, { body: { lastReadId: 1 } })).statusCode).toBe(401);
    for (const body of [{ lastReadId: -1 }, { lastReadId: 1.5 }, { lastReadId: '3' }, {}, { lastReadId: 1, extra: true }]) {
      const res = await put(body);
      expect({ body, status: res.statusCode }).toEqual({ body, status: 400 });
    }
    expect((await put({ lastReadId: -1 })).json().errors[0].field).toMatch(/lastReadId/);
    expect((await call(app, 'GET', url, { token: ann.token })).json()).toEqual({ lastReadId: ids[1], unreadCount: 1 });
    // Beyond every id: nothing unread.
    expect((await put({ lastReadId: 2 ** 53 - 1 })).json()).toEqual({ lastReadId: 2 ** 53 - 1, unreadCount: 0 });
  });

  it('the unread count is exact up to 1000, then 1000', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const add = (n: number) =>
      write(app, (db) => createNotificationsRepository(db).insert(Array.from({ length: n }, () => ({ recipient_id: ann.id, actor_id: bob.id, type: 'follow' as const }))));
    const count = async () => (await call(app, 'GET', `/users/${ann.id}/notifications/marker`, { token: ann.token })).json().unreadCount;
    await add(999);
    expect(await count()).toBe(999);
    await add(1);
    expect(await count()).toBe(1000);
    await add(5);
    expect(await count()).toBe(1000);
  });

  it.skipIf(backend !== 'sqlite')('a page and the unread count walk the (recipient_id, id) index, with no sort (SQLite plan)', async () => {
    const app = await buildTestApp();
    const member = { id: 5, role: 'member' as const };
    const page = visibleNotifications(app.db, member).select('notifications.id').where('notifications.id', '<', 100).orderBy('notifications.id', 'desc').limit(21);
    const unread = visibleNotifications(app.db, member).select('notifications.id').where('notifications.id', '>', 100).orderBy('notifications.id').limit(1001);
    for (const query of [page, unread]) {
      const plan = (await sqlitePlan(app.db, query)).join('\n');
      expect(plan).toMatch(/SEARCH notifications USING (COVERING )?INDEX notifications_recipient \(recipient_id=\? AND id[<>]\?\)/);
      expect(plan).not.toMatch(/TEMP B-TREE|SCAN notifications|MULTI-INDEX/);
    }
  });
});

describe('notifications across blocks, mutes and suspensions (CONTRACT §9, §10)', () => {
  const block = (app: FastifyInstance, by: TestUser, whom: TestUser) => call(app, 'POST', `/users/${by.id}/blocks`, { token: by.token, body: { id: whom.id } });
  const mute = (app: FastifyInstance, by: TestUser, whom: TestUser) => call(app, 'POST', `/users/${by.id}/mutes`, { token: by.token, body: { id: whom.id } });

  it('none from a user the recipient mutes: follow, reply, recommend and mention all stay silent; others still notify', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const cat = await signUp(app);
    const hers = await post(app, ann, { title: 'Ann writes', content: 'Hello' });
    expect((await mute(app, ann, bob)).statusCode).toBe(201);
    await follow(app, bob, ann);
    await replyTo(app, bob, hers.id, 'A reply');
    await recommend(app, bob, hers.id);
    await post(app, bob, { title: 'Hi', content: `hello @${ann.username}` });
    expect(await stored(app, ann.id)).toEqual([]);
    await follow(app, cat, ann);
    expect(await gists(app, ann)).toEqual([`follow:${cat.id}`]);
  });

  it('none across a block, either way, and those from before it are left out until it is lifted', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const hers = await post(app, ann, { title: 'Ann writes', content: 'Hello' });
    await recommend(app, bob, hers.id);
    expect(await gists(app, ann)).toEqual([`recommend:${bob.id}:${hers.id}`]);
    expect((await block(app, bob, ann)).statusCode).toBe(201);
    expect(await gists(app, ann)).toEqual([]);
    expect((await call(app, 'GET', `/users/${ann.id}/notifications/marker`, { token: ann.token })).json()).toEqual({ lastReadId: 0, unreadCount: 0 });
    // A mention across the block (bob names ann) creates nothing.
    await post(app, bob, { title: 'About ann', content: `@${ann.username} again` });
    expect((await stored(app, ann.id)).map((n) => n.type)).toEqual(['recommend']);
    expect((await call(app, 'DELETE', `/users/${bob.id}/blocks/${ann.id}`, { token: bob.token })).statusCode).toBe(200);
    expect(await gists(app, ann)).toEqual([`recommend:${bob.id}:${hers.id}`]);
  });

  it('an admin hears of no one across a block either: their own page, in no block and then in one, and the marker', async () => {
    // The page's prepared text is kept per kind of recipient: an admin's kind must still check blocks (rule 6),
    // although an admin sees every post.
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const bob = await signUp(app);
    await follow(app, bob, admin);
    expect(await gists(app, admin)).toEqual([`follow:${bob.id}`]);
    expect((await block(app, bob, admin)).statusCode).toBe(201);
    // The block ended bob's follow (and its notification); a mention from before the block stays out too.
    expect((await call(app, 'DELETE', `/users/${bob.id}/blocks/${admin.id}`, { token: bob.token })).statusCode).toBe(200);
    await post(app, bob, { title: 'Hi', content: `hello @${admin.username}` });
    expect((await gists(app, admin)).map((g) => g.split(':')[0])).toEqual(['mention']);
    expect((await block(app, admin, bob)).statusCode).toBe(201);
    expect(await gists(app, admin)).toEqual([]);
    expect((await call(app, 'GET', `/users/${admin.id}/notifications/marker`, { token: admin.token })).json()).toMatchObject({ unreadCount: 0 });
  });

  it('a suspended actor\'s notifications are left out, to the recipient and to an admin reading them, and show again once lifted', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const ann = await signUp(app);
    const bob = await signUp(app);
    await follow(app, bob, ann);
    expect(await gists(app, ann)).toEqual([`follow:${bob.id}`]);
    expect((await call(app, 'PUT', `/users/${bob.id}/suspension`, { token: admin.token, body: { reason: 'spam' } })).statusCode).toBe(200);
    expect(await gists(app, ann)).toEqual([]);
    expect(await notes(app, ann, '', admin.token)).toEqual([]);
    expect((await call(app, 'DELETE', `/users/${bob.id}/suspension`, { token: admin.token })).statusCode).toBe(200);
    expect(await gists(app, ann)).toEqual([`follow:${bob.id}`]);
  });

  // A reply or a recommend is about the recipient's own post, so the reads skip probing `posts` for it: the one thing
  // that can hide it is the recipient's own suspension (rule 2), which an admin reading their notifications sees.
  it('an admin reading a suspended user\'s notifications: those about the user\'s own posts are left out like the posts; a follow is not', async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const ann = await signUp(app);
    const bob = await signUp(app);
    const hers = await post(app, ann, { title: 'Ann writes', content: 'Hello' });
    await follow(app, bob, ann);
    await recommend(app, bob, hers.id);
    await replyTo(app, bob, hers.id, 'A reply');
    const all = await notes(app, ann, '', admin.token);
    expect(all.map((n) => n.type)).toEqual(['reply', 'recommend', 'follow']);
    expect((await call(app, 'PUT', `/users/${ann.id}/suspension`, { token: admin.token, body: { reason: 'spam' } })).statusCode).toBe(200);
    expect((await notes(app, ann, '', admin.token)).map((n) => n.type)).toEqual(['follow']);
    expect((await call(app, 'GET', `/users/${ann.id}/notifications/${all[1]!.id}`, { token: admin.token })).statusCode).toBe(404);
    expect((await call(app, 'GET', `/users/${ann.id}/notifications/marker`, { token: admin.token })).json()).toEqual({ lastReadId: 0, unreadCount: 1 });
    expect((await call(app, 'DELETE', `/users/${ann.id}/suspension`, { token: admin.token })).statusCode).toBe(200);
    expect((await notes(app, ann, '', admin.token)).map((n) => n.type)).toEqual(['reply', 'recommend', 'follow']);
  });
});

describe('notification streams (Accept: text/event-stream)', () => {
  /** The app listening on a real socket, and its base URL. */
  async function listening(overrides: Parameters<typeof buildTestApp>[0] = {}): Promise<{ app: FastifyInstance; base: string }> {
    const app = await buildTestApp(overrides);
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as { port: number };
    return { app, base: `http://127.0.0.1:${port}` };
  }

  it('streams notification.created (the notification as GET shows it) and notification.deleted, only the recipient\'s', async () => {
    const { app, base } = await listening();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const carl = await signUp(app);
    const stream = await openSse(base, `/users/${ann.id}/notifications`, { token: ann.token });
    onTestFinished(() => stream.close());
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toBe('text/event-stream');
    expect(stream.headers['cache-control']).toBe('no-store');
    expect(stream.retry).toBe(2000);

    await follow(app, carl, bob); // bob's, not ann's
    await follow(app, bob, ann);
    const created = await stream.next((e) => e.event === 'notification.created');
    const [note] = await notes(app, ann);
    expect(created.data).toBe((await call(app, 'GET', `/users/${ann.id}/notifications/${note!.id}`, { token: ann.token })).body);
    await unfollow(app, bob, ann);
    const deleted = await stream.next((e) => e.event === 'notification.deleted');
    expect(JSON.parse(deleted.data)).toEqual({ id: note!.id });
    expect(Number(deleted.id!.split('-')[0])).toBeGreaterThan(Number(created.id!.split('-')[0]));
    expect(stream.events.map((e) => e.event)).toEqual(['notification.created', 'notification.deleted']);
  });

  it('resumes after Last-Event-ID: in order, a notification made and removed meanwhile as nothing but its deletion, hidden ones never', async () => {
    const { app, base } = await listening();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const carl = await signUp(app);
    const dora = await signUp(app);
    const first = await openSse(base, `/users/${bob.id}/notifications`, { token: bob.token });
    await follow(app, ann, bob);
    const seen = await first.next((e) => e.event === 'notification.created');
    first.close();

    // While away: a follow made and undone, a follow that stays, and a mention whose post is then hidden from bob.
    await follow(app, dora, bob);
    await unfollow(app, dora, bob);
    await follow(app, carl, bob);
    const p = await post(app, ann, { title: 't', content: `@${bob.username}` });
    await edit(app, ann, p.id, { title: 't', content: `@${bob.username}`, visibility: 'private' });

    const resumed = await openSse(base, `/users/${bob.id}/notifications`, { token: bob.token, lastEventId: seen.id });
    onTestFinished(() => resumed.close());
    const carlsNote = (await notes(app, bob)).find((n) => n.actorId === carl.id)!;
    await resumed.next((e) => e.event === 'notification.created' && JSON.parse(e.data).id === carlsNote.id);
    // Live after the replay: a new follow arrives.
    await follow(app, ann, carl);
    const live = await signUp(app);
    await follow(app, live, bob);
    await resumed.next((e) => e.event === 'notification.created' && JSON.parse(e.data).actorId === live.id);
    const kinds = resumed.events.map((e) => `${e.event}:${JSON.parse(e.data).actorId ?? 'id'}`);
    expect(kinds).toEqual(['notification.deleted:id', `notification.created:${carl.id}`, `notification.created:${live.id}`]);
    // `<xid>.<id>-<tag>` on PostgreSQL, `<id>-<tag>` on SQLite (xid 0); increasing as (xid, id).
    for (const event of resumed.events) expect(event.id).toMatch(backend === 'postgres' ? /^[1-9][0-9]*\.[1-9][0-9]*-[0-9a-f]{12}$/ : /^[1-9][0-9]*-[0-9a-f]{12}$/);
    const order = (id: string) => {
      const [xid, n] = id.split('-')[0]!.includes('.') ? id.split('-')[0]!.split('.') : ['0', id.split('-')[0]!];
      return BigInt(xid!) * 2n ** 64n + BigInt(n!);
    };
    const ids = [seen.id!, ...resumed.events.map((e) => e.id!)].map(order);
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
  });

  it('an id it cannot resume from gets event: reset (with the id it goes on from); a malformed one is a 400', async () => {
    const { app, base } = await listening();
    const ann = await signUp(app);
    const bob = await signUp(app);
    await follow(app, bob, ann);
    const end = await app.db.selectFrom('notification_events').select(['xid', 'id', 'tag']).orderBy('xid', 'desc').orderBy('id', 'desc').executeTakeFirstOrThrow();
    const xid = String(end.xid) === '0' ? '' : `${String(end.xid)}.`;
    const here = `${xid}${Number(end.id)}-${end.tag}`;
    // Never issued; a known number with another tag (as after a restore); a bare number (no tag).
    for (const lastEventId of [`${xid}${Number(end.id) + 100}-${end.tag}`, `${xid}${Number(end.id)}-000000000000`, `${xid}${Number(end.id)}`]) {
      const stream = await openSse(base, `/users/${ann.id}/notifications`, { token: ann.token, lastEventId });
      onTestFinished(() => stream.close());
      expect(await stream.next((e) => e.event === 'reset')).toEqual({ id: here, event: 'reset', data: '{}' });
    }
    // The id of the last event, with its tag: resumable, no reset.
    const resumed = await openSse(base, `/users/${ann.id}/notifications`, { token: ann.token, lastEventId: here });
    onTestFinished(() => resumed.close());
    const carl = await signUp(app);
    await follow(app, carl, ann);
    expect((await resumed.next((e) => e.event !== 'reset')).event).toBe('notification.created');
    expect(resumed.events.map((e) => e.event)).toEqual(['notification.created']);
    const bad = await openSse(base, `/users/${ann.id}/notifications`, { token: ann.token, lastEventId: 'abc' });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body).errors[0].field).toBe('Last-Event-ID');
  });

  it('self and admins only; the per-user stream limit is shared with the post streams', async () => {
    const { app, base } = await listening({ streamMaxPerUser: 1 });
    const ann = await signUp(app);
    const bob = await signUp(app);
    const admin = await createAdmin(app);
    expect((await openSse(base, `/users/${ann.id}/notifications`)).status).toBe(401);
    expect((await openSse(base, `/users/${ann.id}/notifications`, { token: bob.token })).status).toBe(403);
    const watched = await openSse(base, `/users/${ann.id}/notifications`, { token: admin.token });
    onTestFinished(() => watched.close());
    expect(watched.status).toBe(200);
    await follow(app, bob, ann);
    expect(JSON.parse((await watched.next((e) => e.event === 'notification.created')).data).actorId).toBe(bob.id);

    const feed = await openSse(base, `/users/${ann.id}/feed`, { token: ann.token });
    onTestFinished(() => feed.close());
    expect(feed.status).toBe(200);
    const refused = await openSse(base, `/users/${ann.id}/notifications`, { token: ann.token });
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBeDefined();
  });

  it('a stream whose token is revoked is closed', async () => {
    const { app, base } = await listening({ streamAuthRecheckSeconds: 1 });
    const ann = await signUp(app);
    const stream = await openSse(base, `/users/${ann.id}/notifications`, { token: ann.token });
    onTestFinished(() => stream.close());
    expect(stream.status).toBe(200);
    const tokenId = (await app.db.selectFrom('tokens').select('id').where('user_id', '=', ann.id).executeTakeFirstOrThrow()).id;
    await write(app, (db) => db.deleteFrom('tokens').where('id', '=', tokenId).execute());
    await stream.ended(5000);
  });

  // Issue 45: every insert or delete of a notification used to bump the one row of `notification_position`, locked
  // until its commit, so a second writer, for any user, waited for the first. Now nothing shared is locked: the second
  // commits while the first is open, and streams hold its event back until the first has ended (the horizon).
  it.runIf(backend === 'postgres')('PostgreSQL: notifications for two users commit with no lock wait between them; streams wait for the horizon', async () => {
    const { app, base } = await listening();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const carl = await signUp(app);
    const stream = await openSse(base, `/users/${bob.id}/notifications`, { token: bob.token });
    onTestFinished(() => stream.close());
    let release!: () => void;
    const open = new Promise<void>((resolve) => (release = resolve));
    let written!: () => void;
    const inside = new Promise<void>((resolve) => (written = resolve));
    const first = app.store.transaction(async (tx) => {
      await createNotificationsRepository(tx.db).insert([{ recipient_id: ann.id, actor_id: carl.id, type: 'follow' }]);
      written();
      await open;
    });
    await inside;
    // The service's own follow, notifying another user, while the first transaction holds its event uncommitted.
    const second = call(app, 'POST', `/users/${bob.id}/followers`, { token: carl.token, body: { id: carl.id } });
    const timeout = new Promise<'waited'>((resolve) => setTimeout(() => resolve('waited'), 5_000).unref());
    const answer = await Promise.race([second, timeout]);
    if (answer === 'waited') release();
    expect(answer).not.toBe('waited');
    if (answer === 'waited') return;
    expect(answer.statusCode).toBe(201);
    // Committed, but above the horizon (the first transaction, older, is still open): not sent yet, over several scans.
    expect((await app.db.selectFrom('notification_events').select('recipient_id').execute()).map((row) => Number(row.recipient_id))).toEqual([bob.id]);
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(stream.events.filter((e) => e.event.startsWith('notification.'))).toEqual([]);
    release();
    await first;
    const event = await stream.next((e) => e.event === 'notification.created');
    expect(JSON.parse(event.data)).toMatchObject({ type: 'follow', actorId: carl.id });
    // Both in the log in (xid, id) order: the first transaction's xid is the older, though it committed second.
    const log = await app.db.selectFrom('notification_events').select(['recipient_id']).orderBy('xid').orderBy('id').execute();
    expect(log.map((row) => Number(row.recipient_id))).toEqual([ann.id, bob.id]);
  });

  it.skipIf(backend !== 'postgres')('across processes: a notification written through one process reaches a stream held by another', async () => {
    const { app, base } = await listening();
    const { rows } = await app.db.executeQuery<{ schema: string }>(CompiledQuery.raw('select current_schema() as schema'));
    const url = await workerDatabaseUrl();
    const other = await buildApp(testConfig({ databaseUrl: url }), { store: openStore(url, { pgSchema: rows[0]!.schema, poolMax: 2 }), logger: false });
    await other.ready();
    onTestFinished(() => other.close());
    const ann = await signUp(app);
    const bob = await signUp(app);
    const stream = await openSse(base, `/users/${ann.id}/notifications`, { token: ann.token });
    onTestFinished(() => stream.close());
    const started = Date.now();
    await follow(other, bob, ann);
    const event = await stream.next((e) => e.event === 'notification.created');
    expect(Date.now() - started).toBeLessThan(1000);
    expect(JSON.parse(event.data)).toMatchObject({ type: 'follow', actorId: bob.id });
  });

  it('the log: each insert and delete (cascades included) in commit order without gaps; a refused write logs nothing', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    await follow(app, bob, ann);
    expect((await call(app, 'POST', `/users/${ann.id}/followers`, { token: bob.token, body: { id: bob.id } })).statusCode).toBe(409);
    const p = await publish(app, ann, 'hello');
    await replyTo(app, bob, p.id, 'hi');
    expect((await call(app, 'DELETE', `/posts/${p.id}`, { token: ann.token })).statusCode).toBe(200);
    const log = await app.db.selectFrom('notification_events').select(['id', 'kind', 'recipient_id']).orderBy('xid').orderBy('id').execute();
    expect(log.map((row) => ({ id: Number(row.id), kind: row.kind, recipient: Number(row.recipient_id) }))).toEqual([
      { id: 1, kind: 'created', recipient: ann.id },
      { id: 2, kind: 'created', recipient: ann.id },
      { id: 3, kind: 'deleted', recipient: ann.id },
    ]);
    // SQLite numbers from the position row; PostgreSQL leaves it alone (a sequence and the xid order the log).
    const position = Number((await app.db.selectFrom('notification_position').select('last_id').executeTakeFirstOrThrow()).last_id);
    expect(position).toBe(backend === 'postgres' ? 0 : 3);
  });

  it('the log of a post naming several users: one created event each, numbered on from the position without gaps', async () => {
    const app = await buildTestApp();
    const ann = await signUp(app);
    const bob = await signUp(app);
    const carl = await signUp(app);
    const dora = await signUp(app);
    await follow(app, bob, ann);
    await publish(app, ann, `@${bob.username} @${carl.username} @${dora.username}`);
    await follow(app, carl, ann);
    const log = await app.db.selectFrom('notification_events').select(['id', 'kind', 'notification_id', 'recipient_id', 'tag']).orderBy('xid').orderBy('id').execute();
    const rows = await app.db.selectFrom('notifications').select(['id', 'recipient_id']).orderBy('id').execute();
    expect(log.map((row) => Number(row.id))).toEqual([1, 2, 3, 4, 5]);
    expect(log.every((row) => row.kind === 'created')).toBe(true);
    expect(log.map((row) => [Number(row.notification_id), Number(row.recipient_id)])).toEqual(rows.map((row) => [Number(row.id), Number(row.recipient_id)]));
    expect(log.map((row) => Number(row.recipient_id))).toEqual([ann.id, bob.id, carl.id, dora.id, ann.id]);
    const end = await app.db.selectFrom('notification_position').select(['last_id', 'tag']).executeTakeFirstOrThrow();
    if (backend === 'sqlite') {
      expect(Number(end.last_id)).toBe(5);
      expect(end.tag).toBe(log[4]!.tag);
    } else {
      expect(Number(end.last_id)).toBe(0);
    }
  });
});

describe('the notification log migration (20261127T1700)', () => {
  /** A database at the schema before it, with two notifications for user 2 logged by the old trigger (ids 1, 2). */
  async function storeBefore(): Promise<Store> {
    const rows = async (db: Kysely<Database>) => {
      const at = new Date().toISOString();
      await db.insertInto('notifications').values([1, 3].map((actor) => ({ recipient_id: 2, actor_id: actor, type: 'follow' as const, post_id: null, reply_id: null, created_at: at }))).execute();
    };
    return storeBeforeMigration('20261127T1700_notification_event_xids', rows);
  }

  it('keeps the events already logged (their ids resume), and numbers new ones after them', async () => {
    const store = await storeBefore();
    const old = await store.db.selectFrom('notification_events').select(['id', 'tag']).orderBy('id').execute();
    expect(old.map((row) => Number(row.id))).toEqual([1, 2]);
    const app = await buildApp(testConfig(), { store, logger: false });
    onTestFinished(() => app.close());
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as { port: number };
    // Users 1 to 3 (the notifications above name ids 1 to 3), the recipient being user 2.
    const [ann, bob] = [await signUp(app), await signUp(app)];
    expect(bob.id).toBe(2);
    const kept = await app.db.selectFrom('notification_events').select(['xid', 'id', 'tag']).orderBy('xid').orderBy('id').execute();
    expect(kept.map((row) => [String(row.xid), Number(row.id), row.tag])).toEqual(old.map((row) => ['0', Number(row.id), row.tag]));
    // Resuming from the first old event: the second, then a new one, no reset.
    const stream = await openSse(`http://127.0.0.1:${port}`, `/users/${bob.id}/notifications`, { token: bob.token, lastEventId: `1-${old[0]!.tag}` });
    onTestFinished(() => stream.close());
    await follow(app, ann, bob);
    await stream.next((e) => e.event === 'notification.created' && JSON.parse(e.data).actorId === ann.id);
    const ids = stream.events.map((e) => e.id!);
    expect(stream.events.map((e) => e.event)).toEqual(['notification.created', 'notification.created']);
    expect(ids[0]).toBe(`2-${old[1]!.tag}`);
    expect(ids[1]).toMatch(backend === 'postgres' ? /^[1-9][0-9]*\.3-[0-9a-f]{12}$/ : /^3-[0-9a-f]{12}$/);
  });
});
