import { afterEach, describe, expect, it } from 'vitest';
import { DEMO_PASSWORD, DEMO_USERS } from '../../scripts/demo-data.js';
import { rowCounts, runCli } from '../helpers/cli-process.js';
import { e2eDatabase, killLeftovers, request, startServer, type E2eDatabase } from '../helpers/server-process.js';

/**
 * `corkboard seed --demo`, run as the built command against a database of its own (a SQLite file, or a new
 * PostgreSQL database), then checked over HTTP through the built server.
 */

interface User {
  id: number;
  username: string;
  displayName: string;
  bio: string;
  followerCount: number;
}
interface Post {
  id: number;
  title: string;
  visibility: string;
  ownerId: number;
  replyCount: number;
  recommendCount: number;
}

let database: E2eDatabase | undefined;

afterEach(async () => {
  await killLeftovers();
  await database?.drop();
  database = undefined;
});

async function freshDatabase(): Promise<string> {
  database = await e2eDatabase();
  return database.url;
}

async function signIn(base: string, username: string): Promise<string> {
  const res = await request(base, 'POST', '/tokens', { body: { username, password: DEMO_PASSWORD } });
  expect(res.status, res.text).toBe(201);
  return res.json<{ token: string }>().token;
}

describe('corkboard seed --demo', () => {
  it('creates users, follows, posts of each visibility, replies, recommends and boards; a second run changes nothing', async () => {
    const url = await freshDatabase();
    const first = await runCli(['seed', '--demo'], { DATABASE_URL: url });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain(`"${DEMO_PASSWORD}"`);
    expect(first.stdout).toMatch(/8 users, 25 follows, 17 posts \(9 public, 5 for followers, 3 private\), 19 replies, 24 recommends, 4 boards/);
    const afterFirst = await rowCounts(url);

    const server = await startServer({ databaseUrl: url });
    const users: User[] = [];
    for (const demo of DEMO_USERS) {
      const res = await request(server.url, 'GET', `/users?username=${demo.username}`);
      expect(res.status).toBe(200);
      const [user] = res.json<User[]>();
      expect(user).toMatchObject({ username: demo.username, displayName: demo.displayName, bio: demo.bio });
      users.push(user!);
    }
    const byName = new Map(users.map((u) => [u.username, u]));
    const maren = byName.get('maren_h')!;
    const tomas = byName.get('tomas_r')!;
    const sam = byName.get('sam_b')!;
    expect(maren.followerCount).toBe(5);

    // Anonymous: public posts only, every one of them.
    const anonymous = await request(server.url, 'GET', '/posts?limit=100');
    expect(anonymous.status).toBe(200);
    const publicPosts = anonymous.json<Post[]>();
    expect(publicPosts).toHaveLength(9);
    expect(new Set(publicPosts.map((p) => p.visibility))).toEqual(new Set(['public']));

    // The owner sees all three visibilities of their own posts; a follower sees the followers post, not the private
    // one; someone who does not follow sees only the public one.
    const marenPosts = async (token?: string) => {
      const res = await request(server.url, 'GET', `/users/${maren.id}/posts`, { ...(token ? { token } : {}) });
      expect(res.status).toBe(200);
      return res.json<Post[]>().map((p) => p.visibility).sort();
    };
    expect(await marenPosts(await signIn(server.url, 'maren_h'))).toEqual(['followers', 'private', 'public']);
    expect(await marenPosts(await signIn(server.url, 'tomas_r'))).toEqual(['followers', 'public']);
    expect(await marenPosts(await signIn(server.url, 'elif_y'))).toEqual(['public']);
    expect(await marenPosts()).toEqual(['public']);

    // Replies and recommends, readable by anyone on a public post.
    const repairCafe = publicPosts.find((p) => p.title.startsWith('Repair café'))!;
    expect(repairCafe).toMatchObject({ ownerId: maren.id, replyCount: 3, recommendCount: 4 });
    const replies = await request(server.url, 'GET', `/posts/${repairCafe.id}/replies`);
    expect(replies.json<{ authorId: number }[]>().map((r) => r.authorId)).toEqual([tomas.id, sam.id, maren.id]);
    const recommends = await request(server.url, 'GET', `/posts/${repairCafe.id}/recommends`);
    expect(recommends.json<User[]>().map((u) => u.username).sort()).toEqual(['ade_o', 'priya_k', 'sam_b', 'tomas_r']);
    const following = await request(server.url, 'GET', `/users/${sam.id}/following`);
    expect(following.json<User[]>().map((u) => u.username).sort()).toEqual(['elif_y', 'jonas_w', 'lin_c', 'maren_h']);

    const boards = await request(server.url, 'GET', '/boards/list');
    expect(boards.status).toBe(200);
    const page = boards.json<{ data: { total: number; items: { authorId: number }[] } }>().data;
    expect(page.total).toBe(4);
    expect(page.items.every((b) => users.some((u) => u.id === b.authorId))).toBe(true);
    await server.stop();

    // The seed's own sign-ins were revoked (these counts were taken before the test signed in above).
    const tokenTables = Object.keys(afterFirst).filter((t) => t.includes('token'));
    expect(tokenTables.length).toBeGreaterThan(0);
    for (const table of tokenTables) expect(afterFirst[table]).toBe(0);

    const second = await runCli(['seed', '--demo'], { DATABASE_URL: url });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toContain('already there');
    expect(second.stdout).toContain(`"${DEMO_PASSWORD}"`);
    const afterSecond = await rowCounts(url);
    // The four sign-ins of this test are the only difference. FTS5's segment tables are left out: the server's
    // background merge (search.merge.ts) may rewrite the index's segments, fewer rows of the same content, while
    // the test's server runs; the index's documents (post_search_docsize) are still compared.
    for (const table of tokenTables) afterSecond[table] = 0;
    for (const table of ['post_search_data', 'post_search_idx']) {
      delete afterFirst[table];
      delete afterSecond[table];
    }
    expect(afterSecond).toEqual(afterFirst);
  });

  it('refuses a database that holds other users unless --force, and writes nothing when it refuses', async () => {
    const url = await freshDatabase();
    // Someone has used this database already: the server ran and a person signed up.
    const used = await startServer({ databaseUrl: url });
    const signUp = await request(used.url, 'POST', '/users', { body: { username: 'someone_else', password: 'a-real-password' } });
    expect(signUp.status).toBe(201);
    await used.stop();
    const before = await rowCounts(url);

    const refused = await runCli(['seed', '--demo'], { DATABASE_URL: url });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('users that are not demo users');
    expect(refused.stderr).toContain('someone_else');
    expect(refused.stderr).toContain('--force');
    expect(refused.stdout).toBe('');
    expect(await rowCounts(url)).toEqual(before);

    const forced = await runCli(['seed', '--demo', '--force'], { DATABASE_URL: url });
    expect(forced.code, forced.stderr).toBe(0);
    const server = await startServer({ databaseUrl: url });
    for (const demo of DEMO_USERS) {
      const found = await request(server.url, 'GET', `/users?username=${demo.username}`);
      expect(found.json<User[]>().map((u) => u.displayName)).toEqual([demo.displayName]);
    }
    await server.stop();
    const seeded = await rowCounts(url);
    expect(seeded.users).toBe(1 + DEMO_USERS.length);

    // Demo data present next to the other user: nothing to do, even without --force.
    const again = await runCli(['seed', '--demo'], { DATABASE_URL: url });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain('already there');
    expect(await rowCounts(url)).toEqual(seeded);
  });

  it('finishes the work of an interrupted run: demo users without the last write are removed and seeded again', async () => {
    const url = await freshDatabase();
    expect((await runCli(['seed', '--demo'], { DATABASE_URL: url })).code).toBe(0);
    const complete = await rowCounts(url);

    // Undo the seed's last write (elif_y follows sam_b), as if the run had stopped just before it.
    const server = await startServer({ databaseUrl: url });
    const find = async (name: string) => (await request(server.url, 'GET', `/users?username=${name}`)).json<User[]>()[0]!;
    const [elif, sam] = [await find('elif_y'), await find('sam_b')];
    const token = await signIn(server.url, 'elif_y');
    const unfollow = await request(server.url, 'DELETE', `/users/${sam.id}/followers/${elif.id}`, { token });
    expect(unfollow.status).toBe(200);
    await server.stop();

    const rerun = await runCli(['seed', '--demo'], { DATABASE_URL: url });
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(rerun.stdout).toContain('unfinished seed');
    expect(rerun.stdout).toContain('created the demo community');
    // The same community again; only the live-stream event log grew, by the removed posts' deletions and the
    // new posts' creations (it is an append-only log, purged after its retention). The notifications' event log is
    // append-only too, and SQLite's search index keeps its words in segments whose count depends on the writes'
    // history (FTS5's shadow tables): neither is the community's state.
    const comparable = (counts: Record<string, number>) =>
      Object.fromEntries(Object.entries(counts).filter(([table]) => !/^(notification_events|post_search_(data|idx|docsize|config|content))$/.test(table)));
    const { stream_events: eventsAfter, ...after } = await rowCounts(url);
    const { stream_events: eventsBefore, ...before } = complete;
    expect(comparable(after)).toEqual(comparable(before));
    expect(eventsAfter).toBe((eventsBefore ?? 0) + 2 * (before.posts ?? 0));
  });

  it('rejects a command line it does not understand', async () => {
    const url = 'sqlite::memory:';
    const bare = await runCli(['seed'], { DATABASE_URL: url });
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('--demo');
    const unknown = await runCli(['seed', '--demo', '--yes'], { DATABASE_URL: url });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('--yes');
  });
});
