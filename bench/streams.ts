import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { runLoad, type LoadResult, type LoadTool } from './lib/load.js';
import { freePort, npmStartCommand, run, startServer, which, type ServerProcess } from './lib/process.js';
import type { FanoutJob, FanoutResult, NotifyJob, NotifyResult, OpenJob, OpenResult, Percentiles, SeedJob, Seeded } from './lib/stream-client.js';
import { int } from './lib/args.js';

/**
 * `npm run bench:streams [-- options]`: what thousands of live streams (CONTRACT §7) cost one server process
 * (issue 25). Builds, starts the built server on a fresh database pinned to CPU 0, and drives a separate client
 * process pinned to CPU 1 (bench/lib/stream-client.ts) that holds the streams on raw sockets. Three figures:
 *   1. peak RSS of the server holding N idle streams (half feed streams of signed-in users, half anonymous);
 *   2. how long a post by an author followed by F of the S connected subscribers takes to reach all F feed
 *      streams, while the other writers post at a fixed rate;
 *   3. GET /posts/{id} throughput with S idle streams open ÷ the same without them, in back-to-back pairs;
 *   4. (issue 43) with S notification streams open, how long a follow of one of their users takes to reach that
 *      user's stream as a `notification.created`, while the writers post at the same fixed rate.
 * `--phases` runs some of them (the seed always runs). See bench/README.md ("Live streams").
 */

const HELP = `Usage: npm run bench:streams -- [options]
  --backend sqlite|postgres   database under test (default sqlite)
  --quick                     smoke run: small numbers, short runs (about a minute)
  --subscribers N             signed-in subscribers, one feed stream each (default 5000; quick 500)
  --anonymous N               anonymous GET /posts streams added for figure 1 (default 5000; quick 500)
  --followers N               subscribers who follow the author (default 1000; quick 100)
  --writers N                 other users who post during figure 2 (default 50; quick 10)
  --rate N                    their posts per second (default 50)
  --probes N                  author's posts timed in figure 2, one a second (default 20; quick 5)
  --hold S                    seconds the idle streams of figure 1 are held (default 40; quick 5)
  --pairs N                   (without, with) pairs of load runs in figure 3 (default 3; quick 1)
  --duration S                seconds per load run in figure 3 (default 30, the token re-check period, so that
                              every run with streams carries one re-check of their 5,000 tokens; quick 2)
  --connections N             load connections in figure 3 (default 50)
  --follows N                 follows timed in figure 4, each of a different subscriber (default 200; quick 50)
  --follow-rate N             their rate per second (default 10)
  --phases a,b,...            figures to run: idle (1), fanout (2), reads (3), notifications (4) (default all)
  --tool wrk|autocannon       load generator (default: wrk when installed)
  --profile                   write a V8 CPU profile of the server to bench/.work/profiles
  --pg-url URL                PostgreSQL server (default postgres://postgres@127.0.0.1:5432/postgres)
  --out DIR                   results directory (default bench/results; bench/.work/results with --quick)
  --no-build                  skip npm run build`;

const { values: args } = parseArgs({
  options: {
    backend: { type: 'string', default: 'sqlite' },
    quick: { type: 'boolean', default: false },
    subscribers: { type: 'string' },
    anonymous: { type: 'string' },
    followers: { type: 'string' },
    writers: { type: 'string' },
    rate: { type: 'string' },
    probes: { type: 'string' },
    hold: { type: 'string' },
    pairs: { type: 'string' },
    duration: { type: 'string' },
    connections: { type: 'string', default: '50' },
    follows: { type: 'string' },
    'follow-rate': { type: 'string' },
    phases: { type: 'string' },
    tool: { type: 'string' },
    profile: { type: 'boolean', default: false },
    'pg-url': { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
    out: { type: 'string' },
    'no-build': { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(`${HELP}\n`);
  process.exit(0);
}

const quick = args.quick;
if (args.backend !== 'sqlite' && args.backend !== 'postgres') throw new Error('--backend must be sqlite or postgres');
const backend = args.backend;
const cfg = {
  subscribers: int('subscribers', args.subscribers, quick ? 500 : 5_000),
  anonymous: int('anonymous', args.anonymous, quick ? 500 : 5_000, 0),
  followers: int('followers', args.followers, quick ? 100 : 1_000),
  writers: int('writers', args.writers, quick ? 10 : 50),
  rate: int('rate', args.rate, 50),
  probes: int('probes', args.probes, quick ? 5 : 20),
  hold: int('hold', args.hold, quick ? 5 : 40, 0),
  pairs: int('pairs', args.pairs, quick ? 1 : 3),
  duration: int('duration', args.duration, quick ? 2 : 30),
  warmup: quick ? 1 : 5,
  connections: int('connections', args.connections, 50),
  follows: int('follows', args.follows, quick ? 50 : 200),
  followRate: int('follow-rate', args['follow-rate'], 10),
  archivePosts: quick ? 200 : 2_000,
};
if (cfg.followers > cfg.subscribers) throw new Error('--followers cannot exceed --subscribers');
if (cfg.follows > cfg.subscribers) throw new Error('--follows cannot exceed --subscribers');
const PHASES = ['idle', 'fanout', 'reads', 'notifications'] as const;
const phases = new Set((args.phases ?? PHASES.join(',')).split(',').map((p) => p.trim()));
for (const p of phases) if (!(PHASES as readonly string[]).includes(p)) throw new Error(`--phases: unknown phase ${p} (${PHASES.join(', ')})`);
const idleStreams = cfg.subscribers + cfg.anonymous;

/** The thresholds (full size; a --quick run is judged against them too, for the smoke of it). */
const TARGETS = { rssMb: 300, fanoutP99Ms: 1000, throughputRatio: 0.9, notifyP99Ms: 1000 };

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
process.chdir(root);
const work = path.join(root, 'bench/.work', `streams-${backend}-${process.pid}`);
const outDir = path.resolve(args.out ?? (quick ? 'bench/.work/results' : 'bench/results'));
const log = (line: string) => process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);

/**
 * A command prefix that raises the open-file limit before the program starts (each side holds one socket per
 * stream): prlimit execs the program, so the child's pid stays the program's own; without it, a shell's ulimit.
 */
function fileLimit(wanted: number): string[] {
  // Without CAP_SYS_RESOURCE (a container) the hard limit cannot be raised: take what it allows, if that is enough.
  const hard = execFileSync('bash', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }).trim();
  const n = hard === 'unlimited' ? wanted : Math.min(wanted, Number(hard));
  if (n < idleStreams + 1_000) {
    throw new Error(`the open-file limit (hard ${hard}) is too low for ${idleStreams} streams: raise it (ulimit -Hn, as root)`);
  }
  if (which('prlimit')) return ['prlimit', `--nofile=${n}:${n}`, '--'];
  return ['bash', '-c', `ulimit -n ${n} && exec "$@"`, 'bash'];
}

/** The node flags of `npm start` (heap sizing), so the server runs as it is deployed. */
function startFlags(): string[] {
  return npmStartCommand().slice(1, -1);
}

/** The client process, over IPC: each call sends one command and resolves with its answer. */
class Client {
  private next = 1;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  constructor(readonly child: ChildProcess) {
    child.on('message', (m: { id: number; result?: unknown; error?: string }) => {
      const w = this.waiting.get(m.id);
      if (!w) return;
      this.waiting.delete(m.id);
      if (m.error !== undefined) w.reject(new Error(`client: ${m.error}`));
      else w.resolve(m.result);
    });
    child.on('exit', (code, signal) => {
      for (const w of this.waiting.values()) w.reject(new Error(`client exited (${signal ?? code})`));
      this.waiting.clear();
    });
  }
  call<T>(command: Record<string, unknown>): Promise<T> {
    const id = this.next++;
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.child.send({ id, ...command });
    });
  }
  async exit(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((r) => this.child.once('exit', () => r()));
    try {
      await this.call({ cmd: 'exit' });
    } catch {
      // it may exit before answering
    }
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}

/** The server's open streams: post and feed streams, or notification streams (a gauge of their own). */
async function openStreams(port: number, kind: 'posts' | 'notifications' = 'posts'): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const gauge = kind === 'posts' ? 'corkboard_streams_open' : 'corkboard_notification_streams_open';
  const match = new RegExp(`^${gauge}(?:\\{[^}]*\\})? (\\d+)`, 'm').exec(text);
  return match ? Number(match[1]) : Number.NaN;
}

/** The server's V8 heap (used, total) and external memory in MB, from its default Prometheus metrics. */
async function heapOf(port: number): Promise<{ heapUsedMb: number; heapTotalMb: number; externalMb: number }> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const get = (name: string) => {
    const match = new RegExp(`^corkboard_${name}(?:\\{[^}]*\\})? ([0-9.e+]+)`, 'm').exec(text);
    return match ? mb(Number(match[1]) / 1048576) : Number.NaN;
  };
  return { heapUsedMb: get('nodejs_heap_size_used_bytes'), heapTotalMb: get('nodejs_heap_size_total_bytes'), externalMb: get('nodejs_external_memory_bytes') };
}

/** Waits until the server reports `n` open streams (closing is noticed asynchronously). */
async function awaitOpen(port: number, n: number, timeoutMs = 30_000, kind: 'posts' | 'notifications' = 'posts'): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const open = await openStreams(port, kind);
    if (open === n || Date.now() > deadline) return open;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Whether the main benchmark (bench/run.ts) is running: sampled through the run, reported with the figures. */
function mainBenchRunning(): boolean {
  try {
    return execFileSync('pgrep', ['-f', 'bench/run.ts'], { encoding: 'utf8' }).trim() !== '';
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mb = (n: number) => Math.round(n * 10) / 10;
const ms = (n: number) => (Number.isFinite(n) ? Math.round(n * 10) / 10 : n);
const median = (values: number[]) => {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

interface Figures {
  meta: Record<string, unknown>;
  idle?: {
    streams: number;
    open: OpenResult;
    serverOpen: number;
    rssBeforeMb: number;
    rssPeakMb: number;
    rssEndMb: number;
    perStreamKb: number;
    holdSeconds: number;
    heapBefore: { heapUsedMb: number; heapTotalMb: number; externalMb: number };
    heapEnd: { heapUsedMb: number; heapTotalMb: number; externalMb: number };
    met: boolean;
  };
  fanout?: FanoutResult & { serverCpuShare: number; met: boolean };
  throughput?: {
    pairs: { without: LoadResult; with: LoadResult; ratio: number; cpuRatio: number }[];
    ratio: number;
    cpuRatio: number;
    streams: number;
    met: boolean;
  };
  notifications?: NotifyResult & { serverCpuShare: number; met: boolean };
}

async function main(): Promise<void> {
  const taskset = which('taskset') && os.cpus().length >= 2;
  const pinServer = taskset ? ['taskset', '-c', '0'] : [];
  const pinClient = taskset ? ['taskset', '-c', '1'] : [];
  const tool: LoadTool = args.tool === 'autocannon' || args.tool === 'wrk' ? args.tool : which('wrk') ? 'wrk' : 'autocannon';
  const overlap: string[] = [];
  const watch = setInterval(() => {
    if (mainBenchRunning()) overlap.push(new Date().toISOString().slice(11, 19));
  }, 5000);
  watch.unref();
  if (mainBenchRunning()) overlap.push(new Date().toISOString().slice(11, 19));
  log(`stream benchmark: ${backend}; ${idleStreams} idle streams (${cfg.subscribers} feed + ${cfg.anonymous} anonymous), ` +
    `${cfg.followers} followers of the author, ${cfg.writers} writers at ${cfg.rate} posts/s; ` +
    (taskset ? 'server on CPU 0, client on CPU 1' : 'not pinned (no taskset or one CPU)'));

  if (!args['no-build']) {
    log('building…');
    await run('npm', ['run', 'build', '--silent']);
  }
  fs.mkdirSync(work, { recursive: true });

  let server: ServerProcess | undefined;
  let client: Client | undefined;
  const cleanups: (() => Promise<void>)[] = [];
  let tidied: Promise<void> | undefined;
  // Once, whether the run ends, fails or is interrupted: no server, client or database is left behind.
  const tidy = () =>
    (tidied ??= (async () => {
      clearInterval(watch);
      await client?.exit();
      await server?.stop();
      for (const cleanup of cleanups.reverse()) await cleanup().catch((e: unknown) => log(`cleanup failed: ${String(e)}`));
      fs.rmSync(work, { recursive: true, force: true });
    })());
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: stopping the server and the client, dropping the database`);
      void tidy().finally(() => process.exit(130));
    });
  }
  try {
    // ---- database ----
    let databaseUrl: string;
    if (backend === 'sqlite') {
      databaseUrl = `sqlite:${path.join(work, 'streams.db')}`;
    } else {
      const name = `corkboard_sbench_${process.pid}`;
      const admin = async (sql: string) => {
        const c = new pg.Client({ connectionString: args['pg-url'] });
        await c.connect();
        try {
          await c.query(sql);
        } finally {
          await c.end();
        }
      };
      await admin(`DROP DATABASE IF EXISTS ${name}`);
      await admin(`CREATE DATABASE ${name}`);
      cleanups.push(() => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
      const url = new URL(args['pg-url']);
      url.pathname = `/${name}`;
      databaseUrl = url.toString();
    }

    const settle = async () => {
      const until = async (done: () => Promise<boolean>) => {
        const deadline = Date.now() + 120_000;
        while (!(await done()) && Date.now() < deadline) await sleep(250);
      };
      if (backend === 'sqlite') {
        const db = new Database(databaseUrl.slice('sqlite:'.length), { readonly: true, fileMustExist: true });
        try {
          await until(async () => (db.prepare('SELECT count(*) AS n FROM fanout_queue').get() as { n: number }).n === 0);
        } finally {
          db.close();
        }
      } else {
        const c = new pg.Client({ connectionString: databaseUrl });
        await c.connect();
        try {
          const count = async (sql: string) => Number((await c.query<{ n: string }>(sql)).rows[0]?.n ?? 0);
          await until(async () => (await count('SELECT count(*) AS n FROM fanout_queue')) === 0);
          await c.query('CHECKPOINT');
          await until(async () => (await count("SELECT count(*) AS n FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'")) === 0);
        } finally {
          await c.end();
        }
      }
      await sleep(2000);
    };

    // ---- server ----
    const port = await freePort();
    const profileDir = path.join(root, 'bench/.work/profiles');
    if (args.profile) fs.mkdirSync(profileDir, { recursive: true });
    server = await startServer({
      name: 'corkboard',
      command: ['node', ...startFlags(), ...(args.profile ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []), 'dist/src/server.js'],
      env: {
        DATABASE_URL: databaseUrl,
        RATE_LIMIT: 'off',
        LOG_LEVEL: 'warn',
        PASSWORD_HASH_MEMORY_KIB: '64',
        // Anonymous streams are limited per client address as a user's are (CONTRACT §7), and figure 1's all come
        // from 127.0.0.1: at 100, all but 100 of them were refused (429).
        STREAM_MAX_PER_USER: String(Math.max(100, cfg.anonymous)),
        STREAM_MAX: String(Math.max(10_000, idleStreams + 1_000)),
      },
      port,
      pin: [...fileLimit(65_536), ...pinServer],
      readyPath: '/health',
    });
    const srv = server;
    log(`server pid ${srv.pid} on port ${port}, RSS ${mb(srv.rss())} MB`);

    // ---- client ----
    const clientPath = path.join(root, 'bench/lib/stream-client.ts');
    const argv = [...fileLimit(65_536), ...pinClient, process.execPath, '--import', 'tsx', clientPath];
    const child = spawn(argv[0] as string, argv.slice(1), { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    client = new Client(child);
    const cl = client;

    log('seeding through the API…');
    const seedJob: SeedJob = { subscribers: cfg.subscribers, writers: cfg.writers, authorFollowers: cfg.followers, archivePosts: cfg.archivePosts };
    const seeded = await cl.call<Seeded>({ cmd: 'seed', base: `http://127.0.0.1:${port}`, job: seedJob });
    log(`  ${cfg.subscribers + cfg.writers + 2} users, ${cfg.subscribers + cfg.followers} follows, ${cfg.archivePosts} posts in ${seeded.seconds.toFixed(1)} s`);

    // ---- figure 1: idle streams, server RSS ----
    await sleep(2000);
    let idle: Figures['idle'];
    // Whether the subscribers' feed streams are open (figure 1 opens them; figure 2 needs them).
    let feedsOpen = false;
    if (phases.has('idle')) {
      const rssBefore = srv.rss();
      const heapBefore = await heapOf(port);
      log(`figure 1: opening ${idleStreams} streams (server RSS before: ${mb(rssBefore)} MB)…`);
      const sampler = srv.sampleRss();
      const openJob: OpenJob = { feeds: { from: 0, count: cfg.subscribers }, anonymous: cfg.anonymous };
      const opened = await cl.call<OpenResult>({ cmd: 'open', job: openJob });
      const serverOpen = await awaitOpen(port, idleStreams, 10_000);
      log(`  opened ${opened.opened} (failed ${opened.failed}: ${JSON.stringify(opened.statuses)}) in ${opened.seconds.toFixed(1)} s; the server counts ${serverOpen}`);
      await sleep(cfg.hold * 1000);
      const rssEnd = srv.rss();
      const heapEnd = await heapOf(port);
      const rssPeak = sampler.stop();
      log(`  held ${cfg.hold} s: peak RSS ${mb(rssPeak)} MB, at the end ${mb(rssEnd)} MB`);
      idle = {
        streams: idleStreams,
        open: opened,
        serverOpen,
        rssBeforeMb: mb(rssBefore),
        rssPeakMb: mb(rssPeak),
        rssEndMb: mb(rssEnd),
        perStreamKb: Math.round(((rssEnd - rssBefore) * 1024) / Math.max(1, serverOpen)),
        holdSeconds: cfg.hold,
        heapBefore,
        heapEnd,
        met: serverOpen === idleStreams && opened.failed === 0 && rssPeak <= TARGETS.rssMb,
      };
      feedsOpen = true;
    }

    // ---- figure 2: fan-out latency under write load ----
    let fan: FanoutResult | undefined;
    let cpuShare = 0;
    let fanMet = false;
    let settleSeconds = 0;
    if (phases.has('fanout')) {
      await cl.call({ cmd: 'close', kind: 'anonymous' });
      if (!feedsOpen) {
        await cl.call<OpenResult>({ cmd: 'open', job: { feeds: { from: 0, count: cfg.subscribers } } });
        feedsOpen = true;
      }
      const left = await awaitOpen(port, cfg.subscribers);
      log(`figure 2: ${left} feed streams open (${cfg.followers} follow the author); ${cfg.rate} posts/s by ${cfg.writers} writers, ${cfg.probes} probes…`);
      const fanJob: FanoutJob = { probes: cfg.probes, probeIntervalMs: 1000, writesPerSecond: cfg.rate, warmupMs: quick ? 1000 : 3000, graceMs: 10_000 };
      const cpu0 = srv.cpuSeconds();
      const t0 = performance.now();
      fan = await cl.call<FanoutResult>({ cmd: 'fanout', job: fanJob });
      cpuShare = (srv.cpuSeconds() - cpu0) / ((performance.now() - t0) / 1000);
      fanMet = fan.missed === 0 && fan.unexpected === 0 && fan.fromSend.p99 <= TARGETS.fanoutP99Ms && fan.writes.rate >= 0.95 * cfg.rate;
      log(`  p50 ${ms(fan.fromSend.p50)} ms, p99 ${ms(fan.fromSend.p99)} ms, max ${ms(fan.fromSend.max)} ms over ${fan.samples} deliveries ` +
        `(missed ${fan.missed}, unexpected ${fan.unexpected}); writes ${fan.writes.rate.toFixed(1)}/s; server CPU ${(cpuShare * 100).toFixed(0)}%`);

      // ---- settle: what the write phase set going must not run into the read runs ----
      // The fan-out worker still writes the feed entries of the posts just made, and on PostgreSQL dirty buffers and
      // autovacuum follow a burst of writes (see "Slices" above in bench/README.md): wait for all of it.
      const settleStarted = performance.now();
      await settle();
      settleSeconds = (performance.now() - settleStarted) / 1000;
      log(`settled in ${settleSeconds.toFixed(1)} s (fan-out queue empty${backend === 'postgres' ? ', CHECKPOINT, no autovacuum worker' : ''})`);
    }

    // ---- figure 3: GET /posts/{id} with and without idle streams ----
    let throughput: Figures['throughput'];
    if (phases.has('reads')) {
      // Figure 1's anonymous streams are gone when figure 2 ran; without it they must go here (feed streams only).
      await cl.call({ cmd: 'close', kind: 'anonymous' });
      if (feedsOpen) await awaitOpen(port, cfg.subscribers);
      const spec = { method: 'GET' as const, path: '/posts/{id}', idMax: seeded.archivePosts };
      const load = (seconds: number) => runLoad(tool, spec, { port, seconds, connections: cfg.connections, pin: pinClient, workDir: work });
      let withStreams = feedsOpen;
      const setStreams = async (on: boolean) => {
        if (on === withStreams) return;
        if (on) await cl.call<OpenResult>({ cmd: 'open', job: { feeds: { from: 0, count: cfg.subscribers } } });
        else await cl.call({ cmd: 'close', kind: 'all' });
        const n = await awaitOpen(port, on ? cfg.subscribers : 0);
        if (n !== (on ? cfg.subscribers : 0)) throw new Error(`the server holds ${n} streams, expected ${on ? cfg.subscribers : 0}`);
        withStreams = on;
        // Let the opening (or closing) and its garbage settle before the load starts.
        await sleep(2000);
      };
      const measured = async (): Promise<LoadResult> => {
        const c0 = srv.cpuSeconds();
        const r = await load(cfg.duration);
        r.cpuUs = ((srv.cpuSeconds() - c0) * 1e6) / Math.max(1, r.requests);
        r.busy = (srv.cpuSeconds() - c0) / r.seconds;
        return r;
      };
      log(`figure 3: GET /posts/{id} with ${cfg.subscribers} idle streams and without, ${cfg.pairs} pairs of ${cfg.duration} s (${tool}, ${cfg.connections} connections)…`);
      await load(cfg.warmup);
      const pairs: NonNullable<Figures['throughput']>['pairs'] = [];
      for (let k = 0; k < cfg.pairs; k++) {
        // Alternate the order (with, without | without, with | …) so that drift favours neither and each toggle serves
        // two runs.
        const order = k % 2 === 0 ? [true, false] : [false, true];
        const got: Record<string, LoadResult> = {};
        for (const on of order) {
          await setStreams(on);
          const r = await measured();
          got[on ? 'with' : 'without'] = r;
          log(`  pair ${k + 1} ${on ? 'with   ' : 'without'}: ${Math.round(r.rps)} req/s, p99 ${ms(r.p99)} ms, CPU ${Math.round(r.cpuUs ?? 0)} µs/req, errors ${r.errors}`);
        }
        const w = got.with as LoadResult;
        const wo = got.without as LoadResult;
        pairs.push({ without: wo, with: w, ratio: w.rps / wo.rps, cpuRatio: (wo.cpuUs ?? 0) / (w.cpuUs ?? 1) });
      }
      const ratio = median(pairs.map((p) => p.ratio));
      throughput = {
        pairs,
        ratio,
        cpuRatio: median(pairs.map((p) => p.cpuRatio)),
        streams: cfg.subscribers,
        met: ratio >= TARGETS.throughputRatio && pairs.every((p) => p.with.errors === 0 && p.without.errors === 0),
      };
      feedsOpen = withStreams;
    }

    // ---- figure 4: follows reaching notification streams under write load (issue 43) ----
    let notifications: Figures['notifications'];
    if (phases.has('notifications')) {
      await cl.call({ cmd: 'close', kind: 'all' });
      await awaitOpen(port, 0);
      log(`figure 4: opening ${cfg.subscribers} notification streams…`);
      const opened = await cl.call<OpenResult>({ cmd: 'open', job: { notifications: { from: 0, count: cfg.subscribers } } });
      const serverOpen = await awaitOpen(port, cfg.subscribers, 30_000, 'notifications');
      log(`  opened ${opened.opened} (failed ${opened.failed}: ${JSON.stringify(opened.statuses)}) in ${opened.seconds.toFixed(1)} s; the server counts ${serverOpen}`);
      await sleep(2000);
      log(`  ${cfg.follows} follows at ${cfg.followRate}/s, each of a different subscriber; ${cfg.rate} posts/s by ${cfg.writers} writers…`);
      const job: NotifyJob = { follows: cfg.follows, followsPerSecond: cfg.followRate, writesPerSecond: cfg.rate, warmupMs: quick ? 1000 : 3000, graceMs: 10_000 };
      const cpu0 = srv.cpuSeconds();
      const t0 = performance.now();
      const result = await cl.call<NotifyResult>({ cmd: 'notify', job });
      const share = (srv.cpuSeconds() - cpu0) / ((performance.now() - t0) / 1000);
      const met = serverOpen === cfg.subscribers && opened.failed === 0 && result.followed === result.follows && result.missed === 0 &&
        result.misdelivered === 0 && result.duplicates === 0 && result.fromSend.p99 <= TARGETS.notifyP99Ms && result.writes.rate >= 0.95 * cfg.rate;
      notifications = { ...result, serverCpuShare: share, met };
      log(`  p50 ${ms(result.fromSend.p50)} ms, p99 ${ms(result.fromSend.p99)} ms, max ${ms(result.fromSend.max)} ms over ${result.follows} follows ` +
        `(${result.followed} answered 201; missed ${result.missed}, misdelivered ${result.misdelivered}, twice ${result.duplicates}); ` +
        `writes ${result.writes.rate.toFixed(1)}/s; server CPU ${(share * 100).toFixed(0)}%`);
    }

    const figures: Figures = {
      meta: {
        backend,
        date: new Date().toISOString().slice(0, 10),
        started: new Date().toISOString(),
        commit: gitCommit(),
        node: process.versions.node,
        cpu: os.cpus()[0]?.model ?? 'unknown',
        cpus: os.cpus().length,
        pinned: Boolean(taskset),
        tool,
        quick,
        config: cfg,
        seedSeconds: seeded.seconds,
        settleSeconds,
        mainBenchOverlap: overlap,
        serverFlags: startFlags(),
      },
      ...(idle ? { idle } : {}),
      ...(fan ? { fanout: { ...fan, serverCpuShare: cpuShare, met: fanMet } } : {}),
      ...(throughput ? { throughput } : {}),
      ...(notifications ? { notifications } : {}),
    };
    const md = markdown(figures);
    process.stdout.write(`\n${md}\n`);
    process.stdout.write(`${JSON.stringify(figures)}\n`);
    fs.mkdirSync(outDir, { recursive: true });
    const file = path.join(outDir, `${figures.meta.date as string}-streams-${backend}${quick ? '-quick' : ''}`);
    fs.writeFileSync(`${file}.md`, md);
    fs.writeFileSync(`${file}.json`, `${JSON.stringify(figures, null, 2)}\n`);
    log(`wrote ${path.relative(root, file)}.{md,json}`);
  } catch (error) {
    if (server) process.stderr.write(`server output (last lines):\n${server.output().split('\n').slice(-30).join('\n')}\n`);
    throw error;
  } finally {
    await tidy();
  }
}

function gitCommit(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { encoding: 'utf8' }).trim() !== '';
    return dirty ? `${head}+uncommitted` : head;
  } catch {
    return 'unknown';
  }
}

const verdict = (met: boolean) => (met ? '**met**' : '**not met**');
const pct = (p: Percentiles) => `p50 ${ms(p.p50)}, p90 ${ms(p.p90)}, p99 ${ms(p.p99)}, max ${ms(p.max)}`;

function markdown(f: Figures): string {
  const m = f.meta;
  const c = m.config as typeof cfg;
  const idle = f.idle;
  const fanout = f.fanout;
  const t = f.throughput;
  const n = f.notifications;
  const lines = [
    `# Live streams: ${m.backend as string}, ${m.date as string}`,
    '',
    `Issues 25 and 43 (figure 4). Server: \`node ${(m.serverFlags as string[]).join(' ')} dist/src/server.js\` (the \`npm start\` flags), ` +
      `${m.pinned ? 'pinned to CPU 0; clients in a separate Node process pinned to CPU 1' : 'not pinned'}; ` +
      `${m.cpu as string}, ${m.cpus as number} CPUs, Node ${m.node as string}, commit ${m.commit as string}` +
      `${m.quick ? '; **--quick** (small numbers: not the issue\'s figures)' : ''}.`,
    '',
    (m.mainBenchOverlap as string[]).length
      ? `**The main benchmark (bench/run.ts) was running during this run** (seen at ${(m.mainBenchOverlap as string[]).join(', ')} UTC): ` +
        'both shared the 2 CPUs, so the latencies and req/s here are pessimistic.'
      : 'The main benchmark (bench/run.ts) was not running at any of the checks (every 5 s).',
    '',
    `Seeded through the API in ${(m.seedSeconds as number).toFixed(1)} s: ${c.subscribers.toLocaleString('en-US')} subscribers (each follows one of ` +
      `${c.writers} writers; the first ${c.followers.toLocaleString('en-US')} also follow the author), ${c.archivePosts.toLocaleString('en-US')} public posts for the read load.`,
    '',
    '| # | figure | target | measured | result |',
    '|---|---|---|---|---|',
    ...(idle
      ? [
          `| 1 | server RSS holding ${idle.streams.toLocaleString('en-US')} idle streams (${c.subscribers.toLocaleString('en-US')} feed streams of signed-in users + ` +
            `${c.anonymous.toLocaleString('en-US')} anonymous \`GET /posts\` streams), held ${idle.holdSeconds} s | ≤ ${TARGETS.rssMb} MB | ` +
            `peak ${idle.rssPeakMb} MB (${idle.rssBeforeMb} MB before opening; ~${idle.perStreamKb} KB a stream) | ${verdict(idle.met)} |`,
        ]
      : []),
    ...(fanout
      ? [
          `| 2 | a post by the author reaches the feed streams of its ${fanout.watchers.toLocaleString('en-US')} followers (of ${c.subscribers.toLocaleString('en-US')} open), ` +
            `while ${c.writers} other users post ${c.rate}/s | p99 ≤ ${TARGETS.fanoutP99Ms} ms | p99 ${ms(fanout.fromSend.p99)} ms ` +
            `(${fanout.samples.toLocaleString('en-US')} deliveries of ${fanout.probes} posts; missed ${fanout.missed}) | ${verdict(fanout.met)} |`,
        ]
      : []),
    ...(t
      ? [
          `| 3 | \`GET /posts/{id}\` req/s with ${t.streams.toLocaleString('en-US')} idle feed streams ÷ without | ≥ ${TARGETS.throughputRatio} | ` +
            `${t.ratio.toFixed(2)} (median of ${t.pairs.length} pairs: ${t.pairs.map((p) => p.ratio.toFixed(2)).join(', ')}) | ${verdict(t.met)} |`,
        ]
      : []),
    ...(n
      ? [
          `| 4 | a follow reaches its recipient's notification stream (${n.streams.toLocaleString('en-US')} open, one per subscriber) as \`notification.created\`, ` +
            `while ${c.writers} users post ${c.rate}/s | p99 ≤ ${TARGETS.notifyP99Ms} ms | p99 ${ms(n.fromSend.p99)} ms ` +
            `(${n.follows} follows; missed ${n.missed}, misdelivered ${n.misdelivered}) | ${verdict(n.met)} |`,
        ]
      : []),
    '',
    ...(idle
      ? [
          '## 1. Idle streams',
          '',
          `Opened ${idle.open.opened.toLocaleString('en-US')} in ${idle.open.seconds.toFixed(1)} s (100 handshakes in flight; refused: ${idle.open.failed}), ` +
            `the server's \`corkboard_streams_open\` said ${idle.serverOpen.toLocaleString('en-US')}. RSS (\`VmRSS\` of /proc/<pid>/status, sampled every 200 ms ` +
            `from the first stream opened to the end of the hold): before ${idle.rssBeforeMb} MB, peak ${idle.rssPeakMb} MB, at the end ${idle.rssEndMb} MB. ` +
            `V8 heap used/total before ${idle.heapBefore.heapUsedMb}/${idle.heapBefore.heapTotalMb} MB, at the end ` +
            `${idle.heapEnd.heapUsedMb}/${idle.heapEnd.heapTotalMb} MB; external memory ${idle.heapBefore.externalMb} → ${idle.heapEnd.externalMb} MB ` +
            `(from the server's own /metrics; the rest of RSS is code, native allocations such as the HTTP parsers, and freed memory not yet returned). ` +
            `The hold spans the heartbeat (\`: keep-alive\` every 15 s to every stream) and the token re-check (every 30 s) when it is ≥ 30 s.`,
          '',
        ]
      : []),
    ...(fanout
      ? [
          '## 2. Fan-out latency',
          '',
          `Every second the author posts (\`POST /users/{id}/posts\`, public); its title carries a sequence number, and the client records ` +
            `when that title arrives on each follower's feed stream. Meanwhile the writers post ${c.rate}/s, open loop ` +
            `(achieved ${fanout.writes.rate.toFixed(1)}/s, ${fanout.writes.errors} errors, write latency ${pct(fanout.writes.latency)} ms); each of their posts ` +
            `goes to the ~${Math.round(c.subscribers / c.writers)} feed streams of its followers. The server process was on CPU ${(fanout.serverCpuShare * 100).toFixed(0)}% of the phase.`,
          '',
          '| latency, ms | p50 | p90 | p99 | max |',
          '|---|---:|---:|---:|---:|',
          `| from sending the POST | ${ms(fanout.fromSend.p50)} | ${ms(fanout.fromSend.p90)} | ${ms(fanout.fromSend.p99)} | ${ms(fanout.fromSend.max)} |`,
          `| from its 201 | ${ms(fanout.fromResponse.p50)} | ${ms(fanout.fromResponse.p90)} | ${ms(fanout.fromResponse.p99)} | ${ms(fanout.fromResponse.max)} |`,
          `| the probe POST itself | ${ms(fanout.probePostMs.p50)} | ${ms(fanout.probePostMs.p90)} | ${ms(fanout.probePostMs.p99)} | ${ms(fanout.probePostMs.max)} |`,
          '',
          `Slowest delivery per probe (ms): ${fanout.perProbeMax.map((v) => (Number.isFinite(v) ? Math.round(v) : 'missed')).join(', ')}. ` +
            `Missed: ${fanout.missed}; delivered to a stream that must not get it: ${fanout.unexpected}; twice: ${fanout.duplicates}; ` +
            `within 1 s: ${(fanout.withinOneSecond * 100).toFixed(2)}%. Post events received by all streams: ${fanout.eventsReceived.toLocaleString('en-US')}.`,
          '',
        ]
      : []),
    ...(t
      ? [
          '## 3. Reads beside idle streams',
          '',
          `\`GET /posts/{id}\` (random public post of ${c.archivePosts.toLocaleString('en-US')}, anonymous), ${m.tool as string} with ${c.connections} connections from CPU 1, ` +
            `after the write phase has settled (${(m.settleSeconds as number).toFixed(1)} s: fan-out queue empty; PostgreSQL: CHECKPOINT, no autovacuum worker), ` +
            `${c.duration} s runs after ${c.warmup} s of warm-up, in pairs taken back to back in alternating order (with, without | without, with | …); ` +
            `the streams are opened (or closed) and the server's count checked 2 s before a run. Ratio: with ÷ without within a pair; median over the pairs.`,
          '',
          '| pair | without req/s | with req/s | ratio | CPU µs/req without | with | busy without | with | p99 ms without | with | errors |',
          '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
          ...t.pairs.map((p, i) =>
            `| ${i + 1} | ${Math.round(p.without.rps).toLocaleString('en-US')} | ${Math.round(p.with.rps).toLocaleString('en-US')} | ${p.ratio.toFixed(2)} | ` +
              `${Math.round(p.without.cpuUs ?? 0)} | ${Math.round(p.with.cpuUs ?? 0)} | ${Math.round((p.without.busy ?? 0) * 100)}% | ${Math.round((p.with.busy ?? 0) * 100)}% | ` +
              `${ms(p.without.p99)} | ${ms(p.with.p99)} | ${p.without.errors + p.with.errors} |`,
          ),
          '',
          `CPU ratio (µs/req without ÷ with, median over the pairs): ${t.cpuRatio.toFixed(2)}.`,
          '',
        ]
      : []),
    ...(n
      ? [
          '## 4. Notification streams',
          '',
          `${n.streams.toLocaleString('en-US')} notification streams open (\`GET /users/{id}/notifications\`, \`Accept: text/event-stream\`, one per subscriber ` +
            `with their token). ${n.follows} follows at ${c.followRate}/s (\`POST /users/{id}/followers\` by a writer, each of a different subscriber; ` +
            `${n.followed} answered 201), timed from just before the POST to the \`notification.created\` of type \`follow\` from that writer on the ` +
            `subscriber's stream. Meanwhile the writers post ${c.rate}/s, open loop (achieved ${n.writes.rate.toFixed(1)}/s, ${n.writes.errors} errors, write ` +
            `latency ${pct(n.writes.latency)} ms). The server process was on CPU ${(n.serverCpuShare * 100).toFixed(0)}% of the phase.`,
          '',
          '| latency, ms | p50 | p90 | p99 | max |',
          '|---|---:|---:|---:|---:|',
          `| from sending the follow | ${ms(n.fromSend.p50)} | ${ms(n.fromSend.p90)} | ${ms(n.fromSend.p99)} | ${ms(n.fromSend.max)} |`,
          `| from its 201 | ${ms(n.fromResponse.p50)} | ${ms(n.fromResponse.p90)} | ${ms(n.fromResponse.p99)} | ${ms(n.fromResponse.max)} |`,
          `| the follow POST itself | ${ms(n.followPostMs.p50)} | ${ms(n.followPostMs.p90)} | ${ms(n.followPostMs.p99)} | ${ms(n.followPostMs.max)} |`,
          '',
          `Missed: ${n.missed}; \`notification.created\` events a stream did not expect (another user's follow, another type): ${n.misdelivered}; ` +
            `twice: ${n.duplicates}; within 1 s: ${(n.withinOneSecond * 100).toFixed(2)}%.`,
          '',
        ]
      : []),
  ];
  return lines.join('\n');
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
