import { AsyncResource } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { CompiledQuery, Kysely, SqliteDialect } from 'kysely';
import { DatabaseUnavailableError } from './errors.js';
import { startCheckpointer } from './sqlite-checkpoint.js';
import { isSchemaCurrent, migrateToLatest } from './migrate.js';
import { kyselyLog, observe, runHooks, type LockableTable, type PlainStatement, type Store, type TransactionOptions, type StoreOptions, type Tx, type Work } from './store.js';
import { PostChanges } from '../shared/post-changes.js';
import type { Database } from './types.js';

const BEGIN_IMMEDIATE = CompiledQuery.raw('begin immediate');
const COMMIT = CompiledQuery.raw('commit');
const ROLLBACK = CompiledQuery.raw('rollback');
// One name serves every unit: a unit's savepoint is released before the next unit's is taken, so they never nest.
const SAVEPOINT_UNIT = CompiledQuery.raw('savepoint unit');
const RELEASE_UNIT = CompiledQuery.raw('release unit');
const ROLLBACK_TO_UNIT = CompiledQuery.raw('rollback to unit');

/**
 * Units of work one transaction holds at most with group commit on. A longer queue is committed in several
 * transactions: the callers of a batch hear back only after its COMMIT, so a bounded batch bounds their wait.
 */
export const MAX_UNITS_PER_TRANSACTION = 64;

/**
 * How long a batch keeps taking units. Every caller of a batch waits for its COMMIT, so one large unit (a chunk of a
 * big account's fan-out) must not hold many small ones behind it: once the batch has run this long, it commits.
 */
export const MAX_BATCH_MS = 5;

/** Prepared statements kept per connection: a process runs a small set of SQL texts (values are parameters). */
const STATEMENT_CACHE_SIZE = 500;

/**
 * Page cache per connection, in KiB. better-sqlite3 builds SQLite with 16 MiB, and each connection keeps its own
 * (reader and writer: two copies of what is hot). The pages that every lookup walks (the B-trees' upper levels) fit
 * in far less; the rest comes from the kernel's page cache, which all connections and processes share (measured in
 * bench/README.md, "Figures behind choices in the code").
 */
const PAGE_CACHE_KIB = 4096;

/**
 * SQLite, embedded. Two connections to one file in WAL mode:
 * - a read connection (`query_only`) for everything outside a transaction: WAL lets it read the last committed
 *   state while a writer (this process or another, e.g. a backup or the sqlite3 CLI) holds the write lock;
 * - a write connection for transactions, which start with `BEGIN IMMEDIATE` so the write lock is taken up front.
 *   better-sqlite3 is synchronous, so SQLite's own busy_timeout would block the whole event loop while another
 *   process holds the lock; instead the write connection has none and the lock is retried with timers until
 *   `statementTimeoutMs`, after which the request gets a 503.
 * `sqlite::memory:` is served from a temporary file (deleted on close), so that it behaves like any other.
 *
 * Group commit (`groupCommit`, on by default): a COMMIT appends every page the transaction changed to the WAL and
 * is most of what a small write costs, and consecutive writes change mostly the same pages (a table's last leaf,
 * its indexes, a counter row). So the units of work queued together run one after another in one transaction,
 * each inside a savepoint of its own, and share its COMMIT:
 * - each unit sees the writes of the units before it, as serial transactions would; none is ever run twice;
 * - a unit that throws is rolled back to its savepoint alone: its writes and its after-commit hooks are dropped,
 *   and the units before and after it commit;
 * - every caller hears back only after the COMMIT, when the read connection has begun to see the batch's writes;
 *   hooks run first, in commit order. So does a caller whose unit threw: it may have failed on an earlier unit's
 *   write (a unique key taken), which must be committed, and readable, before its caller acts on that;
 * - if the transaction fails as a whole (its COMMIT fails, or SQLite ends it by itself on a full disk or an I/O
 *   error), nothing of it stays and every caller of the batch gets that error.
 * A batch starts on the `setImmediate` after the first unit is queued, so every request whose unit was queued in
 * that turn of the event loop joins it: better-sqlite3 is synchronous, and a batch started at once would be over
 * before the next request is read. COMMIT checks no constraint: the schema has no deferred foreign keys, so a
 * unit's constraint failures are its own statement's errors (a deferred one would fail every unit of its batch).
 * Off: one unit per transaction, started at once.
 */
export function createSqliteStore(location: string, options: StoreOptions = {}): Store {
  const temporary = location === ':memory:';
  const file = temporary ? path.join(os.tmpdir(), `corkboard-${randomBytes(8).toString('hex')}.db`) : location;
  makeFolder(path.dirname(path.resolve(file)));
  const timeoutMs = options.statementTimeoutMs ?? 5000;
  const onHookError = options.onHookError ?? (() => {});
  const postChanges = new PostChanges();

  const writer = open(file, 0);
  // A savepoint keeps the original of every page its unit changes in a statement journal, which SQLite moves to a
  // temporary file once it outgrows a small buffer (a large unit, e.g. a fan-out chunk) and then writes for every
  // later unit of the batch; in memory it stays a copy, emptied whenever a unit's savepoint is released.
  writer.pragma('temp_store = MEMORY');
  const checkpointer = (options.backgroundCheckpoint ?? true) ? startCheckpointer(file, onHookError) : undefined;
  const reader = open(file, 100);
  reader.pragma('query_only = ON');
  const readStatements = withStatementCache(reader);
  const onStatement = options.onStatement;
  const log = kyselyLog(onStatement);
  const writeStatements = withStatementCache(writer);
  const writeDb = new Kysely<Database>({ dialect: new SqliteDialect({ database: writeStatements }), log });
  /** `Tx.query`: a plain statement on the writer's driver, as `query` reads, inside the unit's savepoint. */
  const writeQuery = async <R>(statement: PlainStatement, params: readonly unknown[]): Promise<R[]> => {
    const run = () => {
      const prepared = writeStatements.prepare(statement.sqlite);
      if (prepared.reader) return prepared.all(params) as R[];
      prepared.run(params);
      return [];
    };
    return onStatement ? observe(onStatement, statement.sqlite, run) : run();
  };
  /** `Tx.run`: a plain write on the writer's driver, answering the rows it changed. */
  const writeRun = async (statement: PlainStatement, params: readonly unknown[]): Promise<number> => {
    const run = () => writeStatements.prepare(statement.sqlite).run(params).changes;
    return onStatement ? observe(onStatement, statement.sqlite, run) : run();
  };
  const readDb = new Kysely<Database>({ dialect: new SqliteDialect({ database: readStatements }), log });

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

  const maxUnits = (options.groupCommit ?? true) ? MAX_UNITS_PER_TRANSACTION : 1;
  const maxBatchMs = options.groupCommitMaxMs ?? MAX_BATCH_MS;
  const queue: QueuedUnit[] = [];
  // True from the first queued unit until the queue is empty again: one batch at a time holds the write connection.
  let running = false;

  async function drain(): Promise<void> {
    while (queue.length > 0) await runBatch(queue.shift() as QueuedUnit);
    running = false;
  }

  /**
   * One transaction: `first`, then the units queued behind it, up to `maxUnits` and while the batch is younger than
   * `maxBatchMs`, each in its savepoint; a solo unit is never batched with another. Settles every unit it takes and
   * never throws: a throw would stop `drain` and leave the queue waiting forever.
   */
  async function runBatch(first: QueuedUnit): Promise<void> {
    try {
      await writeDb.connection().execute(async (conn) => {
        try {
          // The first unit's deadline: the others queued get their own turn, as they would one by one.
          await begin(conn, first.deadline);
        } catch (error) {
          first.reject(error);
          return;
        }
        const taken: QueuedUnit[] = [];
        const outcomes: Outcome[] = [];
        const until = performance.now() + maxBatchMs;
        try {
          for (let unit: QueuedUnit | undefined = first; unit !== undefined; ) {
            taken.push(unit);
            outcomes.push(await runUnit(conn, unit.work));
            const next: QueuedUnit | undefined = queue[0];
            const more: boolean = !unit.solo && next !== undefined && !next.solo && taken.length < maxUnits && performance.now() < until;
            unit = more ? queue.shift() : undefined;
          }
          // The units' `atCommit` steps, outside any savepoint; one that throws loses the batch, as the COMMIT would.
          for (const outcome of outcomes) if (outcome.ok) for (const step of outcome.last) await step();
          await conn.executeQuery(COMMIT);
        } catch (error) {
          // Nothing of the batch stays. The error that ended it is what every caller and the log must see, never
          // the failed ROLLBACK's "no transaction is active".
          if (writer.inTransaction) await conn.executeQuery(ROLLBACK).catch(() => {});
          for (const unit of taken) unit.reject(error);
          return;
        }
        taken.forEach((unit, i) => {
          const outcome = outcomes[i] as Outcome;
          if (outcome.ok) {
            runHooks(outcome.hooks, onHookError);
            unit.resolve(outcome.value);
          } else {
            unit.reject(outcome.error);
          }
        });
      });
    } catch (error) {
      // No connection (the store was closed): no statement ran.
      first.reject(error);
    }
  }

  /** Runs one unit in a savepoint of its own; throws only when the whole transaction is lost. */
  async function runUnit(conn: Kysely<Database>, work: Work<unknown>): Promise<Outcome> {
    const hooks: (() => void)[] = [];
    const steps: (() => Promise<void>)[] = [];
    const last: (() => Promise<void>)[] = [];
    await conn.executeQuery(SAVEPOINT_UNIT);
    try {
      const value = await work(sqliteTx(conn, writeQuery, writeRun, postChanges, hooks, steps, last));
      for (const step of steps) await step();
      // The unit caught the error under which SQLite ended the transaction; without this the callers would hear
      // only that the savepoint is gone.
      if (!writer.inTransaction) throw new Error('SQLite ended the transaction during this unit of work');
      await conn.executeQuery(RELEASE_UNIT);
      return { ok: true, value, hooks, last };
    } catch (error) {
      // SQLite ends the transaction by itself on some errors (a full disk, an I/O error): the batch is lost.
      if (!writer.inTransaction) throw error;
      await conn.executeQuery(ROLLBACK_TO_UNIT);
      await conn.executeQuery(RELEASE_UNIT);
      return { ok: false, error };
    }
  }

  return {
    dialect: 'sqlite',
    db: readDb,
    postChanges,

    // better-sqlite3 answers synchronously, so this cannot interleave with a query Kysely runs on the same connection.
    async query<R>(statement: PlainStatement, params: readonly unknown[]) {
      const all = () => readStatements.prepare(statement.sqlite).all(params) as R[];
      return onStatement ? observe(onStatement, statement.sqlite, all) : all();
    },

    // `get` stops at the first row; `all` steps once more to find there is no second and builds an array.
    async queryOne<R>(statement: PlainStatement, params: readonly unknown[]) {
      const get = () => readStatements.prepare(statement.sqlite).get(params) as R | undefined;
      return onStatement ? observe(onStatement, statement.sqlite, get) : get();
    },

    transaction<T>(work: Work<T>, options: TransactionOptions = {}): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        const solo = options.solo === true;
        // Traced: the unit runs in its caller's async context (its statements belong to the caller's span), not in
        // that of the batch runner, which the first unit of the batch started.
        if (onStatement) work = AsyncResource.bind(work);
        queue.push({ work, solo, deadline: Date.now() + timeoutMs, resolve: resolve as (value: unknown) => void, reject });
        if (running) return;
        running = true;
        if (maxUnits > 1) setImmediate(() => void drain());
        else void drain();
      });
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
      await checkpointer?.close();
      await readDb.destroy();
      await writeDb.destroy();
      // Kysely closes a connection only if it ever ran a query; these were opened up front.
      reader.close();
      writer.close();
      if (temporary) for (const suffix of ['', '-wal', '-shm']) fs.rmSync(file + suffix, { force: true });
    },
  };
}

interface QueuedUnit {
  work: Work<unknown>;
  /** Commits alone: no other unit joins its transaction (TransactionOptions.solo). */
  solo: boolean;
  /** Until when `BEGIN IMMEDIATE` is retried for it (DB_STATEMENT_TIMEOUT_MS after it was queued). */
  deadline: number;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** How a unit ended in its savepoint; its caller hears it once the batch's COMMIT has succeeded. */
type Outcome = { ok: true; value: unknown; hooks: (() => void)[]; last: (() => Promise<void>)[] } | { ok: false; error: unknown };

function sqliteTx(
  conn: Kysely<Database>,
  query: Tx['query'],
  run: Tx['run'],
  postChanges: PostChanges,
  hooks: (() => void)[],
  steps: (() => Promise<void>)[],
  last: (() => Promise<void>)[],
): Tx {
  // The transaction holds SQLite's write lock: no other writer runs until it ends, so there is nothing to lock.
  const existing = async (table: LockableTable, ids: readonly number[]) => {
    if (ids.length === 0) return [];
    const rows = await conn.selectFrom(table).select('id').where('id', 'in', ids).orderBy('id').execute();
    return rows.map((r) => r.id);
  };
  const tx: Tx = {
    db: conn,
    dialect: 'sqlite',
    afterCommit: (hook) => void hooks.push(hook),
    beforeCommit: (step) => void steps.push(step),
    atCommit: (step) => void last.push(step),
    recordPostChange: (change) => postChanges.record(tx, change),
    query,
    run,
    lockRows: existing,
    shareRows: existing,
    tryExclusive: async () => true,
  };
  return tx;
}

function open(file: string, busyTimeoutMs: number): SQLite.Database {
  const sqlite = new SQLite(file);
  // WAL lets readers run beside the writer; NORMAL sync in WAL mode keeps every committed transaction across a
  // process crash (kill -9) and risks only the last ones on power loss. Without foreign_keys=ON no cascade runs.
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma(`busy_timeout = ${busyTimeoutMs}`);
  sqlite.pragma(`cache_size = -${PAGE_CACHE_KIB}`);
  return sqlite;
}

/**
 * Kysely's SQLite driver prepares every statement afresh, which costs more than running a point read; statements
 * are kept per SQL text instead (the same idea as PostgreSQL's named statements). Sharing one is safe: Kysely runs
 * one query at a time per connection.
 */
function withStatementCache(sqlite: SQLite.Database): { close(): void; prepare(text: string): SQLite.Statement } {
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

/**
 * Creates `folder` and its missing parents, one level at a time: Node's `mkdirSync(…, { recursive: true })` retries
 * forever where a parent exists but refuses new entries with ENOENT (under /proc), so a bad DATABASE_URL would hang
 * start-up instead of stopping it with a message.
 */
function makeFolder(folder: string): void {
  if (fs.existsSync(folder)) return;
  makeFolder(path.dirname(folder));
  fs.mkdirSync(folder);
}
