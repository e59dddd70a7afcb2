import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { CompiledQuery, Kysely, SqliteDialect, type SqliteDatabase } from 'kysely';
import { DatabaseUnavailableError } from './errors.js';
import { isSchemaCurrent, migrateToLatest } from './migrate.js';
import { runHooks, type PlainStatement, type Store, type StoreOptions, type Tx, type Work } from './store.js';
import type { Database } from './types.js';

const BEGIN_IMMEDIATE = CompiledQuery.raw('begin immediate');
const COMMIT = CompiledQuery.raw('commit');
const ROLLBACK = CompiledQuery.raw('rollback');

/** Prepared statements kept per connection: a process runs a small set of SQL texts (values are parameters). */
const STATEMENT_CACHE_SIZE = 500;

/**
 * SQLite, embedded. Two connections to one file in WAL mode:
 * - a read connection (`query_only`) for everything outside a transaction: WAL lets it read the last committed
 *   state while a writer (this process or another, e.g. a backup or the sqlite3 CLI) holds the write lock;
 * - a write connection for transactions, which start with `BEGIN IMMEDIATE` so the write lock is taken up front.
 *   better-sqlite3 is synchronous, so SQLite's own busy_timeout would block the whole event loop while another
 *   process holds the lock; instead the write connection has none and the lock is retried with timers until
 *   `statementTimeoutMs`, after which the request gets a 503.
 * `sqlite::memory:` is served from a temporary file (deleted on close), so that it behaves like any other.
 */
export function createSqliteStore(location: string, options: StoreOptions = {}): Store {
  const temporary = location === ':memory:';
  const file = temporary ? path.join(os.tmpdir(), `corkboard-${randomBytes(8).toString('hex')}.db`) : location;
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const timeoutMs = options.statementTimeoutMs ?? 5000;
  const onHookError = options.onHookError ?? (() => {});

  const writer = open(file, 0);
  const reader = open(file, 100);
  reader.pragma('query_only = ON');
  const readStatements = withStatementCache(reader);
  const writeDb = new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(writer) }) });
  const readDb = new Kysely<Database>({ dialect: new SqliteDialect({ database: readStatements }) });

  /** Takes the write lock, retrying while another connection holds it, until the deadline. */
  async function begin(conn: Kysely<Database>, deadline: number): Promise<void> {
    for (let wait = 1; ; wait = Math.min(wait * 2, 50)) {
      try {
        await conn.executeQuery(BEGIN_IMMEDIATE);
        return;
      } catch (error) {
        if (!isBusy(error)) throw error;
        if (Date.now() + wait > deadline) {
          throw new DatabaseUnavailableError('the SQLite write lock is held by another connection', { cause: error });
        }
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  return {
    dialect: 'sqlite',
    db: readDb,

    // better-sqlite3 answers synchronously, so this cannot interleave with a query Kysely runs on the same connection.
    async query<R>(statement: PlainStatement, params: readonly unknown[]) {
      return readStatements.prepare(statement.sqlite).all(params) as R[];
    },

    async transaction<T>(work: Work<T>): Promise<T> {
      const deadline = Date.now() + timeoutMs;
      const hooks: (() => void)[] = [];
      // `connection()` holds the write connection for the whole unit: one transaction at a time, in arrival order.
      const value = await writeDb.connection().execute(async (conn) => {
        await begin(conn, deadline);
        try {
          const result = await work(sqliteTx(conn, hooks));
          await conn.executeQuery(COMMIT);
          return result;
        } catch (error) {
          // SQLite ends the transaction by itself on some errors (a full disk, an I/O error); the original error
          // is what the caller and the log must see, never the failed ROLLBACK's "no transaction is active".
          if (writer.inTransaction) {
            try {
              await conn.executeQuery(ROLLBACK);
            } catch {
              // the connection is closed or broken: the original error says why
            }
          }
          throw error;
        }
      });
      runHooks(hooks, onHookError);
      return value;
    },

    async migrate() {
      // A connection of its own that may wait for the lock: start-up, not a request, so blocking is fine here.
      const connection = open(file, timeoutMs);
      const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: connection }) });
      try {
        return await migrateToLatest(db);
      } finally {
        await db.destroy();
      }
    },

    healthy: () => isSchemaCurrent(readDb),

    async close() {
      await readDb.destroy();
      await writeDb.destroy();
      // Kysely closes a connection only if it ever ran a query; these were opened up front.
      reader.close();
      writer.close();
      if (temporary) for (const suffix of ['', '-wal', '-shm']) fs.rmSync(file + suffix, { force: true });
    },
  };
}

function sqliteTx(conn: Kysely<Database>, hooks: (() => void)[]): Tx {
  return {
    db: conn,
    dialect: 'sqlite',
    afterCommit: (hook) => void hooks.push(hook),
    // The transaction holds SQLite's write lock: no other writer runs until it ends, so there is nothing to lock.
    async lockRows(table, ids) {
      if (ids.length === 0) return [];
      const rows = await conn.selectFrom(table).select('id').where('id', 'in', ids).orderBy('id').execute();
      return rows.map((r) => r.id);
    },
    tryExclusive: async () => true,
  };
}

function open(file: string, busyTimeoutMs: number): SQLite.Database {
  const sqlite = new SQLite(file);
  // WAL lets readers run beside the writer; NORMAL sync in WAL mode keeps every committed transaction across a
  // process crash (kill -9) and risks only the last ones on power loss. Without foreign_keys=ON no cascade runs.
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma(`busy_timeout = ${busyTimeoutMs}`);
  return sqlite;
}

/**
 * Kysely's SQLite driver prepares every statement afresh, which costs more than running a point read; statements
 * are kept per SQL text instead (the same idea as PostgreSQL's named statements). Sharing one is safe: Kysely runs
 * one query at a time per connection.
 */
function withStatementCache(sqlite: SQLite.Database): SqliteDatabase {
  const statements = new Map<string, SQLite.Statement>();
  return {
    close: () => sqlite.close(),
    prepare(text: string) {
      let statement = statements.get(text);
      if (statement === undefined) {
        if (statements.size >= STATEMENT_CACHE_SIZE) statements.clear();
        statement = sqlite.prepare(text);
        statements.set(text, statement);
      }
      return statement;
    },
  };
}

const isBusy = (error: unknown) => String((error as { code?: unknown } | null)?.code).startsWith('SQLITE_BUSY');
