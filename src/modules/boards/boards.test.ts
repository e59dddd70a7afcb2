import type { FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { PUBLIC_URL, buildTestApp, call, write } from '../../../test/helpers/build-test-app.js';
import { createAdmin, signUp, type TestUser } from '../../../test/helpers/factories.js';
import { createBoardsRepository } from './boards.repository.js';

const JSON_TYPE = 'application/json; charset=utf-8';
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** Writes `n` boards straight into the table (oldest first) and returns their ids newest first, the list order. */
async function seedBoards(app: FastifyInstance, authorId: number, n: number): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 1; i <= n; i++) {
    const now = new Date(Date.UTC(2026, 10, 21, 8, 0, i)).toISOString();
    const row = await write(app, (db) =>
      db
        .insertInto('boards')
        .values({ author_id: authorId, title: `Board ${i}`, content: `Content ${i}`, created_at: now, updated_at: now })
        .returning('id')
        .executeTakeFirstOrThrow(),
    );
    ids.push(row.id);
  }
  return ids.reverse();
}

/** Creates a board over the API. */
async function createBoard(app: FastifyInstance, author: TestUser, body = { title: 'Notice', content: 'Hello, board' }) {
  const res = await call(app, 'POST', '/boards', { token: author.token, body });
  if (res.statusCode !== 201) throw new Error(`create failed: ${res.statusCode} ${res.body}`);
  return res.json().data as { id: number; title: string; content: string; authorId: number; createdAt: string; updatedAt: string };
}

const boardRow = (app: FastifyInstance, id: number) => app.db.selectFrom('boards').selectAll().where('id', '=', id).executeTakeFirst();
const boardCount = async (app: FastifyInstance) =>
  Number((await app.db.selectFrom('boards').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);

/** An error envelope: the status as text, a message, no data, and (for field problems) the fields named. */
function expectEnvelopeError(res: { statusCode: number; headers: Record<string, unknown>; json(): unknown }, status: number, fields?: string[]) {
  expect(res.statusCode).toBe(status);
  expect(res.headers['content-type']).toBe(JSON_TYPE);
  const body = res.json() as { code: string; message: string; data: unknown; errors?: { field: string; message: string }[] };
  expect(body).toMatchObject({ code: String(status), message: expect.any(String), data: null });
  expect(body.message.length).toBeGreaterThan(0);
  if (fields) {
    // One field may break several rules (an empty title is both too short and blank): compare the fields named.
    expect([...new Set(body.errors?.map((e) => e.field))]).toEqual(fields);
    for (const e of body.errors ?? []) expect(e.message).toEqual(expect.any(String));
  } else {
    expect(body.errors).toBeUndefined();
  }
}

describe('GET /boards/list and GET /boards: the window', () => {
  // Five boards; list order (newest first) is offsets 0..4. `want` are the offsets of the items expected.
  it.each([
    ['', [0, 1, 2, 3, 4], 0, 20],
    ['start=0', [0, 1, 2, 3, 4], 0, 20],
    ['start=2', [2, 3, 4], 2, 20],
    ['start=4', [4], 4, 20],
    ['start=5 (just past the end)', [], 5, 20],
    ['start=9 (far past the end)', [], 9, 20],
    ['end=3 (before the last item)', [0, 1, 2], 0, 20],
    ['end=5', [0, 1, 2, 3, 4], 0, 20],
    ['end=50 (past the end)', [0, 1, 2, 3, 4], 0, 20],
    ['end=0', [], 0, 20],
    ['limit=2', [0, 1], 0, 2],
    ['limit=1', [0], 0, 1],
    ['limit=100', [0, 1, 2, 3, 4], 0, 100],
    ['start=1&end=4', [1, 2, 3], 1, 20],
    ['start=2&end=2 (empty window)', [], 2, 20],
    ['start=1&end=4&limit=2 (limit smaller than end-start)', [1, 2], 1, 2],
    ['start=1&end=3&limit=10 (end smaller than start+limit)', [1, 2], 1, 10],
    ['start=3&limit=5 (limit runs past the end)', [3, 4], 3, 5],
    ['limit=3&start=2', [2, 3, 4], 2, 3],
    ['end=4&limit=3&start=0', [0, 1, 2], 0, 3],
    ['start=6&end=8&limit=1 (past the end)', [], 6, 1],
    ['start=02&limit=02 (leading zeros are still decimal)', [2, 3], 2, 2],
    ['start=9007199254740991 (the largest offset)', [], 9007199254740991, 20],
  ])('?%s', async (label, want, start, limit) => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const ids = await seedBoards(app, author.id, 5);
    const query = label.split(' ')[0]!;
    for (const path of ['/boards/list', '/boards']) {
      const res = await call(app, 'GET', query ? `${path}?${query}` : path);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe(JSON_TYPE);
      const body = res.json();
      expect(body).toEqual({
        code: '200',
        message: 'OK',
        data: { items: expect.any(Array), total: 5, start, end: start + want.length, limit },
      });
      expect(body.data.items.map((b: { id: number }) => b.id)).toEqual(want.map((o) => ids[o]));
    }
  });

  it('finds every window from either end exactly, even when the total it steered by is stale', async () => {
    const app = await buildTestApp();
    const author = await signUp(app);
    let ids = await seedBoards(app, author.id, 7);
    // A repository that has never listed counts from the newest end; once it has seen the total, pages in the
    // older half are counted from the oldest end. Both must give the same windows.
    const cold = () => createBoardsRepository(app.db);
    const warm = createBoardsRepository(app.db);
    await warm.window(0, 1);
    const check = async (n: number) => {
      for (let offset = 0; offset <= n + 2; offset++) {
        for (const count of [1, 2, 3, 5, 20]) {
          const want = ids.slice(offset, offset + count);
          for (const repo of [cold(), warm]) {
            const { rows, total } = await repo.window(offset, count);
            expect({ offset, count, ids: rows.map((r) => r.id), total }).toEqual({ offset, count, ids: want, total: n });
          }
        }
      }
    };
    await check(7);
    // More boards than the warm repository last saw (its hint is now stale), then fewer.
    ids = [...(await seedBoards(app, author.id, 4)), ...ids];
    await check(11);
    await write(app, (db) => db.deleteFrom('boards').where('id', 'in', ids.slice(0, 6)).execute());
    ids = ids.slice(6);
    await check(5);
  });

  it('answers an empty page when there are no boards at all', async () => {
    const app = await buildTestApp();
    for (const [query, start, limit] of [['', 0, 20], ['?start=3', 3, 20], ['?end=10&limit=5', 0, 5]] as const) {
      const res = await call(app, 'GET', `/boards/list${query}`);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ code: '200', message: 'OK', data: { items: [], total: 0, start, end: start, limit } });
    }
  });

  it('pages through 25 boards with the default limit of 20, the end of one page starting the next', async () => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const ids = await seedBoards(app, author.id, 25);
    const first = (await call(app, 'GET', '/boards/list')).json().data;
    expect(first).toMatchObject({ total: 25, start: 0, end: 20, limit: 20 });
    expect(first.items.map((b: { id: number }) => b.id)).toEqual(ids.slice(0, 20));
    const second = (await call(app, 'GET', `/boards/list?start=${first.end}`)).json().data;
    expect(second).toMatchObject({ total: 25, start: 20, end: 25, limit: 20 });
    expect(second.items.map((b: { id: number }) => b.id)).toEqual(ids.slice(20));
  });

  it('lists full board representations, newest first, and GET changes nothing', async () => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const older = await createBoard(app, author, { title: 'Older', content: 'First' });
    const newer = await createBoard(app, author, { title: 'Newer', content: 'Second' });
    const res = await call(app, 'GET', '/boards');
    expect(res.json().data.items).toEqual([
      { id: newer.id, title: 'Newer', content: 'Second', authorId: author.id, createdAt: newer.createdAt, updatedAt: newer.createdAt },
      { id: older.id, title: 'Older', content: 'First', authorId: author.id, createdAt: older.createdAt, updatedAt: older.createdAt },
    ]);
    expect((await call(app, 'GET', '/boards')).body).toBe(res.body);
    expect(newer.id).toBeGreaterThan(older.id);
  });

  it.each([
    ['start=-1', ['start']],
    ['start=abc', ['start']],
    ['start=1.5', ['start']],
    ['start=1.0', ['start']],
    ['start=1e1', ['start']],
    ['start=0x10', ['start']],
    ['start=%201', ['start']],
    ['start=+1', ['start']],
    ['start=', ['start']],
    ['start=1&start=2', ['start']],
    ['start=9007199254740992', ['start']],
    ['start=99999999999999999999999', ['start']],
    ['end=-1', ['end']],
    ['end=abc', ['end']],
    ['end=2.5', ['end']],
    ['end=', ['end']],
    ['start=3&end=2', ['end']],
    ['end=0&start=1', ['end']],
    ['limit=0', ['limit']],
    ['limit=101', ['limit']],
    ['limit=-5', ['limit']],
    ['limit=abc', ['limit']],
    ['limit=1.0', ['limit']],
    ['limit=', ['limit']],
    ['start=x&limit=y', ['start', 'limit']],
    ['start=-1&limit=0', ['start', 'limit']],
  ])('rejects ?%s with 400 in the envelope naming the field', async (query, fields) => {
    const app = await buildTestApp();
    for (const path of ['/boards/list', '/boards']) {
      expectEnvelopeError(await call(app, 'GET', `${path}?${query}`), 400, fields);
    }
  });
});

describe('GET /boards/{board_id}', () => {
  it('answers the board in the envelope', async () => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const board = await createBoard(app, author);
    const res = await call(app, 'GET', `/boards/${board.id}`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe(JSON_TYPE);
    expect(res.json()).toEqual({
      code: '200',
      message: 'OK',
      data: { id: board.id, title: 'Notice', content: 'Hello, board', authorId: author.id, createdAt: board.createdAt, updatedAt: board.createdAt },
    });
  });

  it.each([
    ['abc', 400],
    ['1.5', 400],
    ['-3', 400],
    ['007', 400],
    ['1e3', 400],
    ['9223372036854775808', 400],
    ['99999999999999999999', 400],
    ['9223372036854775807', 404],
    ['9007199254740993', 404],
    ['0', 404],
    ['424242', 404],
  ])('GET /boards/%s answers %i in the envelope', async (id, status) => {
    const app = await buildTestApp();
    expectEnvelopeError(await call(app, 'GET', `/boards/${id}`), status, status === 400 ? ['board_id'] : undefined);
  });
});

describe('POST /boards', () => {
  it('creates a board: 201, Created, Location, the board, the row', async () => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const res = await call(app, 'POST', '/boards', { token: author.token, body: { title: 'For sale', content: 'A bicycle' } });
    expect(res.statusCode).toBe(201);
    expect(res.headers['content-type']).toBe(JSON_TYPE);
    const { data } = res.json();
    expect(res.json()).toEqual({
      code: '201',
      message: 'Created',
      data: { id: expect.any(Number), title: 'For sale', content: 'A bicycle', authorId: author.id, createdAt: expect.stringMatching(ISO), updatedAt: data.createdAt },
    });
    expect(res.headers.location).toBe(`${PUBLIC_URL}/boards/${data.id}`);
    expect(await boardRow(app, data.id)).toEqual({
      id: data.id,
      author_id: author.id,
      title: 'For sale',
      content: 'A bicycle',
      created_at: data.createdAt,
      updated_at: data.createdAt,
    });
    expect((await call(app, 'GET', `/boards/${data.id}`)).json().data).toEqual(data);
  });

  it('takes whitespace as a title and as content: only a post title must not be blank (CONTRACT §3)', async () => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const res = await call(app, 'POST', '/boards', { token: author.token, body: { title: ' ', content: '\n\t ' } });
    expect(res.statusCode).toBe(201);
    expect(await boardRow(app, res.json().data.id)).toMatchObject({ title: ' ', content: '\n\t ' });
  });

  it('accepts a title of 200 and content of 20000 characters, and a charset parameter', async () => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const body = { title: 't'.repeat(200), content: 'c'.repeat(20000) };
    const res = await app.inject({
      method: 'POST',
      url: '/boards',
      headers: { authorization: `Bearer ${author.token}`, 'content-type': 'application/json; charset=utf-8' },
      payload: JSON.stringify(body),
    });
    expect(res.statusCode).toBe(201);
    expect(await boardRow(app, res.json().data.id)).toMatchObject(body);
  });

  it.each([
    ['a missing title', { content: 'x' }, ['title']],
    ['a missing content', { title: 'x' }, ['content']],
    ['an empty title', { title: '', content: 'x' }, ['title']],
    ['a title of 201 characters', { title: 't'.repeat(201), content: 'x' }, ['title']],
    ['content of 20001 characters', { title: 'x', content: 'c'.repeat(20001) }, ['content']],
    ['U+0000 in the content', { title: 'x', content: 'a\u0000b' }, ['content']],
    ['a numeric title', { title: 5, content: 'x' }, ['title']],
    ['an unknown field', { title: 'x', content: 'x', pinned: true }, ['pinned']],
    ['an id', { title: 'x', content: 'x', id: 7 }, ['id']],
    ['an authorId', { title: 'x', content: 'x', authorId: 1 }, ['authorId']],
  ])('rejects %s with 400 naming the field, storing nothing', async (_case, body, fields) => {
    const app = await buildTestApp();
    const author = await signUp(app);
    expectEnvelopeError(await call(app, 'POST', '/boards', { token: author.token, body }), 400, fields);
    expect(await boardCount(app)).toBe(0);
  });

  it.each([
    ['no token', undefined],
    ['a garbage token', 'garbage'],
  ])('answers 401 with %s, storing nothing', async (_case, token) => {
    const app = await buildTestApp();
    const res = await call(app, 'POST', '/boards', { token, body: { title: 'x', content: 'y' } });
    expectEnvelopeError(res, 401);
    expect(res.headers['www-authenticate']).toMatch(/^Bearer /);
    expect(await boardCount(app)).toBe(0);
  });

  it.each([
    ['malformed JSON', '{"title":', 'application/json', 400, ['body']],
    ['a JSON array', '[1,2]', 'application/json', 400, ['body']],
    ['an empty body', '', 'application/json', 400, ['body']],
    ['text/plain', '{"title":"x","content":"y"}', 'text/plain', 415, undefined],
    ['a form', 'title=x&content=y', 'application/x-www-form-urlencoded', 415, undefined],
    ['no content type', '{"title":"x","content":"y"}', undefined, 415, undefined],
  ])('rejects %s in the envelope', async (_case, payload, type, status, fields) => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const res = await app.inject({
      method: 'POST',
      url: '/boards',
      payload,
      headers: { authorization: `Bearer ${author.token}`, ...(type ? { 'content-type': type } : {}) },
    });
    expect(res.raw.req.headers['content-type']).toBe(type);
    expectEnvelopeError(res, status, fields);
    expect(await boardCount(app)).toBe(0);
  });

  it('answers 413 in the envelope for a body over the limit', async () => {
    const app = await buildTestApp({ bodyLimit: 2048 });
    const author = await signUp(app);
    expectEnvelopeError(await call(app, 'POST', '/boards', { token: author.token, body: { title: 'big', content: 'x'.repeat(4000) } }), 413);
    expect(await boardCount(app)).toBe(0);
  });
});

describe('PUT /boards/{board_id}', () => {
  const replacement = { title: 'Changed', content: 'New content' };

  it('replaces the board for its author: data "updated", the row changed, read-only fields sent back ignored', async () => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const board = await createBoard(app, author);
    const read = (await call(app, 'GET', `/boards/${board.id}`)).json().data;
    await new Promise((r) => setTimeout(r, 5));
    const res = await call(app, 'PUT', `/boards/${board.id}`, {
      token: author.token,
      body: { ...read, ...replacement, authorId: 999, createdAt: 'whenever', updatedAt: 'never' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe(JSON_TYPE);
    expect(res.json()).toEqual({ code: '200', message: 'OK', data: 'updated' });
    const row = await boardRow(app, board.id);
    expect(row).toMatchObject({ id: board.id, author_id: author.id, title: 'Changed', content: 'New content', created_at: board.createdAt });
    expect(row!.updated_at).toMatch(ISO);
    expect(row!.updated_at > board.updatedAt).toBe(true);
    expect((await call(app, 'GET', `/boards/${board.id}`)).json().data).toMatchObject({ ...replacement, updatedAt: row!.updated_at });
  });

  it("lets an admin replace another user's board; the author stays", async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const author = await signUp(app);
    const board = await createBoard(app, author);
    const res = await call(app, 'PUT', `/boards/${board.id}`, { token: admin.token, body: replacement });
    expect(res.json()).toEqual({ code: '200', message: 'OK', data: 'updated' });
    expect(await boardRow(app, board.id)).toMatchObject({ ...replacement, author_id: author.id });
  });

  it.each([
    ['no token', 'none', {}, undefined, 401, undefined],
    ['a garbage token', 'garbage', {}, undefined, 401, undefined],
    ['another member', 'other', {}, undefined, 403, undefined],
    ['an id that differs from the path', 'author', { id: 999 }, undefined, 400, ['id']],
    ['a missing content (not a patch)', 'author', { content: undefined }, undefined, 400, ['content']],
    ['a missing title (not a patch)', 'author', { title: undefined }, undefined, 400, ['title']],
    ['a title of 201 characters', 'author', { title: 'x'.repeat(201) }, undefined, 400, ['title']],
    ['an unknown field', 'author', { pinned: true }, undefined, 400, ['pinned']],
    ['text/plain', 'author', {}, 'text/plain', 415, undefined],
    ['a form', 'author', {}, 'application/x-www-form-urlencoded', 415, undefined],
    ['no content type', 'author', {}, null, 415, undefined],
    ['malformed JSON', 'author', {}, 'malformed', 400, ['body']],
  ])('answers %s and leaves the row unchanged', async (_case, who, change, type, status, fields) => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const other = await signUp(app);
    const board = await createBoard(app, author);
    const before = await boardRow(app, board.id);
    const token = who === 'author' ? author.token : who === 'other' ? other.token : who === 'garbage' ? 'garbage' : undefined;
    const payload = type === 'malformed' ? '{"title":"x",' : JSON.stringify({ ...replacement, ...change });
    const contentType = type === undefined || type === 'malformed' ? 'application/json' : type;
    const res = await app.inject({
      method: 'PUT',
      url: `/boards/${board.id}`,
      payload,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(contentType ? { 'content-type': contentType } : {}) },
    });
    expect(res.raw.req.headers['content-type']).toBe(contentType ?? undefined);
    expectEnvelopeError(res, status, fields);
    if (status === 401) expect(res.headers['www-authenticate']).toMatch(/^Bearer /);
    expect(await boardRow(app, board.id)).toEqual(before);
  });

  it('answers 415 for a PUT with neither body nor content type (the seed requires the header)', async () => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const board = await createBoard(app, author);
    const res = await app.inject({ method: 'PUT', url: `/boards/${board.id}`, headers: { authorization: `Bearer ${author.token}` } });
    expectEnvelopeError(res, 415);
  });

  it('answers 400 for an empty JSON body', async () => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const board = await createBoard(app, author);
    const res = await app.inject({
      method: 'PUT',
      url: `/boards/${board.id}`,
      headers: { authorization: `Bearer ${author.token}`, 'content-type': 'application/json' },
    });
    expectEnvelopeError(res, 400, ['body']);
  });

  it.each([
    ['424242', 404],
    ['9223372036854775807', 404],
    ['9223372036854775808', 400],
    ['abc', 400],
    ['007', 400],
  ])('PUT /boards/%s answers %i in the envelope', async (id, status) => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const res = await call(app, 'PUT', `/boards/${id}`, { token: admin.token, body: replacement });
    expectEnvelopeError(res, status, status === 400 ? ['board_id'] : undefined);
    expect(await boardCount(app)).toBe(0);
  });

  it.each([
    ['the same digits as the path', '9223372036854775807', 404, undefined],
    ['another id', '0', 400, ['id']],
  ])('PUT /boards/9223372036854775807 with a body id of %s answers %i', async (_case, bodyId, status, fields) => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    // Raw JSON: a JS number cannot hold this id, which is what the comparison with the path must survive.
    const res = await app.inject({
      method: 'PUT',
      url: '/boards/9223372036854775807',
      headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
      payload: `{"id":${bodyId},"title":"t","content":"c"}`,
    });
    expectEnvelopeError(res, status, fields);
    expect(await boardCount(app)).toBe(0);
  });

  it('answers 413 in the envelope for a body over the limit, leaving the row unchanged', async () => {
    const app = await buildTestApp({ bodyLimit: 2048 });
    const author = await signUp(app);
    const board = await createBoard(app, author);
    const before = await boardRow(app, board.id);
    const res = await call(app, 'PUT', `/boards/${board.id}`, { token: author.token, body: { title: 'x', content: 'y'.repeat(4000) } });
    expectEnvelopeError(res, 413);
    expect(await boardRow(app, board.id)).toEqual(before);
  });
});

describe('DELETE /boards/{board_id}', () => {
  it('deletes for the author: data "deleted", the row gone, then GET 404 and DELETE 400', async () => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const board = await createBoard(app, author);
    const keep = await createBoard(app, author);
    const res = await call(app, 'DELETE', `/boards/${board.id}`, { token: author.token });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe(JSON_TYPE);
    expect(res.json()).toEqual({ code: '200', message: 'OK', data: 'deleted' });
    expect(await boardRow(app, board.id)).toBeUndefined();
    expect(await boardRow(app, keep.id)).toBeDefined();
    expectEnvelopeError(await call(app, 'GET', `/boards/${board.id}`), 404);
    expectEnvelopeError(await call(app, 'DELETE', `/boards/${board.id}`, { token: author.token }), 400, ['board_id']);
  });

  it("lets an admin delete another user's board", async () => {
    const app = await buildTestApp();
    const admin = await createAdmin(app);
    const author = await signUp(app);
    const board = await createBoard(app, author);
    expect((await call(app, 'DELETE', `/boards/${board.id}`, { token: admin.token })).json()).toEqual({ code: '200', message: 'OK', data: 'deleted' });
    expect(await boardRow(app, board.id)).toBeUndefined();
  });

  it.each([
    ['no token', 'none', 'existing', 401, undefined],
    ['a garbage token', 'garbage', 'existing', 401, undefined],
    ['another member', 'other', 'existing', 403, undefined],
    ['a board that does not exist (seed §7)', 'author', '424242', 400, ['board_id']],
    ['the largest int64 id (well-formed, no such board)', 'author', '9223372036854775807', 400, ['board_id']],
    ['one past the largest int64 id', 'author', '9223372036854775808', 400, ['board_id']],
    ['a malformed id', 'author', '-3', 400, ['board_id']],
  ])('answers %s and leaves the boards alone', async (_case, who, target, status, fields) => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const other = await signUp(app);
    const board = await createBoard(app, author);
    const before = await boardRow(app, board.id);
    const token = who === 'author' ? author.token : who === 'other' ? other.token : who === 'garbage' ? 'garbage' : undefined;
    const res = await call(app, 'DELETE', `/boards/${target === 'existing' ? board.id : target}`, { token });
    expectEnvelopeError(res, status, fields);
    if (status === 401) expect(res.headers['www-authenticate']).toMatch(/^Bearer /);
    expect(await boardRow(app, board.id)).toEqual(before);
    expect(await boardCount(app)).toBe(1);
  });
});

describe('board interface: protocol-level errors and the document', () => {
  it.each([
    ['PATCH', '/boards/1', 'DELETE, GET, HEAD, PUT'],
    ['POST', '/boards/1', 'DELETE, GET, HEAD, PUT'],
    ['PUT', '/boards', 'GET, HEAD, POST'],
    ['DELETE', '/boards', 'GET, HEAD, POST'],
    // /boards/list is its own resource, not a board with the id "list": the router would hand PUT and DELETE to
    // /boards/:board_id, and the error handler answers them as the unknown methods they are on this path.
    ['POST', '/boards/list', 'GET, HEAD'],
    ['PUT', '/boards/list', 'GET, HEAD'],
    ['DELETE', '/boards/list', 'GET, HEAD'],
  ])('answers %s %s with 405, Allow and the envelope', async (method, url, allow) => {
    const app = await buildTestApp();
    const author = await signUp(app);
    const res = await call(app, method as 'PATCH', url, { token: author.token, ...(method === 'PUT' ? { body: { title: 'x', content: 'y' } } : {}) });
    expectEnvelopeError(res, 405);
    expect(res.headers.allow).toBe(allow);
  });

  it('answers an unknown path under /boards with 404 in the envelope', async () => {
    const app = await buildTestApp();
    expectEnvelopeError(await call(app, 'GET', '/boards/1/comments'), 404);
    // An empty id is no path of the interface, not a malformed id.
    expectEnvelopeError(await call(app, 'GET', '/boards/'), 404);
  });

  it('describes every board operation, with its data type and envelope errors, in the OpenAPI document', async () => {
    const app = await buildTestApp();
    const doc = (await call(app, 'GET', '/openapi.json')).json();
    const op = (path: string, method: string) => doc.paths[path][method];
    // Named schemas are `$ref`s to components.schemas in the document: inline them to look inside.
    const deref = (node: unknown): typeof doc => {
      if (Array.isArray(node)) return node.map(deref);
      if (node === null || typeof node !== 'object') return node;
      const ref = (node as { $ref?: string }).$ref;
      if (ref !== undefined) return deref(ref.slice(2).split('/').reduce((at, key) => at[key], doc));
      return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, deref(value)]));
    };
    const data = (path: string, method: string, status: string) => deref(op(path, method).responses[status].content['application/json'].schema);
    expect(op('/boards/list', 'get').operationId).toBe('listBoards');
    expect(op('/boards', 'get').operationId).toBe('listBoardsAtRoot');
    expect(data('/boards/list', 'get', '200').properties.data.required).toEqual(['items', 'total', 'start', 'end', 'limit']);
    expect(data('/boards', 'get', '200').properties.data.properties.items.items.required).toEqual([
      'id', 'title', 'content', 'authorId', 'createdAt', 'updatedAt',
    ]);
    expect(deref(op('/boards/list', 'get').parameters).map((p: { name: string }) => p.name).sort()).toEqual(['If-None-Match', 'end', 'limit', 'start']);
    expect(data('/boards/{board_id}', 'get', '200').properties.data.required).toContain('authorId');
    expect(data('/boards/{board_id}', 'put', '200').properties.data).toMatchObject({ enum: ['updated'] });
    expect(data('/boards/{board_id}', 'delete', '200').properties.data).toMatchObject({ enum: ['deleted'] });
    expect(data('/boards', 'post', '201').properties.data.required).toContain('id');
    for (const [path, method, status] of [
      ['/boards/{board_id}', 'get', '404'],
      ['/boards', 'post', '401'],
      ['/boards/{board_id}', 'put', '401'],
      ['/boards/{board_id}', 'put', '403'],
      ['/boards/{board_id}', 'put', '404'],
      ['/boards/{board_id}', 'put', '415'],
      ['/boards/{board_id}', 'delete', '400'],
      ['/boards/{board_id}', 'delete', '403'],
    ] as const) {
      expect(data(path, method, status).title, `${method} ${path} ${status}`).toBe('EnvelopeError');
    }
  });
});

describe('total: the board count kept by triggers', () => {
  const total = async (app: FastifyInstance) => (await call(app, 'GET', '/boards/list')).json().data.total as number;
  const stored = async (app: FastifyInstance) => {
    const counter = await app.db.selectFrom('counters').select('value').where('name', '=', 'boards').executeTakeFirstOrThrow();
    const rows = await app.db.selectFrom('boards').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    return { counter: Number(counter.value), rows: Number(rows.n) };
  };

  it('follows creates, deletes, and the cascade when an author is deleted', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const b = await signUp(app);
    for (const who of [a, a, a, b]) {
      const res = await call(app, 'POST', '/boards', { token: who.token, body: { title: 't', content: 'c' } });
      expect(res.statusCode).toBe(201);
    }
    expect(await total(app)).toBe(4);
    const last = (await call(app, 'GET', '/boards/list?limit=1')).json().data.items[0].id as number;
    expect((await call(app, 'DELETE', `/boards/${last}`, { token: b.token })).statusCode).toBe(200);
    expect(await total(app)).toBe(3);
    expect((await call(app, 'DELETE', `/users/${a.id}`, { token: a.token })).statusCode).toBe(200);
    expect(await total(app)).toBe(0);
    expect(await stored(app)).toEqual({ counter: 0, rows: 0 });
    expect((await call(app, 'GET', '/boards/list?start=5')).json().data).toEqual({ items: [], total: 0, start: 5, end: 5, limit: 20 });
  });

  it('stays exact under concurrent creates and deletes', async () => {
    const app = await buildTestApp();
    const users = await Promise.all([signUp(app), signUp(app), signUp(app)]);
    const created = await Promise.all(
      Array.from({ length: 30 }, (_, i) => call(app, 'POST', '/boards', { token: users[i % 3]!.token, body: { title: `t${i}`, content: 'c' } })),
    );
    expect(created.every((r) => r.statusCode === 201)).toBe(true);
    const ids = created.map((r) => r.json().data.id as number);
    const deleted = await Promise.all(ids.slice(0, 12).map((id, i) => call(app, 'DELETE', `/boards/${id}`, { token: users[i % 3]!.token })));
    expect(deleted.every((r) => r.statusCode === 200)).toBe(true);
    expect(await stored(app)).toEqual({ counter: 18, rows: 18 });
    expect(await total(app)).toBe(18);
  });
});
