import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createDatabase, type DatabaseHandle } from '../../src/db/database.js';

export type Backend = 'sqlite' | 'postgres';
export const backend: Backend = process.env.TEST_BACKEND === 'postgres' ? 'postgres' : 'sqlite';

/**
 * A fresh, empty database for one test: SQLite in memory, or a new schema on the PostgreSQL test database
 * (much faster than a new database). `drop` removes the schema again.
 */
export async function freshDatabase(): Promise<{ handle: DatabaseHandle; url: string; drop: () => Promise<void> }> {
  if (backend === 'sqlite') {
    return { handle: createDatabase('sqlite::memory:'), url: 'sqlite::memory:', drop: async () => {} };
  }
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_BACKEND=postgres needs TEST_DATABASE_URL');
  const schema = `t_${randomBytes(6).toString('hex')}`;
  await adminQuery(url, `create schema ${schema}`);
  return {
    handle: createDatabase(url, { pgSchema: schema, poolMax: 10 }),
    url,
    drop: () => adminQuery(url, `drop schema if exists ${schema} cascade`),
  };
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
