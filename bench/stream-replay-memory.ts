import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { int } from './lib/args.js';
import { freePort, npmStartCommand, run, startServer, type ServerProcess } from './lib/process.js';

/**
 * `npx tsx bench/stream-replay-memory.ts [-- options]`: what resumed streams whose clients never read cost the
 * server's memory (issue 40, item 2; CONTRACT §7: a stream holds bounded memory whatever its client does).
 * Builds, starts the built server on a fresh database, writes --posts posts of --size characters, then opens
 * --streams raw connections that send GET /posts with Accept: text/event-stream and a Last-Event-ID from before
 * the first post, and never read. Samples the server's RSS for --hold seconds and prints it before, at its peak and
 * at the end, how many of the streams the server had ended by then, and the machine's TCP buffer memory (the
 * kernel's, on both ends of the loopback connections: what the server wrote that never stayed in its own memory). Everything it starts it stops.
 */

const HELP = `Usage: npx tsx bench/stream-replay-memory.ts [options]
  --backend sqlite|postgres   database under test (default sqlite)
  --streams N                 resumed streams that never read (default 1000)
  --posts N                   posts written before they resume (default 600)
  --size N                    characters of each post's content (default 10000)
  --hold S                    seconds the streams are held (default 20)
  --pg-url URL                PostgreSQL server (default postgres://postgres@127.0.0.1:5432/postgres)
  --no-build                  skip npm run build`;

const { values: args } = parseArgs({
  options: {
    backend: { type: 'string', default: 'sqlite' },
    streams: { type: 'string' },
    posts: { type: 'string' },
    size: { type: 'string' },
    hold: { type: 'string' },
    'pg-url': { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
    'no-build': { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(`${HELP}\n`);
  process.exit(0);
}
if (args.backend !== 'sqlite' && args.backend !== 'postgres') throw new Error('--backend must be sqlite or postgres');
const cfg = {
  backend: args.backend,
  streams: int('streams', args.streams, 1000),
  posts: int('posts', args.posts, 600),
  size: int('size', args.size, 10_000),
  hold: int('hold', args.hold, 20),
};

/** Memory the kernel holds for every TCP socket of the machine (sockstat's pages), in MB: what never reached RSS. */
function kernelTcpMb(): number | undefined {
  const line = fs.readFileSync('/proc/net/sockstat', 'utf8').split('\n').find((l) => l.startsWith('TCP:'));
  const pages = line ? /\bmem (\d+)/.exec(line)?.[1] : undefined;
  return pages === undefined ? undefined : Math.round((Number(pages) * 4096) / 1024 / 1024);
}

const log = (text: string) => process.stdout.write(`[replay-memory] ${text}\n`);
const mb = (n: number) => Math.round(n);

async function json<T>(res: Response): Promise<T> {
  if (!res.ok) throw new Error(`${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** The first `id:` of an event stream opened before a post is written: the Last-Event-ID every stream resumes from. */
async function firstEventId(base: string, token: string, write: () => Promise<void>): Promise<string> {
  const controller = new AbortController();
  const res = await fetch(`${base}/posts`, { headers: { accept: 'text/event-stream', authorization: `Bearer ${token}` }, signal: controller.signal });
  await write();
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the stream ended before its first event');
      text += value;
      const match = /^id: (\S+)$/m.exec(text);
      if (match) return match[1]!;
    }
  } finally {
    controller.abort();
  }
}

/** A connection that asks for the stream and never reads: once the kernel's buffers fill, the server's do. */
function nonReader(port: number, token: string, lastEventId: string, ended: () => void): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.pause();
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.removeListener('error', reject);
      socket.on('error', () => {});
      socket.once('close', ended);
      socket.write(
        `GET /posts HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nAuthorization: Bearer ${token}\r\nLast-Event-ID: ${lastEventId}\r\n\r\n`,
      );
      resolve(socket);
    });
  });
}

async function main(): Promise<void> {
  if (!args['no-build']) await run('npm', ['run', 'build', '--silent']);
  const cleanups: Array<() => Promise<unknown>> = [];
  let server: ServerProcess | undefined;
  try {
    let databaseUrl: string;
    if (cfg.backend === 'sqlite') {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'corkboard-replay-memory-'));
      cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
      databaseUrl = `sqlite:${path.join(dir, 'corkboard.db')}`;
    } else {
      const name = `corkboard_replay_memory_${process.pid}`;
      const admin = async (statement: string) => {
        const client = new pg.Client({ connectionString: args['pg-url'] });
        await client.connect();
        try {
          await client.query(statement);
        } finally {
          await client.end();
        }
      };
      await admin(`CREATE DATABASE ${name}`);
      cleanups.push(() => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
      const url = new URL(args['pg-url']);
      url.pathname = `/${name}`;
      databaseUrl = url.toString();
    }
    execFileSync('node', ['dist/scripts/cli.js', 'migrate'], { env: { ...process.env, DATABASE_URL: databaseUrl }, stdio: 'ignore' });

    const port = await freePort();
    const files = cfg.streams + 1_000;
    server = await startServer({
      name: 'server',
      command: npmStartCommand(),
      env: {
        DATABASE_URL: databaseUrl,
        RATE_LIMIT: 'off',
        LOG_LEVEL: 'warn',
        PASSWORD_HASH_MEMORY_KIB: '64',
        // One signed-in user holds them all (an anonymous stream is limited per client address).
        STREAM_MAX_PER_USER: String(cfg.streams + 10),
        STREAM_MAX: String(Math.max(10_000, cfg.streams + 100)),
      },
      port,
      pin: ['prlimit', `--nofile=${files}:${files}`, '--'],
      readyPath: '/health',
    });
    const srv = server;
    const base = `http://127.0.0.1:${port}`;
    const username = 'replay_bench';
    const password = 'replay bench password';
    const user = await json<{ id: number }>(
      await fetch(`${base}/users`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username, password }) }),
    );
    const { token } = await json<{ token: string }>(
      await fetch(`${base}/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username, password }) }),
    );
    const content = 'x'.repeat(cfg.size);
    const write = async (title: string) => {
      await json(
        await fetch(`${base}/users/${user.id}/posts`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify({ title, content }),
        }),
      );
    };
    const resumeFrom = await firstEventId(base, token, () => write('first'));
    log(`${cfg.backend}: resuming from ${resumeFrom}; writing ${cfg.posts} posts of ${cfg.size} characters…`);
    for (let i = 0; i < cfg.posts; i += 10) await Promise.all(Array.from({ length: Math.min(10, cfg.posts - i) }, (_, j) => write(`post ${i + j}`)));
    await new Promise((r) => setTimeout(r, 1000));

    const before = srv.rss();
    const kernelBefore = kernelTcpMb();
    const peak = srv.sampleRss();
    let ended = 0;
    const sockets: net.Socket[] = [];
    cleanups.push(async () => sockets.forEach((s) => s.destroy()));
    const started = Date.now();
    for (let i = 0; i < cfg.streams; i += 50) {
      sockets.push(...(await Promise.all(Array.from({ length: Math.min(50, cfg.streams - i) }, () => nonReader(port, token, resumeFrom, () => ended++)))));
    }
    log(`${cfg.streams} streams open in ${Date.now() - started} ms (RSS before: ${mb(before)} MB); holding ${cfg.hold} s…`);
    const samples: string[] = [];
    for (let s = 1; s <= cfg.hold; s++) {
      await new Promise((r) => setTimeout(r, 1000));
      if (srv.exitStatus() !== undefined) break;
      if (s % 5 === 0) samples.push(`${s}s ${mb(srv.rss())} (kernel TCP ${kernelTcpMb()})`);
    }
    const peakMb = peak.stop();
    const result = {
      backend: cfg.backend,
      streams: cfg.streams,
      posts: cfg.posts,
      size: cfg.size,
      holdSeconds: cfg.hold,
      rssBeforeMb: mb(before),
      rssPeakMb: mb(peakMb),
      rssEndMb: srv.exitStatus() === undefined ? mb(srv.rss()) : undefined,
      perStreamKb: Math.round(((peakMb - before) * 1024) / cfg.streams),
      kernelTcpBeforeMb: kernelBefore,
      kernelTcpEndMb: kernelTcpMb(),
      endedByServer: ended,
      serverExit: srv.exitStatus(),
    };
    log(`RSS every 5 s (MB): ${samples.join(', ')}`);
    process.stdout.write(`${JSON.stringify(result)}\n`);
    if (srv.exitStatus() !== undefined) log(`the server exited (${srv.exitStatus()}):\n${srv.output().slice(-2000)}`);
  } finally {
    await server?.stop();
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  }
}

await main();
