import { brotliDecompressSync } from 'node:zlib';
import { describe, expect, it, vi } from 'vitest';
import { parseEntityTags, versionTags } from '../src/shared/conditional.js';
import { follow, publish } from './helpers/api.js';
import { buildTestApp, call } from './helpers/build-test-app.js';
import { createAdmin, signUp } from './helpers/factories.js';

/** CONTRACT §6.1: ETag, Cache-Control, Vary, If-None-Match (304) and If-Match (412). */

/** A strong entity-tag: quoted, no W/, only the characters RFC 9110 §8.8.3 allows (the service sends no obs-text). */
const STRONG_TAG = /^"[\x21\x23-\x7e]+"$/;

describe('entity-tag lists', () => {
  it('parses *, lists, weak tags and empty elements; refuses anything else', () => {
    expect(parseEntityTags(' * ', 'If-Match')).toBe('*');
    expect(parseEntityTags('"a", W/"b" ,, "c,d"', 'If-Match')).toEqual([
      { weak: false, opaque: '"a"' },
      { weak: true, opaque: '"b"' },
      { weak: false, opaque: '"c,d"' },
    ]);
    for (const bad of ['', 'abc', '"a" "b"', '*, "a"', 'w/"a"', '"a', '"a"b', ',', '"a\\"b"', 'W/ "a"']) {
      expect(() => parseEntityTags(bad, 'If-None-Match'), bad).toThrow(/If-None-Match/);
    }
  });
});

describe('version tags', () => {
  it('join the version after a hash of the context: another schema or public URL, another tag', () => {
    const tags = versionTags('schema http://a.test');
    expect(tags(5, '2026-11-21T08:00:00.000Z', 0, 1)).toMatch(STRONG_TAG);
    expect(tags(5, '2026-11-21T08:00:00.000Z', 0, 1)).toBe(tags(5, '2026-11-21T08:00:00.000Z', 0, 1));
    expect(tags(5, '2026-11-21T08:00:00.000Z', 0, 1)).not.toBe(tags(5, '2026-11-21T08:00:00.000Z', 1, 0));
    expect(versionTags('schema http://b.test')(5, '2026-11-21T08:00:00.000Z', 0, 1)).not.toBe(tags(5, '2026-11-21T08:00:00.000Z', 0, 1));
  });

  it("a post's tag: the same to every caller who sees it; moved by a reply, a recommend and an edit; back when its body is", async () => {
    const app = await buildTestApp();
    const alice = await signUp(app);
    const bob = await signUp(app);
    const admin = await createAdmin(app);
    const post = await publish(app, alice, 'hello');
    const url = `/posts/${post.id}`;
    const read = async (token?: string) => {
      const res = await call(app, 'GET', url, token ? { token } : {});
      expect(res.statusCode).toBe(200);
      return { tag: res.headers.etag as string, body: res.body };
    };
    const first = await read();
    expect(first.tag).toMatch(STRONG_TAG);
    for (const token of [alice.token, bob.token, admin.token]) expect(await read(token)).toEqual(first);

    const replied = await call(app, 'POST', `${url}/replies`, { token: bob.token, body: { content: 'hi' } });
    const withReply = await read();
    expect(withReply.tag).not.toBe(first.tag);
    expect((await call(app, 'POST', `${url}/recommends`, { token: bob.token, body: { id: bob.id } })).statusCode).toBe(201);
    const recommended = await read();
    expect(recommended.tag).not.toBe(withReply.tag);
    // The reply and the recommend taken back: the same bytes as at first, so the same tag (and a 304 for it).
    expect((await call(app, 'DELETE', `${url}/replies/${replied.json().id}`, { token: bob.token })).statusCode).toBe(200);
    expect((await call(app, 'DELETE', `${url}/recommends/${bob.id}`, { token: bob.token })).statusCode).toBe(200);
    expect(await read()).toEqual(first);
    expect((await call(app, 'GET', url, { headers: { 'if-none-match': first.tag } })).statusCode).toBe(304);

    const edited = await call(app, 'PUT', url, { token: alice.token, body: { title: 'hello', content: 'hello content', visibility: 'public' } });
    expect(edited.statusCode).toBe(200);
    const after = await read();
    expect(after.tag).not.toBe(first.tag);
    expect(edited.headers.etag).toBe(after.tag);
    expect((await call(app, 'GET', url, { headers: { 'if-none-match': first.tag } })).statusCode).toBe(200);
  });
});

describe('GET: ETag, Cache-Control, Vary, If-None-Match', () => {
  it('tags single resources and pages; same bytes, same tag; a change changes it', async () => {
    const app = await buildTestApp();
    const alice = await signUp(app);
    const bob = await signUp(app);
    const post = await publish(app, alice, 'hello');
    await follow(app, bob, alice);
    expect((await call(app, 'POST', `/posts/${post.id}/recommends`, { token: bob.token, body: { id: bob.id } })).statusCode).toBe(201);
    await call(app, 'POST', '/boards', { token: alice.token, body: { title: 't', content: 'c' } });
    const urls = [
      `/users/${alice.id}`,
      `/posts/${post.id}`,
      '/posts',
      `/users/${alice.id}/posts`,
      '/users',
      '/boards/list',
      '/boards',
      '/boards/1',
      `/users/${alice.id}/followers`,
      `/users/${alice.id}/followers/${bob.id}`,
      `/users/${bob.id}/following`,
      `/posts/${post.id}/recommends`,
      `/posts/${post.id}/recommends/${bob.id}`,
      `/posts/${post.id}/replies`,
      `/users/${bob.id}/feed`,
    ];
    const before = new Map<string, string>();
    for (const url of urls) {
      const res = await call(app, 'GET', url, url.endsWith('/feed') ? { token: bob.token } : {});
      expect(res.statusCode, url).toBe(200);
      expect(res.headers.etag, url).toMatch(STRONG_TAG);
      expect(res.headers['cache-control'], url).toBe(url.endsWith('/feed') ? 'private, no-cache' : 'no-cache');
      // GET /posts and the feed also answer an event stream, by Accept (CONTRACT §7).
      const byAccept = url === '/posts' || url.endsWith('/feed');
      expect(res.headers.vary, url).toBe(byAccept ? 'Origin, Authorization, Accept, accept-encoding' : 'Origin, Authorization, accept-encoding');
      const again = await call(app, 'GET', url, url.endsWith('/feed') ? { token: bob.token } : {});
      expect(again.body).toBe(res.body);
      expect(again.headers.etag, url).toBe(res.headers.etag);
      before.set(url, res.headers.etag as string);
    }
    const replaced = await call(app, 'PUT', `/posts/${post.id}`, {
      token: alice.token,
      body: { title: 'changed', content: 'changed', visibility: 'public' },
    });
    expect(replaced.statusCode).toBe(200);
    for (const url of [`/posts/${post.id}`, '/posts', `/users/${alice.id}/posts`]) {
      expect((await call(app, 'GET', url)).headers.etag, url).not.toBe(before.get(url));
    }
    // A counter that moves changes the user's tag.
    await publish(app, alice, 'second');
    expect((await call(app, 'GET', `/users/${alice.id}`)).headers.etag).not.toBe(before.get(`/users/${alice.id}`));
  });

  it('with a token: private, no-cache; caller-dependent bodies get different tags', async () => {
    const app = await buildTestApp();
    const alice = await signUp(app);
    await publish(app, alice, 'secret', 'private');
    const anonymous = await call(app, 'GET', `/users/${alice.id}`);
    const self = await call(app, 'GET', `/users/${alice.id}`, { token: alice.token });
    expect(self.headers['cache-control']).toBe('private, no-cache');
    expect(anonymous.json().postCount).toBe(0);
    expect(self.json().postCount).toBe(1);
    expect(self.headers.etag).not.toBe(anonymous.headers.etag);
    // Not only the 200: a 404 to a GET carries the caching fields too.
    const missing = await call(app, 'GET', '/posts/999999', { token: alice.token });
    expect(missing.statusCode).toBe(404);
    expect(missing.headers['cache-control']).toBe('private, no-cache');
    expect(missing.headers.vary).toMatch(/Authorization/);
  });

  it('If-None-Match: weak comparison, lists and * answer 304 without a body; others 200', async () => {
    const app = await buildTestApp();
    const alice = await signUp(app);
    const post = await publish(app, alice, 'hello');
    const url = `/posts/${post.id}`;
    const first = await call(app, 'GET', url);
    const tag = first.headers.etag as string;
    for (const value of [tag, `W/${tag}`, `"nope", ${tag}`, '*']) {
      for (const method of ['GET', 'HEAD'] as const) {
        const res = await call(app, method, url, { headers: { 'if-none-match': value, 'x-request-id': 'req-304' } });
        expect(res.statusCode, `${method} ${value}`).toBe(304);
        expect(res.body).toBe('');
        expect(res.headers.etag).toBe(tag);
        expect(res.headers['cache-control']).toBe('no-cache');
        expect(res.headers.vary).toMatch(/Authorization/);
        expect(res.headers['x-request-id']).toBe('req-304');
        expect(res.headers['content-type']).toBeUndefined();
        expect(res.headers['content-encoding']).toBeUndefined();
      }
    }
    const stale = await call(app, 'GET', url, { headers: { 'if-none-match': '"stale", W/"other"' } });
    expect(stale.statusCode).toBe(200);
    expect(stale.json()).toEqual(first.json());
    const head = await call(app, 'HEAD', url);
    expect(head.statusCode).toBe(200);
    expect(head.headers.etag).toBe(tag);
  });

  // docs/DESIGN.md, "Choices where the contract is silent": a request is counted when it arrives, before anything tells
  // whether it will be a 304, so a 304 draws on the quota like a 200, and If-None-Match does not get past a 429.
  it('a 304 counts against the rate limit like a 200', async () => {
    const app = await buildTestApp({ rateLimit: { enabled: true, max: 3, authMax: 100, windowMs: 60_000 } });
    const first = await call(app, 'GET', '/users');
    expect(first.headers.ratelimit).toMatch(/^"default";r=2;t=\d+$/);
    const headers = { 'if-none-match': String(first.headers.etag) };
    const second = await call(app, 'GET', '/users', { headers });
    expect(second.statusCode).toBe(304);
    expect(second.headers.ratelimit).toMatch(/^"default";r=1;t=\d+$/);
    expect((await call(app, 'GET', '/users', { headers })).statusCode).toBe(304);
    const over = await call(app, 'GET', '/users', { headers });
    expect(over.statusCode).toBe(429);
    expect(over.headers['retry-after']).toMatch(/^\d+$/);
  });

  it('the tag is the identity body’s: the same for br, gzip and plain; a 304 is never compressed', async () => {
    const app = await buildTestApp();
    const alice = await signUp(app);
    for (let i = 0; i < 8; i++) await publish(app, alice, `a title long enough to pass the threshold ${i}`);
    const plain = await call(app, 'GET', '/posts');
    const br = await app.inject({ method: 'GET', url: '/posts', headers: { 'accept-encoding': 'br' } });
    const gzip = await app.inject({ method: 'GET', url: '/posts', headers: { 'accept-encoding': 'gzip' } });
    expect(br.headers['content-encoding']).toBe('br');
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(brotliDecompressSync(br.rawPayload).toString()).toBe(plain.body);
    expect(br.headers.etag).toBe(plain.headers.etag);
    expect(gzip.headers.etag).toBe(plain.headers.etag);
    expect(br.headers.vary).toBe('Origin, Authorization, Accept, accept-encoding');
    for (const method of ['GET', 'HEAD'] as const) {
      const res = await app.inject({
        method,
        url: '/posts',
        headers: { 'accept-encoding': 'br, gzip', 'if-none-match': plain.headers.etag as string },
      });
      expect(res.statusCode).toBe(304);
      expect(res.rawPayload.length).toBe(0);
      expect(res.headers['content-encoding']).toBeUndefined();
      // RFC 9110 §8.6: a 304 may repeat only the 200's Content-Length; it sends none.
      expect(res.headers['content-length']).toBeUndefined();
    }
  });

  it('under /boards: tags, 304 without an envelope, malformed If-None-Match is a 400 envelope', async () => {
    const app = await buildTestApp();
    const alice = await signUp(app);
    const created = await call(app, 'POST', '/boards', { token: alice.token, body: { title: 't', content: 'c' } });
    const id = created.json().data.id;
    for (const url of [`/boards/${id}`, '/boards/list', '/boards']) {
      const res = await call(app, 'GET', url);
      expect(res.headers.etag).toMatch(STRONG_TAG);
      const not = await call(app, 'GET', url, { headers: { 'if-none-match': res.headers.etag as string } });
      expect(not.statusCode).toBe(304);
      expect(not.body).toBe('');
    }
    const bad = await call(app, 'GET', `/boards/${id}`, { headers: { 'if-none-match': 'unquoted' } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: '400', data: null, errors: [{ field: 'If-None-Match' }] });
    const badProblem = await call(app, 'GET', '/posts', { headers: { 'if-none-match': 'W/unquoted' } });
    expect(badProblem.statusCode).toBe(400);
    expect(badProblem.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(badProblem.json().errors).toEqual([expect.objectContaining({ field: 'If-None-Match' })]);
  });
});

describe('201 of a create', () => {
  it('carries the ETag a GET of its Location by the same caller shows, and a replay carries it again', async () => {
    const app = await buildTestApp();
    const alice = await signUp(app);
    const bob = await signUp(app);
    // Bob's view of himself counts his private post, everyone else's does not: a user's tag is the caller's.
    await publish(app, bob, 'only mine', 'private');
    const post = await publish(app, alice, 'hello');
    const creates: Array<[string, string, unknown, string | undefined]> = [
      ['sign-up', '/users', { username: 'carol_tags', password: 'long enough password' }, undefined],
      ['post', `/users/${bob.id}/posts`, { title: 'new', content: 'new content' }, bob.token],
      ['reply', `/posts/${post.id}/replies`, { content: 'a reply' }, bob.token],
      ['recommend', `/posts/${post.id}/recommends`, { id: bob.id }, bob.token],
      ['follow', `/users/${alice.id}/followers`, { id: bob.id }, bob.token],
      ['board', '/boards', { title: 'notice', content: 'board content' }, bob.token],
    ];
    for (const [what, url, body, token] of creates) {
      const headers = { 'idempotency-key': `tag-${what}` };
      const created = await call(app, 'POST', url, { token, body, headers });
      expect(created.statusCode, what).toBe(201);
      expect(created.headers.etag, what).toMatch(STRONG_TAG);
      const location = new URL(created.headers.location as string).pathname;
      const read = await call(app, 'GET', location, token ? { token } : {});
      expect(read.statusCode, what).toBe(200);
      expect(read.headers.etag, what).toBe(created.headers.etag);
      const replay = await call(app, 'POST', url, { token, body, headers });
      expect(replay.headers['idempotent-replayed'], what).toBe('true');
      expect(replay.headers.etag, what).toBe(created.headers.etag);
    }
  });
});

describe('If-Match on PUT and DELETE', () => {
  it('posts: the ETag a GET returns is accepted, a stale one is 412 and nothing changes; the PUT answers the new ETag', async () => {
    const app = await buildTestApp();
    const alice = await signUp(app);
    const post = await publish(app, alice, 'hello');
    const url = `/posts/${post.id}`;
    const tag = (await call(app, 'GET', url, { token: alice.token })).headers.etag as string;
    const body = { title: 'v2', content: 'v2', visibility: 'public' };
    const ok = await call(app, 'PUT', url, { token: alice.token, body, headers: { 'if-match': `"other", ${tag}` } });
    expect(ok.statusCode).toBe(200);
    const after = await call(app, 'GET', url, { token: alice.token });
    expect(ok.headers.etag).toBe(after.headers.etag);
    expect(ok.headers.etag).not.toBe(tag);

    const stale = await call(app, 'PUT', url, { token: alice.token, body: { ...body, title: 'v3' }, headers: { 'if-match': tag } });
    expect(stale.statusCode).toBe(412);
    expect(stale.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(stale.json()).toMatchObject({ status: 412, errors: [{ field: 'If-Match' }] });
    const row = await app.db.selectFrom('posts').select(['title', 'updated_at']).where('id', '=', post.id).executeTakeFirstOrThrow();
    expect(row.title).toBe('v2');
    // A weak tag never matches by strong comparison.
    const weak = await call(app, 'PUT', url, { token: alice.token, body, headers: { 'if-match': `W/${after.headers.etag}` } });
    expect(weak.statusCode).toBe(412);
    // `*` matches any existing post; no If-Match works as before.
    expect((await call(app, 'PUT', url, { token: alice.token, body, headers: { 'if-match': '*' } })).statusCode).toBe(200);
    expect((await call(app, 'PUT', url, { token: alice.token, body })).statusCode).toBe(200);

    const current = (await call(app, 'GET', url)).headers.etag as string;
    const staleDelete = await call(app, 'DELETE', url, { token: alice.token, headers: { 'if-match': tag } });
    expect(staleDelete.statusCode).toBe(412);
    expect(await app.db.selectFrom('posts').select('id').where('id', '=', post.id).executeTakeFirst()).toBeDefined();
    expect((await call(app, 'DELETE', url, { token: alice.token, headers: { 'if-match': current } })).statusCode).toBe(200);
    expect(await app.db.selectFrom('posts').select('id').where('id', '=', post.id).executeTakeFirst()).toBeUndefined();
  });

  it('order: 400 malformed, 401, 404/400 missing, 403, then 412', async () => {
    const app = await buildTestApp();
    const alice = await signUp(app);
    const bob = await signUp(app);
    const post = await publish(app, alice, 'hello');
    const body = { title: 'x', content: 'x', visibility: 'public' };
    const stale = { 'if-match': '"stale"' };
    expect((await call(app, 'PUT', `/posts/${post.id}`, { body, headers: { 'if-match': 'nope' } })).statusCode).toBe(400);
    const malformed = await call(app, 'DELETE', `/posts/${post.id}`, { token: alice.token, headers: { 'if-match': 'nope' } });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().errors).toEqual([expect.objectContaining({ field: 'If-Match' })]);
    expect((await call(app, 'PUT', `/posts/${post.id}`, { body, headers: stale })).statusCode).toBe(401);
    expect((await call(app, 'PUT', '/posts/999999', { token: alice.token, body, headers: stale })).statusCode).toBe(404);
    expect((await call(app, 'DELETE', '/posts/999999', { token: alice.token, headers: stale })).statusCode).toBe(400);
    expect((await call(app, 'PUT', `/posts/${post.id}`, { token: bob.token, body, headers: stale })).statusCode).toBe(403);
    expect((await call(app, 'PUT', `/posts/${post.id}`, { token: alice.token, body, headers: stale })).statusCode).toBe(412);
    // A hidden post is a 404 before the precondition.
    const hidden = await publish(app, alice, 'mine', 'private');
    expect((await call(app, 'PUT', `/posts/${hidden.id}`, { token: bob.token, body, headers: stale })).statusCode).toBe(404);
  });

  it('users: the tag depends on the caller (postCount); an admin must send the tag of their own view', async () => {
    const app = await buildTestApp();
    const alice = await signUp(app);
    const admin = await createAdmin(app);
    await publish(app, alice, 'secret', 'private');
    const url = `/users/${alice.id}`;
    const selfTag = (await call(app, 'GET', url, { token: alice.token })).headers.etag as string;
    const publicTag = (await call(app, 'GET', url)).headers.etag as string;
    const body = { username: alice.username, displayName: 'Alice', bio: 'hi' };
    const wrongView = await call(app, 'PUT', url, { token: alice.token, body, headers: { 'if-match': publicTag } });
    expect(wrongView.statusCode).toBe(412);
    expect((await app.db.selectFrom('users').select('display_name').where('id', '=', alice.id).executeTakeFirstOrThrow()).display_name).not.toBe('Alice');
    const ok = await call(app, 'PUT', url, { token: alice.token, body, headers: { 'if-match': selfTag } });
    expect(ok.statusCode).toBe(200);
    expect(ok.headers.etag).toBe((await call(app, 'GET', url, { token: alice.token })).headers.etag);
    const adminTag = (await call(app, 'GET', url, { token: admin.token })).headers.etag as string;
    expect((await call(app, 'DELETE', url, { token: admin.token, headers: { 'if-match': selfTag } })).statusCode).toBe(412);
    expect((await call(app, 'DELETE', url, { token: admin.token, headers: { 'if-match': adminTag } })).statusCode).toBe(200);
    expect(await app.db.selectFrom('users').select('id').where('id', '=', alice.id).executeTakeFirst()).toBeUndefined();
  });

  it('replies: GET tag accepted, stale refused, PUT answers the new tag', async () => {
    const app = await buildTestApp();
    const alice = await signUp(app);
    const post = await publish(app, alice, 'hello');
    const created = await call(app, 'POST', `/posts/${post.id}/replies`, { token: alice.token, body: { content: 'first' } });
    const url = `/posts/${post.id}/replies/${created.json().id}`;
    const tag = (await call(app, 'GET', url)).headers.etag as string;
    const ok = await call(app, 'PUT', url, { token: alice.token, body: { content: 'second' }, headers: { 'if-match': tag } });
    expect(ok.statusCode).toBe(200);
    expect(ok.headers.etag).toBe((await call(app, 'GET', url)).headers.etag);
    const stale = await call(app, 'PUT', url, { token: alice.token, body: { content: 'third' }, headers: { 'if-match': tag } });
    expect(stale.statusCode).toBe(412);
    expect((await app.db.selectFrom('replies').select('content').where('id', '=', created.json().id).executeTakeFirstOrThrow()).content).toBe('second');
    expect((await call(app, 'DELETE', url, { token: alice.token, headers: { 'if-match': tag } })).statusCode).toBe(412);
    expect((await call(app, 'DELETE', url, { token: alice.token, headers: { 'if-match': ok.headers.etag as string } })).statusCode).toBe(200);
  });

  it('boards: PUT answers data "updated" with the board GET’s new ETag; 412 in the envelope', async () => {
    const app = await buildTestApp();
    const alice = await signUp(app);
    const id = (await call(app, 'POST', '/boards', { token: alice.token, body: { title: 't', content: 'c' } })).json().data.id;
    const url = `/boards/${id}`;
    const tag = (await call(app, 'GET', url)).headers.etag as string;
    const ok = await call(app, 'PUT', url, { token: alice.token, body: { title: 't2', content: 'c2' }, headers: { 'if-match': tag } });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({ code: '200', message: 'OK', data: 'updated' });
    expect(ok.headers.etag).toBe((await call(app, 'GET', url)).headers.etag);
    const stale = await call(app, 'PUT', url, { token: alice.token, body: { title: 't3', content: 'c3' }, headers: { 'if-match': tag } });
    expect(stale.statusCode).toBe(412);
    expect(stale.json()).toMatchObject({ code: '412', data: null });
    expect((await app.db.selectFrom('boards').select('title').where('id', '=', id).executeTakeFirstOrThrow()).title).toBe('t2');
    expect((await call(app, 'DELETE', url, { token: alice.token, headers: { 'if-match': tag } })).statusCode).toBe(412);
    const deleted = await call(app, 'DELETE', url, { token: alice.token, headers: { 'if-match': ok.headers.etag as string } });
    expect(deleted.json()).toEqual({ code: '200', message: 'OK', data: 'deleted' });
  });

  // RFC 9110 §13.1.2: If-None-Match on a write refuses it while a listed tag (weakly) or `*` matches what exists.
  it.each([
    ['a post', 'post'],
    ['a reply', 'reply'],
    ['a board', 'board'],
  ])('If-None-Match on %s: * and the current tag (weak too) are 412 and nothing changes; a stale tag lets the write through', async (_case, kind) => {
    const app = await buildTestApp();
    const alice = await signUp(app);
    const post = await publish(app, alice, 'hello');
    const url =
      kind === 'post'
        ? `/posts/${post.id}`
        : kind === 'reply'
          ? `/posts/${post.id}/replies/${(await call(app, 'POST', `/posts/${post.id}/replies`, { token: alice.token, body: { content: 'c' } })).json().id}`
          : `/boards/${(await call(app, 'POST', '/boards', { token: alice.token, body: { title: 't', content: 'c' } })).json().data.id}`;
    const body = kind === 'post' ? { title: 'v2', content: 'v2', visibility: 'public' } : kind === 'reply' ? { content: 'v2' } : { title: 'v2', content: 'v2' };
    const stored = () =>
      kind === 'board'
        ? app.db.selectFrom('boards').select('content').executeTakeFirst()
        : kind === 'reply'
          ? app.db.selectFrom('replies').select('content').executeTakeFirst()
          : app.db.selectFrom('posts').select('content').executeTakeFirst();
    const before = await stored();
    const tag = (await call(app, 'GET', url, { token: alice.token })).headers.etag as string;
    for (const value of ['*', tag, `W/${tag}`, `"other", ${tag}`]) {
      const refused = await call(app, 'PUT', url, { token: alice.token, body, headers: { 'if-none-match': value } });
      expect(refused.statusCode, value).toBe(412);
      expect(refused.json().errors).toEqual([{ field: 'If-None-Match', message: 'matches the current entity-tag' }]);
      expect((await call(app, 'DELETE', url, { token: alice.token, headers: { 'if-none-match': value } })).statusCode, value).toBe(412);
    }
    expect(await stored()).toEqual(before);
    expect((await call(app, 'PUT', url, { token: alice.token, body, headers: { 'if-none-match': '"other"' } })).statusCode).toBe(200);
    expect(await stored()).toEqual({ content: 'v2' });
    expect((await call(app, 'PUT', url, { token: alice.token, body, headers: { 'if-none-match': 'nope' } })).statusCode).toBe(400);
  });

  it('a write always changes the tag, even with the same body within one millisecond', async () => {
    const app = await buildTestApp();
    const alice = await signUp(app);
    const post = await publish(app, alice, 'hello');
    const boardId = (await call(app, 'POST', '/boards', { token: alice.token, body: { title: 't', content: 'c' } })).json().data.id;
    const replyId = (await call(app, 'POST', `/posts/${post.id}/replies`, { token: alice.token, body: { content: 'r' } })).json().id;
    const resources = [
      [`/posts/${post.id}`, { title: 'same', content: 'x', visibility: 'public' }],
      [`/boards/${boardId}`, { title: 'same', content: 'x' }],
      [`/users/${alice.id}`, { username: alice.username, displayName: 'same', bio: '' }],
      [`/posts/${post.id}/replies/${replyId}`, { content: 'same' }],
    ] as const;
    // The clock stands still: every write happens in the same millisecond.
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 1000 });
    try {
      for (const [url, body] of resources) {
        // Already this body, written in this millisecond.
        expect((await call(app, 'PUT', url, { token: alice.token, body })).statusCode).toBe(200);
        const tag = (await call(app, 'GET', url, { token: alice.token })).headers.etag as string;
        const first = await call(app, 'PUT', url, { token: alice.token, body, headers: { 'if-match': tag } });
        expect(first.statusCode, url).toBe(200);
        expect(first.headers.etag, url).not.toBe(tag);
        const second = await call(app, 'PUT', url, { token: alice.token, body, headers: { 'if-match': tag } });
        expect(second.statusCode, url).toBe(412);
      }
    } finally {
      vi.useRealTimers();
    }
  });

  it('two PUTs with the same If-Match at once, even with the same body: exactly one 200, one 412', async () => {
    const app = await buildTestApp();
    const alice = await signUp(app);
    const post = await publish(app, alice, 'hello');
    const boardId = (await call(app, 'POST', '/boards', { token: alice.token, body: { title: 't', content: 'c' } })).json().data.id;
    const replyId = (await call(app, 'POST', `/posts/${post.id}/replies`, { token: alice.token, body: { content: 'r' } })).json().id;
    const resources = [
      [`/posts/${post.id}`, (n: number) => ({ title: `racer ${n}`, content: 'x', visibility: 'public' })],
      [`/boards/${boardId}`, (n: number) => ({ title: `racer ${n}`, content: 'x' })],
      [`/users/${alice.id}`, (n: number) => ({ username: alice.username, displayName: `racer ${n}`, bio: '' })],
      [`/posts/${post.id}/replies/${replyId}`, (n: number) => ({ content: `racer ${n}` })],
    ] as const;
    for (const sameBody of [false, true]) {
      for (const [url, bodyOf] of resources) {
        const tag = (await call(app, 'GET', url, { token: alice.token })).headers.etag as string;
        const answers = await Promise.all(
          [1, 2].map((n) => call(app, 'PUT', url, { token: alice.token, body: bodyOf(sameBody ? 0 : n), headers: { 'if-match': tag } })),
        );
        expect(answers.map((a) => a.statusCode).sort(), `${url} same body: ${sameBody}`).toEqual([200, 412]);
        // The winner's answer is what GET now shows.
        const winner = answers.find((a) => a.statusCode === 200)!;
        const now = await call(app, 'GET', url, { token: alice.token });
        expect(winner.headers.etag).toBe(now.headers.etag);
        if (!url.startsWith('/boards')) expect(now.json()).toEqual(winner.json());
      }
    }
  });
});
