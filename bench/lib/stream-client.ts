import http from 'node:http';

/**
 * The client side of `npm run bench:streams` (bench/streams.ts), run as its own Node process pinned to the client
 * CPU and driven over the IPC channel: it seeds users through the API, holds thousands of event streams on raw
 * sockets, writes the background posts and the probe posts, and times when each probe reaches each stream.
 *
 * Everything here is kept cheap per stream, because its cost lands on the client CPU and, for the fan-out figure,
 * inside the measured latency: one `http.request` per stream on its own socket (`agent: false`; keep-alive pooling
 * would only get in the way of long responses), Buffers rather than decoded strings, and the only parsing is a
 * search for the probe marker in the chunks of streams that are watched.
 */

export interface Seeded {
  author: User;
  writers: User[];
  subscribers: User[];
  /** Posts 1..archivePosts are public posts of the archive user, for the GET /posts/{id} load. */
  archivePosts: number;
  seconds: number;
}

interface User {
  id: number;
  token: string;
}

export interface SeedJob {
  subscribers: number;
  writers: number;
  /** How many of the subscribers follow the author (the first ones). */
  authorFollowers: number;
  archivePosts: number;
}

export interface OpenJob {
  /** Feed streams of subscribers [from, from + count). */
  feeds?: { from: number; count: number };
  /** Notification streams of subscribers [from, from + count). */
  notifications?: { from: number; count: number };
  /** Anonymous GET /posts streams. */
  anonymous?: number;
}

export interface OpenResult {
  opened: number;
  failed: number;
  statuses: Record<string, number>;
  seconds: number;
  open: number;
}

export interface FanoutJob {
  probes: number;
  probeIntervalMs: number;
  writesPerSecond: number;
  /** Background writes before the first probe. */
  warmupMs: number;
  /** How long after the last probe is sent its deliveries are awaited. */
  graceMs: number;
}

export interface FanoutResult {
  probes: number;
  /** Streams of followers of the author that were open during the probes. */
  watchers: number;
  samples: number;
  missed: number;
  /** Probes received by streams that must not get them (feeds of users who do not follow the author). */
  unexpected: number;
  duplicates: number;
  /** Delivery latency from just before the probe POST is sent, in ms. */
  fromSend: Percentiles;
  /** Delivery latency from the moment the probe POST's 201 arrived, in ms (negative: before it). */
  fromResponse: Percentiles;
  withinOneSecond: number;
  probePostMs: Percentiles;
  writes: WriteStats;
  /** Post events (all kinds) received by all streams during the phase. */
  eventsReceived: number;
  /** Per probe: the slowest delivery in ms from send (NaN if some were missed). */
  perProbeMax: number[];
}

/** The notification figure (issue 43): follows of subscribers whose notification streams are open. */
export interface NotifyJob {
  follows: number;
  followsPerSecond: number;
  writesPerSecond: number;
  /** Background writes before the first follow. */
  warmupMs: number;
  /** How long after the last follow is sent its notification is awaited. */
  graceMs: number;
}

export interface NotifyResult {
  /** Follows sent (each of a different subscriber, by a writer) and how many were answered 201. */
  follows: number;
  followed: number;
  /** Notification streams open when the follows began. */
  streams: number;
  missed: number;
  /** `notification.created` events on a stream that expected none, or not the follow it expected. */
  misdelivered: number;
  duplicates: number;
  /** From just before the follow POST is sent to its `notification.created` on the recipient's stream, in ms. */
  fromSend: Percentiles;
  /** From the follow's 201 (negative: before it), in ms. */
  fromResponse: Percentiles;
  withinOneSecond: number;
  followPostMs: Percentiles;
  writes: WriteStats;
}

export interface WriteStats {
  sent: number;
  ok: number;
  errors: number;
  seconds: number;
  rate: number;
  latency: Percentiles;
  maxInFlight: number;
}

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

type Request =
  | { id: number; cmd: 'seed'; base: string; job: SeedJob }
  | { id: number; cmd: 'open'; job: OpenJob }
  | { id: number; cmd: 'close'; kind: 'anonymous' | 'all' }
  | { id: number; cmd: 'fanout'; job: FanoutJob }
  | { id: number; cmd: 'notify'; job: NotifyJob }
  | { id: number; cmd: 'exit' };

interface Stream {
  index: number;
  kind: 'feed' | 'posts' | 'notifications';
  /** Index into subscribers, for feed and notification streams. */
  subscriber: number;
  req: http.ClientRequest;
  followsAuthor: boolean;
  closed: boolean;
  /** The end of the previous chunk, so that a marker split between two chunks is still found; notification
   * streams: the text after the last complete event. */
  tail: string;
}

const PROBE_MARKER = '"title":"probe-';
const MARKER_TAIL = PROBE_MARKER.length + 12;

let base = '';
let seeded: Seeded | undefined;
let authorFollowers = 0;
const streams: Stream[] = [];
let nextStreamIndex = 0;
let eventsReceived = 0;
/** While probing: seq → arrival time (performance.now()) per stream index; NaN until received. */
const arrivals = new Map<number, Float64Array>();
let unexpected = 0;
let duplicates = 0;
/** While following: subscriber → the follow their notification stream awaits (the actor's id, when it arrived). */
const awaited = new Map<number, { actorId: number; arrived: number }>();
let misdelivered = 0;

const api = new http.Agent({ keepAlive: true, maxSockets: 64 });

function call(method: string, path: string, body?: unknown, token?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(`${base}${path}`, {
      method,
      agent: api,
      headers: {
        ...(payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }),
        ...(token ? { authorization: `Bearer ${token}` } : {}),
      },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.end(payload);
  });
}

async function ok<T>(method: string, path: string, body?: unknown, token?: string): Promise<T> {
  const res = await call(method, path, body, token);
  if (res.status < 200 || res.status > 299) throw new Error(`${method} ${path}: ${res.status} ${res.body.slice(0, 300)}`);
  return JSON.parse(res.body) as T;
}

/** Runs `work(i)` for i in [0, n) with at most `limit` at a time, in order of start. */
async function pool(n: number, limit: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, n) }, async () => {
    while (next < n) await work(next++);
  });
  await Promise.all(lanes);
}

const PASSWORD = 'stream benchmark password';
// About the seeded mean of the main benchmark (title 37 characters, content 350).
const CONTENT = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor in reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur. Excepteur sint occaecat cupidatat.';

async function signUp(name: string): Promise<User> {
  const user = await ok<{ id: number }>('POST', '/users', { username: name, password: PASSWORD });
  const token = await ok<{ token: string }>('POST', '/tokens', { username: name, password: PASSWORD });
  return { id: user.id, token: token.token };
}

/**
 * Through the API (the server runs with a cheap password hash for this): the archive user and its public posts
 * first (so they are posts 1..archivePosts), then the author, the writers and the subscribers, then the follows.
 */
async function seed(job: SeedJob): Promise<Seeded> {
  const started = performance.now();
  const tag = Date.now().toString(36).slice(-5);
  const archive = await signUp(`sb_${tag}_archive`);
  for (let i = 0; i < job.archivePosts; i++) {
    // One at a time: ids then run 1..archivePosts on both backends.
    const post = await ok<{ id: number }>('POST', `/users/${archive.id}/posts`, { title: `Archive post number ${i + 1} of the benchmark`, content: CONTENT, visibility: 'public' }, archive.token);
    if (post.id !== i + 1) throw new Error(`archive post ${i + 1} got id ${post.id}: the database was not fresh`);
  }
  const author = await signUp(`sb_${tag}_author`);
  const writers: User[] = new Array(job.writers);
  await pool(job.writers, 16, async (i) => {
    writers[i] = await signUp(`sb_${tag}_w${i}`);
  });
  const subscribers: User[] = new Array(job.subscribers);
  await pool(job.subscribers, 32, async (i) => {
    subscribers[i] = await signUp(`sb_${tag}_s${i}`);
  });
  // Subscriber i follows writer i mod W (so background posts reach ~S/W feed streams each), and the first
  // `authorFollowers` also follow the author.
  await pool(job.subscribers, 32, async (i) => {
    const s = subscribers[i] as User;
    const w = writers[i % job.writers] as User;
    await ok('POST', `/users/${w.id}/followers`, { id: s.id }, s.token);
    if (i < job.authorFollowers) await ok('POST', `/users/${author.id}/followers`, { id: s.id }, s.token);
  });
  authorFollowers = job.authorFollowers;
  seeded = { author, writers, subscribers, archivePosts: job.archivePosts, seconds: (performance.now() - started) / 1000 };
  return seeded;
}

/**
 * A notification stream's chunk: its complete events are parsed (they are few: a subscriber gets only the follows
 * sent to them) and each `notification.created` is matched to the follow its stream awaits.
 */
function onNotificationChunk(stream: Stream, chunk: Buffer): void {
  const now = performance.now();
  const text = stream.tail + chunk.toString('utf8');
  const end = text.lastIndexOf('\n\n');
  stream.tail = end < 0 ? text : text.slice(end + 2);
  if (end < 0) return;
  for (const event of text.slice(0, end).split('\n\n')) {
    if (!event.includes('event: notification.created')) continue;
    const data = event.split('\n').find((line) => line.startsWith('data: '));
    const notification = data ? (JSON.parse(data.slice(6)) as { type?: string; actorId?: number }) : {};
    const wanted = awaited.get(stream.subscriber);
    if (!wanted || notification.type !== 'follow' || notification.actorId !== wanted.actorId) misdelivered++;
    else if (!Number.isNaN(wanted.arrived)) duplicates++;
    else wanted.arrived = now;
  }
}

function onChunk(stream: Stream, chunk: Buffer): void {
  if (stream.kind === 'notifications') return onNotificationChunk(stream, chunk);
  const now = performance.now();
  // Count post events: cheap Buffer searches, no decoding.
  let at = chunk.indexOf('event: post.');
  while (at >= 0) {
    eventsReceived++;
    at = chunk.indexOf('event: post.', at + 12);
  }
  if (arrivals.size === 0 || stream.kind !== 'feed') return;
  const text = stream.tail + chunk.toString('latin1');
  stream.tail = text.length > MARKER_TAIL ? text.slice(-MARKER_TAIL) : text;
  let m = text.indexOf(PROBE_MARKER);
  while (m >= 0) {
    const start = m + PROBE_MARKER.length;
    let end = start;
    while (end < text.length && text.charCodeAt(end) >= 48 && text.charCodeAt(end) <= 57) end++;
    // A marker cut off by the chunk's end is completed by the next chunk (the tail keeps it).
    if (end < text.length) {
      const seq = Number(text.slice(start, end));
      const times = arrivals.get(seq);
      if (times) {
        if (!stream.followsAuthor) unexpected++;
        else if (!Number.isNaN(times[stream.index] as number)) duplicates++;
        else times[stream.index] = now;
      }
      // The tail must not report it again with the next chunk.
      if (m >= text.length - MARKER_TAIL) stream.tail = '';
    }
    m = text.indexOf(PROBE_MARKER, m + 1);
  }
}

function openOne(kind: Stream['kind'], subscriber: number): Promise<number> {
  return new Promise((resolve) => {
    const user = kind === 'posts' ? undefined : seeded?.subscribers[subscriber];
    const path = kind === 'posts' ? '/posts' : `/users/${user?.id}/${kind}`;
    const req = http.request(`${base}${path}`, {
      agent: false,
      headers: { accept: 'text/event-stream', ...(user ? { authorization: `Bearer ${user.token}` } : {}) },
    });
    const stream: Stream = {
      index: nextStreamIndex++,
      kind,
      subscriber,
      req,
      followsAuthor: kind === 'feed' && subscriber < authorFollowers,
      closed: false,
      tail: '',
    };
    let settled = false;
    const settle = (status: number) => {
      if (settled) return;
      settled = true;
      resolve(status);
    };
    req.on('error', () => {
      stream.closed = true;
      settle(-1);
    });
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        stream.closed = true;
        settle(res.statusCode ?? 0);
        return;
      }
      streams.push(stream);
      res.on('data', (chunk: Buffer) => onChunk(stream, chunk));
      res.on('close', () => {
        stream.closed = true;
      });
      settle(200);
    });
    req.end();
  });
}

async function open(job: OpenJob): Promise<OpenResult> {
  const started = performance.now();
  const statuses: Record<string, number> = {};
  let opened = 0;
  let failed = 0;
  const count = (status: number) => {
    statuses[status] = (statuses[status] ?? 0) + 1;
    if (status === 200) opened++;
    else failed++;
  };
  const feeds = job.feeds;
  // 100 handshakes in flight at a time: well inside the server's listen backlog (511).
  if (feeds) await pool(feeds.count, 100, async (i) => count(await openOne('feed', feeds.from + i)));
  const notifications = job.notifications;
  if (notifications) await pool(notifications.count, 100, async (i) => count(await openOne('notifications', notifications.from + i)));
  if (job.anonymous) await pool(job.anonymous, 100, async () => count(await openOne('posts', -1)));
  return { opened, failed, statuses, seconds: (performance.now() - started) / 1000, open: streams.filter((s) => !s.closed).length };
}

function close(kind: 'anonymous' | 'all'): number {
  let n = 0;
  for (let i = streams.length - 1; i >= 0; i--) {
    const s = streams[i] as Stream;
    if (kind === 'anonymous' && s.kind !== 'posts') continue;
    s.req.destroy();
    s.closed = true;
    streams.splice(i, 1);
    n++;
  }
  return n;
}

function percentiles(values: number[]): Percentiles {
  if (values.length === 0) return { p50: Number.NaN, p90: Number.NaN, p99: Number.NaN, max: Number.NaN };
  const sorted = [...values].sort((a, b) => a - b);
  // Nearest rank: the p99 of 1,000 samples is the 990th.
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
  return { p50: at(50), p90: at(90), p99: at(99), max: sorted[sorted.length - 1] as number };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The fan-out figure: background posts by the writers at a fixed rate (open loop: one is sent on schedule whatever
 * the previous ones are doing), and every `probeIntervalMs` a post by the author whose title carries a sequence
 * number; each watched stream records when that title arrives.
 */
async function fanout(job: FanoutJob): Promise<FanoutResult> {
  if (!seeded) throw new Error('seed first');
  const s = seeded;
  eventsReceived = 0;
  unexpected = 0;
  duplicates = 0;
  const writer = backgroundWrites(s, job.writesPerSecond);

  await sleep(job.warmupMs);
  const watchers = streams.filter((st) => st.kind === 'feed' && st.followsAuthor && !st.closed);
  const sendTimes: number[] = [];
  const responseTimes: number[] = [];
  const postMs: number[] = [];
  const probes: Promise<void>[] = [];
  let due = performance.now();
  for (let seq = 1; seq <= job.probes; seq++) {
    const times = new Float64Array(nextStreamIndex).fill(Number.NaN);
    arrivals.set(seq, times);
    const t0 = performance.now();
    sendTimes[seq] = t0;
    probes.push(
      ok('POST', `/users/${s.author.id}/posts`, { title: `probe-${seq} of the stream benchmark`, content: CONTENT, visibility: 'public' }, s.author.token).then(() => {
        responseTimes[seq] = performance.now();
        postMs.push(performance.now() - t0);
      }),
    );
    due += job.probeIntervalMs;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
  }
  await Promise.all(probes);
  // Wait for the last deliveries (or the grace period).
  const graceEnd = performance.now() + job.graceMs;
  const complete = () => {
    for (const [, times] of arrivals) for (const w of watchers) if (!w.closed && Number.isNaN(times[w.index] as number)) return false;
    return true;
  };
  while (performance.now() < graceEnd && !complete()) await sleep(50);
  const writes = await writer.stop();

  const fromSend: number[] = [];
  const fromResponse: number[] = [];
  const perProbeMax: number[] = [];
  let missed = 0;
  for (const [seq, times] of arrivals) {
    let worst = 0;
    for (const w of watchers) {
      const t = times[w.index] as number;
      if (Number.isNaN(t)) {
        // A missed delivery counts as slower than any other, so the percentiles cannot hide it.
        missed++;
        fromSend.push(Number.POSITIVE_INFINITY);
        worst = Number.NaN;
        continue;
      }
      fromSend.push(t - (sendTimes[seq] as number));
      fromResponse.push(t - (responseTimes[seq] as number));
      if (!Number.isNaN(worst)) worst = Math.max(worst, t - (sendTimes[seq] as number));
    }
    perProbeMax.push(worst);
  }
  arrivals.clear();
  const samples = fromSend.length;
  return {
    probes: job.probes,
    watchers: watchers.length,
    samples,
    missed,
    unexpected,
    duplicates,
    fromSend: percentiles(fromSend),
    fromResponse: percentiles(fromResponse),
    withinOneSecond: samples === 0 ? 0 : fromSend.filter((v) => v <= 1000).length / samples,
    probePostMs: percentiles(postMs),
    writes,
    eventsReceived,
    perProbeMax,
  };
}

/**
 * The writers' background posts at a fixed rate (open loop: one is sent on schedule whatever the previous ones are
 * doing), until `stop`, which waits for those in flight.
 */
function backgroundWrites(s: Seeded, writesPerSecond: number): { stop: () => Promise<WriteStats> } {
  const writes = { sent: 0, ok: 0, errors: 0, maxInFlight: 0 };
  const writeLatency: number[] = [];
  let inFlight = 0;
  let writing = true;
  const writeStarted = performance.now();
  const writer = (async () => {
    const interval = 1000 / writesPerSecond;
    let due = performance.now();
    for (let n = 0; writing; n++) {
      const w = s.writers[n % s.writers.length] as User;
      const t0 = performance.now();
      inFlight++;
      writes.maxInFlight = Math.max(writes.maxInFlight, inFlight);
      writes.sent++;
      call('POST', `/users/${w.id}/posts`, { title: `Background post ${n} by a writer of the run`, content: CONTENT, visibility: 'public' }, w.token)
        .then((res) => {
          if (res.status === 201) {
            writes.ok++;
            writeLatency.push(performance.now() - t0);
          } else writes.errors++;
        })
        .catch(() => writes.errors++)
        .finally(() => inFlight--);
      due += interval;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
    }
  })();
  return {
    async stop() {
      writing = false;
      await writer;
      const seconds = (performance.now() - writeStarted) / 1000;
      while (inFlight > 0) await sleep(20);
      return { ...writes, seconds, rate: writes.ok / seconds, latency: percentiles(writeLatency) };
    },
  };
}

/**
 * The notification figure: background posts as in `fanout`, and `follows` follows at a fixed rate, follow k by
 * writer k mod W of subscriber k × ⌊S / follows⌋ (each subscriber at most once; the writers follow nobody in the
 * seed, so every follow is new and notifies). Each is timed from just before its POST to its
 * `notification.created` on that subscriber's notification stream.
 */
async function notify(job: NotifyJob): Promise<NotifyResult> {
  if (!seeded) throw new Error('seed first');
  const s = seeded;
  if (job.follows > s.subscribers.length) throw new Error(`${job.follows} follows need as many subscribers`);
  misdelivered = 0;
  duplicates = 0;
  awaited.clear();
  const open = streams.filter((st) => st.kind === 'notifications' && !st.closed).length;
  const writer = backgroundWrites(s, job.writesPerSecond);
  await sleep(job.warmupMs);

  const stride = Math.floor(s.subscribers.length / job.follows);
  const sent: { subscriber: number; at: number; answered: number }[] = [];
  const postMs: number[] = [];
  const posts: Promise<void>[] = [];
  let followed = 0;
  let due = performance.now();
  for (let k = 0; k < job.follows; k++) {
    const subscriber = k * stride;
    const actor = s.writers[k % s.writers.length] as User;
    const target = s.subscribers[subscriber] as User;
    awaited.set(subscriber, { actorId: actor.id, arrived: Number.NaN });
    const probe = { subscriber, at: performance.now(), answered: Number.NaN };
    sent.push(probe);
    posts.push(
      call('POST', `/users/${target.id}/followers`, { id: actor.id }, actor.token).then((res) => {
        probe.answered = performance.now();
        postMs.push(probe.answered - probe.at);
        if (res.status === 201) followed++;
      }),
    );
    due += 1000 / job.followsPerSecond;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
  }
  await Promise.all(posts);
  const graceEnd = performance.now() + job.graceMs;
  while (performance.now() < graceEnd && sent.some((p) => Number.isNaN(awaited.get(p.subscriber)?.arrived as number))) await sleep(50);
  const writes = await writer.stop();

  const fromSend: number[] = [];
  const fromResponse: number[] = [];
  let missed = 0;
  for (const p of sent) {
    const arrived = awaited.get(p.subscriber)?.arrived as number;
    if (Number.isNaN(arrived)) {
      // A missed notification counts as slower than any other, so the percentiles cannot hide it.
      missed++;
      fromSend.push(Number.POSITIVE_INFINITY);
      continue;
    }
    fromSend.push(arrived - p.at);
    fromResponse.push(arrived - p.answered);
  }
  awaited.clear();
  return {
    follows: job.follows,
    followed,
    streams: open,
    missed,
    misdelivered,
    duplicates,
    fromSend: percentiles(fromSend),
    fromResponse: percentiles(fromResponse),
    withinOneSecond: fromSend.length === 0 ? 0 : fromSend.filter((v) => v <= 1000).length / fromSend.length,
    followPostMs: percentiles(postMs),
    writes,
  };
}

async function handle(message: Request): Promise<unknown> {
  switch (message.cmd) {
    case 'seed':
      base = message.base;
      return seed(message.job);
    case 'open':
      return open(message.job);
    case 'close':
      return close(message.kind);
    case 'fanout':
      return fanout(message.job);
    case 'notify':
      return notify(message.job);
    case 'exit':
      setImmediate(() => process.exit(0));
      return true;
  }
}

if (!process.send) throw new Error('stream-client runs as a child of bench/streams.ts (it needs the IPC channel)');
process.on('message', (message: Request) => {
  handle(message).then(
    (result) => process.send?.({ id: message.id, result }),
    (error: unknown) => process.send?.({ id: message.id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
  );
});
process.on('disconnect', () => process.exit(0));
