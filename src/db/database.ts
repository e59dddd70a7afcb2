import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { Kysely, PostgresDialect, SqliteDialect, sql, type CompiledQuery, type PostgresCursor, type PostgresPool, type PostgresPoolClient, type PostgresQueryResult } from 'kysely';
import type { Database } from './types.js';
import type { Eventually } from '../shared/eventually.js';
import { enableGroupCommit } from './group-commit.js';
import { fifoCache } from '../shared/fifo-cache.js';

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
/**
 * A timestamptz as PostgreSQL prints it in a UTC session (`2026-02-01 00:01:37.12+00`): the ISO 8601 text is the
 * same digits rearranged (`2026-02-01T00:01:37.120Z`), so it is rewritten rather than parsed into a Date and
 * formatted back (`toISOString` costs ~7,000 instructions: two a post row). Milliseconds are truncated, as a
 * Date does. Anything else (infinity, BC years, years past 9999) takes the Date route.
 */
const PG_UTC_TIMESTAMP = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?\+00$/;
export function pgTimestampToIso(text: string, parseDate: (text: string) => Date): string {
  const parts = PG_UTC_TIMESTAMP.exec(text);
  if (parts === null) return parseDate(text).toISOString();
  const fraction = parts[3] === undefined ? '000' : parts[3].length >= 3 ? parts[3].slice(0, 3) : parts[3].padEnd(3, '0');
  return `${parts[1]}T${parts[2]}.${fraction}Z`;
}
const pgTypes = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === PG_INT8) return (v: string) => Number(v);
    if (oid === PG_TIMESTAMPTZ) {
      const parseDate = pg.types.getTypeParser(PG_TIMESTAMPTZ) as (v: string) => Date;
      return (v: string) => pgTimestampToIso(v, parseDate);
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
    const nameOf = statementNames();
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: withNamedStatements(pool, nameOf) }) });
    directReaders.set(db, async ({ sql: text, parameters }) => (await pool.query(namedQuery(nameOf, text, parameters))).rows);
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
  // Group commit runs every write in a savepoint, and SQLite keeps the pages a savepoint changes in a statement
  // journal, a temporary file once it outgrows 64 KiB: ~6 pwrite calls of 4 KiB per created post and a new temp
  // file per group, measured with strace. In memory it is a copy, truncated whenever a savepoint is released.
  sqlite.pragma('temp_store = MEMORY');
  // Kysely's SQLite driver prepares every statement afresh, which costs more than running a point read. Queries
  // come in a small set of shapes (values travel as parameters), so prepared statements (Kysely's, and the row
  // readers of `readCompiled`) are kept per SQL text. Sharing one is safe: Kysely runs one query at a time per
  // connection.
  const statements = fifoCache((text: string) => sqlite.prepare(text));
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: { close: () => sqlite.close(), prepare: statements } }) });
  const readers = fifoCache(rowReader(sqlite));
  // better-sqlite3 runs a statement synchronously, so between two requests' statements the one connection holds
  // no open transaction unless a Kysely transaction is awaiting its next step; only then must a read queue behind
  // it (through Kysely's connection mutex) rather than see its uncommitted rows.
  directReaders.set(db, (query) =>
    sqlite.inTransaction ? db.executeQuery(query).then((r) => r.rows) : readers(query.sql)(query.parameters),
  );
  enableGroupCommit(db, () => sqlite.inTransaction);
  return handle(db, 'sqlite');
}

type DirectReader = (query: CompiledQuery) => Eventually<unknown[]>;
const directReaders = new WeakMap<Kysely<Database>, DirectReader>();

/**
 * Runs a compiled read-only query (a SELECT) and answers its rows. On the database's own Kysely instance it goes
 * straight to the driver: a prepared better-sqlite3 statement, or a named `pool.query` on PostgreSQL. Kysely's
 * executor (plugins, connection acquisition, a promise per step) costs more than SQLite takes for a point read,
 * and the hottest routes run queries compiled ahead of time, so there is nothing left for Kysely to do. Inside a
 * transaction (a `Transaction` instance, which has no direct reader) the query runs through Kysely as usual.
 * On SQLite outside a transaction the rows come back at once, not as a promise (see `Eventually`).
 */
export function readCompiled<R>(db: Kysely<Database>, query: CompiledQuery<R>): Eventually<R[]> {
  const direct = directReaders.get(db);
  return direct ? (direct(query) as Eventually<R[]>) : db.executeQuery(query).then((result) => result.rows);
}

/**
 * Runs a SELECT for `readCompiled` and answers its rows as objects keyed by column name, as better-sqlite3 and
 * Kysely do, but built here from better-sqlite3's raw mode (each row an array): better-sqlite3 sets each column
 * of each row through V8's C++ API, which cost ~8,000 instructions a post row, against ~2,000 for a loop
 * (callgrind, 21 posts: 562,000 → 428,000 instructions a query). Its own statement, apart from Kysely's, since
 * raw mode is a setting of the statement.
 */
function rowReader(sqlite: SQLite.Database) {
  return (text: string) => {
    const statement = sqlite.prepare(text).raw(true);
    const toRow = rowBuilder(statement.columns().map((column) => column.name));
    return (parameters: readonly unknown[]): Record<string, unknown>[] => {
      const raw = statement.all(parameters) as unknown[][];
      const rows = new Array<Record<string, unknown>>(raw.length);
      for (let r = 0; r < raw.length; r++) rows[r] = toRow(raw[r] as unknown[]);
      return rows;
    };
  };
}

/**
 * A function that turns one raw row into an object with these keys: an object literal written out for the
 * statement's columns (`v => ({"id": v[0], "title": v[1], …})`), so V8 builds every row at one shape in one step.
 * Setting the keys in a loop (`row[names[i]] = v[i]`) is a megamorphic keyed store per column, shared by every
 * statement: ~190 per page of posts. Names are quoted with JSON.stringify, so any column name is a plain key.
 * Exported for its test.
 */
export function rowBuilder(names: readonly string[]): (values: unknown[]) => Record<string, unknown> {
  // "__proto__" as a literal key would set the prototype: that one (never a column of ours) becomes a computed key.
  const fields = names.map((name, i) => `${name === '__proto__' ? `[${JSON.stringify(name)}]` : JSON.stringify(name)}: v[${i}]`).join(', ');
  return new Function('v', `return { ${fields} };`) as (values: unknown[]) => Record<string, unknown>;
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

/**
 * Kysely sends every query unnamed, so PostgreSQL parses and plans it again on each execution. Naming each distinct
 * SQL text makes node-postgres prepare it once per connection and from then on only bind and execute it: on the
 * seeded 1M-post database, GET /posts/{id} went from ~7,100 to ~8,300 requests/s with the same Node CPU per request
 * (the PostgreSQL backends do less). Beyond `max` distinct texts queries run unnamed, so a query whose text varies
 * cannot pile up prepared statements on the connections.
 */
function statementNames(max = 500): (text: string) => string | undefined {
  const names = new Map<string, string>();
  return (text) => {
    let name = names.get(text);
    if (name === undefined && names.size < max) {
      name = `corkboard_${names.size}`;
      names.set(text, name);
    }
    return name;
  };
}

/**
 * The pg query for a SQL text: named (prepared once per connection) while names last, unnamed beyond. Always the
 * same object shape (`name` may be undefined, which pg treats as unnamed), so pg's Query reads it at one map; the
 * values are passed as they are (pg maps them into the Bind message without changing the array). Before, a
 * conditional spread and a copy of the values cost ~1.8 µs of a ~130 µs PostgreSQL point read in CPU profiles.
 */
function namedQuery(nameOf: (text: string) => string | undefined, text: string, values: ReadonlyArray<unknown>): pg.QueryConfig {
  return { name: nameOf(text), text, values: values as unknown[] };
}

function withNamedStatements(pool: pg.Pool, nameOf: (text: string) => string | undefined): PostgresPool {
  // Kysely keeps its own state per client object, so each pooled client keeps one wrapper.
  const wrappers = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  return {
    async connect() {
      const client = await pool.connect();
      let wrapper = wrappers.get(client);
      if (!wrapper) {
        function query<R>(sql: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>>;
        function query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
        function query<R>(
          text: string | PostgresCursor<R>,
          values: ReadonlyArray<unknown> = [],
        ): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
          // Streaming needs a cursor class in the dialect's config, which corkboard does not set.
          if (typeof text !== 'string') throw new Error('query streams are not supported');
          return client
            .query<pg.QueryResultRow & R>(namedQuery(nameOf, text, values))
            .then((r) => ({ command: r.command as PostgresQueryResult<R>['command'], rowCount: r.rowCount ?? 0, rows: r.rows }));
        }
        wrapper = { query, release: () => client.release() };
        wrappers.set(client, wrapper);
      }
      return wrapper;
    },
    end: () => pool.end(),
  };
}
