import type { FastifyInstance } from 'fastify';
import type { Insertable } from 'kysely';
import { afterEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { PUBLIC_URL, buildTestApp, call, testConfig, write, type Response } from '../../../test/helpers/build-test-app.js';
import { buildApp } from '../../app.js';
import type { Store } from '../../db/store.js';
import { idempotencyKeys } from './idempotency.repository.js';
import { signUp, type TestUser } from '../../../test/helpers/factories.js';
import { insertPost } from '../../../test/helpers/posts.js';
import * as passwords from '../../shared/passwords.js';
import type { IdempotencyKeysTable } from '../../db/types.js';
import { canonicalJson, fingerprint, parseIdempotencyKey } from './key.js';

// Every Argon2id hash goes through this spy: a test can count hashes, hold one (a slow sign-up) or make it fail.
vi.mock('../../shared/passwords.js', async (importOriginal) => {
  const original = await importOriginal<typeof passwords>();
  return { ...original, hashPassword: vi.fn(original.hashPassword) };
});
const hashPassword = vi.mocked(passwords.hashPassword);
const realHash = (await vi.importActual<typeof passwords>('../../shared/passwords.js')).hashPassword;
afterEach(() => {
  hashPassword.mockReset();
  hashPassword.mockImplementation(realHash);
});

const JSON_TYPE = 'application/json; charset=utf-8';
const PROBLEM_TYPE = 'application/problem+json; charset=utf-8';

/** A POST with a raw JSON text (so whitespace and key order are the test's), an Idempotency-Key and a token. */
function post(app: FastifyInstance, url: string, body: string | object, key?: string, token?: string): Promise<Response> {
  return app.inject({
    method: 'POST',
    url,
    headers: {
      'content-type': 'application/json',
      ...(key !== undefined ? { 'idempotency-key': key } : {}),
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

const count = async (app: FastifyInstance, table: 'users' | 'posts' | 'replies' | 'recommends' | 'follows' | 'boards' | 'tokens' | 'idempotency_keys') =>
  Number((await app.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);

const keyRows = (app: FastifyInstance) => app.db.selectFrom('idempotency_keys').selectAll().orderBy('id').execute();

/** Writes a key's row as another process (or an earlier version) would: a sign-up's scope, live for an hour, by default. */
async function insertKeyRow(app: FastifyInstance, row: Partial<Insertable<IdempotencyKeysTable>> & { idempotency_key: string; fingerprint: string }) {
  const now = Date.now();
  const defaults = { caller_id: 0, target: 'POST /users', started_at: new Date(now).toISOString(), expires_at: new Date(now + 3_600_000).toISOString() };
  await write(app, (db) => db.insertInto('idempotency_keys').values({ ...defaults, ...row }).execute());
}

/** A gate a held password hash waits on: `release()` lets it go on. */
function holdHashes(): { started: Promise<void>; release: () => void } {
  let release!: () => void;
  let started!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const startedPromise = new Promise<void>((resolve) => (started = resolve));
  hashPassword.mockImplementation(async (password, memoryKib) => {
    started();
    await gate;
    return realHash(password, memoryKib);
  });
  return { started: startedPromise, release };
}

/** The fingerprint the service keeps for this body (keyed by the database's secret). */
async function fingerprintOf(app: FastifyInstance, body: object): Promise<string> {
  const row = await app.db.selectFrom('settings').select('value').where('key', '=', 'idempotency_secret').executeTakeFirstOrThrow();
  return fingerprint(body, Buffer.from(row.value, 'base64url'));
}

function expectSameAnswer(replayed: Response, first: Response): void {
  expect(replayed.statusCode).toBe(first.statusCode);
  expect(replayed.body).toBe(first.body);
  expect(replayed.headers['content-type']).toBe(first.headers['content-type']);
  expect(replayed.headers.location).toBe(first.headers.location);
  expect(replayed.headers.etag).toBe(first.headers.etag);
  expect(replayed.headers['idempotent-replayed']).toBe('true');
  expect(first.headers['idempotent-replayed']).toBeUndefined();
}

describe('Idempotency-Key on sign-up', () => {
  it('replays the first answer to a repeat with the same body, whatever its whitespace and key order, without hashing again', async () => {
    const app = await buildTestApp();
    const first = await post(app, '/users', '{"username":"ada_idem","password":"correct horse battery","displayName":"Ada"}', 'signup-1');
    expect(first.statusCode).toBe(201);
    expect(first.headers.location).toBe(`${PUBLIC_URL}/users/${first.json().id}`);
    expect(first.json()).toMatchObject({ username: 'ada_idem', displayName: 'Ada' });
    expect(hashPassword).toHaveBeenCalledTimes(1);

    const again = await post(app, '/users', '{ "displayName" : "Ada",\n  "password": "correct horse battery", "username":"ada_idem" }', '"signup-1"');
    expectSameAnswer(again, first);
    expect(hashPassword).toHaveBeenCalledTimes(1);
    expect(await count(app, 'users')).toBe(1);

    const [row] = await keyRows(app);
    expect(row).toMatchObject({
      caller_id: 0,
      target: 'POST /users',
      idempotency_key: 'signup-1',
      claim_token: null,
      status: 201,
      content_type: JSON_TYPE,
      location: first.headers.location,
      etag: first.headers.etag,
      body: first.body,
    });
    // A keyed hash of the body (it holds a password), never the body itself.
    expect(row!.fingerprint).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(JSON.stringify(row)).not.toContain('correct horse battery');
  });

  it('answers 422 naming Idempotency-Key to the same key with another body, and creates nothing', async () => {
    const app = await buildTestApp();
    expect((await post(app, '/users', { username: 'ada_idem', password: 'correct horse battery' }, 'k')).statusCode).toBe(201);
    // Another password, or another name: another request.
    for (const body of [{ username: 'ada_idem', password: 'another password!' }, { username: 'bob_idem', password: 'correct horse battery' }]) {
      const res = await post(app, '/users', body, 'k');
      expect(res.statusCode).toBe(422);
      expect(res.headers['content-type']).toBe(PROBLEM_TYPE);
      expect(res.headers['idempotent-replayed']).toBeUndefined();
      expect(res.json()).toMatchObject({
        status: 422,
        errors: [{ field: 'Idempotency-Key', message: 'was already used with a different request body' }],
      });
    }
    expect(await count(app, 'users')).toBe(1);
    expect(hashPassword).toHaveBeenCalledTimes(1);
  });

  it('answers 409 with Retry-After: 1 while the first request runs, then replays once it is done', async () => {
    const app = await buildTestApp();
    const body = { username: 'slow_idem', password: 'correct horse battery' };
    const hold = holdHashes();
    const first = post(app, '/users', body, 'slow');
    await hold.started;

    const during = await post(app, '/users', body, 'slow');
    expect(during.statusCode).toBe(409);
    expect(during.headers['retry-after']).toBe('1');
    expect(during.json()).toMatchObject({ status: 409, errors: [{ field: 'Idempotency-Key' }] });
    // Another body: the key is bound to the first one from the moment it was claimed.
    expect((await post(app, '/users', { ...body, username: 'other_idem' }, 'slow')).statusCode).toBe(422);
    expect(await count(app, 'users')).toBe(0);

    hold.release();
    const done = await first;
    expect(done.statusCode).toBe(201);
    expectSameAnswer(await post(app, '/users', body, 'slow'), done);
    expect(hashPassword).toHaveBeenCalledTimes(1);
    expect(await count(app, 'users')).toBe(1);
  });

  it('keeps a 409 for a taken username, and replays it even once the name is free again', async () => {
    const app = await buildTestApp();
    const taken = await signUp(app, { username: 'taken_idem' });
    const first = await post(app, '/users', { username: 'TAKEN_idem', password: 'correct horse battery' }, 'dup');
    expect(first.statusCode).toBe(409);
    expect(first.json()).toMatchObject({ errors: [{ field: 'username' }] });
    await write(app, (db) => db.deleteFrom('users').where('id', '=', taken.id).execute());

    const again = await post(app, '/users', { username: 'TAKEN_idem', password: 'correct horse battery' }, 'dup');
    expectSameAnswer(again, first);
    expect(await count(app, 'users')).toBe(0);
    expect(await keyRows(app)).toMatchObject([{ status: 409, claim_token: null, content_type: PROBLEM_TYPE, body: first.body }]);
  });

  it('keeps no 5xx: the claim is given up and a retry runs again', async () => {
    const app = await buildTestApp();
    hashPassword.mockRejectedValueOnce(new Error('the hasher fell over'));
    const failed = await post(app, '/users', { username: 'retry_idem', password: 'correct horse battery' }, 'flaky');
    expect(failed.statusCode).toBe(500);
    expect(await keyRows(app)).toEqual([]);
    expect(await count(app, 'users')).toBe(0);

    const retried = await post(app, '/users', { username: 'retry_idem', password: 'correct horse battery' }, 'flaky');
    expect(retried.statusCode).toBe(201);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    expect(hashPassword).toHaveBeenCalledTimes(2);
    expect(await count(app, 'users')).toBe(1);
  });

  it('scopes a sign-up key by the token that came with it, and without one by the key alone', async () => {
    const app = await buildTestApp();
    const ada = await signUp(app);
    const body = { username: 'scoped_idem', password: 'correct horse battery' };
    const anonymous = await post(app, '/users', body, 'shared');
    expect(anonymous.statusCode).toBe(201);
    // Ada's key of the same name is hers: it runs (and meets the taken username).
    const asAda = await post(app, '/users', body, 'shared', ada.token);
    expect(asAda.statusCode).toBe(409);
    expect(asAda.headers['idempotent-replayed']).toBeUndefined();
    // Anyone else without a token shares the anonymous scope: a replay.
    expectSameAnswer(await post(app, '/users', body, 'shared'), anonymous);
    expect((await keyRows(app)).map((r) => [r.caller_id, r.status])).toEqual([
      [0, 201],
      [ada.id, 409],
    ]);
  });

  /** What another process sharing the database writes when its request with the same key keeps its answer. */
  const keptElsewhere = (app: FastifyInstance, key: string, answer: Response, fingerprint: string) =>
    insertKeyRow(app, {
      idempotency_key: key,
      fingerprint,
      status: answer.statusCode,
      content_type: String(answer.headers['content-type']),
      location: answer.headers.location === undefined ? null : String(answer.headers.location),
      body: answer.body,
    });

  it('rolls the create back and answers the kept answer, replayed, when another process kept one for the key while it ran', async () => {
    const app = await buildTestApp();
    const body = { username: 'lost_idem', password: 'correct horse battery' };
    const hold = holdHashes();
    const running = post(app, '/users', body, 'lost');
    await hold.started;
    const kept = { statusCode: 201, headers: { 'content-type': JSON_TYPE, location: `${PUBLIC_URL}/users/9` }, body: '{"id":9}' } as unknown as Response;
    await keptElsewhere(app, 'lost', kept, await fingerprintOf(app, body));
    hold.release();
    const res = await running;
    expect(res.statusCode).toBe(201);
    expect(res.headers['idempotent-replayed']).toBe('true');
    expect(res.headers['retry-after']).toBeUndefined();
    expect(res.headers.location).toBe(`${PUBLIC_URL}/users/9`);
    expect(res.body).toBe('{"id":9}');
    expect(await count(app, 'users')).toBe(0);
    expect((await keyRows(app)).map((r) => [r.idempotency_key, r.status, r.body])).toEqual([['lost', 201, '{"id":9}']]);
    // So does a retry.
    const retried = await post(app, '/users', body, 'lost');
    expect(retried.statusCode).toBe(201);
    expect(retried.headers['idempotent-replayed']).toBe('true');
    expect(retried.body).toBe('{"id":9}');
  });

  it('answers with the answer another process kept for the key when its own run ended in a 4xx meanwhile', async () => {
    const app = await buildTestApp();
    const body = { username: 'racer_idem', password: 'correct horse battery' };
    const hold = holdHashes();
    const running = post(app, '/users', body, 'race');
    await hold.started;
    // Meanwhile the same sign-up with the same key, through another process, created the user and kept its 201.
    const now = new Date().toISOString();
    const elsewhere = await write(app, (db) =>
      db
        .insertInto('users')
        .values({ username: 'racer_idem', username_key: 'racer_idem', display_name: '', bio: '', role: 'member', password_hash: 'x', created_at: now, updated_at: now })
        .returning('id')
        .executeTakeFirstOrThrow(),
    );
    const location = `${PUBLIC_URL}/users/${elsewhere.id}`;
    const kept = { statusCode: 201, headers: { 'content-type': JSON_TYPE, location }, body: '{"id":1}' } as unknown as Response;
    const fingerprint = await fingerprintOf(app, body);
    await keptElsewhere(app, 'race', kept, fingerprint);
    hold.release();
    // Its own insert met the taken name (409); the client gets the first answer instead, replayed.
    const res = await running;
    expect(res.statusCode).toBe(201);
    expect(res.headers['idempotent-replayed']).toBe('true');
    expect(res.headers.location).toBe(location);
    expect(res.headers['content-type']).toBe(JSON_TYPE);
    expect(res.headers['retry-after']).toBeUndefined();
    expect(res.body).toBe('{"id":1}');
    expect(await count(app, 'users')).toBe(1);
    expect((await keyRows(app)).map((r) => [r.idempotency_key, r.status])).toEqual([['race', 201]]);
  });

  it('never holds a key after a crash: a row without an answer (a claim of an earlier version) is run over', async () => {
    const app = await buildTestApp();
    const body = { username: 'after_crash', password: 'correct horse battery' };
    await insertKeyRow(app, { idempotency_key: 'crash', fingerprint: await fingerprintOf(app, body), claim_token: 'dead' });
    const res = await post(app, '/users', body, 'crash');
    expect(res.statusCode).toBe(201);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    expect((await keyRows(app)).map((r) => [r.idempotency_key, r.claim_token, r.status, r.body])).toEqual([['crash', null, 201, res.body]]);
    expectSameAnswer(await post(app, '/users', body, 'crash'), res);
  });
});

describe('Idempotency-Key on every creating POST', () => {
  interface Case {
    name: string;
    table: 'posts' | 'follows' | 'replies' | 'recommends' | 'boards';
    /** The request (url, body, and a valid body of another meaning), for user `a` (who has a post) and user `b`. */
    request: (a: TestUser, b: TestUser, postId: number) => { url: string; body: object; other: object; token: string };
  }
  const cases: Case[] = [
    {
      name: 'POST /users/{id}/posts',
      table: 'posts',
      request: (a) => ({ url: `/users/${a.id}/posts`, body: { title: 'T', content: 'C' }, other: { title: 'T', content: 'C', visibility: 'private' }, token: a.token }),
    },
    { name: 'POST /users/{id}/followers', table: 'follows', request: (a, b) => ({ url: `/users/${a.id}/followers`, body: { id: b.id }, other: { id: a.id }, token: b.token }) },
    {
      name: 'POST /posts/{id}/replies',
      table: 'replies',
      request: (_a, b, postId) => ({ url: `/posts/${postId}/replies`, body: { content: 'Nice' }, other: { content: 'Nicer' }, token: b.token }),
    },
    {
      name: 'POST /posts/{id}/recommends',
      table: 'recommends',
      request: (a, b, postId) => ({ url: `/posts/${postId}/recommends`, body: { id: b.id }, other: { id: a.id }, token: b.token }),
    },
    {
      name: 'POST /boards',
      table: 'boards',
      request: (a) => ({ url: '/boards', body: { title: 'Notice', content: 'At five' }, other: { title: 'Notice', content: 'At six' }, token: a.token }),
    },
  ];

  it.each(cases)('$name: a repeat gets the kept 201 again and creates nothing', async ({ table, request }) => {
    const app = await buildTestApp();
    const [a, b] = [await signUp(app), await signUp(app)];
    const postId = await insertPost(app, a.id);
    const { url, body, other: otherBody, token } = request(a, b, postId);
    const before = await count(app, table);
    const first = await post(app, url, body, 'create-1', token);
    expect(first.statusCode).toBe(201);
    expect(first.headers.location).toMatch(new RegExp(`^${PUBLIC_URL}/`));
    expect(await count(app, table)).toBe(before + 1);
    const counters = await app.db.selectFrom('posts').select(['reply_count', 'recommend_count']).where('id', '=', postId).executeTakeFirstOrThrow();

    // A follow or a recommend sent twice would be a 409: the repeat is the first answer instead.
    const again = await post(app, url, body, 'create-1', token);
    expectSameAnswer(again, first);
    expect(await count(app, table)).toBe(before + 1);
    expect(await app.db.selectFrom('posts').select(['reply_count', 'recommend_count']).where('id', '=', postId).executeTakeFirstOrThrow()).toEqual(counters);
    expect(await keyRows(app)).toMatchObject([{ caller_id: token === a.token ? a.id : b.id, target: `POST ${url}`, status: 201, body: first.body }]);

    const other = await post(app, url, otherBody, 'create-1', token);
    expect(other.statusCode).toBe(422);
    if (table === 'boards') {
      expect(other.json()).toEqual({
        code: '422',
        message: 'Idempotency-Key was already used with a different request body',
        data: null,
        errors: [{ field: 'Idempotency-Key', message: 'was already used with a different request body' }],
      });
    }
    // Without a key the route works as before.
    const plain = await call(app, 'POST', url, { token, body });
    expect(plain.statusCode).toBe(table === 'follows' || table === 'recommends' ? 409 : 201);
    expect(plain.headers['idempotent-replayed']).toBeUndefined();
  });

  it('keeps apart the same key sent by two callers, and by one caller to two paths', async () => {
    const app = await buildTestApp();
    const [a, b] = [await signUp(app), await signUp(app)];
    const body = { title: 'Notice', content: 'Same body' };
    const byA = await post(app, '/boards', body, 'k', a.token);
    const byB = await post(app, '/boards', body, 'k', b.token);
    expect([byA.statusCode, byB.statusCode]).toEqual([201, 201]);
    expect(byB.headers['idempotent-replayed']).toBeUndefined();
    expect(byA.json().data.id).not.toBe(byB.json().data.id);

    const [p1, p2] = [await insertPost(app, a.id), await insertPost(app, a.id)];
    const r1 = await post(app, `/posts/${p1}/replies`, { content: 'Hi' }, 'k', b.token);
    const r2 = await post(app, `/posts/${p2}/replies`, { content: 'Hi' }, 'k', b.token);
    expect([r1.statusCode, r2.statusCode, r2.headers['idempotent-replayed']]).toEqual([201, 201, undefined]);
    // `%31` is `1` to the router, so it is the same path to the key as well.
    const encoded = await post(app, `/posts/${String(p1).replace(/^1/, '%31')}/replies`, { content: 'Hi' }, 'k', b.token);
    if (String(p1).startsWith('1')) expectSameAnswer(encoded, r1);
    expect(await count(app, 'boards')).toBe(2);
    expect(await count(app, 'replies')).toBe(2);
  });

  it('keeps a 4xx of the create (403, 404) and replays it', async () => {
    const app = await buildTestApp();
    const [a, b] = [await signUp(app), await signUp(app)];
    const forbidden = await post(app, `/users/${a.id}/posts`, { title: 'T', content: 'C' }, 'k403', b.token);
    expect(forbidden.statusCode).toBe(403);
    expectSameAnswer(await post(app, `/users/${a.id}/posts`, { title: 'T', content: 'C' }, 'k403', b.token), forbidden);

    const postId = await insertPost(app, a.id, { visibility: 'private' });
    const hidden = await post(app, `/posts/${postId}/replies`, { content: 'Hi' }, 'k404', b.token);
    expect(hidden.statusCode).toBe(404);
    // Made visible since: the key still answers what its request got.
    await write(app, (db) => db.updateTable('posts').set({ visibility: 'public' }).where('id', '=', postId).execute());
    expectSameAnswer(await post(app, `/posts/${postId}/replies`, { content: 'Hi' }, 'k404', b.token), hidden);
    expect(await count(app, 'replies')).toBe(0);
    expect((await keyRows(app)).map((r) => r.status)).toEqual([403, 404]);
  });

  it('never claims a key for a request refused before it runs (401, 400 on the body)', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    expect((await post(app, '/boards', { title: 'T', content: 'C' }, 'k')).statusCode).toBe(401);
    expect((await post(app, '/boards', { title: 'T' }, 'k', a.token)).statusCode).toBe(400);
    expect(await keyRows(app)).toEqual([]);
    // The corrected request may use the key.
    expect((await post(app, '/boards', { title: 'T', content: 'C' }, 'k', a.token)).statusCode).toBe(201);
  });

  it('replays to every one of many simultaneous repeats once the first has finished, none of them a 409', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const body = { title: 'Once', content: 'Then replayed' };
    const first = await post(app, `/users/${a.id}/posts`, body, 'done', a.token);
    expect(first.statusCode).toBe(201);
    const repeats = await Promise.all(Array.from({ length: 12 }, () => post(app, `/users/${a.id}/posts`, body, 'done', a.token)));
    for (const res of repeats) expectSameAnswer(res, first);
    expect(await count(app, 'posts')).toBe(1);
  });

  it('lets only one of many simultaneous requests with one key create; the others get 409 or the replay', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const answers = await Promise.all(Array.from({ length: 12 }, () => post(app, `/users/${a.id}/posts`, { title: 'Once', content: 'Only once' }, 'race', a.token)));
    const created = answers.filter((r) => r.statusCode === 201 && r.headers['idempotent-replayed'] === undefined);
    expect(created).toHaveLength(1);
    for (const res of answers) {
      if (res === created[0]) continue;
      if (res.statusCode === 409) expect(res.headers['retry-after']).toBe('1');
      else expectSameAnswer(res, created[0]!);
    }
    expect(await count(app, 'posts')).toBe(1);
    expect(await count(app, 'idempotency_keys')).toBe(1);
  });
});

describe('Idempotency-Key in the create’s transaction', () => {
  /** Another process on the same database: its own in-process state, the same rows (the store is the first's). */
  async function secondProcess(app: FastifyInstance): Promise<FastifyInstance> {
    const shared = Object.create(app.store, { close: { value: async () => {} } }) as Store;
    const other = await buildApp(testConfig(), { store: shared, logger: false });
    await other.ready();
    onTestFinished(() => other.close());
    return other;
  }

  /** Holds the first create that keeps an answer inside its transaction, after the keep and before the commit. */
  function holdAfterKeep(): { kept: Promise<void>; release: () => void } {
    const keep = idempotencyKeys.keep.bind(idempotencyKeys);
    let release!: () => void;
    let kept!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const keptPromise = new Promise<void>((resolve) => (kept = resolve));
    const spy = vi.spyOn(idempotencyKeys, 'keep').mockImplementationOnce(async (...args) => {
      const done = await keep(...args);
      kept();
      await gate;
      return done;
    });
    onTestFinished(() => spy.mockRestore());
    return { kept: keptPromise, release };
  }

  it('makes a repeat sent to another process while the first is still in its transaction wait, then replays the first', async () => {
    const app = await buildTestApp();
    const other = await secondProcess(app);
    const a = await signUp(app);
    const body = { title: 'Once', content: 'Held open' };
    const hold = holdAfterKeep();
    const first = post(app, `/users/${a.id}/posts`, body, 'held', a.token);
    await hold.kept;
    // Nothing is committed yet: the other process finds no answer and runs; PostgreSQL makes it wait on the rows the
    // first holds, SQLite's one writer queues it behind the first.
    const repeat = post(other, `/users/${a.id}/posts`, body, 'held', a.token);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await count(app, 'posts')).toBe(0);
    hold.release();
    const [done, again] = await Promise.all([first, repeat]);
    expect(done.statusCode).toBe(201);
    expectSameAnswer(again, done);
    expect(again.headers['retry-after']).toBeUndefined();
    expect(await count(app, 'posts')).toBe(1);
    const author = await app.db.selectFrom('users').select('post_count').where('id', '=', a.id).executeTakeFirstOrThrow();
    expect(Number(author.post_count)).toBe(1);
    expect(await keyRows(app)).toMatchObject([{ caller_id: a.id, target: `POST /users/${a.id}/posts`, idempotency_key: 'held', status: 201, body: done.body }]);
  });

  it('keeps neither the post nor its key when the transaction fails after the answer was kept, and a retry runs', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const body = { title: 'Crash', content: 'Before the commit' };
    const keep = idempotencyKeys.keep.bind(idempotencyKeys);
    const spy = vi.spyOn(idempotencyKeys, 'keep').mockImplementationOnce(async (...args) => {
      expect(await keep(...args)).toBe(true);
      throw new Error('the process died between the kept answer and COMMIT');
    });
    onTestFinished(() => spy.mockRestore());
    const failed = await post(app, `/users/${a.id}/posts`, body, 'crash', a.token);
    expect(failed.statusCode).toBe(500);
    expect(failed.headers.location).toBeUndefined();
    expect(failed.headers.etag).toBeUndefined();
    expect(await keyRows(app)).toEqual([]);
    expect(await count(app, 'posts')).toBe(0);

    const retried = await post(app, `/users/${a.id}/posts`, body, 'crash', a.token);
    expect(retried.statusCode).toBe(201);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    expect(await count(app, 'posts')).toBe(1);
    expect(await keyRows(app)).toMatchObject([{ idempotency_key: 'crash', status: 201, body: retried.body, location: retried.headers.location }]);
    expectSameAnswer(await post(app, `/users/${a.id}/posts`, body, 'crash', a.token), retried);
  });
});

describe('the Idempotency-Key field value', () => {
  it.each([
    ['abc', 'abc'],
    ['"abc"', 'abc'],
    ['"a\\"b\\\\c"', 'a"b\\c'],
    ['x'.repeat(255), 'x'.repeat(255)],
    [`"${'y'.repeat(255)}"`, 'y'.repeat(255)],
    ['!~#{}', '!~#{}'],
    ['a,b', 'a,b'],
  ])('%s is the key %s', (value, key) => {
    expect(parseIdempotencyKey(value)).toBe(key);
  });

  it.each(['', '""', 'a b', '"a b"', '"abc', '"a"b', '"a";p=1', '"a\\x"', 'x'.repeat(256), `"${'y'.repeat(256)}"`, 'clé', 'a, b'])(
    '%j is malformed',
    (value) => {
      expect(parseIdempotencyKey(value)).toBeUndefined();
    },
  );

  it.each([
    ['a b', '/users'],
    ['"unterminated', '/users'],
    ['x'.repeat(256), '/boards'],
    ['"a";p=1', '/tokens'],
  ])('%j is a 400 naming the header on POST %s, before anything runs', async (value, url) => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const body = url === '/tokens' ? { username: a.username, password: a.password } : url === '/boards' ? { title: 'T', content: 'C' } : { username: 'n_idem', password: 'correct horse battery' };
    hashPassword.mockClear();
    const res = await post(app, url, body, value, url === '/boards' ? a.token : undefined);
    expect(res.statusCode).toBe(400);
    const field = { field: 'Idempotency-Key', message: 'must be a structured-field string ("…") or a bare value of 1 to 255 visible ASCII characters' };
    expect(res.json()).toMatchObject(url === '/boards' ? { code: '400', data: null, errors: [field] } : { status: 400, errors: [field] });
    expect(hashPassword).not.toHaveBeenCalled();
    expect(await count(app, 'users')).toBe(1);
    expect(await count(app, 'boards')).toBe(0);
  });

  it('canonical JSON ignores key order and whitespace, not array order or values', () => {
    expect(canonicalJson(JSON.parse('{ "b": [1, {"y":2,"x":1}], "a": "s" }'))).toBe('{"a":"s","b":[1,{"x":1,"y":2}]}');
    expect(canonicalJson([2, 1])).not.toBe(canonicalJson([1, 2]));
  });
});

describe('POST /tokens', () => {
  it('accepts a key and ignores it: every sign-in mints a fresh token', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const tokensBefore = await count(app, 'tokens');
    const first = await post(app, '/tokens', { username: a.username, password: a.password }, 'signin');
    const second = await post(app, '/tokens', { username: a.username, password: a.password }, 'signin');
    expect([first.statusCode, second.statusCode]).toEqual([201, 201]);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    expect(second.json().token).not.toBe(first.json().token);
    expect(await count(app, 'tokens')).toBe(tokensBefore + 2);
    expect(await keyRows(app)).toEqual([]);
  });
});

describe('expiry', () => {
  it('forgets a key after IDEMPOTENCY_TTL_SECONDS: the same key then creates again', async () => {
    const app = await buildTestApp({ idempotencyTtlSeconds: 1 });
    const a = await signUp(app);
    const body = { title: 'T', content: 'C' };
    expect((await post(app, '/boards', body, 'ttl', a.token)).statusCode).toBe(201);
    expect((await post(app, '/boards', body, 'ttl', a.token)).headers['idempotent-replayed']).toBe('true');
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const later = await post(app, '/boards', body, 'ttl', a.token);
    expect(later.statusCode).toBe(201);
    expect(later.headers['idempotent-replayed']).toBeUndefined();
    expect(await count(app, 'boards')).toBe(2);
    expect(await count(app, 'idempotency_keys')).toBe(1);
  });

  it('runs over an expired answer that the purge has not reached yet, whatever body it was for', async () => {
    const app = await buildTestApp();
    const a = await signUp(app);
    const past = (ms: number) => new Date(Date.now() - ms).toISOString();
    await insertKeyRow(app, {
      caller_id: a.id,
      target: 'POST /boards',
      idempotency_key: 'old',
      fingerprint: 'another body',
      started_at: past(120_000),
      expires_at: past(60_000),
      status: 201,
      content_type: JSON_TYPE,
      body: '{"old":true}',
    });
    const res = await post(app, '/boards', { title: 'T', content: 'C' }, 'old', a.token);
    expect(res.statusCode).toBe(201);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    const rows = await keyRows(app);
    expect(rows.map((r) => [r.idempotency_key, r.status, r.body])).toEqual([['old', 201, res.body]]);
    expect(rows[0]!.fingerprint).not.toBe('another body');
    expect(rows[0]!.expires_at > new Date().toISOString()).toBe(true);
    expectSameAnswer(await post(app, '/boards', { title: 'T', content: 'C' }, 'old', a.token), res);
  });

  it('purges expired keys in the background and leaves the live ones', async () => {
    const app = await buildTestApp({ idempotencyTtlSeconds: 1 });
    const a = await signUp(app);
    expect((await post(app, '/boards', { title: 'T', content: 'C' }, 'old', a.token)).statusCode).toBe(201);
    await insertKeyRow(app, { caller_id: a.id, target: 'POST /boards', idempotency_key: 'live', fingerprint: 'f', status: 201, content_type: JSON_TYPE, body: '{}' });
    // The timer runs every TTL (here 1 s); no request is needed.
    await vi.waitFor(async () => expect((await keyRows(app)).map((r) => r.idempotency_key)).toEqual(['live']), { timeout: 5000, interval: 200 });
    expect(await app.idempotency.purge()).toBe(0);
  });

  it('purges in batches through app.idempotency.purge', async () => {
    const app = await buildTestApp();
    const past = new Date(Date.now() - 1000).toISOString();
    await write(app, (db) =>
      db
        .insertInto('idempotency_keys')
        .values(Array.from({ length: 1205 }, (_, i) => ({ caller_id: 1, target: 'POST /boards', idempotency_key: `k${i}`, fingerprint: 'f', started_at: past, expires_at: past })))
        .execute(),
    );
    expect(await app.idempotency.purge()).toBe(1205);
    expect(await count(app, 'idempotency_keys')).toBe(0);
  });
});
