/**
 * Where a block's time goes (issue 42), measured in one process with nothing else in flight: `npx tsx
 * bench/block-cost.ts <seeded sqlite file> [blocks]`. It copies the file (a database seeded by `npm run bench --
 * --reuse-seed`, whose sidecar `<file>.json` holds the block pairs' tokens), builds the app on the copy, and sends
 * `blocks` blocks of seeded pairs (diagonal, as the `block` scenario walks them) through `app.inject`, one at a
 * time. It prints the process's CPU time per block (user + system, so the fan-out worker and the whole request
 * path count) and each SQL text's share of the time spent inside better-sqlite3, per block. Prints only.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import type { BlockPairs } from './lib/seed.js';

const [source, countArg] = process.argv.slice(2);
if (!source) throw new Error('usage: tsx bench/block-cost.ts <seeded sqlite file> [blocks]');
const blocks = Number(countArg ?? 200);
const pairs = (JSON.parse(fs.readFileSync(`${source}.json`, "utf8")) as { tokens: { blockPairs: BlockPairs } }).tokens.blockPairs;

const file = path.join(os.tmpdir(), `block-cost-${process.pid}.db`);
fs.copyFileSync(source, file);

// Every statement better-sqlite3 runs, timed by its SQL text (the prototype is shared by every connection).
const spent = new Map<string, { ns: bigint; calls: number }>();
const probe = new SQLite(':memory:');
const proto = Object.getPrototypeOf(probe.prepare('select 1')) as Record<string, (...args: unknown[]) => unknown>;
probe.close();
let counting = false;
for (const method of ['run', 'get', 'all', 'iterate'] as const) {
  const original = proto[method]!;
  proto[method] = function (this: { source: string }, ...args: unknown[]) {
    if (!counting) return original.apply(this, args);
    const start = process.hrtime.bigint();
    try {
      return original.apply(this, args);
    } finally {
      const entry = spent.get(this.source) ?? { ns: 0n, calls: 0 };
      entry.ns += process.hrtime.bigint() - start;
      entry.calls += 1;
      spent.set(this.source, entry);
    }
  };
}

const app = await buildApp(loadConfig({ ...process.env, DATABASE_URL: `sqlite:${file}`, RATE_LIMIT: 'off', LOG_LEVEL: 'warn' }), { logger: false });
try {
  const request = (n: number) => {
    const i = n % pairs.blockers.length;
    const blocker = pairs.blockers[i]!;
    const blocked = pairs.blocked[(i + Math.floor(n / pairs.blockers.length)) % pairs.blocked.length]!;
    return app.inject({
      method: 'POST',
      url: `/users/${blocker.id}/blocks`,
      headers: { authorization: `Bearer ${blocker.token}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ id: blocked }),
    });
  };
  // Warm the JIT and the statement cache on pairs the measured ones do not use.
  const warm = 50;
  for (let n = 0; n < warm; n++) if ((await request(n)).statusCode !== 201) throw new Error(`warm-up block ${n} failed`);
  counting = true;
  const walls: number[] = [];
  const cpu = process.cpuUsage();
  for (let n = warm; n < warm + blocks; n++) {
    const start = performance.now();
    const response = await request(n);
    walls.push(performance.now() - start);
    if (response.statusCode !== 201) throw new Error(`block ${n}: ${response.statusCode} ${response.body}`);
  }
  const used = process.cpuUsage(cpu);
  counting = false;
  walls.sort((a, b) => a - b);
  const at = (q: number) => walls[Math.min(walls.length - 1, Math.floor(q * walls.length))]!.toFixed(2);
  const sqlNs = [...spent.values()].reduce((sum, e) => sum + e.ns, 0n);
  console.log(`${blocks} blocks, one at a time: CPU ${((used.user + used.system) / blocks / 1000).toFixed(2)} ms a block ` +
    `(user ${(used.user / blocks / 1000).toFixed(2)}, system ${(used.system / blocks / 1000).toFixed(2)}); ` +
    `in SQLite ${(Number(sqlNs) / blocks / 1e6).toFixed(2)} ms; wall p50 ${at(0.5)} ms, p99 ${at(0.99)} ms`);
  const rows = [...spent.entries()].sort((a, b) => Number(b[1].ns - a[1].ns));
  for (const [sql, e] of rows) {
    console.log(`${(Number(e.ns) / blocks / 1e3).toFixed(0).padStart(7)} µs  ${(e.calls / blocks).toFixed(2).padStart(5)}×  ${sql.replace(/\s+/g, ' ').slice(0, 150)}`);
  }
} finally {
  await app.close();
  for (const suffix of ['', '-wal', '-shm']) fs.rmSync(`${file}${suffix}`, { force: true });
}
