import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GRACE_OVER, SECOND_SIGNAL, e2eDatabase, killLeftovers, startServer, type E2eDatabase } from '../helpers/server-process.js';
import { backend } from '../helpers/database.js';
import { collect, connect, parseResponse } from './socket.js';

/**
 * SIGTERM against the built server as a real process (CONTRACT §5): stop accepting, finish in-flight requests
 * (answered with `Connection: close`), close idle keep-alive connections, cut off clients still sending after the
 * grace period, close the database, exit 0, always.
 */

/** The grace period of the test that waits it out: short, so the cut-off shows quickly. */
const GRACE_MS = 1500;
/**
 * The other tests' grace period: long enough that, on a loaded machine, a request in flight (a sign-up hashes its
 * password) is never cut off by it; what they check must happen without waiting for it.
 */
const LONG_GRACE_MS = 10_000;
let db: E2eDatabase;

beforeAll(async () => {
  db = await e2eDatabase();
});
afterEach(async () => {
  await killLeftovers();
});
afterAll(async () => {
  await db?.drop();
}, 60_000);

// At debug the server logs each request as it arrives, which is how these tests know a request is in flight.
const start = (graceMs = LONG_GRACE_MS) =>
  startServer({ databaseUrl: db.url, env: { SHUTDOWN_GRACE_MS: String(graceMs), REQUEST_TIMEOUT_MS: '20000', LOG_LEVEL: 'debug' } });

/** A client that keeps sending a sign-up's body, a byte every 100 ms, once the server has the request in hand. */
async function sendBodyForever(server: Awaited<ReturnType<typeof start>>) {
  const socket = await connect(server.port);
  const outcome = collect(socket, 20_000);
  socket.write('POST /users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{');
  const timer = setInterval(() => socket.writable && socket.write(' '), 100);
  await server.waitForLog((line) => line.msg === 'incoming request');
  return { outcome, timer };
}

describe('SIGTERM', () => {
  it('with a client still sending its body: cut off after the grace period, exit code 0', async () => {
    const server = await start(GRACE_MS);
    const { outcome, timer } = await sendBodyForever(server);

    const started = Date.now();
    const exit = await server.stop('SIGTERM', 15_000);
    clearInterval(timer);
    expect(exit).toEqual({ code: 0, signal: null });
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(GRACE_MS - 100);
    expect(elapsed).toBeLessThan(GRACE_MS + 4000);
    expect((await outcome).ending).not.toBe('timeout');
    expect(server.logs().some((line) => line.msg === GRACE_OVER)).toBe(true);
  });

  it('a second SIGTERM cuts the grace period short: a client still sending is cut off at once, exit code 0', async () => {
    // A grace period far longer than the bound below, so that only the second signal can end the drain in time.
    const server = await start(60_000);
    const { outcome, timer } = await sendBodyForever(server);

    const started = Date.now();
    server.child.kill('SIGTERM');
    await server.waitForLog((line) => line.msg === 'shutting down');
    server.child.kill('SIGTERM');
    const exit = await server.exited;
    clearInterval(timer);
    expect(exit).toEqual({ code: 0, signal: null });
    expect(Date.now() - started, JSON.stringify(server.logs().slice(-8))).toBeLessThan(20_000);
    expect((await outcome).ending).not.toBe('timeout');
    expect(server.logs().some((line) => line.msg === SECOND_SIGNAL)).toBe(true);
    expect(server.logs().some((line) => line.msg === GRACE_OVER)).toBe(false);
    // The database was closed before the exit: SQLite leaves no write-ahead log behind.
    if (db.url.startsWith('sqlite:')) expect(fs.existsSync(`${db.url.slice('sqlite:'.length)}-wal`)).toBe(false);
  });

  it('with a request in flight: it is answered with Connection: close, and the process exits 0', async () => {
    const server = await start();
    const socket = await connect(server.port);
    const outcome = collect(socket, 20_000);
    const body = JSON.stringify({ username: 'inflight_user', password: 'correct horse battery' });
    socket.write(`POST /users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
    socket.write(body.slice(0, 10));
    await server.waitForLog((line) => line.msg === 'incoming request');
    server.child.kill('SIGTERM');
    await server.waitForLog((line) => line.msg === 'shutting down');
    socket.write(body.slice(10));

    const { text, ending } = await outcome;
    const res = parseResponse(text);
    expect(res.status).toBe(201);
    expect(res.headers.connection).toBe('close');
    expect(ending).toBe('close');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.logs().some((line) => line.msg === GRACE_OVER)).toBe(false);
  });

  it('idle keep-alive connections are closed at once, and the process exits 0 well before the grace period', async () => {
    const server = await start();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    const get = () =>
      new Promise<number>((resolve, reject) => {
        http.get(`${server.url}/posts?limit=1`, { agent }, (res) => res.resume().on('end', () => resolve(res.statusCode ?? 0))).on('error', reject);
      });
    expect(await Promise.all([get(), get(), get(), get()])).toEqual([200, 200, 200, 200]);
    const sockets = Object.values(agent.freeSockets).flat();
    expect(sockets.length).toBeGreaterThan(0);
    const closed = Promise.all(sockets.map((s) => new Promise((resolve) => s!.once('close', resolve))));

    const started = Date.now();
    const exit = await server.stop('SIGTERM', 15_000);
    await closed;
    expect(exit).toEqual({ code: 0, signal: null });
    expect(Date.now() - started).toBeLessThan(LONG_GRACE_MS / 2);
    expect(server.logs().some((line) => line.msg === GRACE_OVER)).toBe(false);
    agent.destroy();
  });

  it('requests sent on reused keep-alive connections just before SIGTERM are all answered, none reset', async () => {
    const server = await start();
    // 40 keep-alive connections, each already used once, then each sends a second request and SIGTERM follows.
    const sockets = await Promise.all(Array.from({ length: 40 }, () => connect(server.port)));
    const request = 'GET /posts?limit=1 HTTP/1.1\r\nHost: localhost\r\n\r\n';
    await Promise.all(
      sockets.map(
        (socket) =>
          new Promise<void>((resolve) => {
            socket.once('data', () => resolve());
            socket.write(request);
          }),
      ),
    );
    const outcomes = sockets.map((socket) => collect(socket, 20_000));
    for (const socket of sockets) socket.write(request);
    server.child.kill('SIGTERM');

    const results = await Promise.all(outcomes);
    expect(results.filter((r) => r.ending !== 'close')).toEqual([]);
    // Answered before the signal was handled (keep-alive, then the idle connection is closed) or after it
    // (Connection: close): either way a whole answer, never a reset.
    expect(results.map(({ text }) => parseResponse(text).status)).toEqual(results.map(() => 200));
    expect(await server.exited).toEqual({ code: 0, signal: null });
  });
});

/**
 * A keep-alive client that sends its next request as soon as the last answer is in, until an answer says
 * `Connection: close`. Records, for the request outstanding when the connection ended, when it was written.
 */
function pingPong(port: number, request: string, onFirstAnswer: () => void) {
  return connect(port).then(
    (socket) =>
      new Promise<{ answered: number; lostWrittenAt?: number; error?: string }>((resolve) => {
        let buffer = '';
        let answered = 0;
        let writtenAt: number | undefined;
        let error: string | undefined;
        const send = () => {
          writtenAt = Date.now();
          socket.write(request);
        };
        socket.setEncoding('latin1');
        socket.on('data', (chunk: string) => {
          buffer += chunk;
          for (;;) {
            const end = buffer.indexOf('\r\n\r\n');
            if (end === -1) return;
            const length = Number(/content-length: *(\d+)/i.exec(buffer.slice(0, end))?.[1] ?? 0);
            if (buffer.length < end + 4 + length) return;
            const head = buffer.slice(0, end);
            buffer = buffer.slice(end + 4 + length);
            answered++;
            if (answered === 1) onFirstAnswer();
            writtenAt = undefined;
            if (/\r\nconnection: *close/i.test(head)) return;
            send();
          }
        });
        socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code));
        socket.on('close', () => resolve({ answered, lostWrittenAt: writtenAt, error }));
        send();
      }),
  );
}

describe('SIGTERM under load', () => {
  it('keep-alive clients sending back to back: every request written before the signal gets an answer', async () => {
    const server = await start();
    // Every client is under way (its first answer in) before the signal, however slow the machine is.
    const firstAnswers: Promise<void>[] = [];
    const clients = Array.from({ length: 40 }, () => {
      let answered!: () => void;
      firstAnswers.push(new Promise<void>((resolve) => (answered = resolve)));
      return pingPong(server.port, 'GET /posts?limit=1 HTTP/1.1\r\nHost: localhost\r\n\r\n', () => answered());
    });
    await Promise.all(firstAnswers);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const signalledAt = Date.now();
    server.child.kill('SIGTERM');
    const results = await Promise.all(clients);
    expect(results.every((r) => r.answered > 0)).toBe(true);
    // A request written after the signal may meet a closed connection; one written before it must be answered.
    expect(results.filter((r) => r.lostWrittenAt !== undefined && r.lostWrittenAt < signalledAt)).toEqual([]);
    expect(await server.exited).toEqual({ code: 0, signal: null });
  });
});

// What a supervisor does that runs the README's start command and signals only its main process (`docker stop`
// with `CMD npm start`): the signal must reach the server, not only npm's shell. The start command's behaviour,
// not the database's: run once, on the embedded default.
describe.skipIf(backend !== 'sqlite')('SIGTERM to `npm start`', () => {
  it('reaches the server: it shuts down cleanly, the port is free, the database closed, exit 0', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'corkboard-npm-start-'));
    const file = path.join(dir, 'db.sqlite');
    // --ignore-scripts: `npm start` without `prestart`'s build (the suite runs on a build it must not rewrite).
    const npm = spawn('npm', ['start', '--silent', '--ignore-scripts'], {
      cwd: path.resolve(import.meta.dirname, '../..'),
      env: { ...process.env, PORT: '0', DATABASE_URL: `sqlite:${file}`, LOG_LEVEL: 'info', RATE_LIMIT: 'off' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const listening = new Promise<{ port: number; pid: number }>((resolve) => {
      npm.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        out += chunk;
        const line = out.split('\n').find((l) => l.includes('Server listening at'));
        if (line) {
          const parsed = JSON.parse(line) as { msg: string; pid: number };
          resolve({ port: Number(/:(\d+)$/.exec(parsed.msg)![1]), pid: parsed.pid });
        }
      });
    });
    const exited = new Promise<number | null>((resolve) => npm.once('close', (code) => resolve(code)));
    const { port, pid } = await listening;
    try {
      const health = await fetch(`http://127.0.0.1:${port}/health`);
      expect(health.status).toBe(200);
      npm.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(out).toContain('"msg":"shutting down"');
      // The server itself is gone (not left running with npm gone), its database closed without a WAL.
      expect(() => process.kill(pid, 0)).toThrow();
      await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
      expect(fs.existsSync(`${file}-wal`)).toBe(false);
    } finally {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone, as it should be
      }
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
