import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import {
  e2eDatabase,
  killLeftovers,
  openDatabase,
  request,
  startServer,
  type E2eDatabase,
  type HttpResponse,
  type ServerProcess,
} from '../helpers/server-process.js';

/**
 * Issue 22, item 5: users who all follow each other, reply to and recommend each other's posts, delete their
 * accounts at the same moment. Each delete locks the rows whose counters it moves in one global order, so they
 * queue instead of deadlocking: every DELETE answers 200 promptly, PostgreSQL counts no deadlock, nothing of
 * theirs is left, and the counters of a user who stays (followed by and following all of them, replied to and
 * recommended) are back to what that user has without them. One server process, then two on one database.
 */

const USERS = 8;
let db: E2eDatabase | undefined;
afterEach(async () => {
  await killLeftovers();
  await db?.drop();
  db = undefined;
}, 30_000);

interface Member {
  id: number;
  token: string;
  posts: number[];
}

async function member(server: ServerProcess, username: string): Promise<Member> {
  const body = { username, password: 'correct horse battery' };
  const created = await request(server.url, 'POST', '/users', { body });
  expect(created.status, created.text).toBe(201);
  const signedIn = await request(server.url, 'POST', '/tokens', { body });
  expect(signedIn.status).toBe(201);
  return { id: created.json<{ id: number }>().id, token: signedIn.json<{ token: string }>().token, posts: [] };
}

async function ok(res: Promise<HttpResponse>, status = 201): Promise<HttpResponse> {
  const r = await res;
  expect(r.status, r.text).toBe(status);
  return r;
}

/** The 8 members and one bystander, all following each other, with posts, replies, recommends and boards. */
async function populate(server: ServerProcess) {
  const members = await Promise.all(Array.from({ length: USERS }, (_, i) => member(server, `mutual_${i}`)));
  const bystander = await member(server, 'bystander');
  const everyone = [...members, bystander];
  const post = (m: Member, title: string, visibility: string) =>
    ok(request(server.url, 'POST', `/users/${m.id}/posts`, { token: m.token, body: { title, content: title, visibility } }));
  await Promise.all(
    everyone.flatMap((a) => everyone.filter((b) => b !== a).map((b) => ok(request(server.url, 'POST', `/users/${b.id}/followers`, { token: a.token, body: { id: a.id } })))),
  );
  for (const m of everyone) {
    for (const visibility of ['public', 'followers']) m.posts.push((await post(m, `${visibility} by ${m.id}`, visibility)).json<{ id: number }>().id);
    await ok(request(server.url, 'POST', '/boards', { token: m.token, body: { title: `board of ${m.id}`, content: 'pinned' } }));
  }
  // Everyone replies to and recommends the posts of the next two (wrapping around), the bystander's included.
  await Promise.all(
    everyone.flatMap((a, i) =>
      [everyone[(i + 1) % everyone.length]!, everyone[(i + 2) % everyone.length]!].flatMap((b) =>
        b.posts.flatMap((postId) => [
          ok(request(server.url, 'POST', `/posts/${postId}/replies`, { token: a.token, body: { content: `reply by ${a.id}` } })),
          ok(request(server.url, 'POST', `/posts/${postId}/recommends`, { token: a.token, body: { id: a.id } })),
        ]),
      ),
    ),
  );
  return { members, bystander };
}

async function deadlocks(name: string): Promise<number> {
  const client = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>('select deadlocks as n from pg_stat_database where datname = $1', [name]);
    return Number(rows[0]?.n ?? 0);
  } finally {
    await client.end();
  }
}

async function run(servers: ServerProcess[], url: string) {
  const { members, bystander } = await populate(servers[0]!);
  const before = backend === 'postgres' ? await deadlocks(new URL(url).pathname.slice(1)) : 0;

  const answers = await Promise.all(
    members.map(async (m, i) => {
      const started = performance.now();
      const res = await request(servers[i % servers.length]!.url, 'DELETE', `/users/${m.id}`, { token: m.token });
      return { status: res.status, text: res.text, ms: Math.round(performance.now() - started) };
    }),
  );
  const times = answers.map((a) => a.ms);
  // Stopped servers have flushed their backends' statistics: the counter is complete.
  for (const server of servers) await server.stop();
  const after = backend === 'postgres' ? await deadlocks(new URL(url).pathname.slice(1)) : 0;
  console.log(`[concurrent deletes, ${servers.length} process(es), ${backend}] DELETE times (ms): ${times.join(', ')}; deadlocks: ${after - before}`);
  for (const a of answers) expect(a.status, a.text).toBe(200);
  // Promptly: under the 5 s statement timeout that a lock wait would end in (a deadlock shows in the counter).
  for (const ms of times) expect(ms).toBeLessThan(4000);
  expect(after - before).toBe(0);

  const store = openDatabase(url);
  try {
    const ids = members.map((m) => m.id);
    const count = async (table: 'users' | 'posts' | 'replies' | 'recommends' | 'follows' | 'boards' | 'tokens' | 'feed_entries') =>
      Number((await store.db.selectFrom(table).select(({ fn }) => fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    expect(await store.db.selectFrom('users').select('id').where('id', 'in', ids).execute()).toEqual([]);
    // Only the bystander's own things are left.
    expect({ users: await count('users'), posts: await count('posts'), boards: await count('boards'), follows: await count('follows') }).toEqual({
      users: 1,
      posts: 2,
      boards: 1,
      follows: 0,
    });
    expect(await count('replies')).toBe(0);
    expect(await count('recommends')).toBe(0);
    expect(await store.db.selectFrom('tokens').select('user_id').distinct().execute()).toEqual([{ user_id: bystander.id }]);
    expect(await store.db.selectFrom('feed_entries').select('post_id').where('owner_id', 'in', ids).execute()).toEqual([]);
    const user = await store.db
      .selectFrom('users')
      .select(['follower_count', 'following_count', 'post_count', 'public_post_count', 'followers_post_count'])
      .where('id', '=', bystander.id)
      .executeTakeFirstOrThrow();
    expect(user).toEqual({ follower_count: 0, following_count: 0, post_count: 2, public_post_count: 1, followers_post_count: 1 });
    const posts = await store.db.selectFrom('posts').select(['reply_count', 'recommend_count']).execute();
    expect(posts).toEqual([
      { reply_count: 0, recommend_count: 0 },
      { reply_count: 0, recommend_count: 0 },
    ]);
    const boards = await store.db.selectFrom('counters').select('value').where('name', '=', 'boards').executeTakeFirst();
    expect(Number(boards?.value)).toBe(1);
  } finally {
    await store.close();
  }
}

describe('users who all follow each other delete their accounts at once', () => {
  it('one server: every DELETE 200 in under 4 s, no deadlock, nothing left, counters right', async () => {
    db = await e2eDatabase();
    const server = await startServer({ databaseUrl: db.url });
    await run([server], db.url);
  });

  it('two server processes on one database: the same', async () => {
    db = await e2eDatabase();
    const first = await startServer({ databaseUrl: db.url });
    const second = await startServer({ databaseUrl: db.url });
    await run([first, second], db.url);
  });
});
