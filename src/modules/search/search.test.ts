import type { FastifyInstance } from 'fastify';
import { sql, type Kysely } from 'kysely';
import { describe, expect, it, onTestFinished } from 'vitest';
import { buildApp } from '../../app.js';
import type { Store, Tx } from '../../db/store.js';
import type { Database, Visibility } from '../../db/types.js';
import { buildTestApp, call, testConfig } from '../../../test/helpers/build-test-app.js';
import { follow, nextPath, publish } from '../../../test/helpers/api.js';
import { backend, sqlitePlan, storeBeforeMigration } from '../../../test/helpers/database.js';
import { createAdmin, signUp, type TestUser } from '../../../test/helpers/factories.js';
import { createPostsRepository, searchReader } from '../posts/posts.repository.js';
import { createUsersRepository } from '../users/users.repository.js';
import { COMMON_SHARE, commonShare, searchPage } from '../../db/search-sql.js';
import { parsePostQuery, parseUserQuery } from './search.query.js';
import { indexPost } from './search.repository.js';
import { wordsOf } from './search.text.js';

const PROBLEM = 'application/problem+json; charset=utf-8';

/** The documents of the table below, published in this order (so newest first is the reverse). */
const DOCUMENTS: Record<string, { title: string; content: string }> = {
  cafe: { title: 'Café society', content: 'We met at the cafe on Monday.' },
  latte: { title: 'CAFÉ LATTE', content: 'Straße und Übung' },
  numbers: { title: 'Room 101', content: 'Version 2 of abc123 and 12345678901234567890' },
  email: { title: 'Contact', content: 'Write to ann@example.com or bob-smith@example.org today.' },
  newYork: { title: 'New York', content: 'I love new york pizza, not york new.' },
  yorkIsNew: { title: 'York is new', content: 'A town' },
  connect: { title: 'Connect', content: 'connect connection' },
  connected: { title: 'Connected people', content: 'people' },
  keywords: { title: 'or and not', content: 'NEAR AND OR NOT "quoted" * - ( ) : ^' },
  scripts: { title: 'Ελληνικά ΟΔΟΣ', content: '東京 тест naïve हिन्दी' },
  prefix: { title: 'prefix test', content: 'preamble premium' },
  dashed: { title: 'foo-bar', content: 'foo_baz x' },
  repeated: { title: 'Repeated', content: `${'w '.repeat(300)}z` },
};

/** (query, the documents it finds, newest first). */
const FINDS: [string, string[]][] = [
  ['cafe', ['latte', 'cafe']],
  ['CAFÉ', ['latte', 'cafe']],
  ['cafe\u0301', ['latte', 'cafe']], // decomposed é
  ['Cafe latte', ['latte']],
  ['straße', ['latte']],
  ['STRASSE', []], // no folding beyond case and Latin diacritics
  ['ubung', ['latte']],
  ['"new york"', ['newYork']],
  ['"york new"', ['newYork']],
  ['new york', ['yorkIsNew', 'newYork']],
  ['york -pizza', ['yorkIsNew']],
  ['york -"new york"', ['yorkIsNew']],
  ['"new york" -pizza', []],
  ['"new york', ['newYork']], // an unclosed quote runs to the end
  ['pre*', ['prefix']],
  ['prem*', ['prefix']],
  ['premium*', ['prefix']],
  ['p*', []], // a * after one character is ignored: the word "p"
  ['x*', ['dashed']],
  ['connect', ['connect']], // no stemming
  ['connected', ['connected']],
  ['connect*', ['connected', 'connect']],
  ['ann@example.com', ['email']],
  ['"example com"', ['email']],
  ['"com example"', []],
  ['bob smith', ['email']],
  ['foo-bar', ['dashed']],
  ['"foo bar"', ['dashed']],
  ['baz', ['dashed']],
  ['abc123', ['numbers']],
  ['abc', []],
  ['abc*', ['numbers']],
  ['12345678901234567890', ['numbers']],
  ['1234567890*', ['numbers']],
  ['101 2', ['numbers']],
  ['or', ['keywords', 'email']], // no stop words, and no operators
  ['near and or not', ['keywords']],
  ['cafe OR latte', []],
  ['NEAR(cafe latte)', []],
  ['οδος', ['scripts']], // final sigma
  ['ΟΔΟΣ', ['scripts']],
  ['東京', ['scripts']],
  ['тест', ['scripts']],
  ['NAIVE', ['scripts']],
  ['हिन्दी', ['scripts']],
  ['z', ['repeated']],
  ['w', ['repeated']],
  ['"w z"', []], // past the 256th occurrence of a word, a phrase through it is missed on both engines alike
  ['"w w"', ['repeated']],
  ["'; drop table posts; --", []],
  ['cafe\\', ['latte', 'cafe']],
  ['*cafe* -x', ['latte', 'cafe']],
  ['cafe -(latte)', ['latte']], // `-` before a non-word is a separator
  ['--cafe latte', []],
  ['-- cafe latte', ['latte']],
];

/** Queries with nothing to match, or over the limits: 400 naming q. */
const REFUSED = ['', 'cafe\u0000', '   ', '-cafe', '"" - * ', '-"new york"', '---', 'a'.repeat(201), 'a b c d e f g h i j k', '"a b c d e f g h i j k"', '-a b c d e f g h i j k'];

async function publishAll(app: FastifyInstance, owner: TestUser): Promise<Record<string, number>> {
  const ids: Record<string, number> = {};
  for (const [name, body] of Object.entries(DOCUMENTS)) {
    const res = await call(app, 'POST', `/users/${owner.id}/posts`, { token: owner.token, body });
    expect(res.statusCode).toBe(201);
    ids[name] = res.json().id;
  }
  return ids;
}

const search = (app: FastifyInstance, q: string, token?: string, path = '/posts') =>
  call(app, 'GET', `${path}?q=${encodeURIComponent(q)}`, { token });
const ids = (res: { json(): unknown }) => (res.json() as { id: number }[]).map((p) => p.id);

describe('GET /posts?q=', () => {
  it('finds, per the table, the same posts in the same order on this backend', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const docs = await publishAll(app, owner);
    const found: Record<string, number[]> = {};
    for (const [q] of FINDS) {
      const res = await search(app, q);
      expect(res.statusCode, q).toBe(200);
      found[q] = ids(res);
    }
    expect(found).toEqual(Object.fromEntries(FINDS.map(([q, names]) => [q, names.map((n) => docs[n])])));
    // The same through the owner's listing.
    const own = await search(app, 'cafe', undefined, `/users/${owner.id}/posts`);
    expect(ids(own)).toEqual([docs.latte, docs.cafe]);
  });

  it.each(REFUSED)('answers 400 naming q for %j', async (q) => {
    const app = await buildTestApp();
    const res = await search(app, q);
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toBe(PROBLEM);
    expect(res.json().errors.map((e: { field: string }) => e.field)).toEqual(['q']);
  });

  it('takes 200 code points of any plane, and 10 terms counting phrase words and exclusions', async () => {
    const app = await buildTestApp();
    expect((await search(app, '😀'.repeat(199) + 'a')).statusCode).toBe(200);
    expect((await search(app, '😀'.repeat(201))).statusCode).toBe(400);
    expect((await search(app, 'a b c d e f g h i -j')).statusCode).toBe(200);
    expect((await search(app, '"a b c d e" f g h i -j')).statusCode).toBe(200);
    expect((await search(app, '"a b c d e" f g h i -j k')).statusCode).toBe(400);
    // A repeated q is not a query either.
    for (const path of ['/posts?q=a&q=b', '/users?q=a&q=b', '/users/1/posts?q=a&q=b']) {
      const res = await call(app, 'GET', path);
      expect({ path, status: res.statusCode, field: res.json().errors?.[0]?.field }).toEqual({ path, status: 400, field: 'q' });
    }
  });

  it('shows only what the caller may see: followers-only and private posts stay hidden from the others', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const follower = await signUp(app);
    const stranger = await signUp(app);
    const admin = await createAdmin(app);
    await follow(app, follower, owner);
    const pub = await publish(app, owner, 'secretword public', 'public');
    const fol = await publish(app, owner, 'secretword followers', 'followers');
    const pri = await publish(app, owner, 'secretword private', 'private');
    const expected = {
      anonymous: [pub.id],
      stranger: [pub.id],
      follower: [fol.id, pub.id],
      owner: [pri.id, fol.id, pub.id],
      admin: [pri.id, fol.id, pub.id],
    };
    const tokens = { anonymous: undefined, stranger: stranger.token, follower: follower.token, owner: owner.token, admin: admin.token };
    const seen: Record<string, number[]> = {};
    const seenOwn: Record<string, number[]> = {};
    for (const [who, token] of Object.entries(tokens)) {
      seen[who] = ids(await search(app, 'secretword', token));
      seenOwn[who] = ids(await search(app, 'secretword', token, `/users/${owner.id}/posts`));
    }
    expect(seen).toEqual(expected);
    expect(seenOwn).toEqual(expected);
  });

  it('shows edits, visibility changes and deletes at once, an account deletion included', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const post = await publish(app, owner, 'alpha');
    expect(ids(await search(app, 'alpha'))).toEqual([post.id]);
    const put = (body: object) => call(app, 'PUT', `/posts/${post.id}`, { token: owner.token, body });
    expect((await put({ title: 'beta', content: 'gamma', visibility: 'public' })).statusCode).toBe(200);
    expect(ids(await search(app, 'alpha'))).toEqual([]);
    expect(ids(await search(app, 'beta gamma'))).toEqual([post.id]);
    expect((await put({ title: 'beta', content: 'gamma', visibility: 'private' })).statusCode).toBe(200);
    expect(ids(await search(app, 'beta'))).toEqual([]);
    expect(ids(await search(app, 'beta', owner.token))).toEqual([post.id]);
    expect((await put({ title: 'beta', content: 'gamma', visibility: 'public' })).statusCode).toBe(200);
    expect((await call(app, 'DELETE', `/posts/${post.id}`, { token: owner.token })).statusCode).toBe(200);
    expect(ids(await search(app, 'beta', owner.token))).toEqual([]);

    const other = await publish(app, owner, 'delta');
    expect(ids(await search(app, 'delta'))).toEqual([other.id]);
    expect(await indexEntries(app)).toBe(1);
    expect((await call(app, 'DELETE', `/users/${owner.id}`, { token: owner.token })).statusCode).toBe(200);
    expect(ids(await search(app, 'delta'))).toEqual([]);
    // The index entries went with the posts (the trigger, or the foreign key's cascade).
    expect(await indexEntries(app)).toBe(0);
  });

  it('pages newest first over keyset cursors, each post once, while new posts arrive', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const made: number[] = [];
    for (let i = 0; i < 25; i++) made.push((await publish(app, owner, i % 2 ? `paged odd ${i}` : `paged even ${i}`)).id);
    const seen: number[] = [];
    let path: string | undefined = '/posts?q=paged&limit=10';
    let pages = 0;
    while (path) {
      const res = await call(app, 'GET', path);
      expect(res.statusCode).toBe(200);
      seen.push(...ids(res));
      if (pages++ === 0) await publish(app, owner, 'paged later'); // newer than the cursor: not on later pages
      path = nextPath(res.headers.link);
    }
    expect(pages).toBe(3);
    expect(seen).toEqual([...made].reverse());
    // Two terms, over pages too.
    const odd = await call(app, 'GET', '/posts?q=paged%20odd&limit=5');
    expect(ids(odd)).toEqual(made.filter((_, i) => i % 2).reverse().slice(0, 5));
    const second = await call(app, 'GET', nextPath(odd.headers.link)!);
    expect(ids(second)).toEqual(made.filter((_, i) => i % 2).reverse().slice(5, 10));
    // A cursor belongs to its query: another query's, or an edited one, is a 400 naming cursor.
    const cursor = /cursor=([^&>]+)/.exec(String(odd.headers.link))![1]!;
    for (const path of [`/posts?q=paged%20even&cursor=${cursor}`, `/posts?cursor=${cursor}`, `/posts?q=paged%20odd&cursor=${cursor.replace(/^\d/, '9')}`]) {
      const res = await call(app, 'GET', path);
      expect({ path, status: res.statusCode, field: res.json().errors?.[0]?.field }).toEqual({ path, status: 400, field: 'cursor' });
    }
  });

  it('answers 404 for the posts of a user that does not exist, and JSON when a stream is asked for with q', async () => {
    const app = await buildTestApp();
    expect((await search(app, 'x', undefined, '/users/999/posts')).statusCode).toBe(404);
    const res = await call(app, 'GET', '/posts?q=x', { headers: { accept: 'text/event-stream' } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual([]);
  });

  it.runIf(backend === 'sqlite')('lets FTS5 drive the page on SQLite: no sort, the cursor as the index bound', async () => {
    const app = await buildTestApp();
    const posts = createPostsRepository(app.db);
    const terms = parsePostQuery('common word').terms;
    for (const viewer of [undefined, { id: 1, role: 'member' as const }]) {
      const plan = await sqlitePlan(app.db, posts.listQuery(viewer, { limit: 20, after: 1000 }, { terms }));
      expect(plan[0]).toMatch(/^SCAN post_search VIRTUAL TABLE INDEX \d+:M1<$/);
      expect(plan.join('\n')).not.toMatch(/TEMP B-TREE/);
      // A window below a cursor (searchPage): both bounds FTS5's, read forwards, no sort.
      const window = await sqlitePlan(app.db, posts.listQuery(viewer, { limit: 20, after: 1000 }, { terms }, { below: 1000, atLeast: 936 }));
      expect(window[0]).toMatch(/^SCAN post_search VIRTUAL TABLE INDEX \d+:M1><$/);
      expect(window[1]).toBe('SEARCH posts USING INTEGER PRIMARY KEY (rowid=?)');
      expect(window.join('\n')).not.toMatch(/TEMP B-TREE/);
      // One owner's posts drive their search (the owner index), each looked up in FTS5 by rowid.
      const owned = await sqlitePlan(app.db, posts.listQuery(viewer, { limit: 20, after: 1000 }, { terms, ownerId: 7 }, { below: 1000, ownerId: 7 }));
      expect(owned[0]).toMatch(/^SEARCH posts USING INDEX posts_owner_id \(owner_id=\? AND id<\?\)$/);
      expect(owned.filter((line) => line.includes('post_search'))).toEqual([expect.stringMatching(/^SCAN post_search VIRTUAL TABLE INDEX \d+:=M1$/)]);
      expect(owned.join('\n')).not.toMatch(/TEMP B-TREE/);
    }
  });
});

describe('a search page read in windows (PostgreSQL)', () => {
  it('has the rows one query over the whole index has, whichever windows find them', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const follower = await signUp(app);
    await follow(app, follower, owner);
    for (let i = 1; i <= 40; i++) {
      const words = [i % 2 ? 'odd' : 'even', i % 13 === 0 ? 'rare' : 'plain', i <= 8 ? 'early' : 'late', i % 3 ? 'red green' : 'green red'];
      await publish(app, i % 4 === 0 ? follower : owner, words.join(' '), i % 5 === 0 ? 'private' : i % 7 === 0 ? 'followers' : 'public');
    }
    // With statistics, a query common enough is walked along the primary key once the windows are past, the rest
    // listed from the index: both ways must give the whole query's rows.
    if (backend === 'postgres') {
      await sql`analyze post_search`.execute(app.db);
      expect(await commonShare(app.db, parsePostQuery('odd').terms)).toBeGreaterThanOrEqual(COMMON_SHARE);
      expect(await commonShare(app.db, parsePostQuery('odd late').terms)).toBeGreaterThanOrEqual(COMMON_SHARE);
      expect(await commonShare(app.db, parsePostQuery('gre*').terms)).toBe(0);
      expect(await commonShare(app.db, parsePostQuery('nothing').terms)).toBe(0);
    }
    const posts = createPostsRepository(app.db);
    const queries = ['odd', 'rare', 'early', 'odd rare', '"red green"', 'late -odd', 'gre*', 'nothing'];
    const checked: string[] = [];
    for (const q of queries) {
      const search = { terms: parsePostQuery(q).terms };
      for (const viewer of [undefined, { id: follower.id, role: 'member' as const }]) {
        for (const after of [undefined, 35, 20, 9]) {
          for (const limit of [1, 3, 20]) {
            const page = { limit, after };
            for (const windows of [{ first: 1, max: 2, batch: 1 }, { first: 3, max: 7, batch: 2 }, { first: 5, max: 100 }, { first: 2, max: 9, batch: 3, ownerId: owner.id }]) {
              const scoped = { ...search, ownerId: windows.ownerId };
              const whole = await posts.listQuery(viewer, page, scoped, { below: after, ownerId: windows.ownerId }).execute();
              // The windows as the route runs them: each statement compiled once for its shape (searchReader).
              const windowed = await searchPage(app.db, search.terms, after, limit, searchReader(app.store, viewer, page, scoped), windows);
              expect({ q, viewer: viewer?.id, after, limit, windows, ids: windowed.map((r) => r.id) }).toEqual({
                q, viewer: viewer?.id, after, limit, windows, ids: whole.map((r) => r.id),
              });
            }
            checked.push(`${q}|${after}|${limit}`);
          }
        }
      }
    }
    expect(checked.length).toBe(queries.length * 2 * 4 * 3);
  });
});

describe('the statements of a PostgreSQL search page', () => {
  it.runIf(backend === 'postgres')('reads the first page of a common word, and of a rare query, in one statement', async () => {
    const seen: string[] = [];
    const app = await buildTestApp({}, { onStatement: ({ sql: text }) => void seen.push(text) });
    const owner = await signUp(app);
    // 25 old posts with the rare phrase, then 300 newer ones, every other one with the common word: the first window
    // (the newest 128) holds none of them, and half its posts match the common word.
    const rare: number[] = [];
    for (let i = 0; i < 25; i++) rare.push((await publish(app, owner, `quartz old ${i}`)).id);
    const common: number[] = [];
    for (let i = 0; i < 300; i++) {
      const post = await publish(app, owner, i % 2 ? `coffee ${i}` : `tea ${i}`);
      if (i % 2) common.push(post.id);
    }
    await app.fanout.close(); // the worker's statements are not the page's
    await sql`analyze post_search`.execute(app.db);
    expect(await commonShare(app.db, parsePostQuery('coffee').terms)).toBeGreaterThanOrEqual(COMMON_SHARE);
    // A phrase's share is not in the statistics: it is read as rare (so is a word they do not list).
    expect(await commonShare(app.db, parsePostQuery('"quartz old"').terms)).toBe(0);
    const page = async (q: string) => {
      seen.length = 0;
      const res = await call(app, 'GET', `/posts?q=${q}`);
      expect(res.statusCode).toBe(200);
      return { ids: ids(res), statements: seen.filter((text) => /\bpost_search\b/.test(text)).length, all: seen.length };
    };
    // The share was read above (kept a minute), so these pages send only their own statements.
    expect(await page('coffee')).toEqual({ ids: common.slice(-20).reverse(), statements: 1, all: 1 });
    // The window (no match in it) and, since it shows nothing, the index's matches and their posts: one statement.
    expect(await page(encodeURIComponent('"quartz old"'))).toEqual({ ids: rare.slice(-20).reverse(), statements: 1, all: 1 });
    // A rare query with a match among the newest posts: the window shows it, and the index is not read in that
    // statement; the page goes on below it (the second window, then the index's batch).
    const newest = await publish(app, owner, 'quartz old newest');
    await app.fanout.close();
    const mixed = await page(encodeURIComponent('"quartz old"'));
    expect(mixed.ids).toEqual([newest.id, ...rare.slice(-19).reverse()]);
  });
});

const indexEntries = async (app: FastifyInstance) =>
  Number((await sql<{ n: number }>`select count(*) as n from post_search`.execute(app.db)).rows[0]!.n);

describe('GET /users?q=', () => {
  it('finds the users each query word starts a word of, in lower-cased username order, paged', async () => {
    const app = await buildTestApp();
    const make = async (username: string, displayName: string) => (await signUp(app, { username, displayName })).id;
    const annSmith = await make('Ann_Smith', 'Ann Smith');
    const annabel = await make('annabel', 'Belle');
    const bob = await make('bob', 'Ann-Marie Café');
    const zed = await make('zed_ann', '');
    await make('nanny', 'Joanne');
    const find = async (q: string) => {
      const res = await call(app, 'GET', `/users?q=${encodeURIComponent(q)}`);
      expect(res.statusCode, q).toBe(200);
      return ids(res);
    };
    expect(await find('ann')).toEqual([annSmith, annabel, bob, zed]);
    expect(await find('ANN smi')).toEqual([annSmith]);
    expect(await find('cafe')).toEqual([bob]);
    expect(await find('mar ann')).toEqual([bob]);
    expect(await find('b')).toEqual([annabel, bob]);
    expect(await find('nn')).toEqual([]);
    expect(await find('zed_ann')).toEqual([zed]);

    const first = await call(app, 'GET', '/users?q=ann&limit=3');
    expect(ids(first)).toEqual([annSmith, annabel, bob]);
    const rest = await call(app, 'GET', nextPath(first.headers.link)!);
    expect(ids(rest)).toEqual([zed]);
    expect(rest.headers.link).toBeUndefined();
    const cursor = /cursor=([^&>]+)/.exec(String(first.headers.link))![1]!;
    expect((await call(app, 'GET', `/users?q=bob&cursor=${cursor}`)).statusCode).toBe(400);
    expect((await call(app, 'GET', `/users?cursor=${cursor}`)).statusCode).toBe(400);

    for (const q of ['', '_', '"*-', 'a'.repeat(201), 'a b c d e f g h i j k']) {
      const res = await call(app, 'GET', `/users?q=${encodeURIComponent(q)}`);
      expect({ q, status: res.statusCode, field: res.json().errors?.[0]?.field }).toEqual({ q, status: 400, field: 'q' });
    }
  });

  it('follows renames at once', async () => {
    const app = await buildTestApp();
    const user = await signUp(app, { username: 'old_name', displayName: 'Quentin' });
    expect(ids(await call(app, 'GET', '/users?q=quen'))).toEqual([user.id]);
    const res = await call(app, 'PUT', `/users/${user.id}`, { token: user.token, body: { username: 'new_name', displayName: 'Rex', bio: '' } });
    expect(res.statusCode).toBe(200);
    expect(ids(await call(app, 'GET', '/users?q=quen'))).toEqual([]);
    expect(ids(await call(app, 'GET', '/users?q=rex%20new'))).toEqual([user.id]);
  });
});

describe('GET /users?q= over user_words', () => {
  const wordsOfUser = async (app: FastifyInstance, userId: number) =>
    (await app.db.selectFrom('user_words').select(['word', 'username_key']).where('user_id', '=', userId).orderBy('word').execute()).map(
      (r) => `${r.word}|${r.username_key}`,
    );

  it('keeps the words of each user with the write: sign-up, profile change, deletion', async () => {
    const app = await buildTestApp();
    const user = await signUp(app, { username: 'Ann_Smith', displayName: 'Ann Café' });
    expect(await wordsOfUser(app, user.id)).toEqual(
      ['a', 'an', 'ann', 'c', 'ca', 'caf', 'cafe', 's', 'sm', 'smi', 'smit', 'smith'].map((w) => `${w}|ann_smith`),
    );
    const res = await call(app, 'PUT', `/users/${user.id}`, { token: user.token, body: { username: 'Rex_9', displayName: 'Rex', bio: '' } });
    expect(res.statusCode).toBe(200);
    expect(await wordsOfUser(app, user.id)).toEqual(['9|rex_9', 'r|rex_9', 're|rex_9', 'rex|rex_9']);
    expect((await call(app, 'DELETE', `/users/${user.id}`, { token: user.token })).statusCode).toBe(200);
    expect(await wordsOfUser(app, user.id)).toEqual([]);
    expect(ids(await call(app, 'GET', '/users?q=rex'))).toEqual([]);
    // A word longer than the prefixes kept: looked up by its first 20 code points, then checked whole.
    const long = await signUp(app, { username: 'mary_p', displayName: 'Supercalifragilisticexpialidocious' });
    expect(ids(await call(app, 'GET', '/users?q=SUPERCALIFRAGILISTICEXPIALIDOCIOUS'))).toEqual([long.id]);
    expect(ids(await call(app, 'GET', '/users?q=supercalifragilisticexpialidociouz'))).toEqual([]);
    expect(ids(await call(app, 'GET', '/users?q=supercalifragilistic%20mar'))).toEqual([long.id]);
  });

  it('finds the same users, in the same order and pages, whether a rare word or only common words drive it', async () => {
    const app = await buildTestApp();
    // 2,001 users named "common…" (many batches of the index's range), of whom a few are also "rare…"; created in
    // one transaction, through the repository's own writes, for speed.
    const { createUsersRepository } = await import('../users/users.repository.js');
    const COMMON = 2000;
    const at = new Date().toISOString();
    const made: { id: number; key: string; rare: boolean }[] = [];
    await app.store.transaction(async (tx) => {
      const users = createUsersRepository(tx.db);
      for (let i = 0; i <= COMMON; i++) {
        // Usernames in an order unlike the ids' (reversed), so a page in id order would be wrong.
        const username = `common_${String(COMMON - i).padStart(4, '0')}`;
        const rare = i % 400 === 7;
        const id = await users.insert({ username, display_name: rare ? 'Rarely Seen' : 'Often', bio: '', role: 'member', password_hash: 'x', created_at: at, updated_at: at });
        made.push({ id, key: username, rare });
      }
    });
    const inOrder = (list: typeof made) => [...list].sort((a, b) => (a.key < b.key ? -1 : 1)).map((u) => u.id);
    const pages = async (q: string, limit: number) => {
      const found: number[] = [];
      for (let path: string | undefined = `/users?q=${encodeURIComponent(q)}&limit=${limit}`; path; ) {
        const res = await call(app, 'GET', path);
        expect(res.statusCode, q).toBe(200);
        found.push(...ids(res));
        path = nextPath(res.headers.link);
      }
      return found;
    };
    const rare = inOrder(made.filter((u) => u.rare));
    expect(rare.length).toBe(5);
    // Driven by the longest word, filtered by the other: a short range, a long one that rarely passes the filter.
    expect(await pages('rare common', 4)).toEqual(rare);
    expect(await pages('rar', 2)).toEqual(rare);
    expect(await pages('seen comm', 100)).toEqual(rare);
    const all = inOrder(made);
    expect(await pages('common', 100)).toEqual(all);
    expect(await pages('comm often', 100)).toEqual(inOrder(made.filter((u) => !u.rare)));
    // A suspended account: found by admins only, on both paths.
    const admin = await createAdmin(app);
    const hidden = made.find((u) => u.rare)!;
    expect((await call(app, 'PUT', `/users/${hidden.id}/suspension`, { token: admin.token, body: { reason: 'test' } })).statusCode).toBe(200);
    expect(await pages('rare', 100)).toEqual(rare.filter((id) => id !== hidden.id));
    expect(ids(await call(app, 'GET', '/users?q=rare&limit=100', { token: admin.token }))).toEqual(rare);
    expect((await pages('common', 100)).length).toBe(all.length - 1);
  });

  it('reads the users with a word starting with the query word as one range of user_words, in username order', async () => {
    const app = await buildTestApp();
    if (backend !== 'sqlite') return;
    const users = createUsersRepository(app.db);
    // The statement the route runs, past a cursor and with a second word: the range in username order, each user
    // by key, no sort, whatever the number of users with such a word.
    const plan = await sqlitePlan(app.db, users.searchByNameQuery(undefined, parseUserQuery('ann b'), { limit: 20, after: 'a' }));
    expect(plan.slice(0, 2)).toEqual(['SEARCH user_words USING PRIMARY KEY (word=? AND username_key>?)', 'SEARCH users USING INTEGER PRIMARY KEY (rowid=?)']);
    expect(plan.join('\n')).not.toContain('TEMP B-TREE');
  });
});

describe('the background merge of the post index (SQLite)', () => {
  it('merges the segments writes leave, in steps, until there is nothing left to merge', async () => {
    const app = await buildTestApp();
    if (backend !== 'sqlite') return;
    const { mergeRound } = await import('./search.merge.js');
    const owner = await signUp(app);
    // Each post its own transaction: a segment each.
    for (let i = 0; i < 12; i++) await publish(app, owner, `steady ${i}`);
    const segments = async () =>
      Number((await sql<{ n: number }>`select count(*) as n from post_search_data where id > 10`.execute(app.db)).rows[0]!.n);
    const before = await segments();
    expect(await mergeRound(app.store, 1000)).toBeGreaterThan(0);
    expect(await mergeRound(app.store, 1000)).toBe(0);
    expect(await segments()).toBeLessThan(before);
    expect(ids(await search(app, 'steady'))).toHaveLength(12);
  });
});

describe("a group commit's search entries (SQLite)", () => {
  it.runIf(backend === 'sqlite')('writes the entries of a batch at its COMMIT, as one segment, for the posts the batch left', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    await app.fanout.close();
    const segments = async () =>
      Number((await sql<{ n: number }>`select count(*) as n from post_search_data where id > 10`.execute(app.db)).rows[0]!.n);
    const create = (tx: Tx, title: string) =>
      createPostsRepository(tx.db).insert({ owner_id: owner.id, title, content: 'batched', visibility: 'public', created_at: new Date().toISOString() });
    // A post created and indexed in a transaction of its own; those queued in one turn share one COMMIT.
    const published = (title: string) =>
      app.store.transaction(async (tx) => {
        const post = await create(tx, title);
        await indexPost(tx, post, false);
        return post.id;
      });
    const before = await segments();
    const created = await Promise.all(Array.from({ length: 10 }, (_, i) => published(`plenty ${i}`)));
    // Each entry in its unit's savepoint made a segment each (10 here); at the COMMIT, the batch's make one.
    expect((await segments()) - before).toBe(1);
    expect(ids(await search(app, 'plenty'))).toEqual([...created].reverse());

    // A later unit of the same batch deletes one post and edits another: the index ends as the posts do.
    const [deleted, renamed] = await Promise.all([
      published('fleeting'),
      published('first'),
      app.store.transaction(async (tx) => {
        const last = Number((await sql<{ id: number }>`select max(id) as id from posts`.execute(tx.db)).rows[0]!.id);
        await createPostsRepository(tx.db).remove(last - 1);
        const post = (await createPostsRepository(tx.db).update(last, { title: 'second', content: 'batched', visibility: 'public', updated_at: new Date().toISOString() }))!;
        await indexPost(tx, post, true);
      }),
    ]);
    expect(ids(await search(app, 'fleeting'))).toEqual([]);
    expect(Number((await sql<{ n: number }>`select count(*) as n from post_search where rowid = cast(${deleted} as integer)`.execute(app.db)).rows[0]!.n)).toBe(0);
    expect(ids(await search(app, 'first'))).toEqual([]);
    expect(ids(await search(app, 'second'))).toEqual([renamed]);
  });
});

describe('the search migration', () => {
  /** A database at the schema before search, holding a user and two posts written as that version wrote them. */
  async function storeBeforeSearch(): Promise<Store> {
    const rows = async (db: Kysely<Database>) => {
      const at = new Date().toISOString();
      const user = { username: 'Old_Timer', username_key: 'old_timer', display_name: 'Zoë', bio: '', role: 'member' as const, password_hash: 'x', created_at: at, updated_at: at };
      const { id } = await db.insertInto('users').values(user).returning('id').executeTakeFirstOrThrow();
      for (const [title, visibility] of [['Crème brûlée', 'public'], ['Crème secrète', 'private']] as const satisfies [string, Visibility][]) {
        await db.insertInto('posts').values({ owner_id: id, title, content: 'from before', visibility, created_at: at, updated_at: at }).execute();
      }
    };
    return storeBeforeMigration('20261127T1300_search', rows);
  }

  it('indexes the posts and users already there', async () => {
    const store = await storeBeforeSearch();
    const app = await buildApp(testConfig(), { store, logger: false });
    onTestFinished(() => app.close());
    await app.ready();
    const found = (await call(app, 'GET', '/posts?q=creme')).json();
    expect(found.map((p: { title: string }) => p.title)).toEqual(['Crème brûlée']);
    expect((await call(app, 'GET', '/users?q=zoe%20old')).json().map((u: { username: string }) => u.username)).toEqual(['Old_Timer']);
    // The user_words migration wrote the user's words as the service writes them.
    expect((await store.db.selectFrom('user_words').select(['word', 'username_key']).orderBy('word').execute()).map((r) => `${r.word}|${r.username_key}`)).toEqual(
      ['o', 'ol', 'old', 't', 'ti', 'tim', 'time', 'timer', 'z', 'zo', 'zoe'].map((w) => `${w}|old_timer`),
    );
  });
});

describe('the query parser and tokenizer', () => {
  it('splits and folds words as the contract says', () => {
    expect(wordsOf('Café-Society: ann@example.com, ÉCOLE_42 naïve')).toEqual(['cafe', 'society', 'ann', 'example', 'com', 'ecole', '42', 'naive']);
    expect(parsePostQuery('"New York" -pizza pre* a* foo-bar').terms).toEqual([
      { words: [{ text: 'new', prefix: false }, { text: 'york', prefix: false }], exclude: false },
      { words: [{ text: 'pizza', prefix: false }], exclude: true },
      { words: [{ text: 'pre', prefix: true }], exclude: false },
      { words: [{ text: 'a', prefix: false }], exclude: false },
      { words: [{ text: 'foo', prefix: false }], exclude: false },
      { words: [{ text: 'bar', prefix: false }], exclude: false },
    ]);
    expect(parseUserQuery('Ann-Marie "x"')).toEqual(['ann', 'marie', 'x']);
  });
});
