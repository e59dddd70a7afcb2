import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { Kysely, PostgresDialect, SqliteDialect, sql, type SqliteDatabase } from 'kysely';
import type { Database } from './types.js';

export type Dialect = 'sqlite' | 'postgres';

export interface DatabaseHandle {
  db: Kysely<Database>;
  dialect: Dialect;
  /** True when the database answers a trivial query (for /health). */
  ping(): Promise<boolean>;
  destroy(): Promise<void>;
}

export interface DatabaseOptions {
  /** Maximum connections in the PostgreSQL pool. */
  poolMax?: number;
  /** PostgreSQL schema to use instead of `public` (tests isolate themselves this way). */
  pgSchema?: string;
}

// pg returns int8 (ids, COUNT(*)) as strings and timestamptz as Date. Ids are assigned sequentially and stay far
// below 2^53, so a JS number is exact; timestamps go out as the same ISO 8601 text that SQLite stores.
// These parsers are set per pool (not globally) so that a caller's own pg usage is untouched.
const PG_INT8 = 20;
const PG_TIMESTAMPTZ = 1184;
const pgTypes = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === PG_INT8) return (v: string) => Number(v);
    if (oid === PG_TIMESTAMPTZ) {
      const parseDate = pg.types.getTypeParser(PG_TIMESTAMPTZ) as (v: string) => Date;
      return (v: string) => parseDate(v).toISOString();
    }
    return pg.types.getTypeParser(oid, format);
  },
};

export function createDatabase(url: string, options: DatabaseOptions = {}): DatabaseHandle {
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    const pool = new pg.Pool({
      connectionString: url,
      max: options.poolMax ?? 10,
      types: pgTypes as pg.CustomTypesConfig,
      // Every connection runs in UTC so that anything formatted by the server matches SQLite's output.
      options: `-c TimeZone=UTC${options.pgSchema ? ` -c search_path=${options.pgSchema}` : ''}`,
    });
    // An idle client that loses its connection emits 'error' on the pool; without a listener that kills the process.
    pool.on('error', () => {});
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    return handle(db, 'postgres');
  }
  const file = url.replace(/^sqlite:/, '');
  if (file !== ':memory:') fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const sqlite = new SQLite(file);
  // WAL lets readers run beside the writer; NORMAL sync in WAL mode keeps every committed transaction across a
  // process crash (kill -9) and only risks the last ones on power loss. Without foreign_keys=ON no cascade runs.
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) });
  return handle(db, 'sqlite');
}

/**
 * Kysely's SQLite driver prepares every statement afresh, which costs more than running a point read. Queries
 * come in a small set of shapes (values travel as parameters), so prepared statements are kept per SQL text, the
 * least recently used dropped beyond `size`. Sharing one is safe: Kysely runs one query at a time per connection.
 */
function withStatementCache(sqlite: SQLite.Database, size = 500): SqliteDatabase {
  const cache = new Map<string, SQLite.Statement>();
  return {
    close: () => sqlite.close(),
    prepare(text: string) {
      let statement = cache.get(text);
      if (statement) {
        cache.delete(text);
      } else {
        statement = sqlite.prepare(text);
        if (cache.size >= size) cache.delete(cache.keys().next().value as string);
      }
      cache.set(text, statement);
      return statement;
    },
  };
}

function handle(db: Kysely<Database>, dialect: Dialect): DatabaseHandle {
  return {
    db,
    dialect,
    async ping() {
      try {
        await sql`select 1`.execute(db);
        return true;
      } catch {
        return false;
      }
    },
    destroy: () => db.destroy(),
  };
}
