import type { Kysely } from 'kysely';
import { afterAll, beforeAll, expect } from 'vitest';
import type { Database } from '../../src/db/types.js';
import { e2eDatabase, killLeftovers, openDatabase, request, startServer, type E2eDatabase, type HttpResponse, type ServerProcess } from '../helpers/server-process.js';

/**
 * Races run against the real server process over real sockets: many requests in flight at once, on PostgreSQL
 * handled by concurrent transactions on the pool's connections. Each file gets one server on one fresh database.
 */
export interface RaceServer {
  server: ServerProcess;
  url: string;
  db: Kysely<Database>;
  /** Direct writes to the server's database (to set up a state the API cannot produce). */
  write<T>(work: (db: Kysely<Database>) => Promise<T>): Promise<T>;
  /** Every status any request of this file received: none may be a 5xx. */
  statuses: number[];
}

/** Starts one server for the file (beforeAll) and tears it down (afterAll), checking that it exits cleanly. */
export function useRaceServer(): RaceServer {
  const statuses: number[] = [];
  let database: E2eDatabase | undefined;
  let server: ServerProcess | undefined;
  let handle: ReturnType<typeof openDatabase> | undefined;
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the race server is started in beforeAll: use it inside a test');
    return value;
  };
  beforeAll(async () => {
    database = await e2eDatabase();
    // A pool of 10 connections (the default) on PostgreSQL: the races run as truly concurrent transactions.
    server = await startServer({ databaseUrl: database.url, env: { PG_POOL_MAX: '10' } });
    handle = openDatabase(database.url);
  });
  afterAll(async () => {
    const exit = await server?.stop();
    await handle?.close();
    await killLeftovers();
    await database?.drop();
    expect(exit).toEqual({ code: 0, signal: null });
  }, 120_000);
  return {
    statuses,
    get server() {
      return started(server);
    },
    get url() {
      return started(server).url;
    },
    get db() {
      return started(handle).db;
    },
    write(work) {
      return started(handle).transaction((tx) => work(tx.db));
    },
  };
}

/** A request whose status is recorded in `race.statuses`. */
export async function send(
  race: RaceServer,
  method: string,
  path: string,
  options: { token?: string; body?: unknown } = {},
): Promise<HttpResponse> {
  const res = await request(race.url, method, path, options);
  race.statuses.push(res.status);
  return res;
}

/** Fails with the offending responses when any status is 5xx. */
export function expectNo5xx(responses: HttpResponse[]): void {
  const failed = responses.filter((r) => r.status >= 500).map((r) => `${r.status} ${r.text}`);
  expect(failed).toEqual([]);
}

export interface RaceUser {
  id: number;
  username: string;
  token: string;
}

let counter = 0;

/** Signs `n` users up and in, a few at a time (the setup is not the race). */
export async function signUpMany(race: RaceServer, n: number, prefix = 'racer'): Promise<RaceUser[]> {
  const users: RaceUser[] = [];
  for (let i = 0; i < n; i += 10) {
    const batch = Array.from({ length: Math.min(10, n - i) }, () => `${prefix}_${process.pid}_${++counter}`.slice(0, 32));
    users.push(
      ...(await Promise.all(
        batch.map(async (username) => {
          const password = 'race password 1';
          const created = await send(race, 'POST', '/users', { body: { username, password } });
          if (created.status !== 201) throw new Error(`sign-up failed: ${created.status} ${created.text}`);
          const token = await send(race, 'POST', '/tokens', { body: { username, password } });
          if (token.status !== 201) throw new Error(`sign-in failed: ${token.status} ${token.text}`);
          return { id: created.json<{ id: number }>().id, username, token: token.json<{ token: string }>().token };
        }),
      )),
    );
  }
  return users;
}

export async function createPost(race: RaceServer, owner: RaceUser, visibility = 'public'): Promise<number> {
  const res = await send(race, 'POST', `/users/${owner.id}/posts`, {
    token: owner.token,
    body: { title: `post by ${owner.username}`, content: 'racing', visibility },
  });
  if (res.status !== 201) throw new Error(`post failed: ${res.status} ${res.text}`);
  return res.json<{ id: number }>().id;
}

export interface CounterMismatch {
  table: 'users' | 'posts';
  id: number;
  column: string;
  stored: number;
  actual: number;
}

/**
 * Recomputes every denormalised counter with COUNT(*) over the rows it counts and lists where the stored column
 * differs. Empty means every counter in the database is true.
 */
export async function counterMismatches(db: Kysely<Database>): Promise<CounterMismatch[]> {
  const users = await db
    .selectFrom('users')
    .select((eb) => [
      'users.id',
      'users.follower_count',
      'users.following_count',
      'users.post_count',
      eb.selectFrom('follows').select(eb.fn.countAll<number>().as('n')).whereRef('follows.followee_id', '=', 'users.id').as('followers'),
      eb.selectFrom('follows').select(eb.fn.countAll<number>().as('n')).whereRef('follows.follower_id', '=', 'users.id').as('following'),
      eb.selectFrom('posts').select(eb.fn.countAll<number>().as('n')).whereRef('posts.owner_id', '=', 'users.id').as('posts'),
    ])
    .execute();
  const posts = await db
    .selectFrom('posts')
    .select((eb) => [
      'posts.id',
      'posts.reply_count',
      'posts.recommend_count',
      eb.selectFrom('replies').select(eb.fn.countAll<number>().as('n')).whereRef('replies.post_id', '=', 'posts.id').as('replies'),
      eb.selectFrom('recommends').select(eb.fn.countAll<number>().as('n')).whereRef('recommends.post_id', '=', 'posts.id').as('recommends'),
    ])
    .execute();

  const mismatches: CounterMismatch[] = [];
  const check = (table: CounterMismatch['table'], id: number, column: string, stored: number, actual: unknown) => {
    if (Number(stored) !== Number(actual)) mismatches.push({ table, id, column, stored: Number(stored), actual: Number(actual) });
  };
  for (const u of users) {
    check('users', u.id, 'follower_count', u.follower_count, u.followers);
    check('users', u.id, 'following_count', u.following_count, u.following);
    check('users', u.id, 'post_count', u.post_count, u.posts);
  }
  for (const p of posts) {
    check('posts', p.id, 'reply_count', p.reply_count, p.replies);
    check('posts', p.id, 'recommend_count', p.recommend_count, p.recommends);
  }
  return mismatches;
}

/**
 * Home feeds are denormalised too: `feed_entries` must hold exactly one row per (follower, post of a followee).
 * Lists the entries that are missing (a follow and a post that raced and left no entry) and the stale ones (an
 * entry whose follow relation is gone, or whose owner is not the post's owner).
 */
export async function feedMismatches(db: Kysely<Database>): Promise<{ missing: string[]; stale: string[] }> {
  const missing = await db
    .selectFrom('follows')
    .innerJoin('posts', 'posts.owner_id', 'follows.followee_id')
    .select(['follows.follower_id as user_id', 'posts.id as post_id'])
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('feed_entries')
            .select('feed_entries.post_id')
            .whereRef('feed_entries.user_id', '=', 'follows.follower_id')
            .whereRef('feed_entries.post_id', '=', 'posts.id'),
        ),
      ),
    )
    .execute();
  const stale = await db
    .selectFrom('feed_entries')
    .innerJoin('posts', 'posts.id', 'feed_entries.post_id')
    .select(['feed_entries.user_id', 'feed_entries.post_id'])
    .where(({ or, eb, not, exists, selectFrom }) =>
      or([
        eb('feed_entries.owner_id', '<>', eb.ref('posts.owner_id')),
        not(
          exists(
            selectFrom('follows')
              .select('follows.follower_id')
              .whereRef('follows.follower_id', '=', 'feed_entries.user_id')
              .whereRef('follows.followee_id', '=', 'posts.owner_id'),
          ),
        ),
      ]),
    )
    .execute();
  const show = (rows: { user_id: number; post_id: number }[]) => rows.map((r) => `user ${r.user_id} post ${r.post_id}`);
  return { missing: show(missing), stale: show(stale) };
}

/** Sanity check that counterMismatches sees rows at all (a helper that reads nothing would always pass). */
export async function rowCounts(db: Kysely<Database>): Promise<Record<'users' | 'follows' | 'posts' | 'replies' | 'recommends', number>> {
  const count = async (table: 'users' | 'follows' | 'posts' | 'replies' | 'recommends') =>
    Number((await db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
  return {
    users: await count('users'),
    follows: await count('follows'),
    posts: await count('posts'),
    replies: await count('replies'),
    recommends: await count('recommends'),
  };
}
