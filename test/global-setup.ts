import pg from 'pg';
import { testDatabaseName } from './helpers/database.js';

/**
 * Checks the PostgreSQL server up front, so a missing server fails the run loudly instead of each test; the
 * returned teardown drops the per-worker databases this run created.
 */
export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  const url = process.env.TEST_DATABASE_URL;
  const pooler = process.env.TEST_PGBOUNCER_URL;
  if (pooler && !url) {
    throw new Error('[corkboard] TEST_PGBOUNCER_URL is set without TEST_DATABASE_URL: the pgbouncer project creates its databases directly on that server');
  }
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
  if (pooler) await checkPgBouncer(pooler);
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

/**
 * The pgbouncer project's servers connect through TEST_PGBOUNCER_URL: it must answer, and pool by transaction (a
 * session pooler would pass every test and prove nothing). Asks its admin console, which scripts/pgbouncer.sh
 * opens to the user postgres.
 */
async function checkPgBouncer(url: string): Promise<void> {
  const admin = new URL(url);
  admin.pathname = '/pgbouncer';
  const client = new pg.Client({ connectionString: admin.toString() });
  try {
    await client.connect();
  } catch (error) {
    throw new Error(`[corkboard] TEST_PGBOUNCER_URL is set but PgBouncer's admin console is unreachable at ${admin.host}: ${String(error)}`, {
      cause: error,
    });
  }
  try {
    const { rows } = await client.query<{ key: string; value: string }>('show config');
    const mode = rows.find((row) => row.key === 'pool_mode')?.value;
    if (mode !== 'transaction') throw new Error(`[corkboard] the PgBouncer at ${admin.host} pools by ${mode ?? 'an unknown mode'}, not by transaction`);
  } finally {
    await client.end();
  }
  console.warn(`[corkboard] and the end-to-end tests once more through PgBouncer (transaction pooling, ${admin.host})\n`);
}
