import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/**
 * One load run: wrk when installed (C, LuaJIT scripts for bodies, headers and random ids), else autocannon in a
 * separate Node process. Either way the load generator runs pinned to its own CPU (when taskset exists), against
 * 127.0.0.1, for a fixed time, and reports the same figures.
 */

export interface RequestSpec {
  method: 'GET' | 'POST';
  /** May contain `{id}`: replaced on every request by a random public post id in 1..idMax. */
  path: string;
  idMax?: number;
  headers?: Record<string, string>;
  body?: string;
  /**
   * Requests that differ in path and headers (e.g. many users, each with their own token): each request picks one
   * at random and uses it in place of `path` and on top of `headers`. `path` is still what the sanity check sends.
   */
  variants?: { path: string; headers: Record<string, string> }[];
  /**
   * A header whose value is new on every request (`<run>-<n>`), e.g. an Idempotency-Key for creates that must not
   * replay. wrk and the instruction counts (lib/instructions.ts), not autocannon.
   */
  uniqueHeader?: string;
  /**
   * Follows that never repeat (the follow scenario): request n of a load run is pair `start + n` of `followers` ×
   * `followees` (see followRequest), sent as the follower with their token. `path`, `headers` and `body` are pair
   * `start - 1`, which the sanity check sends; the harness moves `start` past the pairs each run used. With
   * `action: 'block'` each request is a block instead (the block scenario).
   */
  follows?: FollowSequence;
}

export interface FollowSequence {
  start: number;
  /** Users with a bearer token, none of whom follows any of `followees` in the seed (blocks: who block). */
  followers: { id: number; token: string }[];
  /** Blocks: the users blocked, each followed by and following every one of `followers` in the seed. */
  followees: number[];
  /**
   * 'block': pair n is `POST /users/{follower}/blocks` naming the followee, walked diagonally (see followRequest).
   * Default: a follow.
   */
  action?: 'block';
}

/**
 * Pair n of a follow sequence as a request: follower i = n mod |followers| names followee (i + ⌊n / |followers|⌋) mod
 * |followees|. With at least as many followees as followers, and fewer requests in flight than followers, requests in
 * flight together name different users on both sides, and n below |followers| × |followees| never names a pair twice.
 * Issue 45 states the follow figure for random pairs; until 11-28 follows walked one followee for |followers|
 * requests in a row, which on PostgreSQL measured 50 follows waiting on that one followee's row (a popular-user shape).
 * A block (`action: 'block'`) names the same pair the other way round: `POST /users/{follower}/blocks`.
 * The wrk script does the same in Lua.
 */
export function followRequest(seq: FollowSequence, n: number): { path: string; headers: Record<string, string>; body: string } {
  const i = n % seq.followers.length;
  const round = Math.floor(n / seq.followers.length);
  const follower = seq.followers[i] as { id: number; token: string };
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${follower.token}` };
  const followee = seq.followees[(i + round) % seq.followees.length] as number;
  if (seq.action === 'block') return { path: `/users/${follower.id}/blocks`, headers, body: JSON.stringify({ id: followee }) };
  return { path: `/users/${followee}/followers`, headers, body: JSON.stringify({ id: follower.id }) };
}

/**
 * The request paths of a spec: its path as it is, or with `{id}` replaced on every call by a random public post id
 * in 1..idMax (ids that are multiples of 10 are not public: step to the id below). The wrk script does the same in
 * Lua; the Node load generators (autocannon, the instruction counter) call this.
 */
export function randomPaths(spec: RequestSpec, random: () => number = Math.random): () => string {
  if (!spec.path.includes('{id}')) return () => spec.path;
  const [prefix, suffix] = spec.path.split('{id}') as [string, string];
  const idMax = spec.idMax ?? 1;
  return () => {
    let id = 1 + Math.floor(random() * idMax);
    if (id % 10 === 0) id -= 1;
    return `${prefix}${id}${suffix}`;
  };
}

export interface LoadResult {
  requests: number;
  seconds: number;
  rps: number;
  /** Latency percentiles in milliseconds. */
  p50: number;
  p99: number;
  /** Non-2xx/3xx answers, socket errors and timeouts. */
  errors: number;
  /** Server CPU time (user + system) per completed request, in µs; filled in by the harness. */
  cpuUs?: number;
  /**
   * Share of the run the server spent on CPU (0–1); filled in by the harness. Well under 1 means the server was
   * not the bottleneck (the load generator was starved, or the server waited on something), so its req/s
   * understates what it can serve.
   */
  busy?: number;
  /**
   * KB per completed request that the server process read from storage rather than the page cache; filled in by
   * the harness. Near 0 when its database was in memory, as it is on a machine under steady load.
   */
  diskKb?: number;
}

export interface LoadOptions {
  port: number;
  seconds: number;
  connections: number;
  /** Command prefix that pins the generator, e.g. ['taskset', '-c', '1'] (empty when taskset is missing). */
  pin: string[];
  workDir: string;
}

export type LoadTool = 'wrk' | 'autocannon';

const luaString = (s: string) => {
  for (let level = 0; ; level++) {
    const eq = '='.repeat(level);
    if (!s.includes(`]${eq}]`)) return `[${eq}[${s}]${eq}]`;
  }
};

/** The Lua script for one request shape; `done` prints one JSON line that the harness parses. */
export function wrkScript(spec: RequestSpec): string {
  const headers = Object.entries(spec.headers ?? {})
    .map(([k, v]) => `[ ${luaString(k)} ] = ${luaString(v)}`)
    .join(', ');
  const lines = [
    `local method = ${luaString(spec.method)}`,
    `local headers = { ${headers} }`,
    `local body = ${spec.body === undefined ? 'nil' : luaString(spec.body)}`,
  ];
  if (spec.follows) {
    const seq = spec.follows;
    lines.push(
      `local start = ${seq.start}`,
      `local followers = { ${seq.followers.map((f) => `{ ${f.id}, ${luaString(f.token)} }`).join(', ')} }`,
      `local followees = { ${seq.followees.join(', ')} }`,
      'local n = 0',
      'request = function()',
      '  local k = start + n',
      '  n = n + 1',
      '  local i = k % #followers',
      '  local f = followers[i + 1]',
      '  local h = { ["content-type"] = "application/json", ["authorization"] = "Bearer " .. f[2] }',
      '  local e = followees[((i + math.floor(k / #followers)) % #followees) + 1]',
      seq.action === 'block'
        ? '  return wrk.format("POST", "/users/" .. f[1] .. "/blocks", h, \'{"id":\' .. e .. "}")'
        : '  return wrk.format("POST", "/users/" .. e .. "/followers", h, \'{"id":\' .. f[1] .. "}")',
      'end',
    );
  } else if (spec.variants?.length) {
    lines.push(
      'local variants = {',
      ...spec.variants.map((v) => `  { ${luaString(v.path)}, { ${Object.entries(v.headers).map(([k, x]) => `[ ${luaString(k)} ] = ${luaString(x)}`).join(', ')} } },`),
      '}',
      'local requests = {}',
      'init = function(args)',
      '  for i, v in ipairs(variants) do',
      '    local h = {}',
      '    for k, x in pairs(headers) do h[k] = x end',
      '    for k, x in pairs(v[2]) do h[k] = x end',
      '    requests[i] = wrk.format(method, v[1], h, body)',
      '  end',
      '  math.randomseed(os.time())',
      'end',
      'request = function()',
      '  return requests[math.random(1, #requests)]',
      'end',
    );
  } else if (spec.uniqueHeader !== undefined) {
    lines.push(
      `local path, unique = ${luaString(spec.path)}, ${luaString(spec.uniqueHeader)}`,
      'math.randomseed(os.time())',
      'local run, n = tostring(math.random(1, 2147483647)) .. "-" .. tostring(os.time()), 0',
      'request = function()',
      '  n = n + 1',
      '  local h = {}',
      '  for k, v in pairs(headers) do h[k] = v end',
      '  h[unique] = run .. "-" .. n',
      '  return wrk.format(method, path, h, body)',
      'end',
    );
  } else if (spec.path.includes('{id}')) {
    const [prefix, suffix] = spec.path.split('{id}') as [string, string];
    lines.push(
      `local prefix, suffix, idmax = ${luaString(prefix)}, ${luaString(suffix)}, ${spec.idMax ?? 1}`,
      'math.randomseed(os.time())',
      '-- Ids that are multiples of 10 are not public posts: step to the id below.',
      'request = function()',
      '  local k = math.random(1, idmax)',
      '  if k % 10 == 0 then k = k - 1 end',
      '  return wrk.format(method, prefix .. k .. suffix, headers, body)',
      'end',
    );
  } else {
    lines.push(
      'wrk.method = method',
      'wrk.body = body',
      'for k, v in pairs(headers) do wrk.headers[k] = v end',
    );
  }
  lines.push(
    'done = function(summary, latency, requests)',
    '  local e = summary.errors',
    '  io.write(string.format(\'BENCH_RESULT {"requests":%d,"duration_us":%d,"errors":%d,"status_errors":%d,"p50_us":%d,"p99_us":%d}\\n\',',
    '    summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout, e.status,',
    '    latency:percentile(50), latency:percentile(99)))',
    'end',
  );
  return lines.join('\n') + '\n';
}

function capture(command: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

let scriptCounter = 0;

export async function runLoad(tool: LoadTool, spec: RequestSpec, options: LoadOptions): Promise<LoadResult> {
  const pathOnly = spec.path.replace('{id}', '1');
  const url = `http://127.0.0.1:${options.port}${pathOnly}`;
  if (tool === 'wrk') {
    const script = path.join(options.workDir, `load-${process.pid}-${scriptCounter++}.lua`);
    fs.writeFileSync(script, wrkScript(spec));
    try {
      const args = ['-t1', `-c${options.connections}`, `-d${options.seconds}s`, '--timeout', '5s', '-s', script, url];
      const argv = [...options.pin, 'wrk', ...args];
      const { code, stdout, stderr } = await capture(argv[0] as string, argv.slice(1));
      const line = stdout.split('\n').find((l) => l.startsWith('BENCH_RESULT '));
      if (code !== 0 || !line) throw new Error(`wrk failed (exit ${code}): ${stderr || stdout}`);
      const r = JSON.parse(line.slice('BENCH_RESULT '.length)) as {
        requests: number;
        duration_us: number;
        errors: number;
        p50_us: number;
        p99_us: number;
      };
      const seconds = r.duration_us / 1e6;
      return { requests: r.requests, seconds, rps: r.requests / seconds, p50: r.p50_us / 1000, p99: r.p99_us / 1000, errors: r.errors };
    } finally {
      fs.rmSync(script, { force: true });
    }
  }
  const worker = path.join(path.dirname(new URL(import.meta.url).pathname), 'autocannon-worker.ts');
  const tsx = path.resolve('node_modules/.bin/tsx');
  const job = JSON.stringify({ url: `http://127.0.0.1:${options.port}`, spec, seconds: options.seconds, connections: options.connections });
  const argv = [...options.pin, tsx, worker, job];
  const { code, stdout, stderr } = await capture(argv[0] as string, argv.slice(1));
  const line = stdout.split('\n').find((l) => l.startsWith('BENCH_RESULT '));
  if (code !== 0 || !line) throw new Error(`autocannon failed (exit ${code}): ${stderr || stdout}`);
  return JSON.parse(line.slice('BENCH_RESULT '.length)) as LoadResult;
}
