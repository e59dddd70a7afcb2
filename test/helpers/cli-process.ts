import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fs from 'node:fs';
import { sql } from 'kysely';
import { openDatabase } from './server-process.js';

/** The built command-line tool (`npm run build` first), run as a real process the way an operator runs it. */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CLI_ENTRY = path.join(ROOT, 'dist/scripts/cli.js');

// As for the spawned server: nothing of the shell that runs the tests leaks into the command's environment.
const PASSED_THROUGH = ['PATH', 'HOME', 'TMPDIR', 'TEMP', 'TMP', 'LANG', 'SYSTEMROOT', 'TZ'];

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** When the process was spawned and when it exited (performance.now()). */
  startedAt: number;
  endedAt: number;
}

export function runCli(args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<CliResult> {
  if (!fs.existsSync(CLI_ENTRY)) throw new Error('dist/scripts/cli.js is missing: run `npm run build` first');
  const base: NodeJS.ProcessEnv = {};
  for (const name of PASSED_THROUGH) if (process.env[name] !== undefined) base[name] = process.env[name];
  return new Promise((resolve, reject) => {
    const startedAt = performance.now();
    const child = spawn(process.execPath, [CLI_ENTRY, ...args], {
      cwd: ROOT,
      env: { ...base, PASSWORD_HASH_MEMORY_KIB: '64', LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, startedAt, endedAt: performance.now() });
    });
  });
}

/**
 * The number of rows in every table of the database (Kysely's migration bookkeeping aside), found by introspection
 * so that it follows whatever tables the schema has: two equal snapshots mean nothing was written in between.
 */
export async function rowCounts(databaseUrl: string): Promise<Record<string, number>> {
  const handle = openDatabase(databaseUrl);
  try {
    const tables = (await handle.db.introspection.getTables()).filter((t) => !t.name.startsWith('kysely_migration'));
    const counts: Record<string, number> = {};
    for (const table of tables.sort((a, b) => a.name.localeCompare(b.name))) {
      const { rows } = await sql<{ n: number | string }>`select count(*) as n from ${sql.table(table.name)}`.execute(handle.db);
      counts[table.name] = Number(rows[0]?.n ?? 0);
    }
    return counts;
  } finally {
    await handle.close();
  }
}
