import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { CompiledQuery, Kysely, Migrator, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { afterEach, beforeEach, onTestFinished } from 'vitest';
import { migrations } from '../../src/db/migrations/index.js';
import { openStore } from '../../src/db/open.js';
import type { Store, StoreOptions } from '../../src/db/store.js';
import type { Database } from '../../src/db/types.js';

export type Backend = 'sqlite' | 'postgres';
export const backend: Backend = process.env.TEST_BACKEND === 'postgres' ? 'postgres' : 'sqlite';

/**
 * A fresh, empty database for one test: SQLite in a temporary file (deleted when the store closes), or a new
 * schema on PostgreSQL (much faster than a new database). Each Vitest worker gets its own PostgreSQL database (`<TEST_DATABASE_URL db>_w<worker>`): Kysely's
 * migrator introspects every schema of the database, which races with another worker dropping its schema.
 * `drop` removes the schema again.
 */
export async function freshDatabase(options: StoreOptions = {}): Promise<{ store: Store; url: string; drop: () => Promise<void> }> {
  if (backend === 'sqlite') {
    return { store: openStore('sqlite::memory:', options), url: 'sqlite::memory:', drop: async () => {} };
  }
  const url = await workerDatabaseUrl();
  const schema = `t_${randomBytes(6).toString('hex')}`;
  await adminQuery(url, `create schema ${schema}`);
  return {
    store: openStore(url, { ...options, pgSchema: schema, poolMax: 10 }),
    url,
    drop: () => adminQuery(url, `drop schema if exists ${schema} cascade`),
  };
}

/**
 * A fresh, migrated database (see `freshDatabase`) for every test of the enclosing `describe`: `.store` is the
 * current test's, closed and dropped after it.
 */
export function migratedDatabasePerTest(): { readonly store: Store } {
  let current: { store: Store; drop: () => Promise<void> } | undefined;
  beforeEach(async () => {
    const fresh = await freshDatabase();
    await fresh.store.migrate();
    current = fresh;
  });
  afterEach(async () => {
    const done = current;
    current = undefined;
    await done?.store.close();
    await done?.drop();
  });
  return {
    get store() {
      if (!current) throw new Error('the database exists only while a test runs');
      return current.store;
    },
  };
}

let workerUrl: Promise<string> | undefined;

/**
 * `<base>_<run>_w<worker>`: unique per test run (CORKBOARD_TEST_RUN, set in vitest.config.ts) so that two runs on
 * one server never share a database; the global teardown drops the run's databases.
 */
export function testDatabaseName(base: string, worker: string): string {
  return `${base}_${process.env.CORKBOARD_TEST_RUN ?? 'local'}_w${worker}`.replace(/[^A-Za-z0-9_]/g, '_').toLowerCase();
}

/** This worker's own database on the TEST_DATABASE_URL server, created on first use. */
export function workerDatabaseUrl(): Promise<string> {
  return (workerUrl ??= (async () => {
    const base = process.env.TEST_DATABASE_URL;
    if (!base) throw new Error('TEST_BACKEND=postgres needs TEST_DATABASE_URL');
    const url = new URL(base);
    const name = testDatabaseName(url.pathname.slice(1), process.env.VITEST_POOL_ID ?? '0');
    try {
      await adminQuery(base, `create database ${name}`);
    } catch (error) {
      // 42P04: it exists already (an earlier run, or an earlier file in this worker).
      if ((error as { code?: string }).code !== '42P04') throw error;
    }
    url.pathname = `/${name}`;
    return url.toString();
  })());
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

/** SQLite's `EXPLAIN QUERY PLAN` for exactly the SQL and parameters a repository compiled: one line per step. */
export async function sqlitePlan(db: Kysely<Database>, query: { compile(): CompiledQuery }): Promise<string[]> {
  const { sql, parameters } = query.compile();
  const plan = await db.executeQuery<{ detail: string }>(CompiledQuery.raw(`EXPLAIN QUERY PLAN ${sql}`, [...parameters]));
  return plan.rows.map((r) => r.detail);
}

/**
 * A store whose schema stops just before the migration `migration` (the ones after it run when an app starts on
 * it), holding what `rows` writes there, as that version wrote it: for tests of what a migration does to existing
 * data. SQLite in a temporary file (deleted after the test), PostgreSQL in a fresh schema (dropped after the test).
 */
export async function storeBeforeMigration(migration: string, rows: (db: Kysely<Database>) => Promise<void>): Promise<Store> {
  const names = Object.keys(migrations).sort();
  const previous = names[names.indexOf(migration) - 1]!;
  const migrateTo = async (db: Kysely<Database>, schema?: string) => {
    const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations }, ...(schema ? { migrationTableSchema: schema } : {}) });
    const { error } = await migrator.migrateTo(previous);
    if (error) throw error;
  };
  if (backend === 'sqlite') {
    const file = join(tmpdir(), `corkboard-before-${migration}-${process.pid}-${Date.now()}.db`);
    onTestFinished(() => ['', '-wal', '-shm'].forEach((suffix) => rmSync(file + suffix, { force: true })));
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: new SQLite(file) }) });
    await migrateTo(db);
    await rows(db);
    await db.destroy();
    return openStore(`sqlite:${file}`);
  }
  const { store, drop } = await freshDatabase();
  onTestFinished(drop);
  const { rows: [current] } = await sql<{ schema: string }>`select current_schema() as schema`.execute(store.db);
  await migrateTo(store.db, current!.schema);
  await rows(store.db);
  return store;
}
