import pg from 'pg';
import { CompiledQuery, Kysely, PostgresDialect, sql, type PostgresPool, type PostgresPoolClient, type PostgresQueryResult } from 'kysely';
import { DatabaseUnavailableError } from './errors.js';
import { isSchemaCurrent, migrateToLatest } from './migrate.js';
import { kyselyLog, observe, runHooks, type LockableTable, type PlainStatement, type Store, type StoreOptions, type Tx, type Work } from './store.js';
import { PostChanges } from '../shared/post-changes.js';
import type { Database } from './types.js';

// pg returns int8 (ids, COUNT(*)) as strings and timestamptz as Date. Ids are assigned sequentially and stay far
// below 2^53, so a JS number is exact; timestamps go out as the same ISO 8601 text that SQLite stores. Set per
// pool, not globally, so that other pg users in the process are untouched.
const PG_INT8 = 20;
const PG_TIMESTAMPTZ = 1184;
const parseTimestamp = pg.types.getTypeParser(PG_TIMESTAMPTZ) as (text: string) => Date;
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === PG_INT8) return (text: string) => Number(text);
    if (oid === PG_TIMESTAMPTZ) return (text: string) => parseTimestamp(text).toISOString();
    return pg.types.getTypeParser(oid, format);
  },
} as pg.CustomTypesConfig;

/** PostgreSQL aborts one of two transactions that wait on each other, or that cannot be serialised: retry it. */
const RETRYABLE = new Set(['40P01', '40001']);
const MAX_ATTEMPTS = 5;

/** Distinct SQL texts prepared per connection at most; texts beyond run unnamed, so none piles up without bound. */
const MAX_NAMED_STATEMENTS = 500;

/**
 * PostgreSQL through a pool of `poolMax` connections. Transactions run concurrently; one aborted to break a
 * deadlock is run again (units of work are written to allow it, see `Work`).
 */
export function createPgStore(url: string, options: StoreOptions = {}): Store {
  const timeoutMs = options.statementTimeoutMs ?? 5000;
  const preparedStatements = options.preparedStatements ?? true;
  const onHookError = options.onHookError ?? (() => {});
  const postChanges = new PostChanges();

  const poolMax = options.poolMax ?? 10;
  const pool = newPool(url, options, { max: poolMax, connectionTimeoutMillis: timeoutMs });
  // An idle client that loses its connection emits 'error' on the pool; without a listener that kills the process.
  pool.on('error', () => {});
  const nameOf = statementNames(preparedStatements);
  const onStatement = options.onStatement;
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: wrapPool(pool, nameOf, poolMax) }), log: kyselyLog(onStatement) });

  async function query<R>(statement: PlainStatement, params: readonly unknown[]): Promise<R[]> {
    const text = statement.postgres;
    // pool.query checks a client out and back in around the one statement; an idle client that died is replaced.
    const run = () => pool.query<pg.QueryResultRow & R>({ name: nameOf(text), text, values: [...params] });
    const result = await (onStatement ? observe(onStatement, text, run) : run());
    return result.rows;
  }

  return {
    dialect: 'postgres',
    db,
    postChanges,

    query,

    async queryOne<R>(statement: PlainStatement, params: readonly unknown[]) {
      return (await query<R>(statement, params))[0];
    },

    async transaction<T>(work: Work<T>): Promise<T> {
      // `solo` (TransactionOptions) is SQLite's: here every transaction is its own already.
      for (let attempt = 1; ; attempt++) {
        const hooks: (() => void)[] = [];
        const steps: (() => Promise<void>)[] = [];
        const last: (() => Promise<void>)[] = [];
        // Kysely answers a failed ROLLBACK's error instead of the one that caused it: on a connection that died
        // mid-transaction that is "Connection terminated unexpectedly", which hides the cause. Keep the work's own.
        let failure: { error: unknown } | undefined;
        try {
          const value = await db.transaction().execute(async (trx) => {
            try {
              const value = await work(pgTx(trx, postChanges, hooks, steps, last));
              for (const step of steps) await step();
              for (const step of last) await step();
              return value;
            } catch (error) {
              failure = { error };
              throw error;
            }
          });
          runHooks(hooks, onHookError);
          return value;
        } catch (thrown) {
          const error = failure ? failure.error : thrown;
          const code = (error as { code?: string } | null)?.code;
          if (attempt >= MAX_ATTEMPTS || !code || !RETRYABLE.has(code)) throw error;
          await new Promise((resolve) => setTimeout(resolve, 5 * attempt * Math.random()));
        }
      }
    },

    async migrate() {
      // Over the session connection: a transaction pooler cannot carry the migrator's lock.
      const direct = newPool(options.directUrl ?? url, options, { max: 1, connectionTimeoutMillis: timeoutMs });
      const migrationDb = new Kysely<Database>({ dialect: new PostgresDialect({ pool: direct }) });
      try {
        return await migrateToLatest(migrationDb);
      } finally {
        await migrationDb.destroy();
      }
    },

    healthy: () => isSchemaCurrent(db),

    close: () => db.destroy(),
  };
}

function newPool(url: string, options: StoreOptions, extra: { max: number; connectionTimeoutMillis: number }): pg.Pool {
  const timeoutMs = options.statementTimeoutMs ?? 5000;
  // Startup options: UTC, so timestamps read back as SQLite stores them; a statement (or its wait for a lock) is
  // cancelled after the timeout. A transaction pooler (PG_PREPARED_STATEMENTS=off) rejects startup options: there
  // the role's settings apply (see docs/OPERATIONS.md, "Behind PgBouncer").
  const settings = [`-c TimeZone=UTC`, `-c statement_timeout=${timeoutMs}`];
  if (options.pgSchema) settings.push(`-c search_path=${options.pgSchema}`);
  const behindPooler = options.preparedStatements === false;
  return new pg.Pool({
    connectionString: url,
    types,
    ...extra,
    ...(behindPooler ? {} : { options: settings.join(' ') }),
  });
}

function pgTx(
  trx: Kysely<Database>,
  postChanges: PostChanges,
  hooks: (() => void)[],
  steps: (() => Promise<void>)[],
  last: (() => Promise<void>)[],
): Tx {
  /** The ids among `ids` that exist, each row locked in `mode`, in ascending id order (the global lock order). */
  const lockExisting = async (table: LockableTable, ids: readonly number[], mode: 'update' | 'key share') => {
    if (ids.length === 0) return [];
    const query = trx.selectFrom(table).select('id').where('id', 'in', ids).orderBy('id');
    const rows = await (mode === 'update' ? query.forUpdate() : query.forKeyShare()).execute();
    return rows.map((r) => r.id);
  };
  const tx: Tx = {
    db: trx,
    dialect: 'postgres',
    afterCommit: (hook) => void hooks.push(hook),
    beforeCommit: (step) => void steps.push(step),
    atCommit: (step) => void last.push(step),
    recordPostChange: (change) => postChanges.record(tx, change),
    query: async <R>(statement: PlainStatement, params: readonly unknown[]) =>
      (await trx.executeQuery<R>(CompiledQuery.raw(statement.postgres, [...params]))).rows as R[],
    // The driver's row count (INSERT … ON CONFLICT DO UPDATE counts the rows inserted or updated, not those skipped).
    run: async (statement: PlainStatement, params: readonly unknown[]) =>
      Number((await trx.executeQuery(CompiledQuery.raw(statement.postgres, [...params]))).numAffectedRows ?? 0),
    lockRows: (table, ids) => lockExisting(table, ids, 'update'),
    shareRows: (table, ids) => lockExisting(table, ids, 'key share'),
    async tryExclusive(key) {
      const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_xact_lock(${key}) as locked`.execute(trx);
      return rows[0]?.locked === true;
    },
  };
  return tx;
}

/**
 * Kysely sends every query unnamed, so PostgreSQL parses and plans it again on each execution. Naming each distinct
 * SQL text makes node-postgres prepare it once per connection and then only bind and execute it. Not behind a
 * transaction pooler (`named` false), which may hand the next statement to a connection that never saw the name.
 * One namer per pool: a name always stands for the same text on every connection, whoever sends it.
 */
function statementNames(named: boolean): (text: string) => string | undefined {
  const names = new Map<string, string>();
  return (text) => {
    if (!named) return undefined;
    let name = names.get(text);
    if (name === undefined && names.size < MAX_NAMED_STATEMENTS) {
      name = `corkboard_${names.size}`;
      names.set(text, name);
    }
    return name;
  };
}

/**
 * The pool as Kysely sees it, with named statements (statementNames) and because:
 * - A connection that dies while checked out (the server terminated it, the network dropped, between two
 *   statements of a transaction) emits 'error' on its client, and pg-pool listens only on idle clients: unheard,
 *   that event kills the process. The error is kept instead; the next query on that client fails with it as the
 *   cause (a 503 whose log names what happened), and pg-pool discards the broken client when it is released.
 */
function wrapPool(pool: pg.Pool, nameOf: (text: string) => string | undefined, max: number): PostgresPool {
  const lost = new WeakMap<pg.PoolClient, unknown>();
  pool.on('connect', (client) => {
    client.on('error', (error) => lost.set(client, error));
  });
  return {
    async connect(): Promise<PostgresPoolClient> {
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (error) {
        // pg-pool says "timeout exceeded when trying to connect" both when the server does not answer and when
        // every connection stayed busy for the whole wait: say which, for whoever reads the log.
        if (error instanceof Error && /timeout exceeded/.test(error.message) && pool.totalCount >= max) {
          throw new DatabaseUnavailableError(`all ${max} PostgreSQL connections stayed busy for the whole wait`, { cause: error });
        }
        // Whatever stops a new connection (the database dropped or not accepting connections, a role refused,
        // the server down) is the database being unavailable, never a fault of the request: a 503.
        throw new DatabaseUnavailableError('could not connect to PostgreSQL', { cause: error });
      }
      return {
        async query<R>(text: unknown, values: ReadonlyArray<unknown> = []): Promise<PostgresQueryResult<R>> {
          // Kysely passes a cursor object only for streaming, which corkboard does not use.
          if (typeof text !== 'string') throw new Error('query streams are not supported');
          if (lost.has(client)) throw new DatabaseUnavailableError('the connection to PostgreSQL was lost', { cause: lost.get(client) });
          let result;
          try {
            result = await client.query<pg.QueryResultRow & R>({ name: nameOf(text), text, values: [...values] });
          } catch (error) {
            // A query cut off by a dying connection fails with "Connection terminated unexpectedly"; the server's
            // own reason (57P01 terminated by an administrator, a reset socket) came as the client's 'error' event.
            const cause = lost.get(client);
            if (cause !== undefined && cause !== error) throw new DatabaseUnavailableError('the connection to PostgreSQL was lost', { cause });
            throw error;
          }
          return { command: result.command as PostgresQueryResult<R>['command'], rowCount: result.rowCount ?? 0, rows: result.rows };
        },
        release: () => client.release(),
      } as PostgresPoolClient;
    },
    end: () => pool.end(),
  };
}
