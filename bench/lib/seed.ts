import { randomBytes } from 'node:crypto';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { Kysely, SqliteDialect } from 'kysely';
import { migrateToLatest } from '../../src/db/migrate.js';
import { openStore } from '../../src/db/open.js';
import type { Database } from '../../src/db/types.js';
import { hashToken, newTokenSecret } from '../../src/shared/tokens.js';
import { tsvectorText } from '../../src/db/search-sql.js';
import { postIndexWords, userSearchWords } from '../../src/modules/search/search.text.js';
import { userWordPrefixes } from '../../src/modules/users/users.repository.js';
import { hashPassword } from '../../src/shared/passwords.js';
import { count, feedOf, textPool, visibilityOf, type Dataset } from './dataset.js';

/**
 * Writes a Dataset into a freshly migrated database, producing exactly the rows the API would have produced had
 * the same users signed up, followed, posted and pinned boards through it: correct counters, one feed entry per
 * (follower, post of the followee) for every follow, a cursor-signing secret, and bearer tokens for the scenarios.
 *
 * Speed comes from bulk writes (SQLite: prepared statements in large transactions; PostgreSQL: multi-row
 * INSERT … SELECT FROM unnest(arrays)), from writing rows in primary-key order, and from building the secondary
 * indexes once at the end: they are dropped after the migration and re-created from their own stored definitions,
 * so the schema ends identical to what the migration made.
 */

export interface Tokens {
  feed: string;
  author: string;
  reader: string;
  /** The bearer token of user u is `signedIn[u - 1]`, for u in 1 .. dataset.options.signedIn. */
  signedIn: string[];
  /** The users and posts of the safety and notifications scenarios (see `seedSafety`). */
  safety?: SafetyFixtures;
  /** The block scenario's users (see `seedBlockPairs`). */
  blockPairs?: BlockPairs;
}

/**
 * The block scenario (issue 42): `blockers` (signed in) and `blocked`, every blocker following every blocked user
 * and followed back, each user with `postsEach` posts, all of them in the feed of everyone on the other side. Users
 * past the dataset's and the safety fixtures', so no other scenario's user changes; every pair can be blocked once.
 */
export interface BlockPairs {
  blockers: { id: number; token: string }[];
  blocked: number[];
  postsEach: number;
}

/** Blockers × blocked users: 20,000 pairs, enough for ~570 blocks a second over the default warm-up and rounds (35 s). */
export const BLOCKERS = 100;
export const BLOCKED = 200;

/**
 * CONTRACT §9 and §10 scenarios (issues 42, 43), seeded beside the dataset without changing it:
 * - `blocksFeedUser` follows exactly the feed user's 1,000 users (the same feed entries) and has 1,000 blocks and
 *   1,000 mutes of users they do not follow, so their feed reads the same rows as the feed user's with every check
 *   of rule 3 and 4 (shared/visibility.ts) on;
 * - `notifiedUser` has NOTIFIED_COUNT notifications (follows, recommends and mentions of public posts) and no marker;
 * - `mentioned`: the usernames create-post-mentions names (existing ordinary users, nobody blocks anybody);
 * - `replyPost`: a public post the reader (who replies) does not own, and its owner's username.
 */
export interface SafetyFixtures {
  blocksFeedUser: number;
  blocksFeedToken: string;
  notifiedUser: number;
  notifiedToken: string;
  mentioned: string[];
  replyPost: number;
  replyPostOwner: string;
}

/** The notifications of the notified user: what issue 43 measures the first page and the unread count at. */
export const NOTIFIED_COUNT = 100_000;
/** Blocks and mutes of the blocks-feed user (issue 42). */
export const SAFETY_RELATIONS = 1_000;

export interface SeedResult {
  seconds: number;
  phases: Record<string, number>;
  rows: Record<string, number>;
  tokens: Tokens;
  cursorSecret: string;
}

type Row = unknown[];

interface TableSpec {
  name: string;
  columns: string[];
  /** PostgreSQL element types for unnest(). */
  pgTypes: string[];
}

const TABLES = {
  users: {
    name: 'users',
    columns: ['id', 'username', 'username_key', 'display_name', 'bio', 'role', 'password_hash', 'follower_count',
      'following_count', 'post_count', 'public_post_count', 'followers_post_count', 'password_version', 'search_words', 'created_at', 'updated_at'],
    pgTypes: ['int8', 'text', 'text', 'text', 'text', 'text', 'text', 'int4', 'int4', 'int4', 'int4', 'int4', 'int4', 'text', 'timestamptz', 'timestamptz'],
  },
  tokens: {
    name: 'tokens',
    columns: ['id', 'user_id', 'token_hash', 'password_version', 'created_at', 'expires_at'],
    pgTypes: ['int8', 'int8', 'text', 'int4', 'timestamptz', 'timestamptz'],
  },
  follows: {
    name: 'follows',
    columns: ['follower_id', 'followee_id', 'created_at'],
    pgTypes: ['int8', 'int8', 'timestamptz'],
  },
  posts: {
    name: 'posts',
    columns: ['id', 'owner_id', 'title', 'content', 'visibility', 'reply_count', 'recommend_count', 'created_at', 'updated_at'],
    pgTypes: ['int8', 'int8', 'text', 'text', 'text', 'int4', 'int4', 'timestamptz', 'timestamptz'],
  },
  feed_entries: {
    name: 'feed_entries',
    columns: ['user_id', 'post_id', 'owner_id'],
    pgTypes: ['int8', 'int8', 'int8'],
  },
  boards: {
    name: 'boards',
    columns: ['id', 'author_id', 'title', 'content', 'created_at', 'updated_at'],
    pgTypes: ['int8', 'int8', 'text', 'text', 'timestamptz', 'timestamptz'],
  },
  settings: { name: 'settings', columns: ['key', 'value'], pgTypes: ['text', 'text'] },
  user_words: { name: 'user_words', columns: ['word', 'username_key', 'user_id'], pgTypes: ['text', 'text', 'int8'] },
  blocks: { name: 'blocks', columns: ['blocker_id', 'blocked_id', 'created_at'], pgTypes: ['int8', 'int8', 'timestamptz'] },
  mutes: { name: 'mutes', columns: ['muter_id', 'muted_id', 'created_at'], pgTypes: ['int8', 'int8', 'timestamptz'] },
  notifications: {
    name: 'notifications',
    columns: ['recipient_id', 'actor_id', 'type', 'post_id', 'created_at'],
    pgTypes: ['int8', 'int8', 'text', 'int8', 'timestamptz'],
  },
} satisfies Record<string, TableSpec>;

/** Tables whose secondary indexes are built after the load rather than maintained row by row. */
const BULK_TABLES = ['follows', 'posts', 'feed_entries', 'boards', 'post_search', 'user_words'];

/**
 * The word of the search scenarios that few posts hold: one post in RARE_EVERY gets it at the end of its content
 * (every seeded word is common: the vocabulary has 66 words and a post ~40 of them).
 */
export const RARE_WORD = 'quartz';
export const RARE_EVERY = 10_000;

interface Target {
  write(table: TableSpec, rows: Iterable<Row>): Promise<number>;
  /** The search index of posts (src/db/search-sql.ts): its table, and the row of a post of these words. */
  postSearch: { table: TableSpec; row(id: number, words: string[]): Row };
  dropSecondaryIndexes(tables: string[]): Promise<string[]>;
  run(statements: string[]): Promise<void>;
  /** Settles the database (switch modes, sequences, statistics); it stays open for `verify`. */
  finish(): Promise<void>;
  /** The first column of the first row of a query, as a number. */
  scalar(text: string): Promise<number>;
  tableExists(name: string): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * The invariants the API keeps, checked on the seeded rows (each query counts violations): a seed that drifted
 * from what the API would produce (a new counter, a trigger the bulk load skipped) fails here, not in a benchmark.
 */
export const INVARIANTS: [string, string][] = [
  ['users.follower_count', 'SELECT count(*) FROM users u WHERE follower_count <> (SELECT count(*) FROM follows f WHERE f.followee_id = u.id)'],
  ['users.following_count', 'SELECT count(*) FROM users u WHERE following_count <> (SELECT count(*) FROM follows f WHERE f.follower_id = u.id)'],
  ['users.post_count', 'SELECT count(*) FROM users u WHERE post_count <> (SELECT count(*) FROM posts p WHERE p.owner_id = u.id)'],
  ['users.public_post_count', "SELECT count(*) FROM users u WHERE public_post_count <> (SELECT count(*) FROM posts p WHERE p.owner_id = u.id AND p.visibility = 'public')"],
  ['users.followers_post_count', "SELECT count(*) FROM users u WHERE followers_post_count <> (SELECT count(*) FROM posts p WHERE p.owner_id = u.id AND p.visibility = 'followers')"],
  ['tokens.password_version', 'SELECT count(*) FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.password_version <> u.password_version'],
  ['posts.reply_count', 'SELECT count(*) FROM posts WHERE reply_count <> 0 OR recommend_count <> 0'],
  // One search entry per post (the index has no column both engines name alike to join on, so the counts).
  ['post_search', 'SELECT abs((SELECT count(*) FROM posts) - (SELECT count(*) FROM post_search))'],
  ['user_words', 'SELECT count(*) FROM user_words w JOIN users u ON u.id = w.user_id WHERE w.username_key <> u.username_key'],
];

async function verify(target: Target, data: Dataset, extraFeedEntries: number): Promise<void> {
  const failures: string[] = [];
  for (const [name, text] of INVARIANTS) {
    const n = await target.scalar(text);
    if (n !== 0) failures.push(`${name}: ${n} rows disagree`);
  }
  const entries = await target.scalar('SELECT count(*) FROM feed_entries');
  const expected = data.feedEntryCount + extraFeedEntries;
  if (entries !== expected) failures.push(`feed_entries: ${entries} rows, expected ${expected}`);
  if ((await target.tableExists('fanout_queue')) && (await target.scalar('SELECT count(*) FROM fanout_queue')) !== 0) {
    failures.push('fanout_queue is not empty');
  }
  // Counters kept by triggers (e.g. the board count), when the schema has them.
  if (await target.tableExists('counters')) {
    const wrong = await target.scalar("SELECT count(*) FROM counters WHERE name = 'boards' AND value <> (SELECT count(*) FROM boards)");
    if (wrong !== 0) failures.push('counters(boards) differs from the number of boards');
  }
  if (failures.length) throw new Error(`the seeded database is not what the API would have produced:\n  ${failures.join('\n  ')}`);
}

// Fixed instants keep the data deterministic: users sign up, then follow, then post (one post a second).
const USERS_AT = Date.UTC(2026, 0, 1);
const FOLLOWS_AT = Date.UTC(2026, 0, 15);
const POSTS_AT = Date.UTC(2026, 1, 1);
const BOARDS_AT = Date.UTC(2026, 1, 1, 12);
const iso = (ms: number) => new Date(ms).toISOString();

async function seed(data: Dataset, target: Target, log: (line: string) => void): Promise<SeedResult> {
  const started = performance.now();
  const phases: Record<string, number> = {};
  const rows: Record<string, number> = {};
  let mark = performance.now();
  const phase = (name: string) => {
    const now = performance.now();
    phases[name] = Math.round(now - mark) / 1000;
    mark = now;
    log(`  ${name.padEnd(16)} ${phases[name]?.toFixed(1)} s`);
  };
  const { users, posts, boards } = data.options;

  // One slow hash, at a low cost, shared by every user: they can all sign in with the same password.
  const passwordHash = await hashPassword('benchmark-password', 1024);
  const dropped = await target.dropSecondaryIndexes(BULK_TABLES);
  phase('prepare');

  // Per-visibility post counts (what the API keeps for visiblePostCount): the visibility is a function of the id.
  const publicPosts = new Int32Array(users + 1);
  const followersPosts = new Int32Array(users + 1);
  for (let p = 1; p <= posts; p++) {
    const owner = data.postOwner[p] as number;
    const visibility = visibilityOf(p);
    if (visibility === 'public') publicPosts[owner] = (publicPosts[owner] as number) + 1;
    else if (visibility === 'followers') followersPosts[owner] = (followersPosts[owner] as number) + 1;
  }
  rows.users = await target.write(TABLES.users, (function* () {
    for (let u = 1; u <= users; u++) {
      const at = iso(USERS_AT + u * 1000);
      yield [u, `user${u}`, `user${u}`, `User ${u}`, '', 'member', passwordHash, count(data.followerOffsets, u),
        count(data.followOffsets, u), count(data.ownerOffsets, u), publicPosts[u], followersPosts[u], 0,
        userSearchWords(`user${u}`, `User ${u}`), at, at];
    }
  })());
  phase('users');

  // The prefixes of the words GET /users?q= finds each user by (users.repository.ts, writeUserWords).
  rows.user_words = await target.write(TABLES.user_words, (function* () {
    for (let u = 1; u <= users; u++) for (const word of userWordPrefixes(`user${u}`, `User ${u}`)) yield [word, `user${u}`, u];
  })());
  phase('user_words');

  const now = Date.now();
  // One token for each of users 1 .. signedIn (token id = user id), minted at password version 0 like the users.
  const signedIn = Array.from({ length: Math.max(data.options.signedIn, data.reader) }, () => newTokenSecret());
  const tokens: Tokens = {
    feed: signedIn[data.feedUser - 1] as string,
    author: signedIn[data.author - 1] as string,
    reader: signedIn[data.reader - 1] as string,
    signedIn,
  };
  rows.tokens = await target.write(TABLES.tokens, signedIn.map((secret, i) =>
    [i + 1, i + 1, hashToken(secret), 0, iso(now), iso(now + 7 * 24 * 3600 * 1000)]));
  const cursorSecret = randomBytes(32).toString('base64url');
  await target.write(TABLES.settings, [['cursor_secret', cursorSecret]]);

  // follows in primary-key order (followee_id, follower_id).
  rows.follows = await target.write(TABLES.follows, (function* () {
    const at = iso(FOLLOWS_AT);
    for (let v = 1; v <= users; v++) {
      for (let i = data.followerOffsets[v] as number; i < (data.followerOffsets[v + 1] as number); i++) {
        yield [data.followers[i], v, at];
      }
    }
  })());
  phase('follows');

  const titles = textPool(data.options.seed + 1, 4096, 2, 9, true);
  const contents = textPool(data.options.seed + 2, 4096, 12, 90, true);
  const pickText = (pool: string[], id: number) => pool[Math.imul(id, 2654435761) >>> 20] as string;
  // Posts 1, 10,001, 20,001, …: public ones (visibilityOf), so the rare word's page is full at 200k posts and more.
  const contentOf = (p: number) => pickText(contents, p) + (p % RARE_EVERY === 1 ? ` ${RARE_WORD}` : '');
  rows.posts = await target.write(TABLES.posts, (function* () {
    for (let p = 1; p <= posts; p++) {
      const at = iso(POSTS_AT + p * 1000);
      yield [p, data.postOwner[p], pickText(titles, p), contentOf(p), visibilityOf(p), 0, 0, at, at];
    }
  })());
  phase('posts');

  // The search entry the API writes with each post: the words of the title and content (search.text.ts).
  rows.post_search = await target.write(target.postSearch.table, (function* () {
    for (let p = 1; p <= posts; p++) yield target.postSearch.row(p, postIndexWords(pickText(titles, p), contentOf(p)));
  })());
  phase('post_search');

  // Every follower gets every post of every user they follow (what POST /users/{id}/followers and
  // POST /users/{id}/posts do at write time), in primary-key order (user_id, post_id).
  rows.feed_entries = await target.write(TABLES.feed_entries, (function* () {
    for (let u = 1; u <= users; u++) {
      for (const p of feedOf(data, u)) yield [u, p, data.postOwner[p]];
    }
  })());
  phase('feed_entries');

  rows.boards = await target.write(TABLES.boards, (function* () {
    for (let b = 1; b <= boards; b++) {
      const at = iso(BOARDS_AT + b * 1000);
      yield [b, data.boardAuthor[b], pickText(titles, b + 7), pickText(contents, b + 11), at, at];
    }
  })());
  phase('boards');

  const pairs = await seedBlockPairs(data, target, passwordHash, (p) => [pickText(titles, p), pickText(contents, p)]);
  tokens.blockPairs = pairs.fixtures;
  phase('block_pairs');

  await target.run(dropped);
  phase('indexes');
  const safety = await seedSafety(data, target, passwordHash);
  tokens.safety = safety.fixtures;
  phase('safety');
  // The feed entries above are what the fan-out worker would have written, so nothing is left queued for it (on
  // SQLite the queueing trigger fired for every post; PostgreSQL's bulk load ran with triggers off).
  if (await target.tableExists('fanout_queue')) await target.run(['DELETE FROM fanout_queue']);
  await target.finish();
  phase('finish');
  try {
    await verify(target, data, safety.feedEntries + pairs.feedEntries);
  } finally {
    await target.close();
  }
  phase('verify');
  return { seconds: Math.round(performance.now() - started) / 1000, phases, rows, tokens, cursorSecret };
}

/**
 * The rows of SafetyFixtures, written after the dataset's (indexes built) with the API's invariants kept: the new
 * users' follows counted on their followees, blocks counted on both sides (`users.block_count`), mutes on the
 * muter (`users.mute_count`). Two users past the dataset's, so no other scenario's user changes.
 */
async function seedSafety(data: Dataset, target: Target, passwordHash: string): Promise<{ fixtures: SafetyFixtures; feedEntries: number }> {
  const { users, posts } = data.options;
  const blocksFeedUser = users + 1;
  const notifiedUser = users + 2;
  const at = iso(USERS_AT);
  const secrets = [newTokenSecret(), newTokenSecret()];
  await target.write(TABLES.users, [blocksFeedUser, notifiedUser].map((u) =>
    [u, `user${u}`, `user${u}`, `User ${u}`, '', 'member', passwordHash, 0, 0, 0, 0, 0, 0, userSearchWords(`user${u}`, `User ${u}`), at, at]));
  const now = Date.now();
  const firstToken = Math.max(data.options.signedIn, data.reader) + 1;
  await target.write(TABLES.tokens, secrets.map((secret, i) =>
    [firstToken + i, blocksFeedUser + i, hashToken(secret), 0, iso(now), iso(now + 7 * 24 * 3600 * 1000)]));

  // The feed user's follows and feed entries, copied.
  const followees = data.followees.subarray(data.followOffsets[data.feedUser] as number, data.followOffsets[data.feedUser + 1] as number);
  await target.write(TABLES.follows, Array.from(followees, (v) => [blocksFeedUser, v, iso(FOLLOWS_AT)]));
  const feed = feedOf(data, data.feedUser);
  await target.write(TABLES.feed_entries, Array.from(feed, (p) => [blocksFeedUser, p, data.postOwner[p]]));

  // Blocks and mutes of users from the top of the id range down, none of them followed (the feed stays the same).
  const followed = new Set(followees);
  const others: number[] = [];
  for (let u = users; u > 1_010 && others.length < 2 * SAFETY_RELATIONS; u--) if (!followed.has(u)) others.push(u);
  const blocked = others.slice(0, SAFETY_RELATIONS);
  const muted = others.slice(SAFETY_RELATIONS);
  await target.write(TABLES.blocks, blocked.map((u) => [blocksFeedUser, u, at]));
  await target.write(TABLES.mutes, muted.map((u) => [blocksFeedUser, u, at]));

  await target.run([
    `UPDATE users SET follower_count = follower_count + 1 WHERE id IN (SELECT followee_id FROM follows WHERE follower_id = ${blocksFeedUser})`,
    `UPDATE users SET following_count = ${followees.length}, block_count = ${blocked.length}, mute_count = ${muted.length} WHERE id = ${blocksFeedUser}`,
    `UPDATE users SET block_count = block_count + 1 WHERE id IN (SELECT blocked_id FROM blocks WHERE blocker_id = ${blocksFeedUser})`,
  ]);

  // Notifications, oldest first: a follow, a recommend and a mention in turn, from actors spread over the users,
  // about public posts (the read checks each post's visibility).
  const publicPost = (k: number) => {
    const p = 1 + ((k * 7919) % posts);
    return p % 10 === 0 ? p - 1 || 1 : p;
  };
  const types = ['follow', 'recommend', 'mention'] as const;
  await target.write(TABLES.notifications, (function* () {
    for (let k = 0; k < NOTIFIED_COUNT; k++) {
      const type = types[k % 3] as (typeof types)[number];
      yield [notifiedUser, 5 + ((k * 104_729) % (users - 5)), type, type === 'follow' ? null : publicPost(k), iso(POSTS_AT + k * 1000)];
    }
  })());

  // Ordinary users (past the many authors) with usernames, and a public post someone other than the reader owns.
  const mentioned = Array.from({ length: 20 }, (_, i) => `user${Math.min(1_011, users - 40) + i}`);
  let replyPost = 3;
  while (visibilityOf(replyPost) !== 'public' || data.postOwner[replyPost] === data.reader) replyPost++;
  const fixtures: SafetyFixtures = {
    blocksFeedUser,
    blocksFeedToken: secrets[0] as string,
    notifiedUser,
    notifiedToken: secrets[1] as string,
    mentioned,
    replyPost,
    replyPostOwner: `user${data.postOwner[replyPost]}`,
  };
  return { fixtures, feedEntries: feed.length };
}

/**
 * The rows of BlockPairs, written before the secondary indexes are built: BLOCKERS + BLOCKED users after the two of
 * `seedSafety` (ids users + 3 …, tokens after its two), their mutual follows (each with the `follow` notification
 * the API writes), their posts and search entries, and every post in the feed of each follower, with the counters
 * to match. Each user has ~100 posts at 1M posts (posts ÷ 10,000, 1–100: 2 at --quick), owned in turn (post
 * posts + 1 + m by user m mod (BLOCKERS + BLOCKED)) so that a user's posts lie spread through the other side's
 * feeds, as posts written over time do. Their texts are the dataset's (without the rare word, so the rare search's
 * results stay the dataset's): they are the newest posts, so GET /posts' first page shows posts of the seeded sizes
 * as before. At 1M posts: 30,000 posts, 40,000 follows and notifications, 4,000,000 feed entries.
 */
async function seedBlockPairs(
  data: Dataset,
  target: Target,
  passwordHash: string,
  text: (post: number) => [string, string],
): Promise<{ fixtures: BlockPairs; feedEntries: number }> {
  const { users, posts } = data.options;
  const postsEach = Math.max(1, Math.min(100, Math.round(posts / 10_000)));
  const first = users + 3;
  const all = BLOCKERS + BLOCKED;
  const blockers = Array.from({ length: BLOCKERS }, (_, i) => first + i);
  const blocked = Array.from({ length: BLOCKED }, (_, i) => first + BLOCKERS + i);
  const ownerOf = (p: number) => first + ((p - posts - 1) % all);
  const lastPost = posts + postsEach * all;
  const isBlocker = (u: number) => u < first + BLOCKERS;

  const publicPosts = new Map<number, number>();
  const followersPosts = new Map<number, number>();
  for (let p = posts + 1; p <= lastPost; p++) {
    const counts = visibilityOf(p) === 'public' ? publicPosts : visibilityOf(p) === 'followers' ? followersPosts : undefined;
    counts?.set(ownerOf(p), (counts.get(ownerOf(p)) ?? 0) + 1);
  }
  const at = (u: number) => iso(USERS_AT + u * 1000);
  await target.write(TABLES.users, [...blockers, ...blocked].map((u) => {
    const others = isBlocker(u) ? BLOCKED : BLOCKERS;
    return [u, `user${u}`, `user${u}`, `User ${u}`, '', 'member', passwordHash, others, others, postsEach,
      publicPosts.get(u) ?? 0, followersPosts.get(u) ?? 0, 0, userSearchWords(`user${u}`, `User ${u}`), at(u), at(u)];
  }));
  await target.write(TABLES.user_words, (function* () {
    for (const u of [...blockers, ...blocked]) for (const word of userWordPrefixes(`user${u}`, `User ${u}`)) yield [word, `user${u}`, u];
  })());
  // Token ids after the dataset's and the two of seedSafety.
  const firstToken = Math.max(data.options.signedIn, data.reader) + 3;
  const secrets = blockers.map(() => newTokenSecret());
  const now = Date.now();
  await target.write(TABLES.tokens, secrets.map((secret, i) =>
    [firstToken + i, blockers[i], hashToken(secret), 0, iso(now), iso(now + 7 * 24 * 3600 * 1000)]));

  // Follows in primary-key order (followee_id, follower_id), and the follow notification of each.
  const followsOf = function* () {
    for (const followee of [...blockers, ...blocked]) for (const follower of isBlocker(followee) ? blocked : blockers) yield [follower, followee];
  };
  await target.write(TABLES.follows, (function* () {
    for (const [follower, followee] of followsOf()) yield [follower, followee, iso(FOLLOWS_AT)];
  })());
  await target.write(TABLES.notifications, (function* () {
    for (const [follower, followee] of followsOf()) yield [followee, follower, 'follow', null, iso(FOLLOWS_AT)];
  })());

  await target.write(TABLES.posts, (function* () {
    for (let p = posts + 1; p <= lastPost; p++) {
      const [title, content] = text(p);
      yield [p, ownerOf(p), title, content, visibilityOf(p), 0, 0, iso(POSTS_AT + p * 1000), iso(POSTS_AT + p * 1000)];
    }
  })());
  await target.write(target.postSearch.table, (function* () {
    for (let p = posts + 1; p <= lastPost; p++) yield target.postSearch.row(p, postIndexWords(...text(p)));
  })());
  // Each user's feed: every post of the other side, in primary-key order (user_id, post_id).
  const feedEntries = await target.write(TABLES.feed_entries, (function* () {
    for (const u of [...blockers, ...blocked]) {
      for (let p = posts + 1; p <= lastPost; p++) if (isBlocker(ownerOf(p)) !== isBlocker(u)) yield [u, p, ownerOf(p)];
    }
  })());
  return { fixtures: { blockers: blockers.map((id, i) => ({ id, token: secrets[i] as string })), blocked, postsEach }, feedEntries };
}

/** Creates (or replaces) the SQLite database `file` and fills it. */
export async function seedSqlite(file: string, data: Dataset, log: (line: string) => void): Promise<SeedResult> {
  // The app's migrations on a connection of the seeder's own: the SQLite store keeps its read and write
  // connections open after close() when they never ran a query, and those would hold the file below.
  const migrator = new Kysely<Database>({ dialect: new SqliteDialect({ database: new SQLite(file) }) });
  await migrateToLatest(migrator);
  await migrator.destroy();

  const db = new SQLite(file);
  // A throw-away load: journal in memory, no fsync, no per-row foreign-key checks (the generator only makes valid
  // references), a large page cache. The database is switched back to WAL (the app's mode) at the end.
  db.pragma('journal_mode = DELETE');
  db.pragma('journal_mode = MEMORY');
  db.pragma('synchronous = OFF');
  db.pragma('foreign_keys = OFF');
  db.pragma('cache_size = -1048576');
  db.pragma('temp_store = MEMORY');
  db.pragma('threads = 2');
  const BATCH = 200_000;
  const target: Target = {
    postSearch: {
      table: { name: 'post_search', columns: ['rowid', 'words'], pgTypes: [] },
      row: (id, words) => [id, words.join(' ')],
    },
    async write(table, rows) {
      // Multi-row INSERTs (PER_STATEMENT rows each) cut the per-row cost of crossing into the native binding.
      const tuple = `(${table.columns.map(() => '?').join(', ')})`;
      const insert = (k: number) =>
        db.prepare(`INSERT INTO ${table.name} (${table.columns.join(', ')}) VALUES ${Array(k).fill(tuple).join(', ')}`);
      const PER_STATEMENT = 256;
      const many = insert(PER_STATEMENT);
      const one = insert(1);
      const width = table.columns.length;
      const params: unknown[] = new Array(width * PER_STATEMENT);
      let buffered = 0;
      let n = 0;
      db.exec('BEGIN');
      for (const row of rows) {
        for (let i = 0; i < width; i++) params[buffered * width + i] = row[i];
        buffered++;
        n++;
        if (buffered === PER_STATEMENT) {
          many.run(params);
          buffered = 0;
        }
        if (n % BATCH === 0) {
          db.exec('COMMIT');
          db.exec('BEGIN');
        }
      }
      for (let r = 0; r < buffered; r++) one.run(params.slice(r * width, (r + 1) * width));
      db.exec('COMMIT');
      return n;
    },
    async dropSecondaryIndexes(tables) {
      const indexes = db
        .prepare(
          `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND tbl_name IN (${tables.map(() => '?').join(', ')})`,
        )
        .all(...tables) as { name: string; sql: string }[];
      for (const index of indexes) db.exec(`DROP INDEX ${index.name}`);
      return indexes.map((i) => i.sql);
    },
    async run(statements) {
      for (const statement of statements) db.exec(statement);
    },
    async finish() {
      // The search index merged into one segment, as an index kept merged looks: FTS5 reads every segment that holds
      // a word, and a bulk load leaves many (at 300k posts: a common word's first page 68 µs instead of 11, a deep
      // page 272 µs instead of 31; see bench/README.md).
      db.exec("INSERT INTO post_search (post_search) VALUES ('optimize')");
      db.pragma('journal_mode = WAL');
    },
    async scalar(text) {
      return Number(db.prepare(text).pluck().get());
    },
    async tableExists(name) {
      return db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined;
    },
    async close() {
      db.close();
    },
  };
  return seed(data, target, log);
}

/** Fills the (new, empty) PostgreSQL database at `url`. */
export async function seedPostgres(url: string, data: Dataset, log: (line: string) => void): Promise<SeedResult> {
  const store = openStore(url);
  await store.migrate();
  await store.close();

  const client = new pg.Client({ connectionString: url });
  await client.connect();
  // A bulk load into a fresh benchmark database: foreign-key triggers off for this session only (the generator
  // only makes valid references), and no waiting for the WAL flush on each batch.
  await client.query('SET session_replication_role = replica');
  await client.query('SET synchronous_commit = off');
  await client.query("SET maintenance_work_mem = '512MB'");
  const target: Target = {
    postSearch: {
      table: { name: 'post_search', columns: ['post_id', 'words'], pgTypes: ['int8', 'tsvector'] },
      row: (id, words) => [id, tsvectorText(words)],
    },
    async write(table, rows) {
      const batch = table.name === 'posts' || table.name === 'boards' || table.name === 'post_search' ? 10_000 : 50_000;
      const text =
        `INSERT INTO ${table.name} (${table.columns.join(', ')}) ` +
        `SELECT * FROM unnest(${table.pgTypes.map((t, i) => `$${i + 1}::${t}[]`).join(', ')})`;
      let columns: unknown[][] = table.columns.map(() => []);
      let n = 0;
      const flush = async () => {
        if ((columns[0] as unknown[]).length === 0) return;
        await client.query(text, columns);
        columns = table.columns.map(() => []);
      };
      for (const row of rows) {
        for (let i = 0; i < row.length; i++) (columns[i] as unknown[]).push(row[i]);
        if (++n % batch === 0) await flush();
      }
      await flush();
      return n;
    },
    async dropSecondaryIndexes(tables) {
      const { rows } = await client.query<{ indexname: string; indexdef: string }>(
        `SELECT indexname, indexdef FROM pg_indexes
          WHERE schemaname = current_schema() AND tablename = ANY($1)
            AND indexname NOT IN (SELECT conname FROM pg_constraint)`,
        [tables],
      );
      for (const index of rows) await client.query(`DROP INDEX ${index.indexname}`);
      return rows.map((r) => r.indexdef);
    },
    async run(statements) {
      for (const statement of statements) await client.query(statement);
    },
    async finish() {
      // The bulk load ran with triggers off (session_replication_role), so the trigger-kept board count is set here.
      await client.query(`UPDATE counters SET value = (SELECT count(*) FROM boards) WHERE name = 'boards'`);
      // Identity columns were given explicit ids: move their sequences past them, as the API's inserts would have.
      for (const table of ['users', 'tokens', 'posts', 'boards']) {
        await client.query(
          `SELECT setval(pg_get_serial_sequence('${table}', 'id'), (SELECT COALESCE(MAX(id), 0) + 1 FROM ${table}), false)`,
        );
      }
      // What autovacuum would have done by the time a database of this size is serving: statistics and a
      // visibility map (index-only scans).
      await client.query('VACUUM ANALYZE');
    },
    async scalar(text) {
      const { rows } = await client.query<Record<string, unknown>>(text);
      return Number(Object.values(rows[0] ?? {})[0]);
    },
    async tableExists(name) {
      const { rows } = await client.query('SELECT to_regclass($1) AS t', [name]);
      return rows[0]?.t !== null;
    },
    async close() {
      await client.end();
    },
  };
  return seed(data, target, log);
}
