import type { Kysely, LogEvent } from 'kysely';
import type { PostChange, PostChanges } from '../shared/post-changes.js';
import type { Database } from './types.js';

export type Dialect = 'sqlite' | 'postgres';

/** The tables whose rows a transaction may lock (see `Tx.lockRows`). */
export type LockableTable = 'users' | 'posts' | 'replies' | 'boards' | 'reports';

export interface TransactionOptions {
  /**
   * Background work of unknown size (a chunk of a big account's fan-out): on SQLite with group commit it runs in a
   * transaction of its own, so that no request's write waits for its COMMIT. Nothing changes on PostgreSQL, where
   * every transaction is its own.
   */
  solo?: boolean;
}

/** A statement written as plain SQL, one text per dialect (prepared.ts), with `?` or `$n` parameters. */
export interface PlainStatement {
  readonly sqlite: string;
  readonly postgres: string;
}

/**
 * What a unit of work gets inside a transaction. On SQLite with group commit, "the transaction" is the unit's
 * savepoint inside a batch's transaction: its reads see the writes of the units before it in the batch (serial
 * order), its writes are undone alone if it throws, and "committed" means the batch's COMMIT succeeded.
 */
export interface Tx {
  /** Queries inside the transaction (pass it to a repository). */
  readonly db: Kysely<Database>;
  readonly dialect: Dialect;
  /**
   * Runs `hook` once the transaction has committed: fan-out scheduling, stream events, anything that must not
   * happen for a write that rolls back. Hooks of an attempt that rolled back (or was retried, or whose unit threw
   * inside a batch) never run; hooks run in commit order, before the caller hears back. A hook that throws is
   * logged; the commit stands.
   */
  afterCommit(hook: () => void): void;
  /**
   * Runs `step` inside the transaction once the unit of work has returned, before it commits: writes that belong
   * with the unit's outcome, such as the kept answer of an idempotent create. Steps run in the order they were
   * added; one that throws rolls the unit back, as if the unit had thrown.
   */
  beforeCommit(step: () => Promise<void>): void;
  /**
   * Runs `step` in the transaction just before its COMMIT: on SQLite after every unit that shares the COMMIT (group
   * commit) has returned, outside their savepoints, in the order added; dropped with this unit if it fails. For a
   * write that costs per savepoint: FTS5 writes the words pending at each savepoint as an index segment of their
   * own, so a search entry written in each unit's savepoint cost a segment a create (db/search-sql.ts). A step
   * runs when the unit's rows may have been changed by a later unit of the batch. On PostgreSQL: after the unit's
   * `beforeCommit` steps.
   */
  atCommit(step: () => Promise<void>): void;
  /**
   * Reports a change to a post (`store.postChanges`): its subscribers' in-transaction work runs now, their
   * after-commit work once this transaction has committed. Every write that changes a post calls it.
   */
  recordPostChange(change: PostChange): Promise<void>;
  /**
   * Runs a plain-SQL statement (prepared.ts) inside the transaction and answers its rows (a write's
   * `RETURNING`): for the few writes on a hot path where building the query costs more than running it.
   */
  query<R>(statement: PlainStatement, params: readonly unknown[]): Promise<R[]>;
  /**
   * Runs a plain-SQL write inside the transaction and answers how many rows it inserted, updated or deleted (an
   * upsert whose `DO UPDATE … WHERE` held for no row: 0). Where only that count matters, this spares the write its
   * `RETURNING`, which on SQLite costs more than the write itself (bench/README.md, idempotency keys).
   */
  run(statement: PlainStatement, params: readonly unknown[]): Promise<number>;
  /**
   * Locks these rows until the end of the transaction, in ascending id order (PostgreSQL `FOR UPDATE`; SQLite's
   * single writer already holds everything), and answers the ids that exist. Every multi-row lock in the service
   * goes through here, so two transactions always take row locks in one global order and cannot deadlock.
   */
  lockRows(table: LockableTable, ids: readonly number[]): Promise<number[]>;
  /**
   * Holds these rows as a foreign key to them does (PostgreSQL `FOR KEY SHARE`: they cannot be deleted or have
   * their id changed, and other writers of them do not wait), in ascending id order, and answers the ids that
   * exist. For a write that must take a lock on another table before its insert: taking the referenced rows first
   * keeps the global order (users before posts).
   */
  shareRows(table: LockableTable, ids: readonly number[]): Promise<number[]>;
  /**
   * Takes a transaction-scoped exclusive lock named by `key` if no other transaction holds it (PostgreSQL advisory
   * lock; always granted on SQLite, where one process owns the file's writes). False: someone else has it.
   */
  tryExclusive(key: number): Promise<boolean>;
}

/**
 * A unit of work. It may run more than once (PostgreSQL retries a transaction it aborted to break a deadlock or a
 * serialization conflict), so it changes nothing outside the database except through `tx.afterCommit`. SQLite
 * never runs a unit twice. A unit must not call `store.transaction` and wait for it: on SQLite the inner unit is
 * queued behind the outer one, which would wait for ever; work that belongs together goes on `tx`.
 */
export type Work<T> = (tx: Tx) => Promise<T>;

/**
 * The database, one object per dialect (sqlite-store.ts, pg-store.ts). Reads outside a transaction use `db`;
 * every write goes through `transaction` (on SQLite `db` is a read-only connection, so a stray write fails loudly).
 */
export interface Store {
  readonly dialect: Dialect;
  /** Reads outside a transaction. */
  readonly db: Kysely<Database>;
  /** Hears every post change its transactions record (`Tx.recordPostChange`): the fan-out worker, live streams. */
  readonly postChanges: PostChanges;
  /**
   * Runs a plain-SQL read (prepared.ts) on the driver itself, outside any transaction: for the few statements
   * on every request, where the builder and its connection handling cost more than the database's answer.
   */
  query<R>(statement: PlainStatement, params: readonly unknown[]): Promise<R[]>;
  /** `query` for a statement that finds at most one row (a lookup by key): that row, or undefined. */
  queryOne<R>(statement: PlainStatement, params: readonly unknown[]): Promise<R | undefined>;
  /**
   * Runs `work` in a transaction and answers what it answered once committed, after its after-commit hooks have
   * run; reads through `db` see its writes from then on, not before. If `work` throws, its writes are undone and the
   * call rejects with that error (on SQLite once its batch is over: with the batch's error if that failed too).
   */
  transaction<T>(work: Work<T>, options?: TransactionOptions): Promise<T>;
  /** Brings the schema up to date over a connection of its own (PostgreSQL: DATABASE_DIRECT_URL). */
  migrate(): Promise<string[]>;
  /** True when the database answers and its schema is the one this build expects (for /health). */
  healthy(): Promise<boolean>;
  close(): Promise<void>;
}

export interface StoreOptions {
  /** PostgreSQL connections per process. */
  poolMax?: number;
  /** PostgreSQL schema to use instead of `public` (tests isolate themselves this way). */
  pgSchema?: string;
  /** PostgreSQL: name statements so each is parsed once per connection; off behind a transaction pooler. */
  preparedStatements?: boolean;
  /** PostgreSQL: the session connection for migrations (and LISTEN); default: the main URL. */
  directUrl?: string;
  /** Longest a statement may run or wait for a lock before it is cancelled (a 503 for the client). */
  statementTimeoutMs?: number;
  /** SQLite: units of work queued together share one transaction and its COMMIT (group commit); default on. */
  groupCommit?: boolean;
  /** SQLite group commit: how long a batch keeps taking units (default `MAX_BATCH_MS` in sqlite-store.ts). */
  groupCommitMaxMs?: number;
  /** SQLite: checkpoint the WAL from a thread of its own instead of inside a COMMIT (sqlite-checkpoint.ts); default on. */
  backgroundCheckpoint?: boolean;
  /** Where failures of after-commit hooks and of background work (SQLite's checkpoints) are reported. */
  onHookError?: (error: unknown) => void;
  /**
   * Told of every statement once it has run (tracing: one span per statement, src/tracing.ts). Unset, statements
   * are not timed at all. Set, a SQLite unit of work also runs in its caller's async context, not in the batch
   * runner's, so what it runs is attributed to the request that queued it.
   */
  onStatement?: StatementObserver;
}

/** One statement the store ran: its SQL text (never its parameters), when it began, how long it took, its error. */
export interface StatementEvent {
  sql: string;
  /** Milliseconds since the epoch, fractional. */
  startTime: number;
  durationMs: number;
  error?: unknown;
}

export type StatementObserver = (statement: StatementEvent) => void;

/** Kysely's `log` option for an observer (Kysely times a query only when `log` is set), or undefined. */
export function kyselyLog(observer: StatementObserver | undefined): ((event: LogEvent) => void) | undefined {
  if (!observer) return undefined;
  return (event) =>
    observer({
      sql: event.query.sql,
      startTime: performance.timeOrigin + performance.now() - event.queryDurationMillis,
      durationMs: event.queryDurationMillis,
      ...(event.level === 'error' ? { error: event.error } : {}),
    });
}

/** Runs a plain-SQL statement and tells `observer` of it. */
export async function observe<T>(observer: StatementObserver, sql: string, run: () => Promise<T> | T): Promise<T> {
  const start = performance.now();
  const event = (error?: unknown): StatementEvent => ({
    sql,
    startTime: performance.timeOrigin + start,
    durationMs: performance.now() - start,
    ...(error === undefined ? {} : { error }),
  });
  try {
    const value = await run();
    observer(event());
    return value;
  } catch (error) {
    observer(event(error));
    throw error;
  }
}

/** Runs after-commit hooks in order; one that throws does not stop the others. */
export function runHooks(hooks: readonly (() => void)[], onError: (error: unknown) => void): void {
  for (const hook of hooks) {
    try {
      hook();
    } catch (error) {
      onError(error);
    }
  }
}
