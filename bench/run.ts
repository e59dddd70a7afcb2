import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { createCursorCodec } from '../src/shared/pagination.js';
import { generateDataset, prng } from './lib/dataset.js';
import { CALLGRIND_ENV, callgrindPrefix, countInstructions, instructionMarkdown, instructionResults, type InstructionCount } from './lib/instructions.js';
import { runLoad, type FollowSequence, type LoadResult, type LoadTool, type RequestSpec } from './lib/load.js';
import { freePort, npmStartCommand, run, startServer, warmPageCache, which, type ServerProcess } from './lib/process.js';
import { addRatios, evaluate, markdown, mergeSlices, summarise, textTable, type Report, type ScenarioResult } from './lib/report.js';
import { RSS_LIMIT_MB, SEARCH_COMMON, scenarios as allScenarios, targets, type Backend, type Scenario } from './lib/scenarios.js';
import { INVARIANTS, seedPostgres, seedSqlite, type SeedResult } from './lib/seed.js';
import { celebrity, mixedTraffic, processCurve, type MixSetup, type SuitesReport } from './lib/suites.js';
import { int } from './lib/args.js';

/**
 * `npm run bench [-- options]`: builds, seeds a database of the chosen size, starts corkboard and the baselines
 * (each pinned to CPU 0), and loads them in rounds from CPU 1: every scenario once per round, so that drift in a
 * noisy machine spreads over all of them. Reports medians, ratios to baselines from the same run, and the
 * server's peak RSS. See bench/README.md.
 */

const HELP = `Usage: npm run bench -- [options]
  --backend sqlite|postgres   database under test (default sqlite)
  --users N --posts N         data size (default 100000 users, 1000000 posts)
  --boards N                  boards on the bulletin board (default 100000)
  --follows N                 mean number of users an ordinary user follows (default 10)
  --runs N                    measured runs per scenario (default 3, at least 3 for the targets)
  --duration S --warmup S     seconds per run, seconds of warm-up per scenario (default 10 and 5)
  --slices N                  run each round's scenarios in N interleaved slices of duration/N seconds (default 5,
                              1 with --quick): slice 1 of every scenario, then slice 2, …, so that a slow patch of
                              the machine falls on every scenario alike (see bench/README.md)
  --connections N             concurrent connections (default 50)
  --quick                     smoke run: 2000 users, 20000 posts, 1 s runs (under a minute)
  --scenarios a,b,...         only these scenario keys (their baselines are added)
  --tool wrk|autocannon       load generator (default: wrk when installed)
  --env NAME=value            a setting for every corkboard process (repeatable), e.g. SQLITE_GROUP_COMMIT=off
  --profile                   write a V8 CPU profile of corkboard to bench/.work/profiles
  --pg-url URL                PostgreSQL server (default postgres://postgres@127.0.0.1:5432/postgres)
  --out DIR                   results directory (default bench/results; bench/.work/results with --quick)
  --keep                      keep the seeded databases
  --no-build                  skip npm run build
  --reuse-seed                keep the seeded database (SQLite: in bench/.work/seed-cache; PostgreSQL: as the
                              template database corkboard_seed_<key>) and start from a copy of it next time (same
                              sizes, seed, migrations and seeder); for iterating on the service
  --seed N                    data generator seed (default 42)
  --instructions              count instructions per request with valgrind's callgrind instead of timing load:
                              steady to ~0.2% on a noisy machine, user space only (see bench/README.md)
  --requests N                with --instructions: requests counted per scenario, after 4 × N to warm up
                              (default 2000)
  --suites a,b,...            issue 26's suites after the rounds: growth, mixed, processes (PostgreSQL only),
                              celebrity; "none" for none (default: all of them, none with --scenarios)
  --growth-posts N            growth: the smaller database's posts (default 100000; 2000 with --quick)
  --suite-seconds S           seconds per run of the mixed-traffic suites (default 5; 2 with --quick)
  --suite-rounds N            rounds of the mixed-traffic suite (default 2; 1 with --quick)`;

const { values: args } = parseArgs({
  options: {
    backend: { type: 'string', default: 'sqlite' },
    users: { type: 'string' },
    posts: { type: 'string' },
    boards: { type: 'string' },
    follows: { type: 'string', default: '10' },
    runs: { type: 'string' },
    duration: { type: 'string' },
    slices: { type: 'string' },
    warmup: { type: 'string' },
    connections: { type: 'string', default: '50' },
    quick: { type: 'boolean', default: false },
    scenarios: { type: 'string' },
    tool: { type: 'string' },
    profile: { type: 'boolean', default: false },
    'pg-url': { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
    out: { type: 'string' },
    keep: { type: 'boolean', default: false },
    'no-build': { type: 'boolean', default: false },
    'reuse-seed': { type: 'boolean', default: false },
    seed: { type: 'string', default: '42' },
    instructions: { type: 'boolean', default: false },
    requests: { type: 'string' },
    suites: { type: 'string' },
    'growth-posts': { type: 'string' },
    'suite-seconds': { type: 'string' },
    'suite-rounds': { type: 'string' },
    env: { type: 'string', multiple: true },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(`${HELP}\n`);
  process.exit(0);
}

const quick = args.quick;
/** `--env NAME=value`: settings for every corkboard process, e.g. `--env SQLITE_GROUP_COMMIT=off` to measure a switch. */
const serverEnv: Record<string, string> = {};
for (const pair of args.env ?? []) {
  const eq = pair.indexOf('=');
  if (eq < 1) throw new Error(`--env takes NAME=value, not ${pair}`);
  serverEnv[pair.slice(0, eq)] = pair.slice(eq + 1);
}
if (args.backend !== 'sqlite' && args.backend !== 'postgres') throw new Error('--backend must be sqlite or postgres');
const backend: Backend = args.backend;
const sizes = {
  users: int('users', args.users, quick ? 2_000 : 100_000, 20),
  posts: int('posts', args.posts, quick ? 20_000 : 1_000_000, 2_000),
  boards: int('boards', args.boards, quick ? 2_000 : 100_000, 40),
};
const runs = int('runs', args.runs, 3);
const duration = int('duration', args.duration, quick ? 1 : 10);
const slices = int('slices', args.slices, quick ? 1 : 5);
// wrk takes whole seconds.
if (duration % slices !== 0) throw new Error(`--duration (${duration}) must be a multiple of --slices (${slices})`);
const warmup = int('warmup', args.warmup, quick ? 1 : 5, 0);
const connections = int('connections', args.connections, 50);
const counted = int('requests', args.requests, quick ? 300 : 2_000);
const warmed = counted * 4;
const instructions = args.instructions;
const SUITES = ['growth', 'mixed', 'processes', 'celebrity'] as const;
const suites = new Set<string>(
  (args.suites ?? (args.scenarios || instructions ? 'none' : SUITES.join(','))).split(',').map((s) => s.trim()).filter((s) => s && s !== 'none'),
);
for (const s of suites) if (!(SUITES as readonly string[]).includes(s)) throw new Error(`--suites: unknown suite "${s}"`);
if (args.backend !== 'postgres') suites.delete('processes');
const growthPosts = suites.has('growth') ? int('growth-posts', args['growth-posts'], quick ? 2_000 : 100_000, 2_000) : undefined;
const suiteSeconds = int('suite-seconds', args['suite-seconds'], quick ? 2 : 5);
const suiteRounds = int('suite-rounds', args['suite-rounds'], quick ? 1 : 2);
if (instructions && !which('valgrind')) throw new Error('--instructions needs valgrind (apt-get install valgrind)');
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
process.chdir(root);
const work = path.join(root, 'bench/.work', `run-${backend}-${process.pid}`);
const outDir = path.resolve(args.out ?? (quick ? 'bench/.work/results' : 'bench/results'));

const log = (line: string) => process.stdout.write(`${line}\n`);

async function pgAdmin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: args['pg-url'] });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * PostgreSQL's counterpart of `warmPageCache`: `pg_prewarm` (a contrib extension shipped with the server) reads every
 * table, index and TOAST relation of the database through the OS page cache ('read' mode), where PostgreSQL's own
 * reads find them. Without the extension the runs go ahead unwarmed, and the log says so.
 */
async function pgPrewarm(url: string): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_prewarm');
  } catch (error) {
    log(`pg_prewarm is not available (${String(error)}): PostgreSQL runs are not warmed`);
    await client.end();
    return async () => {};
  }
  await client.end();
  return async () => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      await c.query(
        `SELECT pg_prewarm(c.oid, 'read') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname IN ('public', 'pg_toast') AND c.relkind IN ('r', 'i', 't', 'm')`,
      );
    } finally {
      await c.end();
    }
  };
}

const dbUrl = (name: string) => {
  const url = new URL(args['pg-url']);
  url.pathname = `/${name}`;
  return url.toString();
};

async function main(): Promise<void> {
  const tasksetPath = which('taskset');
  const cpus = os.cpus().length;
  const pinServer = tasksetPath && cpus >= 2 ? ['taskset', '-c', '0'] : [];
  const pinLoad = tasksetPath && cpus >= 2 ? ['taskset', '-c', '1'] : [];
  const tool: LoadTool = args.tool === 'autocannon' || args.tool === 'wrk' ? args.tool : which('wrk') ? 'wrk' : 'autocannon';
  if (tool === 'wrk' && !which('wrk')) throw new Error('--tool wrk: wrk is not installed (apt-get install wrk)');
  log(`corkboard benchmark: ${backend}, ${sizes.users} users, ${sizes.posts} posts, ${sizes.boards} boards; ` +
    `${tool}, ${connections} connections, ${runs} × ${duration} s (+${warmup} s warm-up)` +
    (pinServer.length ? '; server on CPU 0, load on CPU 1' : '; taskset unavailable or one CPU: not pinned'));

  if (!args['no-build']) {
    log('building…');
    await run('npm', ['run', 'build', '--silent']);
  }
  await run(path.join(root, 'node_modules/.bin/tsc'), ['-p', 'bench/tsconfig.build.json']);

  fs.mkdirSync(work, { recursive: true });
  const servers: ServerProcess[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  try {
    // ---- seed ----
    const datasetOptions = {
      ...sizes,
      followsPerUser: int('follows', args.follows, 10, 0),
      feedFollows: 1_000,
      authorFollowers: 10,
      manyAuthors: 1_000,
      signedIn: 11_000,
      seed: int('seed', args.seed, 42, 0),
    };
    const data = generateDataset(datasetOptions);
    log(`seeding ${backend} (${data.feedEntryCount.toLocaleString('en-US')} feed entries)…`);
    let seeded: SeedResult;
    let corkboardUrl: string;
    let baselineEnv: Record<string, string>;
    // Brings each server's database into memory before every load run (see `warmPageCache`): the figures are
    // what a server costs with its data cached, as on a machine under steady load, not how fast the disk is.
    let warm: Record<Scenario['target'], () => Promise<void>>;
    // Waits until what a write scenario set going has finished: corkboard's fan-out queue and follows' backfills
    // are empty and, on PostgreSQL, the dirty buffers are written and no autovacuum worker runs (see
    // `settleAfterWrites`).
    let settle: () => Promise<void>;
    // Is the feed entry (user, post) written? (the celebrity suite); the first value of a query (invariants).
    let entryWritten: (user: number, post: number) => Promise<boolean>;
    let scalar: (text: string) => Promise<number>;
    if (backend === 'sqlite') {
      const file = path.join(work, 'corkboard.db');
      seeded = args['reuse-seed'] ? await reusableSeed(file, data) : await seedSqlite(file, data, log);
      const copy = path.join(work, 'baseline.db');
      fs.copyFileSync(file, copy);
      corkboardUrl = `sqlite:${file}`;
      baselineEnv = { DATABASE_FILE: copy };
      const files = (db: string) => [db, `${db}-wal`];
      warm = {
        corkboard: async () => void warmPageCache(files(file)),
        database: async () => void warmPageCache(files(copy)),
        constant: async () => {},
        small: async () => {},
      };
      if (!args.keep) cleanups.push(async () => fs.rmSync(work, { recursive: true, force: true }));
      // A connection of the harness's own, opened once the server has migrated and only ever reading a count.
      let probe: Database.Database | undefined;
      cleanups.push(async () => void probe?.close());
      settle = () =>
        settleAfterWrites(async () => {
          probe ??= new Database(file, { readonly: true, fileMustExist: true });
          return (probe.prepare('SELECT (SELECT count(*) FROM fanout_queue) + (SELECT count(*) FROM feed_backfill) AS n').get() as { n: number }).n;
        });
      entryWritten = async (user, post) => {
        probe ??= new Database(file, { readonly: true, fileMustExist: true });
        return probe.prepare('SELECT 1 FROM feed_entries WHERE user_id = ? AND post_id = ?').get(user, post) !== undefined;
      };
      scalar = async (text) => {
        probe ??= new Database(file, { readonly: true, fileMustExist: true });
        return Number(probe.prepare(text).pluck().get());
      };
    } else {
      const name = `corkboard_bench_${process.pid}`;
      await pgAdmin(async (c) => {
        await c.query(`DROP DATABASE IF EXISTS ${name}_baseline`);
        await c.query(`DROP DATABASE IF EXISTS ${name}`);
        await c.query(`CREATE DATABASE ${name}`);
      });
      if (!args.keep) {
        cleanups.push(() =>
          pgAdmin(async (c) => {
            await c.query(`DROP DATABASE IF EXISTS ${name}_baseline WITH (FORCE)`);
            await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
          }),
        );
        cleanups.push(async () => fs.rmSync(work, { recursive: true, force: true }));
      }
      seeded = args['reuse-seed'] ? await reusablePostgresSeed(name, data) : await seedPostgres(dbUrl(name), data, log);
      await pgAdmin((c) => c.query(`CREATE DATABASE ${name}_baseline TEMPLATE ${name}`));
      corkboardUrl = dbUrl(name);
      baselineEnv = { DATABASE_URL: dbUrl(`${name}_baseline`) };
      warm = {
        corkboard: await pgPrewarm(corkboardUrl),
        database: await pgPrewarm(dbUrl(`${name}_baseline`)),
        constant: async () => {},
        small: async () => {},
      };
      const probe = new pg.Client({ connectionString: corkboardUrl });
      await probe.connect();
      cleanups.push(() => probe.end());
      // The celebrity suite polls for many posts at once: a pool, since one client runs one query at a time.
      const pollers = new pg.Pool({ connectionString: corkboardUrl, max: 4 });
      cleanups.push(() => pollers.end());
      entryWritten = async (user, post) =>
        (await pollers.query('SELECT 1 FROM feed_entries WHERE user_id = $1 AND post_id = $2', [user, post])).rows.length > 0;
      scalar = async (text) => Number(Object.values((await probe.query<Record<string, unknown>>(text)).rows[0] ?? {})[0]);
      settle = () =>
        settleAfterWrites(
          async () => Number((await probe.query<{ n: string }>('SELECT (SELECT count(*) FROM fanout_queue) + (SELECT count(*) FROM feed_backfill) AS n')).rows[0]?.n ?? 0),
          async () => {
            await probe.query('CHECKPOINT');
            const busy = async () =>
              Number(
                (await probe.query<{ n: string }>(`SELECT count(*) AS n FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'`)).rows[0]?.n ?? 0,
              );
            await until(async () => (await busy()) === 0);
          },
        );
    }
    log(`seeded in ${seeded.seconds.toFixed(1)} s`);

    // Growth: a second database with the same users and follows and fewer posts, served by a second corkboard.
    let small: { url: string; seeded: SeedResult } | undefined;
    if (growthPosts !== undefined) {
      const smallData = generateDataset({ ...datasetOptions, posts: growthPosts });
      log(`seeding the growth database (${growthPosts} posts, ${smallData.feedEntryCount.toLocaleString('en-US')} feed entries)…`);
      if (backend === 'sqlite') {
        const file = path.join(work, 'small.db');
        const smallSeeded = args['reuse-seed'] ? await reusableSeed(file, smallData) : await seedSqlite(file, smallData, log);
        small = { url: `sqlite:${file}`, seeded: smallSeeded };
        warm.small = async () => void warmPageCache([file, `${file}-wal`]);
      } else {
        const name = `corkboard_bench_${process.pid}_small`;
        await pgAdmin(async (c) => {
          await c.query(`DROP DATABASE IF EXISTS ${name}`);
          await c.query(`CREATE DATABASE ${name}`);
        });
        if (!args.keep) cleanups.push(() => pgAdmin(async (c) => void (await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))));
        small = { url: dbUrl(name), seeded: await seedPostgres(dbUrl(name), smallData, log) };
        warm.small = await pgPrewarm(small.url);
      }
      log(`seeded in ${small.seeded.seconds.toFixed(1)} s`);
    }

    // ---- servers ----
    const profileDir = path.join(root, 'bench/.work/profiles');
    if (args.profile) fs.mkdirSync(profileDir, { recursive: true });
    const [node = 'node', ...nodeArgs] = npmStartCommand();
    // With --instructions every server runs under callgrind, counting nothing until a scenario is measured.
    const under = instructions ? callgrindPrefix(work) : [];
    const underEnv = instructions ? CALLGRIND_ENV : {};
    const corkboard = await startServer({
      name: 'corkboard',
      command: [...under, node, ...(args.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []), ...nodeArgs],
      env: { DATABASE_URL: corkboardUrl, RATE_LIMIT: 'off', LOG_LEVEL: 'warn', HOST: '127.0.0.1', ...serverEnv, ...underEnv },
      port: await freePort(),
      pin: pinServer,
      readyPath: '/health',
    });
    servers.push(corkboard);
    const constant = await startServer({
      name: 'baseline-constant',
      command: [...under, 'node', 'bench/.work/dist/baselines/constant.js'],
      env: underEnv,
      port: await freePort(),
      pin: pinServer,
      readyPath: '/',
    });
    servers.push(constant);
    const database = await startServer({
      name: `baseline-${backend}`,
      command: [...under, 'node', `bench/.work/dist/baselines/${backend}.js`],
      env: { ...baselineEnv, ...underEnv },
      port: await freePort(),
      pin: pinServer,
      readyPath: '/',
    });
    servers.push(database);
    const smallServer = small
      ? await startServer({
          name: 'corkboard-small',
          command: [node, ...nodeArgs],
          env: { DATABASE_URL: small.url, RATE_LIMIT: 'off', LOG_LEVEL: 'warn', HOST: '127.0.0.1', ...serverEnv },
          port: await freePort(),
          pin: pinServer,
          readyPath: '/health',
        })
      : undefined;
    if (smallServer) servers.push(smallServer);
    const serverOf: Record<Scenario['target'], ServerProcess> = { corkboard, constant, database, small: smallServer ?? corkboard };

    // ---- scenarios ----
    // The deep page: of forty neighbouring pages near the oldest end (before ids 1,001, 1,023, … 1,859; about 90%
    // of posts are public, so each cursor starts the page after the one before), the one whose response is nearest
    // their mean size. The first page shows create-post's posts, which are the seeded mean length (see
    // scenarios.ts), so the two pages carry as much text and read as many rows, and differ in depth only (one
    // fixed page, ids 980–999, had carried 12% more text than the mean; see bench/README.md).
    const codec = createCursorCodec(seeded.cursorSecret);
    const deepFrom = Math.min(1_000, Math.floor(sizes.posts / 2)) + 1;
    const deepCandidates = Array.from({ length: 40 }, (_, k) => codec.encode('posts', deepFrom + 22 * k));
    const deepSizes: number[] = [];
    for (const cursor of deepCandidates) {
      const response = await fetch(`http://127.0.0.1:${corkboard.port}/posts?cursor=${encodeURIComponent(cursor)}`);
      deepSizes.push((await response.arrayBuffer()).byteLength);
    }
    const meanSize = deepSizes.reduce((a, b) => a + b, 0) / deepSizes.length;
    const deepIndex = deepSizes.reduce((best, size, i) => (Math.abs(size - meanSize) < Math.abs((deepSizes[best] as number) - meanSize) ? i : best), 0);
    log(`deep page: the one before id ${deepFrom + 22 * deepIndex}, ${deepSizes[deepIndex]} bytes (mean of 40 neighbours ${Math.round(meanSize)})`);
    // The growth database's deep page: the same ids (its posts have the same owners, text and visibility by id).
    const smallCursor = small ? createCursorCodec(small.seeded.cursorSecret).encode('posts', deepFrom + 22 * deepIndex) : undefined;
    const manyAuthors = Array.from(data.manyAuthorIds, (id) => ({ id, token: seeded.tokens.signedIn[id - 1] as string })).filter((a) => a.token);
    let list = allScenarios({
      backend,
      posts: sizes.posts,
      boards: sizes.boards,
      feedUser: data.feedUser,
      author: data.author,
      tokens: seeded.tokens,
      deepCursor: deepCandidates[deepIndex] as string,
      // The search's deep page starts at the same id; its cursor is scoped to its query (search.query.ts).
      searchDeepCursor: codec.encode(`posts?q="${SEARCH_COMMON}"`, deepFrom + 22 * deepIndex),
      manyAuthors,
      follows: followPairs(data, seeded.tokens.signedIn),
      // Pair 0 is the sanity check's; the load runs start at pair 1 (as the follows').
      ...(seeded.tokens.blockPairs
        ? { blocks: { start: 1, followers: seeded.tokens.blockPairs.blockers, followees: seeded.tokens.blockPairs.blocked, action: 'block' as const } }
        : {}),
      ...(seeded.tokens.signedIn[data.returning - 1] ? { returning: { id: data.returning, token: seeded.tokens.signedIn[data.returning - 1] as string } } : {}),
      ...(small && smallCursor && growthPosts !== undefined ? { growth: { posts: growthPosts, deepCursor: smallCursor, feedToken: small.seeded.tokens.feed } } : {}),
    });
    if (args.scenarios) {
      // The named scenarios, every baseline, and whatever their ratios are taken against.
      const wanted = new Set(args.scenarios.split(',').map((s) => s.trim()));
      for (const s of list) if (s.target === 'constant' || s.target === 'database') wanted.add(s.key);
      for (let grew = true; grew; ) {
        grew = false;
        for (const s of list) {
          if (wanted.has(s.key) && s.versus && !wanted.has(s.versus)) {
            wanted.add(s.versus);
            grew = true;
          }
        }
      }
      list = list.filter((s) => wanted.has(s.key));
    }

    for (const scenario of list) await sanityCheck(scenario, serverOf[scenario.target].port);
    log('all scenarios answer as expected');

    if (instructions) {
      log(`counting instructions: ${counted} requests per scenario after ${warmed} to warm up`);
      const counts = new Map<string, InstructionCount>();
      for (const [i, scenario] of list.entries()) {
        const count = await countInstructions(serverOf[scenario.target], scenario.spec, work, {
          warm: warmed,
          count: counted,
          seed: 1000 + i,
        });
        counts.set(scenario.key, count);
        log(`  ${scenario.key.padEnd(26)} ${Math.round(count.perRequest).toLocaleString('en-US').padStart(10)} instructions/request` +
          `${count.failed ? `  FAILED ${count.failed}` : ''}`);
      }
      const { rows, targets: judged } = instructionResults(list, counts, targets(backend, growthPosts, sizes.posts));
      const table = instructionMarkdown(rows, judged);
      log('');
      log(table);
      const meta = { backend, date: today(), commit: gitCommit(), node: process.versions.node, ...sizes, counted, warmed };
      writeResults(
        'instructions',
        { meta, scenarios: rows, targets: judged },
        `# Instructions per request: ${backend}, ${meta.date}\n\n${sizes.users.toLocaleString('en-US')} users, ` +
          `${sizes.posts.toLocaleString('en-US')} posts; callgrind, main thread, ${counted} requests counted per scenario ` +
          `after ${warmed} to warm up, 10 at a time. Node ${meta.node}, commit ${meta.commit}.\n\n${table}`,
      );
      return;
    }

    const connectionsOf = (scenario: Scenario) => Math.min(connections, scenario.connections ?? connections);
    const loadOptions = (scenario: Scenario, port: number, seconds: number) =>
      ({ port, seconds, connections: connectionsOf(scenario), pin: pinLoad, workDir: work });
    const rssMax = new Map<string, number>();
    const measured = new Map<string, LoadResult[]>();
    // A server's database is read into the page cache before a run unless that was done in the last 20 s: this
    // kind of VM pages out file cache left untouched for a minute (see `warmPageCache`), and with interleaved
    // slices every server is loaded far more often than that, so warming before every slice would only add time.
    const warmedAt = new Map<Scenario['target'], number>();
    const load = async (scenario: Scenario, seconds: number) => {
      const server = serverOf[scenario.target];
      if (Date.now() - (warmedAt.get(scenario.target) ?? 0) > 20_000) {
        await warm[scenario.target]();
        warmedAt.set(scenario.target, Date.now());
      }
      const sampler = server.sampleRss();
      const cpuBefore = server.cpuSeconds();
      const diskBefore = server.diskReadBytes();
      try {
        const result = await runLoad(tool, scenario.spec, loadOptions(scenario, server.port, seconds));
        // The next run's follows start past every pair this one may have sent (answered or still in flight).
        if (scenario.spec.follows) {
          const seq = scenario.spec.follows;
          seq.start += result.requests + 2 * connectionsOf(scenario);
          // Blocks cannot repeat (409): past the seeded pairs every answer is an error, and the figures are void.
          if (seq.action === 'block' && seq.start > seq.followers.length * seq.followees.length) {
            log(`  ${scenario.key}: past its ${seq.followers.length * seq.followees.length} seeded pairs (BLOCKERS × BLOCKED in seed.ts): later runs repeat blocks`);
          }
        }
        // After a write, wait for its aftermath before the next run (and count the server's share of it, the
        // fan-out of the posts it created, in this scenario's CPU), so that it falls on no other scenario.
        if (scenario.spec.method !== 'GET') await settle();
        const cpu = server.cpuSeconds() - cpuBefore;
        const diskKb = (server.diskReadBytes() - diskBefore) / 1024 / result.requests;
        return { ...result, cpuUs: (cpu * 1e6) / result.requests, busy: cpu / result.seconds, diskKb };
      } catch (error) {
        const status = server.exitStatus();
        if (status === undefined) throw error;
        throw new Error(`${server.name} ended (${status}) during ${scenario.key}; its last output:\n${server.output().slice(-4000)}`, {
          cause: error,
        });
      } finally {
        rssMax.set(scenario.key, Math.max(rssMax.get(scenario.key) ?? 0, sampler.stop()));
      }
    };
    if (warmup > 0) {
      log(`warming up (${warmup} s per scenario)…`);
      for (const scenario of list) await load(scenario, warmup);
    }
    // Each round runs every scenario for `duration` seconds, in `slices` interleaved slices: slice 1 of every
    // scenario, then slice 2, and so on. The machine's speed drifts by tens of percent over tens of seconds (on
    // 2026-11-24 get-post and the first page ran 1.7× slower for one 10 s run each while the runs either side did
    // not), so a scenario run for 10 s in one go can land wholly in a slow patch that the scenario it is compared
    // with misses; slices of 2 s spread such a patch over every scenario alike.
    for (let round = 1; round <= runs; round++) {
      log(`round ${round}/${runs}${slices > 1 ? ` (${slices} slices of ${duration / slices} s)` : ''}`);
      const sliced = new Map<string, LoadResult[]>();
      for (let slice = 0; slice < slices; slice++) {
        for (const scenario of list) sliced.set(scenario.key, [...(sliced.get(scenario.key) ?? []), await load(scenario, duration / slices)]);
      }
      for (const scenario of list) {
        const result = mergeSlices(sliced.get(scenario.key) ?? []);
        measured.set(scenario.key, [...(measured.get(scenario.key) ?? []), result]);
        log(`  ${scenario.key.padEnd(26)} ${Math.round(result.rps).toString().padStart(7)} req/s  p50 ${result.p50.toFixed(2)} ms  p99 ${result.p99.toFixed(2)} ms  cpu ${Math.round(result.cpuUs ?? 0)} µs/req  busy ${Math.round((result.busy ?? 0) * 100)}%` +
          `${result.errors ? `  ERRORS ${result.errors}` : ''}`);
      }
    }

    // ---- issue 26's suites ----
    const suiteReport: SuitesReport = {};
    if (suites.has('mixed') || suites.has('processes') || suites.has('celebrity')) {
      // Signed-in users for the mix: the last 10,000 of those holding tokens (past the feed user, the author and the
      // many authors, whose figures the main scenarios rely on), or all of them in a small data set.
      const signedIn = seeded.tokens.signedIn;
      const firstUser = signedIn.length > 11_000 - 1 ? signedIn.length - 10_000 + 1 : 1;
      const random = (() => {
        let x = 12345;
        return () => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 4294967296);
      })();
      const base: MixSetup['base'] = {
        posts: sizes.posts,
        firstUser,
        tokens: signedIn.slice(firstUser - 1),
        users: sizes.users,
        cursors: Array.from({ length: 500 }, () => codec.encode('posts', 1 + Math.floor(random() * sizes.posts))),
      };
      const setupFor = (ports: number[]): MixSetup => ({
        ports,
        pin: pinLoad,
        workDir: work,
        seconds: suiteSeconds,
        connections,
        rounds: suiteRounds,
        base,
        settle,
        log,
      });
      await warm.corkboard();
      if (suites.has('mixed')) {
        log(`mixed traffic (${suiteRounds} round(s), ${suiteSeconds} s runs)…`);
        suiteReport.mixed = await mixedTraffic(setupFor([corkboard.port]));
      }
      if (suites.has('processes')) {
        log('mixed traffic against one process and against two…');
        const second = await startServer({
          name: 'corkboard-2',
          command: [node, ...nodeArgs],
          env: { DATABASE_URL: corkboardUrl, RATE_LIMIT: 'off', LOG_LEVEL: 'warn', HOST: '127.0.0.1', ...serverEnv },
          port: await freePort(),
          pin: pinServer,
          readyPath: '/health',
        });
        try {
          suiteReport.processes = await processCurve(
            [
              { processes: 1, setup: setupFor([corkboard.port]) },
              { processes: 2, setup: setupFor([corkboard.port, second.port]) },
            ],
            [0.5, 0.7, 0.9, 1.1],
            log,
          );
        } finally {
          await second.stop();
        }
      }
      if (suites.has('celebrity')) {
        log('a celebrity posts…');
        const c = data.celebrity;
        const followersOf = (u: number) => data.followers.subarray(data.followerOffsets[u] as number, data.followerOffsets[u + 1] as number);
        const celebrityFollowers = followersOf(c);
        const reader = Math.min(signedIn.length, sizes.users);
        suiteReport.celebrity = await celebrity({
          port: corkboard.port,
          celebrity: {
            id: c,
            token: signedIn[c - 1] as string,
            followers: celebrityFollowers.length,
            lastFollower: celebrityFollowers[celebrityFollowers.length - 1] as number,
          },
          reader: { id: reader, token: signedIn[reader - 1] as string },
          authors: manyAuthors.map((a) => ({ ...a, follower: followersOf(a.id)[0] as number })).filter((a) => a.follower !== undefined),
          rate: 50,
          lead: 3,
          entryWritten,
          log,
        });
        await settle();
      }
      // What the suites wrote (follows, unfollows, posts, replies, recommends from two processes at once) must have
      // left every counter equal to its rows.
      const checks: [string, string][] = [
        ...INVARIANTS.filter(([name]) => name.startsWith('users.')),
        ['posts.reply_count', 'SELECT count(*) FROM posts p WHERE reply_count <> (SELECT count(*) FROM replies r WHERE r.post_id = p.id) AND (reply_count > 0 OR EXISTS (SELECT 1 FROM replies r WHERE r.post_id = p.id))'],
        ['posts.recommend_count', 'SELECT count(*) FROM posts p WHERE recommend_count <> (SELECT count(*) FROM recommends r WHERE r.post_id = p.id) AND (recommend_count > 0 OR EXISTS (SELECT 1 FROM recommends r WHERE r.post_id = p.id))'],
        ['fanout_queue', 'SELECT count(*) FROM fanout_queue'],
        ['feed_backfill', 'SELECT count(*) FROM feed_backfill'],
      ];
      suiteReport.invariants = {};
      for (const [name, text] of checks) suiteReport.invariants[name] = await scalar(text);
    }

    // ---- report ----
    const results: ScenarioResult[] = list.map((s) => summarise(s, measured.get(s.key) ?? [], rssMax.get(s.key) ?? 0));
    addRatios(results);
    const rssCorkboard = Math.max(...results.filter((r) => r.target === 'corkboard').map((r) => r.rssMaxMb), 0);
    const date = today();
    const { tokens: _tokens, cursorSecret: _secret, ...seeding } = seeded;
    const report: Report = {
      meta: {
        backend,
        date,
        startedAt: new Date().toISOString(),
        commit: gitCommit(),
        node: process.versions.node,
        cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
        cpus,
        memoryGb: Math.round(os.totalmem() / 2 ** 30),
        loadTool: tool === 'wrk' ? toolVersion() : 'autocannon',
        taskset: pinServer.length > 0,
        serverCpu: pinServer.length ? 0 : 'any',
        loadCpu: pinLoad.length ? 1 : 'any',
        ...sizes,
        followsPerUser: data.options.followsPerUser,
        feedFollows: data.options.feedFollows,
        authorFollowers: data.options.authorFollowers,
        runs,
        duration,
        slices,
        warmup,
        connections,
        quick,
        serverEnv,
        idleRssMb: Object.fromEntries(servers.map((s) => [s.name, Math.round(s.rss())])),
      },
      seeding,
      scenarios: results,
      targets: evaluate(results, targets(backend, growthPosts, sizes.posts)),
      rss: { limitMb: RSS_LIMIT_MB, maxMb: rssCorkboard, pass: rssCorkboard <= RSS_LIMIT_MB },
      ...(Object.keys(suiteReport).length ? { suites: suiteReport } : {}),
    };
    log('');
    log(textTable(report));
    writeResults(undefined, report, markdown(report));
  } finally {
    for (const server of servers) await server.stop();
    for (const cleanup of cleanups.reverse()) await cleanup().catch((e: unknown) => log(`cleanup failed: ${String(e)}`));
  }
}

/**
 * The follow scenario's pairs: up to 1,000 followees drawn at random among ordinary users (none of the users the
 * scenarios rely on, at 10M posts ~100 posts each), and up to 500 signed-in users who follow none of them in the
 * seed, so that every pair is a new relation (a 201, never a 409).
 */
function followPairs(data: ReturnType<typeof generateDataset>, tokens: string[]): FollowSequence | undefined {
  const users = data.options.users;
  const firstOrdinary = 11 + data.options.manyAuthors;
  const signedIn = Math.min(tokens.length, users);
  // Followers from the signed-in users, followees from above them (or, in a small data set, the two halves).
  const lowest = signedIn < users - 1_000 ? signedIn + 1 : Math.floor((firstOrdinary + users) / 2) + 1;
  const random = prng(data.options.seed + 2);
  const followees = new Set<number>();
  for (let tries = 0; followees.size < 1_000 && tries < 100_000; tries++) {
    const u = lowest + Math.floor(random() * (users - lowest + 1));
    if (u !== data.celebrity) followees.add(u);
  }
  const followers: { id: number; token: string }[] = [];
  for (let u = firstOrdinary; u <= Math.min(signedIn, lowest - 1) && followers.length < 500; u++) {
    if (followees.has(u) || u === data.celebrity || u === data.returning) continue;
    const followed = data.followees.subarray(data.followOffsets[u] as number, data.followOffsets[u + 1] as number);
    if (followed.some((v) => followees.has(v))) continue;
    followers.push({ id: u, token: tokens[u - 1] as string });
  }
  if (followers.length === 0 || followees.size === 0) return undefined;
  // Pair 0 is the sanity check's; the load runs start at pair 1.
  return { start: 1, followers, followees: [...followees] };
}

/** Polls `done` every 50 ms until it holds, for at most `seconds`; says so in the log when it gives up. */
async function until(done: () => Promise<boolean>, seconds = 60): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  while (!(await done())) {
    if (Date.now() > deadline) {
      log(`  (gave up waiting after ${seconds} s)`);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * What a write scenario leaves behind runs on after its load stops: corkboard's fan-out worker still writing feed
 * entries for the posts it accepted, and on PostgreSQL dirty buffers for the checkpointer and perhaps an autovacuum
 * worker. All of it shares the server's CPU (the fan-out runs in the server process, pinned with the other
 * servers) or the machine's (PostgreSQL's processes), so whichever scenario ran next paid for it: on 2026-11-24,
 * with slices, the bare pg read that follows create-post in each sweep ran at 3,100 req/s and 51-59% busy, against
 * 5,300 and 94% when it ran 10 s later. This waits until the queue is empty, then runs the backend's own settling
 * (CHECKPOINT, no autovacuum worker), so the next scenario starts on a quiet machine.
 */
async function settleAfterWrites(queued: () => Promise<number>, backendSettle?: () => Promise<void>): Promise<void> {
  await until(async () => (await queued()) === 0);
  await backendSettle?.();
}

const today = () => new Date().toISOString().slice(0, 10);

/** Writes `<date>-<backend>[-kind][-quick].json` and `.md` into the results directory. */
function writeResults(kind: string | undefined, json: unknown, md: string): void {
  fs.mkdirSync(outDir, { recursive: true });
  const base = path.join(outDir, `${today()}-${backend}${kind ? `-${kind}` : ''}${quick ? '-quick' : ''}`);
  fs.writeFileSync(`${base}.json`, `${JSON.stringify(json, null, 2)}\n`);
  fs.writeFileSync(`${base}.md`, md);
  log(`written ${path.relative(root, base)}.json and .md`);
}

/** A kept seed is used for this long: its tokens are valid for seven days. */
const SEED_MAX_AGE_MS = 6 * 24 * 3600 * 1000;

/** What a kept seed depends on: the sizes and seed, the seeder and the migrations. */
function seedKey(data: ReturnType<typeof generateDataset>): string {
  const hash = createHash('sha256').update(JSON.stringify(data.options));
  const sources = ['bench/lib/seed.ts', 'bench/lib/dataset.ts', ...fs.readdirSync('src/db/migrations').map((f) => `src/db/migrations/${f}`)];
  for (const source of sources.sort()) hash.update(fs.readFileSync(source));
  return hash.digest('hex').slice(0, 16);
}

/**
 * PostgreSQL's `--reuse-seed`: the seeded database is kept as a template (`corkboard_seed_<key>`, with its seeding
 * result as the database's comment) and each run's database is copied from it (`CREATE DATABASE … TEMPLATE`).
 * Templates older than six days are dropped and seeded again.
 */
async function reusablePostgresSeed(name: string, data: ReturnType<typeof generateDataset>): Promise<SeedResult> {
  const template = `corkboard_seed_${seedKey(data)}`;
  const comment = await pgAdmin(async (c) =>
    (await c.query<{ comment: string | null }>('SELECT shobj_description(oid, \'pg_database\') AS comment FROM pg_database WHERE datname = $1', [template])).rows[0],
  );
  const kept = comment?.comment ? (JSON.parse(comment.comment) as SeedResult & { seededAt: string }) : undefined;
  if (kept && Date.now() - Date.parse(kept.seededAt) < SEED_MAX_AGE_MS) {
    log(`reusing the database seeded at ${kept.seededAt} (${template})`);
    await pgAdmin(async (c) => {
      await c.query(`DROP DATABASE IF EXISTS ${name}`);
      await c.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
    });
    return kept;
  }
  const result = await seedPostgres(dbUrl(name), data, log);
  await pgAdmin(async (c) => {
    await c.query(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`);
    await c.query(`CREATE DATABASE ${template} TEMPLATE ${name}`);
    await c.query(`COMMENT ON DATABASE ${template} IS ${pg.escapeLiteral(JSON.stringify({ ...result, seededAt: new Date().toISOString() }))}`);
  });
  return result;
}

/**
 * A pristine seeded SQLite database, kept by what determines its content (data options, migrations, seeder), and
 * copied into place; seeded (and kept) on first use. Its tokens are kept beside it, valid for seven days.
 */
async function reusableSeed(file: string, data: ReturnType<typeof generateDataset>): Promise<SeedResult> {
  const cacheDir = path.join(root, 'bench/.work/seed-cache');
  const cached = path.join(cacheDir, `sqlite-${seedKey(data)}.db`);
  const sidecar = `${cached}.json`;
  if (fs.existsSync(cached) && fs.existsSync(sidecar)) {
    const result = JSON.parse(fs.readFileSync(sidecar, 'utf8')) as SeedResult & { seededAt: string };
    if (Date.now() - Date.parse(result.seededAt) < SEED_MAX_AGE_MS) {
      log(`reusing the database seeded at ${result.seededAt} (${path.relative(root, cached)})`);
      fs.copyFileSync(cached, file);
      return result;
    }
  }
  const result = await seedSqlite(file, data, log);
  fs.mkdirSync(cacheDir, { recursive: true });
  fs.copyFileSync(file, cached);
  fs.writeFileSync(sidecar, JSON.stringify({ ...result, seededAt: new Date().toISOString() }));
  return result;
}

/** One request before any load: the scenario must answer with its expected status (and a full page). */
async function sanityCheck(scenario: Scenario, port: number): Promise<void> {
  const spec: RequestSpec = scenario.spec;
  const response = await fetch(`http://127.0.0.1:${port}${spec.path.replace('{id}', '1')}`, {
    method: spec.method,
    headers: spec.headers ?? {},
    ...(spec.body === undefined ? {} : { body: spec.body }),
  });
  const text = await response.text();
  const fail = (why: string) => {
    throw new Error(`scenario ${scenario.key}: ${why}\n${spec.method} ${spec.path} → ${response.status} ${text.slice(0, 500)}`);
  };
  if (response.status !== scenario.expect.status) fail(`expected status ${scenario.expect.status}`);
  if (scenario.expect.items !== undefined) {
    const body = JSON.parse(text) as unknown;
    const items = Array.isArray(body) ? body : (body as { data?: { items?: unknown[] } }).data?.items;
    if (!Array.isArray(items) || items.length !== scenario.expect.items) fail(`expected ${scenario.expect.items} items`);
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

function toolVersion(): string {
  try {
    const out = execFileSync('wrk', ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return out.split('\n')[0]?.split(' Copyright')[0]?.trim() ?? 'wrk';
  } catch (error) {
    // wrk --version prints its banner and exits non-zero.
    const out = (error as { stdout?: string }).stdout ?? '';
    return out.split('\n')[0]?.split(' Copyright')[0]?.trim() || 'wrk';
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
