/**
 * The benchmark's data set, generated deterministically (same sizes and seed → same rows) and held in compact
 * typed arrays, so that 1M posts and ~10M feed entries cost a few tens of MB to describe and can be written to
 * either backend in the order their indexes like best.
 *
 * Users are 1..users, posts 1..posts, boards 1..boards. Three users have a role in the scenarios:
 * - the feed user follows exactly `feedFollows` (1,000) users;
 * - the author (who POSTs in the write scenario) has exactly `authorFollowers` (10) followers;
 * - the reader holds a token for the authenticated reads;
 * - the returning user follows `feedFollows` (1,000) users too, besides their own random ones: the feed-returning
 *   scenario reads their feed as someone back after 30 days away (no seeded state marks when a user last read).
 */

export interface DatasetOptions {
  users: number;
  posts: number;
  boards: number;
  /** Mean number of users each ordinary user follows (uniform on 0..2×mean). */
  followsPerUser: number;
  feedFollows: number;
  authorFollowers: number;
  /** Users 11 .. 10 + manyAuthors each get 10–100 followers (uniform) for the many-authors create scenario. */
  manyAuthors: number;
  /** Users 1 .. signedIn hold a bearer token (the mixed traffic signs in as them). */
  signedIn: number;
  seed: number;
}

export interface Dataset {
  options: DatasetOptions;
  feedUser: number;
  author: number;
  reader: number;
  /** Follows `feedFollows` more users than the random ones (the feed-returning scenario). */
  returning: number;
  /** Followed by every user but the feed user (whose feed must stay as described); owns no seeded post. */
  celebrity: number;
  /** The many-authors users, ascending; each has 10–100 followers. */
  manyAuthorIds: Int32Array;
  /** CSR: followees of user u are followees[followOffsets[u] .. followOffsets[u + 1]), ascending. */
  followOffsets: Int32Array;
  followees: Int32Array;
  /** CSR: followers of user u, ascending (the follows primary key order: followee, follower). */
  followerOffsets: Int32Array;
  followers: Int32Array;
  /** owner of post p (index p; index 0 unused). */
  postOwner: Int32Array;
  /** CSR: posts of user u, ascending. */
  ownerOffsets: Int32Array;
  ownerPosts: Int32Array;
  /** owner of board b (index b; index 0 unused). */
  boardAuthor: Int32Array;
  /** Number of feed entries: one per (follower, post of the followee). */
  feedEntryCount: number;
}

/** Post visibility is a function of the id, so load scripts can pick public posts without asking the server. */
export function visibilityOf(postId: number): 'public' | 'followers' | 'private' {
  const r = postId % 20;
  if (r === 0) return 'followers';
  if (r === 10) return 'private';
  return 'public';
}

/** Ids of multiples of 10 are the non-public ones: a random public id is k, or k − 1 when k is a multiple of 10. */
export const PUBLIC_ID_RULE = 'ids that are multiples of 10 are not public (5% followers, 5% private)';

/** mulberry32: small, fast and good enough to spread rows; deterministic for a given seed. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function toCsr(lists: (Int32Array | undefined)[], n: number): { offsets: Int32Array; values: Int32Array } {
  const offsets = new Int32Array(n + 2);
  for (let u = 1; u <= n; u++) offsets[u + 1] = (offsets[u] as number) + (lists[u]?.length ?? 0);
  const values = new Int32Array(offsets[n + 1] as number);
  for (let u = 1; u <= n; u++) {
    const list = lists[u];
    if (list) values.set(list, offsets[u] as number);
  }
  return { offsets, values };
}

/** Inverts a CSR relation (u → v) into (v → u), each list ascending. */
function invert(offsets: Int32Array, values: Int32Array, n: number): { offsets: Int32Array; values: Int32Array } {
  const counts = new Int32Array(n + 2);
  for (const v of values) counts[v + 1] = (counts[v + 1] as number) + 1;
  for (let v = 1; v <= n; v++) counts[v + 1] = (counts[v + 1] as number) + (counts[v] as number);
  const out = new Int32Array(values.length);
  const fill = counts.slice();
  for (let u = 1; u <= n; u++) {
    for (let i = offsets[u] as number; i < (offsets[u + 1] as number); i++) {
      const v = values[i] as number;
      out[fill[v] as number] = u;
      fill[v] = (fill[v] as number) + 1;
    }
  }
  return { offsets: counts, values: out };
}

export function generateDataset(options: DatasetOptions): Dataset {
  const { users, posts, boards, seed } = options;
  if (users < 20) throw new Error('--users must be at least 20');
  const random = prng(seed);
  const pick = (max: number) => 1 + Math.floor(random() * max);
  const feedUser = 1;
  const author = 2;
  const reader = 3;
  const celebrity = 4;
  const returning = 5;
  const firstManyAuthor = 11;
  const manyAuthors = Math.max(0, Math.min(options.manyAuthors, users - firstManyAuthor));
  const feedFollows = Math.min(options.feedFollows, users - 2);
  const authorFollowers = Math.min(options.authorFollowers, users - 2);

  // Whom each user follows. Nobody follows the author at random: their follower count must be exact.
  const lists: (Int32Array | undefined)[] = new Array(users + 1);
  const chosen = new Set<number>();
  const choose = (u: number, k: number) => {
    chosen.clear();
    while (chosen.size < k) {
      const v = pick(users);
      if (v !== u && v !== author) chosen.add(v);
    }
    return Int32Array.from(chosen);
  };
  for (let u = 1; u <= users; u++) {
    const k = u === feedUser ? feedFollows : Math.min(Math.floor(random() * (2 * options.followsPerUser + 1)), users - 2);
    lists[u] = choose(u, k);
  }
  // The author's followers: distinct ordinary users (never the feed user, whose feed must stay as described).
  const authorFollowerIds = new Set<number>();
  while (authorFollowerIds.size < authorFollowers) {
    const v = pick(users);
    if (v !== author && v !== feedUser) authorFollowerIds.add(v);
  }
  for (const v of authorFollowerIds) {
    const old = lists[v] as Int32Array;
    const next = new Int32Array(old.length + 1);
    next.set(old);
    next[old.length] = author;
    lists[v] = next;
  }
  // The many authors: their random followers topped up to a target drawn uniformly from 10–100 (never the feed
  // user, whose followee count is exact). Then the celebrity: every user but the feed user follows them.
  const extra: number[][] = Array.from({ length: users + 1 }, () => []);
  const authorFollowerSets = new Map<number, Set<number>>();
  for (let a = firstManyAuthor; a < firstManyAuthor + manyAuthors; a++) authorFollowerSets.set(a, new Set());
  for (let u = 1; u <= users; u++) for (const v of lists[u] as Int32Array) authorFollowerSets.get(v)?.add(u);
  for (const [a, set] of authorFollowerSets) {
    const target = Math.min(10 + Math.floor(random() * 91), users - 2);
    while (set.size < target) {
      const u = pick(users);
      if (u === a || u === feedUser || set.has(u)) continue;
      set.add(u);
      (extra[u] as number[]).push(a);
    }
  }
  for (let u = 1; u <= users; u++) {
    if (u !== celebrity && u !== feedUser && !(lists[u] as Int32Array).includes(celebrity)) (extra[u] as number[]).push(celebrity);
  }
  for (let u = 1; u <= users; u++) {
    const more = extra[u] as number[];
    if (more.length === 0) continue;
    const old = lists[u] as Int32Array;
    const next = new Int32Array(old.length + more.length);
    next.set(old);
    next.set(more, old.length);
    lists[u] = next;
  }
  // The returning user's many follows, drawn from a generator of their own so that every other row of the data set
  // stays what it was before this user existed (the main stream of draws is untouched).
  if (users > returning) {
    const own = new Set(lists[returning] as Int32Array);
    const draw = prng(seed + 1);
    const more = Math.min(feedFollows, users - 2 - own.size);
    for (let added = 0; added < more; ) {
      const v = 1 + Math.floor(draw() * users);
      if (v === returning || v === author || own.has(v)) continue;
      own.add(v);
      added++;
    }
    lists[returning] = Int32Array.from(own);
  }
  for (let u = 1; u <= users; u++) (lists[u] as Int32Array).sort();
  const follow = toCsr(lists, users);
  const reverse = invert(follow.offsets, follow.values, users);

  // Posts: owners drawn uniformly; ids in creation order.
  const postOwner = new Int32Array(posts + 1);
  // Nobody's seeded posts are the celebrity's: 100,000 feed entries each would swell the seed for nothing.
  for (let p = 1; p <= posts; p++) {
    let owner = pick(users);
    while (owner === celebrity) owner = pick(users);
    postOwner[p] = owner;
  }
  const ownerCounts = new Int32Array(users + 2);
  for (let p = 1; p <= posts; p++) {
    const o = postOwner[p] as number;
    ownerCounts[o + 1] = (ownerCounts[o + 1] as number) + 1;
  }
  for (let u = 1; u <= users; u++) ownerCounts[u + 1] = (ownerCounts[u + 1] as number) + (ownerCounts[u] as number);
  const ownerPosts = new Int32Array(posts);
  const fill = ownerCounts.slice();
  for (let p = 1; p <= posts; p++) {
    const o = postOwner[p] as number;
    ownerPosts[fill[o] as number] = p;
    fill[o] = (fill[o] as number) + 1;
  }

  const boardAuthor = new Int32Array(boards + 1);
  for (let b = 1; b <= boards; b++) boardAuthor[b] = pick(users);

  let feedEntryCount = 0;
  for (let u = 1; u <= users; u++) {
    for (let i = follow.offsets[u] as number; i < (follow.offsets[u + 1] as number); i++) {
      const v = follow.values[i] as number;
      feedEntryCount += (ownerCounts[v + 1] as number) - (ownerCounts[v] as number);
    }
  }

  return {
    options: { ...options, feedFollows, authorFollowers, manyAuthors, signedIn: Math.min(options.signedIn, users) },
    feedUser,
    author,
    reader,
    returning,
    celebrity,
    manyAuthorIds: Int32Array.from({ length: manyAuthors }, (_, i) => firstManyAuthor + i),
    followOffsets: follow.offsets,
    followees: follow.values,
    followerOffsets: reverse.offsets,
    followers: reverse.values,
    postOwner,
    ownerOffsets: ownerCounts,
    ownerPosts,
    boardAuthor,
    feedEntryCount,
  };
}

/** The feed of user u: every post of every user u follows, ascending by post id (the feed_entries key order). */
export function feedOf(data: Dataset, u: number): Int32Array {
  const { followOffsets, followees, ownerOffsets, ownerPosts } = data;
  let n = 0;
  for (let i = followOffsets[u] as number; i < (followOffsets[u + 1] as number); i++) {
    const v = followees[i] as number;
    n += (ownerOffsets[v + 1] as number) - (ownerOffsets[v] as number);
  }
  const out = new Int32Array(n);
  let k = 0;
  for (let i = followOffsets[u] as number; i < (followOffsets[u + 1] as number); i++) {
    const v = followees[i] as number;
    out.set(ownerPosts.subarray(ownerOffsets[v] as number, ownerOffsets[v + 1] as number), k);
    k += (ownerOffsets[v + 1] as number) - (ownerOffsets[v] as number);
  }
  return out.sort();
}

export const count = (offsets: Int32Array, u: number) => (offsets[u + 1] as number) - (offsets[u] as number);

// Text: a fixed vocabulary makes rows of realistic, varied length without costing time per row.
const WORDS = (
  'board cork pin note meeting garden music river station coffee library market bicycle weekend concert ' +
  'volunteer lecture workshop repair recipe harvest festival neighbour morning evening project question answer ' +
  'update notice event school club team match train weather bread paint photo story letter window ticket ' +
  'lunch dinner walk park bridge tower street corner square harbour island mountain forest lake valley'
).split(' ');

export function textPool(seed: number, size: number, minWords: number, maxWords: number, capitalise: boolean): string[] {
  const random = prng(seed);
  const pool: string[] = [];
  for (let i = 0; i < size; i++) {
    const n = minWords + Math.floor(random() * (maxWords - minWords + 1));
    const words: string[] = [];
    for (let w = 0; w < n; w++) words.push(WORDS[Math.floor(random() * WORDS.length)] as string);
    let text = words.join(' ');
    if (capitalise) text = text.charAt(0).toUpperCase() + text.slice(1);
    pool.push(text);
  }
  return pool;
}
