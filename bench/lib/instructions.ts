import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { promisify } from 'node:util';
import { randomPaths, type RequestSpec } from './load.js';
import { prng } from './dataset.js';

/**
 * Instructions per request, counted by valgrind's callgrind (`npm run bench -- --instructions`).
 *
 * Requests per second on a shared 2-CPU machine drift by ±30% between runs of the same code (steal time, the
 * other CPU's neighbours), so a change worth 5% cannot be seen by timing. Callgrind counts the instructions a
 * process executes, whatever else the machine is doing: the same code gives the same count to within ~0.2%. What
 * it counts is user-space work only (not the kernel's share of socket I/O, which both corkboard and a baseline pay
 * alike), so a ratio of counts is the part of a req/s ratio that the service's own code decides.
 *
 * Each server runs under callgrind with counting off; a scenario is warmed with `warm` requests (so that the JIT
 * has settled), then counted over `count` requests, and the total of the main thread (the event loop: V8's
 * concurrent compiler and GC helpers run on threads of their own) is divided by the count.
 */

/** The command prefix that runs a server under callgrind with counting off; dumps go to `dir`. */
export function callgrindPrefix(dir: string): string[] {
  return ['valgrind', '--tool=callgrind', '--separate-threads=yes', '--instr-atstart=no', `--callgrind-out-file=${path.join(dir, 'callgrind.%p')}`];
}

/**
 * vgdb (behind callgrind_control) finds a process by pipes named after $USER and $HOST, read from the environment
 * on both sides: CI shells may set no user, and corkboard's HOST is its listen address. Every server and every
 * control command gets the same values (the baselines listen on 127.0.0.1 whatever HOST says).
 */
export const CALLGRIND_ENV = { USER: process.env.USER ?? 'root', LOGNAME: process.env.LOGNAME ?? process.env.USER ?? 'root', HOST: '127.0.0.1' };

const exec = promisify(execFile);
const control = (pid: number, ...args: string[]) => exec('callgrind_control', [...args, String(pid)], { env: { ...process.env, ...CALLGRIND_ENV } });

/** `count` requests of one shape, `concurrency` at a time over keep-alive connections; answers the failures. */
export async function fixedLoad(spec: RequestSpec, port: number, count: number, seed: number, concurrency = 10): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  // Seeded, so that every run counts the same requests.
  const nextPath = randomPaths(spec, prng(seed));
  // A new value of `uniqueHeader` on every request (as the wrk script sends it): without it an Idempotency-Key
  // scenario would count the plain create, or replays.
  const run = `${seed}-${process.pid}-${Date.now()}`;
  const headersOf = (n: number) => (spec.uniqueHeader === undefined ? (spec.headers ?? {}) : { ...spec.headers, [spec.uniqueHeader]: `${run}-${n}` });
  let sent = 0;
  let failed = 0;
  const one = (n: number) =>
    new Promise<void>((resolve) => {
      const request = http.request(
        { host: '127.0.0.1', port, method: spec.method, path: nextPath(), agent, headers: headersOf(n) },
        (response) => {
          if ((response.statusCode ?? 500) >= 400) failed += 1;
          response.resume();
          response.on('end', resolve);
        },
      );
      request.on('error', () => {
        failed += 1;
        resolve();
      });
      request.end(spec.body);
    });
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (sent < count) {
        sent += 1;
        await one(sent);
      }
    }),
  );
  agent.destroy();
  return failed;
}

/**
 * The `totals:` of main-thread dump number `n` of `pid` in `dir` (callgrind.<pid>.<n>-01; thread 1 is the main
 * thread). callgrind_control returns once the dump is requested, so this waits until the file is complete (its
 * `totals:` line is written last).
 */
async function mainThreadTotal(dir: string, pid: number, n: number): Promise<number> {
  const file = path.join(dir, `callgrind.${pid}.${n}-01`);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const total = fs.existsSync(file) ? /^totals: (\d+)$/m.exec(fs.readFileSync(file, 'utf8'))?.[1] : undefined;
    if (total !== undefined) return Number(total);
    if (Date.now() > deadline) throw new Error(`no complete callgrind dump ${file}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

export interface InstructionCount {
  /** Main-thread instructions per request. */
  perRequest: number;
  requests: number;
  failed: number;
}

/** Dumps requested so far, per server process: callgrind numbers them from 1. */
const dumps = new Map<number, number>();

/** Warms one scenario on a server running under callgrind, then counts `count` requests. */
export async function countInstructions(
  server: { pid: number; port: number },
  spec: RequestSpec,
  dir: string,
  { warm, count, seed }: { warm: number; count: number; seed: number },
): Promise<InstructionCount> {
  let failed = await fixedLoad(spec, server.port, warm, seed);
  await control(server.pid, '--instr=on');
  failed += await fixedLoad(spec, server.port, count, seed + 1);
  await control(server.pid, '--instr=off');
  await control(server.pid, '--dump');
  const dump = (dumps.get(server.pid) ?? 0) + 1;
  dumps.set(server.pid, dump);
  return { perRequest: (await mainThreadTotal(dir, server.pid, dump)) / count, requests: count, failed };
}

export interface InstructionRow {
  key: string;
  title: string;
  perRequest: number;
  failed: number;
  versus?: string;
  /** The versus scenario's count ÷ this one's: the throughput ratio if time followed instructions. */
  ratio?: number;
}

export interface InstructionTarget {
  title: string;
  scenario: string;
  baseline: string;
  min: number;
  ratio: number;
  /** Undefined where the two sides answer unlike responses: shown, not judged (see TargetSpec.unlikeResponses). */
  pass?: boolean;
}

/** Rows with ratios, and the targets judged on instruction ratios. */
export function instructionResults(
  scenarios: Array<{ key: string; title: string; versus?: string }>,
  counts: Map<string, InstructionCount>,
  targetSpecs: Array<{ title: string; scenario: string; baseline: string; min: number; unlikeResponses?: true; absolute?: unknown }>,
): { rows: InstructionRow[]; targets: InstructionTarget[] } {
  const per = (key: string) => counts.get(key)?.perRequest ?? Number.NaN;
  const rows = scenarios.map((s) => ({
    key: s.key,
    title: s.title,
    perRequest: per(s.key),
    failed: counts.get(s.key)?.failed ?? 0,
    ...(s.versus ? { versus: s.versus, ratio: per(s.versus) / per(s.key) } : {}),
  }));
  const targets = targetSpecs
    // A floor on req/s and p99 says nothing about instructions.
    .filter((t) => counts.has(t.scenario) && counts.has(t.baseline) && t.absolute === undefined)
    .map(({ unlikeResponses, absolute: _absolute, ...t }) => {
      const ratio = per(t.baseline) / per(t.scenario);
      return unlikeResponses ? { ...t, ratio } : { ...t, ratio, pass: ratio >= t.min && (counts.get(t.scenario)?.failed ?? 0) === 0 };
    });
  return { rows, targets };
}

/** The rows and targets as a Markdown table (printed and written beside the JSON). */
export function instructionMarkdown(rows: InstructionRow[], targets: InstructionTarget[]): string {
  const n = (x: number) => Math.round(x).toLocaleString('en-US');
  const lines = [
    '| scenario | instructions / request | ratio | vs | failed |',
    '|---|---:|---:|---|---:|',
    ...rows.map((r) => `| ${r.title} | ${n(r.perRequest)} | ${r.ratio === undefined ? '' : r.ratio.toFixed(2)} | ${r.versus ?? ''} | ${r.failed} |`),
    '',
    '| target (on instruction ratios) | ratio | min | result |',
    '|---|---:|---:|---|',
    ...targets.map(
      (t) => `| ${t.title} | ${t.ratio.toFixed(2)} | ${t.min.toFixed(2)} | ${t.pass === undefined ? 'not judged: unlike responses' : t.pass ? 'pass' : '**miss**'} |`,
    ),
  ];
  return `${lines.join('\n')}\n`;
}
