import { RSS_LIMIT_MB, type Scenario, type TargetSpec } from './scenarios.js';
import type { LoadResult } from './load.js';
import type { SeedResult } from './seed.js';
import { suitesMarkdown, suiteTargets, type SuitesReport } from './suites.js';

export interface ScenarioResult {
  key: string;
  title: string;
  target: Scenario['target'];
  method: string;
  path: string;
  runs: LoadResult[];
  /** Medians over the measured runs. */
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  /** Median server CPU time per request (µs): less sensitive to a noisy machine than req/s. */
  cpuUs: number;
  /** Median share of each run the server was on CPU (see LoadResult.busy). */
  busy: number;
  /** Median KB per request read from storage by the server process (see LoadResult.diskKb). */
  diskKb: number;
  rssMaxMb: number;
  versus?: string;
  /** Median over the rounds of this scenario's req/s ÷ the `versus` scenario's in the same round (see `paired`). */
  ratio?: number;
}

export interface TargetResult extends TargetSpec {
  /** Median over the rounds of the scenario's req/s ÷ the baseline's in the same round: what is judged. */
  ratio: number;
  /** The ratio in each round, in order. */
  roundRatios: number[];
  /** The scenario's median req/s ÷ the baseline's median req/s, which may come from different rounds: shown, not judged. */
  ratioOfMedians: number;
  /** The same paired comparison by server CPU time per request (baseline ÷ scenario): informative, not judged. */
  cpuRatio: number;
  pass: boolean;
}

export interface Report {
  meta: Record<string, unknown>;
  seeding: Omit<SeedResult, 'tokens' | 'cursorSecret'>;
  scenarios: ScenarioResult[];
  targets: TargetResult[];
  rss: { limitMb: number; maxMb: number; pass: boolean };
  /** Issue 26's suites (mixed traffic, two processes, a celebrity), when run. */
  suites?: SuitesReport;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  if (sorted.length === 0) return Number.NaN;
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export function summarise(scenario: Scenario, runs: LoadResult[], rssMaxMb: number): ScenarioResult {
  return {
    key: scenario.key,
    title: scenario.title,
    target: scenario.target,
    method: scenario.spec.method,
    path: scenario.spec.path,
    runs,
    rps: median(runs.map((r) => r.rps)),
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    errors: runs.reduce((sum, r) => sum + r.errors, 0),
    cpuUs: median(runs.map((r) => r.cpuUs ?? Number.NaN)),
    busy: median(runs.map((r) => r.busy ?? Number.NaN)),
    diskKb: median(runs.map((r) => r.diskKb ?? Number.NaN)),
    rssMaxMb,
    ...(scenario.versus ? { versus: scenario.versus } : {}),
  };
}

/**
 * One round's figures for a scenario from the slices it was run in (see `--slices` in run.ts): requests and
 * seconds add up, so req/s is the slices' total requests over their total time; server CPU and disk reads add up
 * per request the same way; latency percentiles are the median of the slices' (wrk gives no histogram to merge).
 */
export function mergeSlices(slices: LoadResult[]): LoadResult {
  if (slices.length === 1) return slices[0] as LoadResult;
  const total = (value: (r: LoadResult) => number) => slices.reduce((sum, r) => sum + value(r), 0);
  const requests = total((r) => r.requests);
  const seconds = total((r) => r.seconds);
  const cpuSeconds = total((r) => ((r.cpuUs ?? Number.NaN) * r.requests) / 1e6);
  return {
    requests,
    seconds,
    rps: requests / seconds,
    p50: median(slices.map((r) => r.p50)),
    p99: median(slices.map((r) => r.p99)),
    errors: total((r) => r.errors),
    cpuUs: (cpuSeconds * 1e6) / requests,
    busy: cpuSeconds / seconds,
    diskKb: total((r) => (r.diskKb ?? Number.NaN) * r.requests) / requests,
  };
}

/**
 * `a ÷ b` in each round, from the runs of two scenarios measured in the same rounds (run i of every scenario is
 * in round i, seconds apart). A ratio is taken within a round before the median over rounds because the machine's
 * speed drifts between rounds far more than within one: in one run on 2026-11-24 the constant route cost 27 µs of
 * CPU a request in round 1 and 57 µs in round 2. A ratio of the two medians can pair one scenario's fast round
 * with the other's slow one, which the paired median does not.
 */
export function paired(a: LoadResult[], b: LoadResult[], value: (r: LoadResult) => number): number[] {
  return a.slice(0, b.length).map((run, i) => value(run) / value(b[i] as LoadResult));
}

export function addRatios(results: ScenarioResult[]): void {
  const byKey = new Map(results.map((r) => [r.key, r]));
  for (const r of results) {
    const base = r.versus ? byKey.get(r.versus) : undefined;
    if (base) r.ratio = median(paired(r.runs, base.runs, (x) => x.rps));
  }
}

export function evaluate(results: ScenarioResult[], specs: TargetSpec[]): TargetResult[] {
  const byKey = new Map(results.map((r) => [r.key, r]));
  return specs.flatMap((spec) => {
    const a = byKey.get(spec.scenario);
    const b = byKey.get(spec.baseline);
    if (!a || !b) return [];
    if (spec.absolute) {
      const { rps, p99Ms } = spec.absolute;
      const pass = a.rps >= rps && a.p99 <= p99Ms && a.errors === 0;
      return [{ ...spec, ratio: a.rps, roundRatios: a.runs.map((r) => r.rps), ratioOfMedians: a.rps, cpuRatio: Number.NaN, pass }];
    }
    const roundRatios = paired(a.runs, b.runs, (x) => x.rps);
    const ratio = median(roundRatios);
    // CPU time is per request, so the baseline's is the numerator.
    const cpuRatio = median(paired(b.runs, a.runs, (x) => x.cpuUs ?? Number.NaN));
    const pass = ratio >= spec.min && a.errors === 0 && b.errors === 0;
    return [{ ...spec, ratio, roundRatios, ratioOfMedians: a.rps / b.rps, cpuRatio, pass }];
  });
}

const perRound = (t: TargetResult) => t.roundRatios.map((r) => fmt(r, 2)).join(' ');
const fmtDisk = (kb: number) => (Number.isNaN(kb) ? '' : fmt(kb, 1));
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

function pad(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ')).join('\n');
}

export function textTable(report: Report): string {
  const rows = [['scenario', 'req/s', 'p50 ms', 'p99 ms', 'ratio', 'vs', 'CPU µs/req', 'busy', 'disk KB/req', 'RSS MB', 'errors']];
  for (const r of report.scenarios) {
    rows.push([r.key, fmt(r.rps), fmt(r.p50, 2), fmt(r.p99, 2), r.ratio === undefined ? '' : fmt(r.ratio, 2), r.versus ?? '', fmt(r.cpuUs), `${fmt(r.busy * 100)}%`, fmtDisk(r.diskKb), fmt(r.rssMaxMb), String(r.errors)]);
  }
  const targets = [['target', 'ratio', 'min', 'result', 'CPU ratio', 'per round', 'of medians']];
  for (const t of report.targets) {
    targets.push([t.title, fmt(t.ratio, 2), fmt(t.min, 2), t.pass ? 'PASS' : 'MISS', fmt(t.cpuRatio, 2), perRound(t), fmt(t.ratioOfMedians, 2)]);
  }
  targets.push([`corkboard RSS ≤ ${report.rss.limitMb} MB in every scenario`, `${fmt(report.rss.maxMb)} MB`, '', report.rss.pass ? 'PASS' : 'MISS', '', '', '']);
  for (const t of report.suites ? suiteTargets(report.suites) : []) targets.push([t.title, t.value, '', t.pass ? 'PASS' : 'MISS', '', '', '']);
  return `${pad(rows)}\n\n${pad(targets)}\n`;
}

export function markdown(report: Report): string {
  const m = report.meta;
  const lines = [
    `# Benchmark: ${String(m.backend)}, ${String(m.date)}`,
    '',
    `${fmt(Number(m.users))} users, ${fmt(Number(m.posts))} posts, ${fmt(Number(report.seeding.rows.feed_entries ?? 0))} feed entries, ` +
      `${fmt(Number(m.boards))} boards; seeded in ${fmt(report.seeding.seconds, 1)} s. ` +
      `Load: ${String(m.loadTool)}, ${String(m.connections)} connections, ${String(m.runs)} × ${String(m.duration)} s per scenario ` +
      `${Number(m.slices ?? 1) > 1 ? `(each round in ${String(m.slices)} interleaved slices) ` : ''}after ${String(m.warmup)} s warm-up; medians. Server pinned to CPU ${String(m.serverCpu)}, load generator to CPU ${String(m.loadCpu)}. ` +
      (m.serverEnv && Object.keys(m.serverEnv).length ? `Corkboard's settings: ${Object.entries(m.serverEnv as Record<string, string>).map(([k, v]) => `${k}=${v}`).join(', ')}. ` : '') +
      `${String(m.cpuModel)}, ${String(m.cpus)} CPUs, Node ${String(m.node)}, commit ${String(m.commit)}.`,
    '',
    '| scenario | req/s | p50 ms | p99 ms | ratio | vs | CPU µs/req | busy | disk KB/req | RSS MB | errors |',
    '|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|',
    ...report.scenarios.map(
      (r) =>
        `| ${r.title} | ${fmt(r.rps)} | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} | ${r.ratio === undefined ? '' : fmt(r.ratio, 2)} | ${r.versus ?? ''} | ${fmt(r.cpuUs)} | ${fmt(r.busy * 100)}% | ${fmtDisk(r.diskKb)} | ${fmt(r.rssMaxMb)} | ${r.errors} |`,
    ),
    '',
    'busy: share of each run the server process spent on CPU; well under 100% means the load generator (or the',
    "machine's other work) held it back, and that scenario's req/s, and the ratios built on it, understate the server.",
    'disk KB/req: what the server process read from storage instead of the page cache (its database files are read',
    'into the page cache before every run; on PostgreSQL the reads are done by its own processes and not shown).',
    '',
    'ratio: the median over the rounds of the two req/s measured in the same round; per round: each of them;',
    'of medians: the median req/s ÷ the median req/s, which can pair different rounds (shown, not judged).',
    '',
    '| target | ratio | result | CPU ratio | per round | of medians |',
    '|---|---:|---|---:|---|---:|',
    ...report.targets.map(
      (t) => `| ${t.title} | ${fmt(t.ratio, 2)} | ${t.pass ? 'pass' : '**miss**'} | ${fmt(t.cpuRatio, 2)} | ${perRound(t)} | ${fmt(t.ratioOfMedians, 2)} |`,
    ),
    `| corkboard RSS ≤ ${RSS_LIMIT_MB} MB in every scenario | ${fmt(report.rss.maxMb)} MB | ${report.rss.pass ? 'pass' : '**miss**'} | | | |`,
    '',
    ...(report.suites ? [suitesMarkdown(report.suites)] : []),
  ];
  return lines.join('\n');
}
