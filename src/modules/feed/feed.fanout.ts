import fp from 'fastify-plugin';
import { sql, type Kysely } from 'kysely';
import type { FastifyBaseLogger } from 'fastify';
import type { Dialect } from '../../db/database.js';
import { inTransaction } from '../../db/transaction.js';
import { reusable } from '../../db/compiled.js';
import type { Database } from '../../db/types.js';

declare module 'fastify' {
  interface FastifyInstance {
    fanout: Fanout;
  }
}

export interface Fanout {
  /** Asks for the queue to be drained soon (after the current I/O callbacks): call it after queueing a post. */
  schedule(): void;
  /** Drains the queue now and resolves when it is empty (or another process holds the drain): tests, shutdown. */
  drain(): Promise<void>;
  /** Stops the worker after the batch in progress; queued posts stay queued for the next start. */
  close(): Promise<void>;
}

export interface FanoutOptions {
  /** Posts per transaction. */
  batchSize?: number;
  /**
   * How often the queue is swept even when nothing was scheduled in this process: posts queued by a process that
   * died before draining them (or by another process while this one held the drain) are picked up here.
   */
  sweepMs?: number;
}

/** Any 64-bit key: the PostgreSQL advisory lock that lets one process drain at a time. */
const DRAIN_LOCK = 0x636f726b; // "cork"
/** Pads the id list of a partial batch: no post has this id, so every batch runs the same SQL text. */
const NO_POST = -1;

/**
 * The batch's three statements, built and compiled once per worker: building and compiling them with Kysely for
 * every batch cost more than SQLite took to run them (callgrind, POST /users/{id}/posts with 10 followers: this
 * and ending a run without a last, empty batch took ~60,000 instructions off a created post's ~630,000). The post
 * ids of a batch are parameters in a list padded to `batchSize`, so the SQL text never changes; `reusable` puts
 * them in place of the stand-ins (-2, -3, …) on each run.
 */
function compileBatch(db: Kysely<Database>, batchSize: number) {
  const standIns = Array.from({ length: batchSize }, (_, i) => NO_POST - 1 - i);
  return {
    queued: db.selectFrom('fanout_queue').select(['post_id', 'owner_id']).orderBy('post_id').limit(sql.lit(batchSize)).compile(),
    write: reusable(
      db
        .insertInto('feed_entries')
        .columns(['user_id', 'post_id', 'owner_id'])
        .expression((eb) =>
          eb
            .selectFrom('fanout_queue')
            .innerJoin('follows', 'follows.followee_id', 'fanout_queue.owner_id')
            .select(['follows.follower_id', 'fanout_queue.post_id', 'fanout_queue.owner_id'])
            .where('fanout_queue.post_id', 'in', standIns),
        )
        .onConflict((oc) => oc.doNothing())
        .compile(),
      standIns,
    ),
    dequeue: reusable(db.deleteFrom('fanout_queue').where('post_id', 'in', standIns).compile(), standIns),
  };
}

/**
 * The fan-out worker. A new post is queued in `fanout_queue` by the transaction that creates it; this worker
 * turns queued posts into `feed_entries` rows (one per follower of the owner) in batches, each batch one
 * transaction that writes its entries and removes its posts from the queue together. Batching is what makes
 * fan-out cheap on SQLite: consecutive posts by the same authors share feed pages, and one commit writes them
 * once. Readers never wait for it: a feed page merges the queued posts of the users the reader follows
 * (feed.repository.ts), so a post is in every follower's feed from the moment it is created.
 *
 * Correctness against concurrent follows and unfollows is the same as when fan-out ran inside the create: the
 * owners' user rows are locked (PostgreSQL `FOR UPDATE`, ascending ids) before the entries are written, and
 * following or unfollowing updates the same row (its follower_count), so each sees the other's committed rows.
 */
export function createFanout(db: Kysely<Database>, dialect: Dialect, log: FastifyBaseLogger, options: FanoutOptions = {}): Fanout {
  const batchSize = options.batchSize ?? 64;
  const statements = compileBatch(db, batchSize);
  let scheduled = false;
  let closed = false;
  let running: Promise<void> | undefined;

  /** One batch; answers how many posts it fanned out (0: the queue is empty, or another process is draining). */
  const drainBatch = () =>
    inTransaction(db, async (trx) => {
      if (dialect === 'postgres') {
        const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_xact_lock(${DRAIN_LOCK}) as locked`.execute(trx);
        if (!rows[0]?.locked) return 0;
      }
      const { rows: batch } = await trx.executeQuery(statements.queued);
      if (batch.length === 0) return 0;
      if (dialect === 'postgres') {
        const owners = [...new Set(batch.map((b) => b.owner_id))].sort((a, b) => a - b);
        await trx.selectFrom('users').select('id').where('id', 'in', owners).orderBy('id').forUpdate().execute();
      }
      const ids = batch.map((b) => b.post_id);
      while (ids.length < batchSize) ids.push(NO_POST);
      await trx.executeQuery(statements.write(ids));
      await trx.executeQuery(statements.dequeue(ids));
      return batch.length;
    });

  function run(): Promise<void> {
    running ??= (async () => {
      try {
        while (!closed) {
          const drained = await drainBatch();
          // A batch short of batchSize took the rest of the queue, and posts this process queues since then have
          // scheduled a run of their own, so on SQLite (one process) that is the end: no last, empty transaction.
          // On PostgreSQL other processes may have queued posts meanwhile that they could not drain (this process
          // holds the lock), so the run goes on until the queue is empty.
          if (drained === 0 || (drained < batchSize && dialect === 'sqlite')) break;
        }
      } catch (error) {
        // The queue keeps the posts (the batch rolled back) and feeds keep showing them; the sweep retries.
        log.warn({ err: error }, 'feed fan-out failed; the queued posts stay queued and are retried');
      } finally {
        running = undefined;
      }
    })();
    return running;
  }

  const sweep = setInterval(() => void run(), options.sweepMs ?? 5_000);
  sweep.unref();

  return {
    schedule() {
      if (scheduled || closed) return;
      scheduled = true;
      setImmediate(() => {
        scheduled = false;
        // Posts queued while a drain runs are taken by its next batch; one more run catches the last of them.
        void (running ? running.then(run) : run());
      });
    },
    async drain() {
      while (running) await running;
      await run();
    },
    async close() {
      closed = true;
      clearInterval(sweep);
      await running;
    },
  };
}

/** Decorates the app with its fan-out worker, drains what earlier processes left queued, and stops it on close. */
export default fp(
  async (app) => {
    const fanout = createFanout(app.db, app.dialect, app.log);
    app.decorate('fanout', fanout);
    app.addHook('onReady', () => {
      fanout.schedule();
    });
    // preClose runs before any onClose hook, so the batch in progress finishes before the database closes.
    app.addHook('preClose', () => fanout.close());
  },
  { name: 'fanout', dependencies: ['database'] },
);
