import fs from 'node:fs';
import http from 'node:http';
import { prng } from './dataset.js';
import { percentile, type KindResult, type MixJob, type MixKind, type MixResult } from './mix.js';

/**
 * The mixed-traffic load client, run as its own process (pinned to the load CPU like wrk): argv[2] names a file holding a MixJob as
 * JSON; prints one `BENCH_RESULT {MixResult}` line. Each request picks a kind by weight and a signed-in user at
 * random, and sends what that user would: reads of public posts, the first page and later pages of GET /posts,
 * their own feed; posts, replies, recommends, follows and unfollows of their own. Closed loop (`connections`
 * requests in flight, each sent when the one before it answered) to find the peak; open loop (`rate`) for
 * latency at a given load, counted from when each request was due, so a stalled server cannot hide its queue.
 */

const job = JSON.parse(fs.readFileSync(process.argv[2] as string, 'utf8')) as MixJob;
const random = prng(job.seed);
const agents = job.ports.map(() => new http.Agent({ keepAlive: true, maxSockets: job.connections }));
let nextPort = 0;

const kinds = Object.entries(job.weights).filter(([, w]) => (w ?? 0) > 0) as [MixKind, number][];
const totalWeight = kinds.reduce((a, [, w]) => a + w, 0);
function pickKind(): MixKind {
  let r = random() * totalWeight;
  for (const [kind, weight] of kinds) {
    r -= weight;
    if (r < 0) return kind;
  }
  return (kinds.at(-1) as [MixKind, number])[0];
}

const pick = (n: number) => Math.floor(random() * n);
/** Ids that are multiples of 10 are not public (dataset.ts): step to the id below. */
function publicPost(): number {
  let id = 1 + pick(job.posts);
  if (id % 10 === 0) id -= 1;
  return id;
}
/** Follows this client made and has not undone, per user index: what an unfollow takes back. */
const followed: [number, number][] = [];

interface Request {
  kind: MixKind;
  method: 'GET' | 'POST' | 'DELETE';
  path: string;
  token: string;
  body?: string;
  ok: number[];
  after?: (status: number) => void;
}

const CONTENT = 'Volunteer workshop this weekend: bring bread, paint and a bicycle repair kit to the corner by the library.';

function nextRequest(): Request {
  const index = pick(job.tokens.length);
  const user = job.firstUser + index;
  const token = job.tokens[index] as string;
  let kind = pickKind();
  if (kind === 'unfollow' && followed.length === 0) kind = 'follow';
  switch (kind) {
    case 'get-post':
      return { kind, method: 'GET', path: `/posts/${publicPost()}`, token, ok: [200] };
    case 'first-page':
      return { kind, method: 'GET', path: '/posts', token, ok: [200] };
    case 'next-page':
      return { kind, method: 'GET', path: `/posts?cursor=${encodeURIComponent(job.cursors[pick(job.cursors.length)] as string)}`, token, ok: [200] };
    case 'feed':
      return { kind, method: 'GET', path: `/users/${user}/feed`, token, ok: [200] };
    case 'create-post':
      return {
        kind,
        method: 'POST',
        path: `/users/${user}/posts`,
        token,
        body: JSON.stringify({ title: `Notice from user ${user}`, content: CONTENT, visibility: 'public' }),
        ok: [201],
      };
    case 'reply':
      return { kind, method: 'POST', path: `/posts/${publicPost()}/replies`, token, body: JSON.stringify({ content: CONTENT }), ok: [201] };
    case 'recommend':
      // A repeat of a recommend the user already made is a 409: rare at random, and an answer, not a failure.
      return { kind, method: 'POST', path: `/posts/${publicPost()}/recommends`, token, body: JSON.stringify({ id: user }), ok: [201, 409] };
    case 'follow': {
      let followee = 1 + pick(job.users);
      if (followee === user) followee = followee === 1 ? 2 : followee - 1;
      return {
        kind,
        method: 'POST',
        path: `/users/${followee}/followers`,
        token,
        body: JSON.stringify({ id: user }),
        ok: [201, 409],
        after: (status) => void (status === 201 && followed.push([index, followee])),
      };
    }
    case 'unfollow': {
      const [who, followee] = followed.splice(pick(followed.length), 1)[0] as [number, number];
      return { kind, method: 'DELETE', path: `/users/${followee}/followers/${job.firstUser + who}`, token: job.tokens[who] as string, ok: [200] };
    }
  }
}

const latencies = new Map<MixKind, number[]>();
const errors = new Map<MixKind, number>();
const failures: string[] = [];

function send(request: Request, due: number): Promise<void> {
  const port = job.ports[nextPort] as number;
  const agent = agents[nextPort] as http.Agent;
  nextPort = (nextPort + 1) % job.ports.length;
  return new Promise((resolve) => {
    const headers: Record<string, string | number> = { authorization: `Bearer ${request.token}` };
    if (request.body !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = Buffer.byteLength(request.body);
    }
    const done = (status: number, detail?: string) => {
      if (due < measureFrom) {
        if (request.ok.includes(status)) request.after?.(status);
        resolve();
        return;
      }
      const ms = performance.now() - due;
      const list = latencies.get(request.kind) ?? [];
      list.push(ms);
      latencies.set(request.kind, list);
      if (!request.ok.includes(status)) {
        errors.set(request.kind, (errors.get(request.kind) ?? 0) + 1);
        if (failures.length < 5) failures.push(`${request.method} ${request.path} → ${status} ${detail ?? ''}`.slice(0, 300));
      } else {
        request.after?.(status);
      }
      resolve();
    };
    const req = http.request({ host: '127.0.0.1', port, method: request.method, path: request.path, headers, agent, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      const keep = !request.ok.includes(res.statusCode ?? 0);
      res.on('data', (c: Buffer) => keep && chunks.push(c));
      res.on('end', () => done(res.statusCode ?? 0, keep ? Buffer.concat(chunks).toString() : undefined));
      res.on('error', (e) => done(0, String(e)));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => done(0, String(e)));
    if (request.body !== undefined) req.write(request.body);
    req.end();
  });
}

const started = performance.now();
const measureFrom = started + job.warmup * 1000;
const end = measureFrom + job.seconds * 1000;
if (job.rate === undefined) {
  await Promise.all(
    Array.from({ length: job.connections }, async () => {
      while (performance.now() < end) await send(nextRequest(), performance.now());
    }),
  );
} else {
  const interval = 1000 / job.rate;
  const inFlight = new Set<Promise<void>>();
  let due = started;
  while (due < end) {
    const now = performance.now();
    while (due <= now && due < end) {
      const p = send(nextRequest(), due);
      inFlight.add(p);
      void p.then(() => inFlight.delete(p));
      due += interval;
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await Promise.all(inFlight);
}
const seconds = (performance.now() - measureFrom) / 1000;

const all: number[] = [];
const byKind: Partial<Record<MixKind, KindResult>> = {};
for (const [kind, list] of latencies) {
  list.sort((a, b) => a - b);
  all.push(...list);
  byKind[kind] = {
    requests: list.length,
    errors: errors.get(kind) ?? 0,
    p50: percentile(list, 50),
    p99: percentile(list, 99),
    max: list.at(-1) ?? 0,
  };
}
all.sort((a, b) => a - b);
const result: MixResult = {
  requests: all.length,
  seconds,
  rps: all.length / seconds,
  errors: [...errors.values()].reduce((a, b) => a + b, 0),
  p50: percentile(all, 50),
  p99: percentile(all, 99),
  kinds: byKind,
  failures,
};
for (const agent of agents) agent.destroy();
process.stdout.write(`BENCH_RESULT ${JSON.stringify(result)}\n`);
