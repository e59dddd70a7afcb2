import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildApp } from '../src/app.js';
import { parseConfig, type Config } from '../src/config.js';
import type { CommandOutput } from './backup-restore.js';
import {
  DEMO_BOARDS,
  DEMO_COMPLETION_FOLLOW,
  DEMO_FOLLOWS,
  DEMO_PASSWORD,
  DEMO_POSTS,
  DEMO_RECOMMENDS,
  DEMO_REPLIES,
  DEMO_USERS,
  type Visibility,
} from './demo-data.js';

/**
 * `corkboard seed --demo`: the demo community of demo-data.ts, written through the application's own HTTP API
 * (`app.inject`), never with SQL, so the seed stays valid whatever the storage layer looks like and every entry
 * passes the same validation and permission checks as a client's.
 */

class SeedError extends Error {}

interface ListedUser {
  id: number;
  username: string;
}

interface Session {
  id: number;
  token: string;
  tokenId: number;
}

function describe(res: LightMyRequestResponse): string {
  const body = res.body.length > 500 ? `${res.body.slice(0, 500)}…` : res.body;
  return `${res.statusCode} ${body}`;
}

async function call(
  app: FastifyInstance,
  method: 'GET' | 'POST' | 'DELETE',
  url: string,
  options: { token?: string; body?: unknown; expect?: number } = {},
): Promise<LightMyRequestResponse> {
  const res = await app.inject({
    method,
    url,
    headers: options.token ? { authorization: `Bearer ${options.token}` } : {},
    ...(options.body !== undefined ? { payload: options.body as object } : {}),
  });
  const expected = options.expect ?? (method === 'POST' ? 201 : 200);
  if (res.statusCode !== expected) throw new SeedError(`${method} ${url} answered ${describe(res)}`);
  return res;
}

/** The demo users that exist, looked up by name (GET /users?username= matches case-insensitively). */
async function presentDemoUsers(app: FastifyInstance): Promise<ListedUser[]> {
  const found: ListedUser[] = [];
  for (const { username } of DEMO_USERS) {
    const res = await call(app, 'GET', `/users?username=${username}`);
    found.push(...(res.json() as ListedUser[]));
  }
  return found;
}

/**
 * A few users that are not demo users, or none. One short page is enough whatever the size of the database: at
 * most DEMO_USERS.length users are demo users, so a page longer than that holds another user if one exists.
 */
async function someOtherUsers(app: FastifyInstance): Promise<ListedUser[]> {
  const demoNames = new Set(DEMO_USERS.map((u) => u.username.toLowerCase()));
  const res = await call(app, 'GET', `/users?limit=${DEMO_USERS.length + 5}`);
  return (res.json() as ListedUser[]).filter((u) => !demoNames.has(u.username.toLowerCase()));
}

async function signIn(app: FastifyInstance, username: string): Promise<Session | undefined> {
  const res = await app.inject({ method: 'POST', url: '/tokens', payload: { username, password: DEMO_PASSWORD } });
  if (res.statusCode === 401) return undefined;
  if (res.statusCode !== 201) throw new SeedError(`POST /tokens (${username}) answered ${describe(res)}`);
  const body = res.json<{ id: number; token: string; userId: number }>();
  return { id: body.userId, token: body.token, tokenId: body.id };
}

export interface SeedOptions {
  force: boolean;
}

export async function seedDemo(baseConfig: Readonly<Config>, options: SeedOptions, io: CommandOutput): Promise<number> {
  // The seed makes a few hundred requests from one "client" in a second: the server's rate limits are for the
  // public, not for this. No admin bootstrap either: an admin it created would count as someone else's data.
  const config = parseConfig({
    ...baseConfig,
    adminUsername: undefined,
    adminPassword: undefined,
    rateLimit: { ...baseConfig.rateLimit, enabled: false },
  });
  const app = await buildApp(config, { logger: false });
  try {
    await app.ready();
    return await seed(app, options, io);
  } catch (error) {
    if (error instanceof SeedError) {
      io.err(`seed failed: ${error.message}\n`);
      return 1;
    }
    throw error;
  } finally {
    await app.close();
  }
}

async function seed(app: FastifyInstance, options: SeedOptions, io: CommandOutput): Promise<number> {
  const present = await presentDemoUsers(app);
  if (present.length === DEMO_USERS.length && (await seedCompleted(app, present))) {
    io.out(`the demo data is already there (${present.length} demo users): nothing to do\n`);
    printSignIn(io);
    return 0;
  }
  const others = options.force ? [] : await someOtherUsers(app);
  if (others.length > 0) {
    const names = others.slice(0, 3).map((u) => u.username).join(', ');
    io.err(
      `refusing to seed: the database already holds users that are not demo users (${names}${others.length > 3 ? ', …' : ''}).\n` +
        'Point DATABASE_URL at a new database, or pass --force to add the demo community next to them.\n',
    );
    return 1;
  }
  if (present.length > 0) {
    // What an interrupted run left behind: remove it (deleting a user removes all that is theirs) and start over.
    io.out(`found ${present.length} demo user(s) from an unfinished seed: removing them and starting over\n`);
    for (const user of present) {
      const session = await signIn(app, user.username);
      if (!session) {
        throw new SeedError(`user ${user.username} exists but does not take the demo password: it is not demo data; remove or rename it first`);
      }
      await call(app, 'DELETE', `/users/${session.id}`, { token: session.token });
    }
  }

  const sessions = new Map<string, Session>();
  for (const user of DEMO_USERS) {
    await call(app, 'POST', '/users', { body: { ...user, password: DEMO_PASSWORD } });
    const session = await signIn(app, user.username);
    if (!session) throw new SeedError(`cannot sign in as ${user.username} right after signing up`);
    sessions.set(user.username, session);
  }
  const as = (username: string): Session => {
    const session = sessions.get(username);
    if (!session) throw new SeedError(`demo data refers to an unknown demo user ${username}`);
    return session;
  };
  const follow = ([follower, followed]: [string, string]) =>
    call(app, 'POST', `/users/${as(followed).id}/followers`, { token: as(follower).token, body: { id: as(follower).id } });

  for (const pair of DEMO_FOLLOWS) await follow(pair);

  const posts = new Map<string, number>();
  const byVisibility: Record<Visibility, number> = { public: 0, followers: 0, private: 0 };
  for (const post of DEMO_POSTS) {
    const owner = as(post.owner);
    const res = await call(app, 'POST', `/users/${owner.id}/posts`, {
      token: owner.token,
      body: { title: post.title, content: post.content, visibility: post.visibility },
    });
    posts.set(post.key, res.json<{ id: number }>().id);
    byVisibility[post.visibility]++;
  }
  const postId = (key: string): number => {
    const id = posts.get(key);
    if (id === undefined) throw new SeedError(`demo data refers to an unknown demo post ${key}`);
    return id;
  };

  for (const [key, author, content] of DEMO_REPLIES) {
    await call(app, 'POST', `/posts/${postId(key)}/replies`, { token: as(author).token, body: { content } });
  }
  for (const [key, username] of DEMO_RECOMMENDS) {
    await call(app, 'POST', `/posts/${postId(key)}/recommends`, { token: as(username).token, body: { id: as(username).id } });
  }
  for (const [author, title, content] of DEMO_BOARDS) {
    await call(app, 'POST', '/boards', { token: as(author).token, body: { title, content } });
  }
  // Last, so that its presence means the whole seed went through (see seedCompleted).
  await follow(DEMO_COMPLETION_FOLLOW);

  // The seed's own sign-ins are not left behind as live tokens.
  for (const session of sessions.values()) {
    await call(app, 'DELETE', `/tokens/${session.tokenId}`, { token: session.token });
  }

  io.out(
    `created the demo community in ${app.config.databaseUrl.startsWith('sqlite:') ? 'SQLite' : 'PostgreSQL'}:\n` +
      `  ${DEMO_USERS.length} users, ${DEMO_FOLLOWS.length + 1} follows, ` +
      `${DEMO_POSTS.length} posts (${byVisibility.public} public, ${byVisibility.followers} for followers, ${byVisibility.private} private), ` +
      `${DEMO_REPLIES.length} replies, ${DEMO_RECOMMENDS.length} recommends, ${DEMO_BOARDS.length} boards\n`,
  );
  printSignIn(io);
  return 0;
}

async function seedCompleted(app: FastifyInstance, present: ListedUser[]): Promise<boolean> {
  const [follower, followed] = DEMO_COMPLETION_FOLLOW.map((name) => present.find((u) => u.username.toLowerCase() === name));
  if (!follower || !followed) return false;
  const res = await app.inject({ method: 'GET', url: `/users/${followed.id}/followers/${follower.id}` });
  if (res.statusCode === 404) return false;
  if (res.statusCode !== 200) throw new SeedError(`GET /users/${followed.id}/followers/${follower.id} answered ${describe(res)}`);
  return true;
}

function printSignIn(io: CommandOutput): void {
  const width = Math.max(...DEMO_USERS.map((u) => u.username.length));
  io.out(`demo users (every one's password is "${DEMO_PASSWORD}"):\n`);
  for (const user of DEMO_USERS) io.out(`  ${user.username.padEnd(width)}  ${user.displayName}\n`);
  io.out(`sign in with POST /tokens {"username": "${DEMO_USERS[0]!.username}", "password": "${DEMO_PASSWORD}"}\n`);
}
