import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { harmonicMix, MIX, percentile, type MixJob, type MixKind, type MixResult } from './mix.js';

/**
 * The scenarios of issue 26 that wrk cannot express: mixed traffic (single kinds, the mix's peak, the mix at 70%
 * of it), the mix against two processes, and a celebrity's post fanned out while ordinary users keep posting.
 * See bench/README.md.
 */

type Log = (line: string) => void;

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

/** Runs the mix client once (pinned like wrk), with the job written to a file (10,000 tokens exceed argv). */
export async function runMix(job: MixJob, pin: string[], workDir: string): Promise<MixResult> {
  const file = path.join(workDir, `mix-${process.pid}-${Math.random().toString(36).slice(2)}.json`);
  fs.writeFileSync(file, JSON.stringify(job));
  try {
    const argv = [...pin, process.execPath, 'bench/.work/dist/lib/mix-client.js', file];
    const { code, stdout, stderr } = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn(argv[0] as string, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      child.on('error', reject);
      child.on('close', (c) => resolve({ code: c ?? -1, stdout: out, stderr: err }));
    });
    const line = stdout.split('\n').find((l) => l.startsWith('BENCH_RESULT '));
    if (code !== 0 || !line) throw new Error(`mix client failed (exit ${code}): ${stderr || stdout}`);
    return JSON.parse(line.slice('BENCH_RESULT '.length)) as MixResult;
  } finally {
    fs.rmSync(file, { force: true });
  }
}

/** The single-kind runs: follows and unfollows run together (an unfollow takes back a follow the run made). */
const SINGLES: Partial<Record<MixKind, number>>[] = [
  { 'get-post': 1 },
  { 'first-page': 1 },
  { 'next-page': 1 },
  { feed: 1 },
  { 'create-post': 1 },
  { reply: 1 },
  { recommend: 1 },
  { follow: 1, unfollow: 1 },
];

export interface MixedReport {
  rounds: number;
  seconds: number;
  connections: number;
  /** Per round: req/s of each kind alone, the harmonic mix of those, the mix's peak and their ratio. */
  perRound: { alone: Partial<Record<MixKind, number>>; harmonic: number; peak: number; ratio: number; errors: number }[];
  alone: Partial<Record<MixKind, number>>;
  harmonic: number;
  peak: number;
  /** Median over rounds of peak ÷ harmonic, paired by round. */
  ratio: number;
  /** The mix in open loop at 70% of the (median) peak. */
  at70: MixResult & { rate: number };
  peakRuns: MixResult[];
  failures: string[];
}

export interface MixSetup {
  ports: number[];
  pin: string[];
  workDir: string;
  seconds: number;
  connections: number;
  rounds: number;
  base: Omit<MixJob, 'ports' | 'seconds' | 'warmup' | 'connections' | 'weights' | 'seed' | 'rate'>;
  /** Waits until what the writes left behind is done (fan-out queue empty, PostgreSQL checkpoint). */
  settle: () => Promise<void>;
  log: Log;
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

/**
 * Rounds of: every single kind alone, then the mix, each closed loop for `seconds` (the ratio mix ÷ harmonic is
 * paired by round, as the main harness pairs its ratios); then the mix once in open loop at 70% of its median peak.
 */
export async function mixedTraffic(setup: MixSetup): Promise<MixedReport> {
  const { log } = setup;
  let seed = 7_000;
  const job = (weights: Partial<Record<MixKind, number>>, rate?: number): MixJob => ({
    ...setup.base,
    ports: setup.ports,
    seconds: setup.seconds,
    warmup: 1,
    connections: setup.connections,
    weights,
    seed: seed++,
    ...(rate === undefined ? {} : { rate }),
  });
  const failures: string[] = [];
  const perRound: MixedReport['perRound'] = [];
  const peakRuns: MixResult[] = [];
  for (let round = 1; round <= setup.rounds; round++) {
    const alone: Partial<Record<MixKind, number>> = {};
    let errors = 0;
    for (const weights of SINGLES) {
      const result = await runMix(job(weights), setup.pin, setup.workDir);
      await setup.settle();
      for (const kind of Object.keys(weights) as MixKind[]) alone[kind] = result.rps;
      errors += result.errors;
      failures.push(...result.failures);
    }
    const peak = await runMix(job(MIX), setup.pin, setup.workDir);
    await setup.settle();
    peakRuns.push(peak);
    failures.push(...peak.failures);
    const harmonic = harmonicMix(MIX, alone);
    perRound.push({ alone, harmonic, peak: peak.rps, ratio: peak.rps / harmonic, errors: errors + peak.errors });
    log(`  mixed round ${round}: alone ${Object.entries(alone).map(([k, v]) => `${k} ${fmt(v)}`).join(', ')}; ` +
      `harmonic ${fmt(harmonic)}, mix ${fmt(peak.rps)} req/s (${(peak.rps / harmonic).toFixed(2)})${errors + peak.errors ? `, ERRORS ${errors + peak.errors}` : ''}`);
  }
  const alone: Partial<Record<MixKind, number>> = {};
  for (const kind of Object.keys(MIX) as MixKind[]) alone[kind] = median(perRound.map((r) => r.alone[kind] ?? 0));
  const peak = median(perRound.map((r) => r.peak));
  const rate = Math.max(1, Math.round(0.7 * peak));
  const at70 = await runMix(job(MIX, rate), setup.pin, setup.workDir);
  await setup.settle();
  failures.push(...at70.failures);
  log(`  mixed at 70% of peak (${fmt(rate)} req/s offered): ${fmt(at70.rps)} req/s, p99 by kind ` +
    Object.entries(at70.kinds).map(([k, v]) => `${k} ${v.p99.toFixed(1)}`).join(', ') + ' ms');
  return {
    rounds: setup.rounds,
    seconds: setup.seconds,
    connections: setup.connections,
    perRound,
    alone,
    harmonic: harmonicMix(MIX, alone),
    peak,
    ratio: median(perRound.map((r) => r.ratio)),
    at70: { ...at70, rate },
    peakRuns,
    failures: [...new Set(failures)].slice(0, 10),
  };
}

export interface CurvePoint {
  processes: number;
  /** Offered rate (open loop), or undefined for the closed-loop peak. */
  offered?: number;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

/**
 * The mix against one process and against two on the same database and the same CPU budget: the closed-loop peak
 * of each, then open-loop runs at fractions of the one-process peak, so the curves can be compared point by point.
 */
export async function processCurve(
  setups: { processes: number; setup: MixSetup }[],
  fractions: number[],
  log: Log,
): Promise<CurvePoint[]> {
  const points: CurvePoint[] = [];
  let reference: number | undefined;
  let seed = 9_000;
  for (const { processes, setup } of setups) {
    const job = (rate?: number): MixJob => ({
      ...setup.base,
      ports: setup.ports,
      seconds: setup.seconds,
      warmup: 1,
      connections: setup.connections,
      weights: MIX,
      seed: seed++,
      ...(rate === undefined ? {} : { rate }),
    });
    const peak = await runMix(job(), setup.pin, setup.workDir);
    await setup.settle();
    reference ??= peak.rps;
    points.push({ processes, rps: peak.rps, p50: peak.p50, p99: peak.p99, errors: peak.errors });
    log(`  ${processes} process${processes > 1 ? 'es' : ''}: peak ${fmt(peak.rps)} req/s, p50 ${peak.p50.toFixed(1)} p99 ${peak.p99.toFixed(1)} ms` +
      `${peak.errors ? `, ERRORS ${peak.errors}: ${peak.failures[0] ?? ''}` : ''}`);
    for (const fraction of fractions) {
      const offered = Math.round(fraction * reference);
      const r = await runMix(job(offered), setup.pin, setup.workDir);
      await setup.settle();
      points.push({ processes, offered, rps: r.rps, p50: r.p50, p99: r.p99, errors: r.errors });
      log(`    offered ${fmt(offered)}: ${fmt(r.rps)} req/s, p50 ${r.p50.toFixed(1)} p99 ${r.p99.toFixed(1)} ms${r.errors ? `, ERRORS ${r.errors}` : ''}`);
    }
  }
  return points;
}

export interface CelebrityReport {
  followers: number;
  /** Offered rate of the ordinary posts (from the many authors), per second. */
  ordinaryRate: number;
  /** POST by the celebrity: its own response time. */
  postMs: number;
  /** Until the post was in the feed read through the API (feeds merge the queue: at once). */
  apiVisibleMs: number;
  /** Until the last follower's feed entry was written (the fan-out's end). */
  lastFollowerMs: number;
  /** Ordinary posts created while the celebrity's fan-out ran: until a follower's feed entry was written. */
  ordinaryDuring: { posts: number; p50: number; p99: number; max: number };
  ordinaryBefore: { posts: number; p50: number; p99: number; max: number };
  /** Response times of the ordinary POSTs while the fan-out ran, and before it (a stalled writer shows here). */
  writeDuring: { requests: number; p50: number; p99: number; max: number };
  writeBefore: { requests: number; p50: number; p99: number; max: number };
  errors: number;
}

export interface CelebritySetup {
  port: number;
  celebrity: { id: number; token: string; followers: number; lastFollower: number };
  /** A follower of the celebrity who holds a token, for the API check. */
  reader: { id: number; token: string };
  /** Ordinary authors with a token and one follower each to check. */
  authors: { id: number; token: string; follower: number }[];
  /** Ordinary posts a second. */
  rate: number;
  /** Seconds of ordinary posting before the celebrity posts. */
  lead: number;
  /** Is the feed entry (user, post) written? */
  entryWritten: (user: number, post: number) => Promise<boolean>;
  log: Log;
}

const stats = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1) ?? 0 };
};

async function postAs(port: number, user: number, token: string, title: string): Promise<{ id?: number; ms: number; status: number }> {
  const started = performance.now();
  const response = await fetch(`http://127.0.0.1:${port}/users/${user}/posts`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ title, content: 'An ordinary notice about the market, the library and the weekend.', visibility: 'public' }),
  });
  const body = (await response.json()) as { id?: number };
  return { id: body.id, ms: performance.now() - started, status: response.status };
}

/** Polls `done` every 10 ms; answers the milliseconds since `since` when it first holds, or −1 after `limitMs`. */
async function lagUntil(since: number, done: () => Promise<boolean>, limitMs = 60_000): Promise<number> {
  for (;;) {
    if (await done()) return performance.now() - since;
    if (performance.now() - since > limitMs) return -1;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Ordinary users post at `rate` a second (open loop); after `lead` seconds the celebrity posts. Measured: when the
 * celebrity's post is in a follower's feed through the API and when the last follower's entry is written; for every
 * ordinary post, when a follower's entry is written; and the ordinary POSTs' response times, before and during the
 * celebrity's fan-out. Ordinary posting stops once the fan-out has ended (and at least `lead` seconds after it began).
 */
export async function celebrity(setup: CelebritySetup): Promise<CelebrityReport> {
  const { port, log } = setup;
  const writes: { at: number; ms: number }[] = [];
  const lags: { at: number; ms: number }[] = [];
  const pending: Promise<void>[] = [];
  let errors = 0;
  let stop = false;
  let n = 0;
  const ordinary = async () => {
    const author = setup.authors[n++ % setup.authors.length] as CelebritySetup['authors'][number];
    const at = performance.now();
    const r = await postAs(port, author.id, author.token, `Ordinary post ${n}`);
    if (r.status !== 201 || r.id === undefined) {
      errors++;
      return;
    }
    writes.push({ at, ms: r.ms });
    const created = performance.now();
    const lag = await lagUntil(created, () => setup.entryWritten(author.follower, r.id as number), 30_000);
    if (lag < 0) errors++;
    else lags.push({ at, ms: lag });
  };
  const started = performance.now();
  const poster = (async () => {
    for (let due = started; !stop; due += 1000 / setup.rate) {
      const wait = due - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      pending.push(ordinary());
    }
  })();

  await new Promise((resolve) => setTimeout(resolve, setup.lead * 1000));
  const celebrityAt = performance.now();
  const post = await postAs(port, setup.celebrity.id, setup.celebrity.token, 'A word from the celebrity');
  if (post.status !== 201 || post.id === undefined) throw new Error(`the celebrity's post failed: ${post.status}`);
  const postId = post.id;
  const api = lagUntil(celebrityAt, async () => {
    const response = await fetch(`http://127.0.0.1:${port}/users/${setup.reader.id}/feed?limit=5`, {
      headers: { authorization: `Bearer ${setup.reader.token}` },
    });
    const items = (await response.json()) as { id: number }[];
    return Array.isArray(items) && items.some((p) => p.id === postId);
  });
  const last = await lagUntil(celebrityAt, () => setup.entryWritten(setup.celebrity.lastFollower, postId));
  const fanoutEnd = performance.now();
  const apiMs = await api;
  // Keep posting a while after the fan-out, then stop and let the last checks finish.
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, setup.lead * 1000 - (fanoutEnd - celebrityAt))));
  stop = true;
  await poster;
  await Promise.all(pending);

  const inWindow = (x: { at: number }) => x.at >= celebrityAt && x.at <= fanoutEnd;
  const before = (x: { at: number }) => x.at < celebrityAt;
  const report: CelebrityReport = {
    followers: setup.celebrity.followers,
    ordinaryRate: setup.rate,
    postMs: post.ms,
    apiVisibleMs: apiMs,
    lastFollowerMs: last,
    ordinaryDuring: { posts: lags.filter(inWindow).length, ...stats(lags.filter(inWindow).map((l) => l.ms)) },
    ordinaryBefore: { posts: lags.filter(before).length, ...stats(lags.filter(before).map((l) => l.ms)) },
    writeDuring: { requests: writes.filter(inWindow).length, ...stats(writes.filter(inWindow).map((w) => w.ms)) },
    writeBefore: { requests: writes.filter(before).length, ...stats(writes.filter(before).map((w) => w.ms)) },
    errors,
  };
  log(`  celebrity (${report.followers.toLocaleString('en-US')} followers): POST ${report.postMs.toFixed(1)} ms, in a feed via the API after ` +
    `${report.apiVisibleMs.toFixed(0)} ms, last follower's entry after ${report.lastFollowerMs.toFixed(0)} ms`);
  log(`  ordinary posts during the fan-out: ${report.ordinaryDuring.posts}, entry written p50 ${report.ordinaryDuring.p50.toFixed(0)} ` +
    `max ${report.ordinaryDuring.max.toFixed(0)} ms; POST p99 ${report.writeDuring.p99.toFixed(1)} max ${report.writeDuring.max.toFixed(1)} ms ` +
    `(before: POST p99 ${report.writeBefore.p99.toFixed(1)} max ${report.writeBefore.max.toFixed(1)} ms)${errors ? `; ERRORS ${errors}` : ''}`);
  return report;
}

export interface SuitesReport {
  mixed?: MixedReport;
  processes?: CurvePoint[];
  celebrity?: CelebrityReport;
  /** Invariants re-checked after the suites' writes (counters against rows): violations by name. */
  invariants?: Record<string, number>;
}

export interface SuiteTarget {
  title: string;
  value: string;
  pass: boolean;
}

/** Issue 26's targets that the suites measure (growth and many authors are ratios in the main table). */
export function suiteTargets(s: SuitesReport): SuiteTarget[] {
  const out: SuiteTarget[] = [];
  if (s.mixed) {
    const m = s.mixed;
    const errors = m.perRound.reduce((a, r) => a + r.errors, 0);
    out.push({ title: 'Mixed traffic ≥ 0.80 × the harmonic mix of the single kinds', value: m.ratio.toFixed(2), pass: m.ratio >= 0.8 && errors === 0 });
    let worst: [string, number] = ['', 0];
    for (const [k, v] of Object.entries(m.at70.kinds)) if (v.p99 > worst[1]) worst = [k, v.p99];
    out.push({
      title: 'Mixed traffic at 70% of its peak: p99 of every kind ≤ 50 ms',
      value: `${worst[1].toFixed(1)} ms (${worst[0]})`,
      pass: worst[1] <= 50 && m.at70.errors === 0,
    });
  }
  if (s.celebrity) {
    const c = s.celebrity;
    out.push({ title: "Celebrity's post in the last follower's feed ≤ 5 s", value: `${(c.lastFollowerMs / 1000).toFixed(2)} s`, pass: c.lastFollowerMs >= 0 && c.lastFollowerMs <= 5000 });
    out.push({
      title: "An ordinary post reaches followers' feeds ≤ 1 s during the fan-out",
      value: `max ${c.ordinaryDuring.max.toFixed(0)} ms (${c.ordinaryDuring.posts} posts)`,
      pass: c.ordinaryDuring.posts > 0 && c.ordinaryDuring.max <= 1000 && c.errors === 0,
    });
    out.push({
      title: 'No writer stalled > 100 ms by the fan-out (ordinary POST response time)',
      value: `max ${c.writeDuring.max.toFixed(1)} ms`,
      pass: c.writeDuring.requests > 0 && c.writeDuring.max <= 100,
    });
  }
  if (s.processes) {
    const errors = s.processes.reduce((a, p) => a + p.errors, 0);
    out.push({ title: 'Two processes on one database: every answer as expected', value: `${errors} errors`, pass: errors === 0 });
  }
  if (s.invariants) {
    const bad = Object.entries(s.invariants).filter(([, n]) => n !== 0);
    out.push({ title: 'Counters still match the rows after the suites', value: bad.length ? bad.map(([k, n]) => `${k}: ${n}`).join(', ') : 'all', pass: bad.length === 0 });
  }
  return out;
}

const f0 = (n: number) => Math.round(n).toLocaleString('en-US');
const f1 = (n: number) => n.toFixed(1);

export function suitesMarkdown(s: SuitesReport): string {
  const lines: string[] = [];
  if (s.mixed) {
    const m = s.mixed;
    lines.push(
      '## Mixed traffic',
      '',
      `${m.rounds} round(s) of ${m.seconds} s runs, ${m.connections} connections, closed loop: each kind alone, then the mix ` +
        `(${Object.entries(MIX).map(([k, w]) => `${k} ${w}%`).join(', ')}). Ratio = mix ÷ harmonic mix of the kinds alone, paired by round.`,
      '',
      '| kind | alone req/s | in the mix at 70%: requests | p50 ms | p99 ms | max ms | errors |',
      '|---|---:|---:|---:|---:|---:|---:|',
      ...(Object.keys(MIX) as MixKind[]).map((k) => {
        const v = m.at70.kinds[k];
        return `| ${k} | ${f0(m.alone[k] ?? 0)} | ${v ? f0(v.requests) : ''} | ${v ? f1(v.p50) : ''} | ${v ? f1(v.p99) : ''} | ${v ? f1(v.max) : ''} | ${v?.errors ?? ''} |`;
      }),
      '',
      `Harmonic mix ${f0(m.harmonic)} req/s; the mix's peak ${f0(m.peak)} req/s (per round: ${m.perRound.map((r) => `${f0(r.peak)} ÷ ${f0(r.harmonic)} = ${r.ratio.toFixed(2)}`).join('; ')}); ` +
        `at 70% (${f0(m.at70.rate)} req/s offered, open loop, latency from when each request was due): ${f0(m.at70.rps)} req/s, p50 ${f1(m.at70.p50)} ms, p99 ${f1(m.at70.p99)} ms.`,
      ...(m.failures.length ? ['', `Unexpected answers (first few): ${m.failures.map((x) => `\`${x}\``).join('; ')}`] : []),
      '',
    );
  }
  if (s.processes) {
    lines.push(
      '## Two processes on one PostgreSQL database',
      '',
      'The mix against one corkboard process and against two behind the client\'s round-robin, both pinned to the same one CPU ' +
        '(the same CPU budget). Closed-loop peak, then open loop at fractions of the one-process peak.',
      '',
      '| processes | offered req/s | served req/s | p50 ms | p99 ms | errors |',
      '|---:|---:|---:|---:|---:|---:|',
      ...s.processes.map((p) => `| ${p.processes} | ${p.offered === undefined ? 'peak (closed loop)' : f0(p.offered)} | ${f0(p.rps)} | ${f1(p.p50)} | ${f1(p.p99)} | ${p.errors} |`),
      '',
    );
  }
  if (s.celebrity) {
    const c = s.celebrity;
    lines.push(
      '## A celebrity posts',
      '',
      `A user with ${f0(c.followers)} followers posts while the many authors post ${c.ordinaryRate} times a second (open loop). ` +
        `The celebrity's POST took ${f1(c.postMs)} ms; the post was in a follower's feed through the API after ${f0(c.apiVisibleMs)} ms ` +
        `(feeds merge queued posts), and the last follower's feed entry was written after ${f0(c.lastFollowerMs)} ms.`,
      '',
      '| ordinary posts | count | entry written p50 ms | p99 ms | max ms | POST p50 ms | POST p99 ms | POST max ms |',
      '|---|---:|---:|---:|---:|---:|---:|---:|',
      `| before the celebrity's post | ${c.ordinaryBefore.posts} | ${f0(c.ordinaryBefore.p50)} | ${f0(c.ordinaryBefore.p99)} | ${f0(c.ordinaryBefore.max)} | ${f1(c.writeBefore.p50)} | ${f1(c.writeBefore.p99)} | ${f1(c.writeBefore.max)} |`,
      `| during its fan-out | ${c.ordinaryDuring.posts} | ${f0(c.ordinaryDuring.p50)} | ${f0(c.ordinaryDuring.p99)} | ${f0(c.ordinaryDuring.max)} | ${f1(c.writeDuring.p50)} | ${f1(c.writeDuring.p99)} | ${f1(c.writeDuring.max)} |`,
      '',
    );
  }
  const targets = suiteTargets(s);
  if (targets.length) {
    lines.push('| suite target | measured | result |', '|---|---:|---|', ...targets.map((t) => `| ${t.title} | ${t.value} | ${t.pass ? 'pass' : '**miss**'} |`), '');
  }
  return lines.join('\n');
}
