import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { buildTestApp, call } from '../../test/helpers/build-test-app.js';
import { signUp } from '../../test/helpers/factories.js';
import { declaredCharset } from './json-body.js';

const PROBLEM = 'application/problem+json; charset=utf-8';

/** A post published as raw bytes with a given Content-Type; answers the response and the posts stored. */
async function postRaw(bytes: Buffer, type: string) {
  const app = await buildTestApp();
  const author = await signUp(app);
  const res = await app.inject({
    method: 'POST',
    url: `/users/${author.id}/posts`,
    payload: bytes,
    headers: { 'content-type': type, authorization: `Bearer ${author.token}` },
  });
  const rows = await app.db.selectFrom('posts').select(['title', 'content']).execute();
  return { res, rows };
}

const body = (title: string) => Buffer.from(JSON.stringify({ title, content: 'Body text' }), 'utf8');

describe('JSON request bodies are UTF-8', () => {
  it.each([
    ['no charset', 'application/json'],
    ['charset=utf-8', 'application/json; charset=utf-8'],
    ['charset="UTF-8" (quoted, upper case)', 'application/json; charset="UTF-8"'],
    ['charset=utf8', 'Application/JSON;charset=utf8'],
  ])('stores multi-byte text exactly with %s', async (_case, type) => {
    const { res, rows } = await postRaw(body('Café ☕ 𝄞'), type);
    expect(res.statusCode).toBe(201);
    expect(res.json().title).toBe('Café ☕ 𝄞');
    expect(rows).toEqual([{ title: 'Café ☕ 𝄞', content: 'Body text' }]);
  });

  it.each([['iso-8859-1'], ['latin1'], ['utf-16'], ['']])('answers charset=%s with 415 and stores nothing', async (charset) => {
    const { res, rows } = await postRaw(body('Hello'), `application/json; charset=${charset}`);
    expect(res.statusCode).toBe(415);
    expect(res.headers['content-type']).toBe(PROBLEM);
    expect(res.json()).toMatchObject({ status: 415, detail: expect.stringContaining('UTF-8') });
    expect(rows).toEqual([]);
  });

  it.each([
    ['gzip, compressed', 'gzip', gzipSync(body('Hello'))],
    ['gzip, yet plain JSON', 'gzip', body('Hello')],
    ['br', 'br', body('Hello')],
  ])('answers a body sent with Content-Encoding: %s with 415 and Accept-Encoding: identity, and stores nothing', async (_case, coding, bytes) => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const send = (encoding: string, payload: Buffer) =>
      app.inject({
        method: 'POST',
        url: `/users/${author.id}/posts`,
        payload,
        headers: { 'content-type': 'application/json', 'content-encoding': encoding, authorization: `Bearer ${author.token}` },
      });
    const res = await send(coding, bytes);
    expect(res.statusCode).toBe(415);
    expect(res.headers['accept-encoding']).toBe('identity');
    expect(res.json()).toMatchObject({ status: 415, detail: expect.stringContaining('Content-Encoding') });
    expect(await app.db.selectFrom('posts').select('id').execute()).toEqual([]);
    // identity is no coding at all.
    expect((await send('identity', body('Hello'))).statusCode).toBe(201);
  });

  it('answers bytes that are not UTF-8 (Latin-1 "café") with 400 naming the body, and stores nothing', async () => {
    // Without the check the body decoded to "caf\uFFFD" and was stored with a 201.
    const latin1 = Buffer.concat([Buffer.from('{"title":"caf'), Buffer.from([0xe9]), Buffer.from('","content":"x"}')]);
    const { res, rows } = await postRaw(latin1, 'application/json');
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toBe(PROBLEM);
    expect(res.json().errors).toEqual([{ field: 'body', message: 'is not valid UTF-8' }]);
    expect(rows).toEqual([]);
  });

  it.each([
    ['__proto__', '{"username":"proto_user","password":"password1","__proto__":{"role":"admin"}}', '__proto__'],
    ['an escaped __proto__', '{"username":"proto_user","password":"password1","\\u005f_proto__":{"role":"admin"}}', '__proto__'],
    ['constructor.prototype', '{"username":"proto_user","password":"password1","constructor":{"prototype":{"role":"admin"}}}', 'constructor'],
    ['a nested __proto__', '{"username":"proto_user","password":"password1","bio":{"__proto__":{}}}', 'bio.__proto__'],
  ])('still refuses prototype poisoning (%s) with 400 naming the field as an unknown one', async (_case, body, field) => {
    const app = await buildTestApp();
    const res = await call(app, 'POST', '/users', { body, headers: { 'content-type': 'application/json' } });
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toBe(PROBLEM);
    expect(res.json().errors).toEqual([{ field, message: 'is not an allowed field' }]);
    expect(await app.db.selectFrom('users').selectAll().execute()).toEqual([]);
  });
});

/**
 * Many client libraries set `Content-Type: application/json` on every request, a body-less DELETE included. An
 * operation without a body reads an empty one as none; one that takes a body still refuses it.
 */
describe('an empty body sent as application/json', () => {
  it.each([
    ['DELETE /posts/{id}', 'post'],
    ['DELETE /boards/{id}', 'board'],
  ])('is no body on %s: 200, and the resource is gone', async (_case, kind) => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const created =
      kind === 'post'
        ? await call(app, 'POST', `/users/${author.id}/posts`, { token: author.token, body: { title: 'T', content: 'C' } })
        : await call(app, 'POST', '/boards', { token: author.token, body: { title: 'T', content: 'C' } });
    expect(created.statusCode).toBe(201);
    const location = new URL(created.headers.location as string).pathname;
    const res = await app.inject({
      method: 'DELETE',
      url: location,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${author.token}` },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(await app.db.selectFrom(kind === 'post' ? 'posts' : 'boards').select('id').execute()).toEqual([]);
  });

  it.each(['text/plain', 'application/x-www-form-urlencoded'])('is no body either as %s on DELETE; a body of that type is still a 415', async (type) => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const created = await call(app, 'POST', `/users/${author.id}/posts`, { token: author.token, body: { title: 'T', content: 'C' } });
    const url = `/posts/${created.json().id}`;
    const headers = { 'content-type': type, authorization: `Bearer ${author.token}` };
    const withBody = await app.inject({ method: 'DELETE', url, headers, payload: 'x=1' });
    expect(withBody.statusCode).toBe(415);
    expect(await app.db.selectFrom('posts').select('id').execute()).toHaveLength(1);
    const empty = await app.inject({ method: 'DELETE', url, headers });
    expect(empty.statusCode, empty.body).toBe(200);
    expect(await app.db.selectFrom('posts').select('id').execute()).toEqual([]);
    const post = await app.inject({ method: 'POST', url: `/users/${author.id}/posts`, headers });
    expect(post.statusCode).toBe(415);
  });

  it.each([
    ['fields', '{"id":1,"force":true}', [{ field: 'id', message: 'is not an allowed field' }, { field: 'force', message: 'is not an allowed field' }]],
    ['an array', '[1]', [{ field: 'body', message: 'is not taken by this operation' }]],
  ])('on an operation that takes no body, JSON with %s is 400 naming them, and nothing is deleted; {} is no field', async (_case, payload, errors) => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const created = await call(app, 'POST', `/users/${author.id}/posts`, { token: author.token, body: { title: 'T', content: 'C' } });
    const url = `/posts/${created.json().id}`;
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${author.token}` };
    const refused = await app.inject({ method: 'DELETE', url, headers, payload });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().errors).toEqual(errors);
    expect(await app.db.selectFrom('posts').select('id').execute()).toHaveLength(1);
    const empty = await app.inject({ method: 'DELETE', url, headers, payload: '{}' });
    expect(empty.statusCode, empty.body).toBe(200);
    expect(await app.db.selectFrom('posts').select('id').execute()).toEqual([]);
  });

  it('is still a 400 naming the body on an operation that takes one', async () => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const res = await app.inject({
      method: 'POST',
      url: `/users/${author.id}/posts`,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${author.token}` },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().errors).toEqual([expect.objectContaining({ field: 'body' })]);
    expect(await app.db.selectFrom('posts').select('id').execute()).toEqual([]);
  });
});

describe('declaredCharset', () => {
  it.each([
    ['application/json', undefined],
    ['application/json;', undefined],
    ['application/json; charset=utf-8', 'utf-8'],
    ['application/json;charset="UTF-8"', 'UTF-8'],
    ['application/json ; charset=utf-8 ', 'utf-8'],
    ['application/json;;charset=utf-8;', 'utf-8'],
    ['application/json; charset="a\\"b"', 'a"b'],
    // Text inside another parameter's quoted value is not a parameter.
    ['application/json; profile="x;charset=latin1"', undefined],
    ['application/json; profile="x;charset=latin1"; charset=utf8', 'utf8'],
    ['application/json; charset=', ''],
    // Unreadable or ambiguous: no charset can be trusted to be UTF-8.
    ['application/json; charset="utf-8"x', null],
    ['application/json; charset', null],
    ['application/json; charset=utf-8; charset=latin1', null],
  ])('reads %s as %j', (contentType, expected) => {
    expect(declaredCharset(contentType)).toBe(expected);
  });
});
