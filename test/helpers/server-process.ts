import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { openStore } from '../../src/db/open.js';
import type { Store } from '../../src/db/store.js';
import { backend } from './database.js';

/**
 * The real server as a child process (`node dist/src/server.js`), for the tests in test/http and test/races that
 * need real sockets, real signals and a real process exit. `npm test` builds dist/ first (pretest).
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The built server; CORKBOARD_E2E_SERVER points the tests at another build (e.g. a deliberately broken copy). */
export const SERVER_ENTRY = process.env.CORKBOARD_E2E_SERVER
  ? path.resolve(process.env.CORKBOARD_E2E_SERVER)
  : path.join(ROOT, 'dist/src/server.js');

/** The base of links and Locations in spawned servers: deliberately not the address the tests connect to. */
export const E2E_PUBLIC_URL = 'http://corkboard.e2e';

/** What a spawned server logs when its shutdown grace period runs out and it cuts off the connections still open. */
export const GRACE_OVER = 'shutdown grace period over: closing the connections still open';
/** What it logs when a second SIGTERM or SIGINT arrives during its shutdown (src/server.ts). */
export const SECOND_SIGNAL = 'second signal: closing the connections still open now';

// The server's environment is built from scratch: nothing of the shell that runs the tests (a DATABASE_URL, a
// PORT, a LOG_LEVEL) may leak into it. Only what a Node process needs to run is passed through.
const PASSED_THROUGH = ['PATH', 'HOME', 'TMPDIR', 'TEMP', 'TMP', 'LANG', 'SYSTEMROOT', 'TZ'];

let freshnessChecked = false;

export function assertBuilt(): void {
  if (!fs.existsSync(SERVER_ENTRY)) {
    throw new Error(`${path.relative(ROOT, SERVER_ENTRY)} is missing: run \`npm run build\` first (\`npm test\` does it in pretest)`);
  }
  // tsc rewrites every output on each build, so a source newer than the entry point means dist/ is out of date.
  if (!freshnessChecked && !process.env.CORKBOARD_E2E_SERVER) {
    freshnessChecked = true;
    const built = fs.statSync(SERVER_ENTRY).mtimeMs;
    const newer = fs
      .readdirSync(path.join(ROOT, 'src'), { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.ts') && !file.endsWith('.test.ts'))
      .find((file) => fs.statSync(path.join(ROOT, 'src', file)).mtimeMs > built);
    if (newer) {
      console.warn(`[corkboard] dist/ is older than src/${newer}: the end-to-end tests run the last build (npm test rebuilds first)`);
    }
  }
}

/** A port that was free a moment ago: listen on port 0, read the port, close. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ServerProcess {
  /** Where to connect, e.g. http://127.0.0.1:40123 */
  url: string;
  port: number;
  pid: number;
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** stdout parsed as JSON log lines (pino); lines that are not JSON are skipped. */
  logs(): Record<string, unknown>[];
  /** Resolves with the first log line that matches, or rejects after timeoutMs. */
  waitForLog(match: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** Resolves when the process has exited. */
  exited: Promise<Exit>;
  /** Sends a signal (SIGTERM by default) and waits for the exit; SIGKILL after timeoutMs. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<Exit>;
}

const live = new Set<ChildProcess>();
// A worker that dies without running its hooks must not leave servers behind (kill is synchronous: fine here).
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** Kills every spawned server still running (call it in afterEach/afterAll) and waits for them to go. */
export async function killLeftovers(): Promise<void> {
  await Promise.all(
    [...live].map(async (child) => {
      if (child.exitCode === null && child.signalCode === null) {
        const gone = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        await gone;
      }
      live.delete(child);
    }),
  );
}

function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = {};
  for (const name of PASSED_THROUGH) if (process.env[name] !== undefined) base[name] = process.env[name];
  return { ...base, ...env };
}

function launch(env: Record<string, string>) {
  assertBuilt();
  const child = spawn(process.execPath, [SERVER_ENTRY], { cwd: ROOT, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  let out = '';
  let err = '';
  const listeners = new Set<() => void>();
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
    for (const listener of listeners) listener();
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk;
  });
  const exited = new Promise<Exit>((resolve) => {
    // 'close' fires after the exit and after stdio has been drained, so the captured output is complete.
    child.once('close', (code, signal) => {
      live.delete(child);
      for (const listener of listeners) listener();
      resolve({ code, signal });
    });
  });
  return { child, exited, stdout: () => out, stderr: () => err, listeners };
}

const parseLines = (text: string) =>
  text
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });

export interface StartOptions {
  /** DATABASE_URL; required. */
  databaseUrl: string;
  /** More environment (overrides the test defaults below). */
  env?: Record<string, string>;
  /** How long to wait for GET /health to answer 200. */
  timeoutMs?: number;
}

/** Set by the `pgbouncer` Vitest project (vitest.config.ts): spawned servers reach PostgreSQL through PgBouncer. */
export const viaPgBouncer = process.env.TEST_VIA_PGBOUNCER === '1';

/**
 * The server's database settings for a database the test created. In the `pgbouncer` project, as deployed behind
 * a transaction pooler (CONTRACT §8): DATABASE_URL is the same database on the TEST_PGBOUNCER_URL host and port,
 * statements go unnamed (PgBouncer 1.18 keeps no prepared statements across transactions), and
 * DATABASE_DIRECT_URL is the direct URL for what needs a session (the migrations' advisory lock, LISTEN).
 * The tests themselves keep the direct URL: creating, inspecting and dropping databases does not go through it.
 */
export function databaseEnv(databaseUrl: string): Record<string, string> {
  if (!viaPgBouncer || !/^postgres(ql)?:/.test(databaseUrl)) return { DATABASE_URL: databaseUrl };
  const pooler = process.env.TEST_PGBOUNCER_URL;
  if (!pooler) throw new Error('the pgbouncer project needs TEST_PGBOUNCER_URL (e.g. postgres://postgres@127.0.0.1:6432)');
  const pooled = new URL(databaseUrl);
  const { hostname, port } = new URL(pooler);
  pooled.hostname = hostname;
  pooled.port = port;
  return { DATABASE_URL: pooled.toString(), PG_PREPARED_STATEMENTS: 'off', DATABASE_DIRECT_URL: databaseUrl };
}

/**
 * Starts the server on a free port and waits (bounded) until GET /health answers 200. Test defaults: info-level
 * JSON logs (so tests can read them), rate limits off, the cheapest password hash, PUBLIC_URL = E2E_PUBLIC_URL.
 */
export async function startServer(options: StartOptions): Promise<ServerProcess> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    try {
      return await startOnPort(port, options);
    } catch (error) {
      // Someone else took the port between freePort() and the server's listen(): try another one.
      if (attempt < 3 && error instanceof Error && error.message.includes('EADDRINUSE')) continue;
      throw error;
    }
  }
}

async function startOnPort(port: number, options: StartOptions): Promise<ServerProcess> {
  const { child, exited, stdout, stderr, listeners } = launch({
    PORT: String(port),
    HOST: '127.0.0.1',
    ...databaseEnv(options.databaseUrl),
    PUBLIC_URL: E2E_PUBLIC_URL,
    LOG_LEVEL: 'info',
    RATE_LIMIT: 'off',
    // The cheapest password hash the config allows: tests sign up many users.
    PASSWORD_HASH_MEMORY_KIB: '64',
    ...options.env,
  });
  const url = `http://127.0.0.1:${port}`;
  let exit: Exit | undefined;
  void exited.then((e) => (exit = e));

  const server: ServerProcess = {
    url,
    port,
    pid: child.pid ?? -1,
    child,
    stdout,
    stderr,
    logs: () => parseLines(stdout()),
    exited,
    waitForLog(match, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = parseLines(stdout()).find(match);
          if (found) done(() => resolve(found));
          else if (exit) done(() => reject(new Error(`server exited (${JSON.stringify(exit)}) before the awaited log line`)));
        };
        const timer = setTimeout(() => done(() => reject(new Error(`no matching log line within ${timeoutMs} ms`))), timeoutMs);
        const done = (settle: () => void) => {
          clearTimeout(timer);
          listeners.delete(check);
          settle();
        };
        listeners.add(check);
        check();
      });
    },
    async stop(signal = 'SIGTERM', timeoutMs = 15_000) {
      if (exit) return exit;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };

  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  for (;;) {
    if (exit) {
      throw new Error(`server exited during start-up (code ${exit.code}, signal ${exit.signal}):\n${stderr()}\n${stdout()}`);
    }
    try {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.status === 200) return server;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await server.stop('SIGKILL');
      throw new Error(`server did not answer GET /health with 200 within ${options.timeoutMs ?? 20_000} ms:\n${stderr()}\n${stdout()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Runs the server with the given environment until it exits on its own (bad configuration) or timeoutMs. */
export async function runUntilExit(env: Record<string, string>, timeoutMs = 15_000): Promise<Exit & { stdout: string; stderr: string }> {
  const { child, exited, stdout, stderr } = launch(env);
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  try {
    const exit = await exited;
    return { ...exit, stdout: stdout(), stderr: stderr() };
  } finally {
    clearTimeout(timer);
  }
}

export interface E2eDatabase {
  /** DATABASE_URL for the server. */
  url: string;
  drop(): Promise<void>;
}

/**
 * A fresh database that does not exist yet, for spawned servers (they take only DATABASE_URL, no schema option):
 * SQLite, a file in a new temporary directory (the server creates it); PostgreSQL, a new database on the
 * TEST_DATABASE_URL server (the server migrates it). `drop` removes it, even with servers still connected.
 */
export async function e2eDatabase(): Promise<E2eDatabase> {
  if (backend === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'corkboard-e2e-'));
    return { url: `sqlite:${path.join(dir, 'corkboard.db')}`, drop: async () => fs.rmSync(dir, { recursive: true, force: true }) };
  }
  const base = process.env.TEST_DATABASE_URL;
  if (!base) throw new Error('TEST_BACKEND=postgres needs TEST_DATABASE_URL');
  const name = `corkboard_e2e_${randomBytes(6).toString('hex')}`;
  await adminQuery(base, `create database ${name}`);
  const url = new URL(base);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => adminQuery(base, `drop database if exists ${name} with (force)`) };
}

async function adminQuery(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

/** A direct connection to a spawned server's database, to check what it stored. Close it when done. */
export function openDatabase(databaseUrl: string): Store {
  return openStore(databaseUrl, { poolMax: 4 });
}

/** The SQLite file behind a `sqlite:` DATABASE_URL. */
export const sqliteFile = (databaseUrl: string) => databaseUrl.replace(/^sqlite:/, '');

export interface HttpResponse {
  status: number;
  headers: Headers;
  text: string;
  json<T = Record<string, unknown>>(): T;
}

/** fetch with JSON in and out. */
export async function request(
  base: string,
  method: string,
  urlPath: string,
  options: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<HttpResponse> {
  const res = await fetch(`${base}${urlPath}`, {
    method,
    headers: {
      ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
      ...options.headers,
    },
    ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: <T = Record<string, unknown>>() => JSON.parse(text) as T };
}
