import pg from 'pg';
import { testDatabaseName } from './helpers/database.js';

/**
 * Checks the PostgreSQL server up front, so a missing server fails the run loudly instead of each test; the
 * returned teardown drops the per-worker databases this run created.
 */
export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) {
    console.warn(
      '\n[corkboard] PostgreSQL tests SKIPPED: set TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/corkboard_test to run the suite on PostgreSQL too.\n',
    );
    return undefined;
  }
  const target = new URL(url);
  const database = target.pathname.slice(1);
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  try {
    await client.connect();
  } catch (error) {
    throw new Error(`[corkboard] TEST_DATABASE_URL is set but PostgreSQL is unreachable at ${target.host}: ${String(error)}`, {
      cause: error,
    });
  }
  try {
    const exists = await client.query('select 1 from pg_database where datname = $1', [database]);
    if (exists.rowCount === 0) await client.query(`create database "${database.replace(/"/g, '""')}"`);
  } finally {
    await client.end();
  }
  console.warn(`\n[corkboard] running the suite on SQLite and on PostgreSQL (${target.host}/${database})\n`);
  return async () => {
    const cleanup = new pg.Client({ connectionString: admin.toString() });
    await cleanup.connect();
    try {
      const pattern = testDatabaseName(database, '%');
      const { rows } = await cleanup.query<{ datname: string }>('select datname from pg_database where datname like $1', [pattern]);
      for (const { datname } of rows) await cleanup.query(`drop database if exists "${datname}" with (force)`);
    } finally {
      await cleanup.end();
    }
  };
}
