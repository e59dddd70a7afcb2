import fp from 'fastify-plugin';
import type { FastifyBaseLogger } from 'fastify';
import type { Store } from '../../db/store.js';

declare module 'fastify' {
  interface FastifyInstance {
    fanout: Fanout;
  }
}

export interface Fanout {
  /** Asks for the queue to be drained soon (after the current I/O callbacks): new posts were committed. */
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

/** Any 64-bit key: the lock that lets one process drain at a time. */
const DRAIN_LOCK = 0x636f726b; // "cork"

/**
 * The fan-out worker. A new post is queued in `fanout_queue` by the transaction that creates it; this worker
 * turns queued posts into `feed_entries` rows (one per follower of the owner) in batches, each batch one
 * transaction that writes its entries and removes its posts from the queue together. Batching is what makes
 * fan-out cheap: consecutive posts by the same authors share feed pages, and one commit writes them once. Readers
 * never wait for it: a feed page merges the queued posts of the users the reader follows (feed.repository.ts), so
 * a post is in every follower's feed from the moment it is created.
 *
 * Correctness against concurrent follows and unfollows is the same as if fan-out ran inside the create: the
 * owners' user rows are locked (in ascending id order) before the entries are written, and following or
 * unfollowing updates the same row (its follower_count), so each sees the other's committed rows.
 */
export function createFanout(store: Store, log: FastifyBaseLogger, options: FanoutOptions = {}): Fanout {
  const batchSize = options.batchSize ?? 64;
  let scheduled = false;
  let closed = false;
  let running: Promise<void> | undefined;

  /** One batch; answers how many posts it fanned out (0: the queue is empty, or another process is draining). */
  const drainBatch = () =>
    store.transaction(async (tx) => {
      if (!(await tx.tryExclusive(DRAIN_LOCK))) return 0;
      const batch = await tx.db.selectFrom('fanout_queue').select(['post_id', 'owner_id']).orderBy('post_id').limit(batchSize).execute();
      if (batch.length === 0) return 0;
      await tx.lockRows('users', [...new Set(batch.map((b) => b.owner_id))]);
      const ids = batch.map((b) => b.post_id);
      await tx.db
        .insertInto('feed_entries')
        .columns(['user_id', 'post_id', 'owner_id'])
        .expression((eb) =>
          eb
            .selectFrom('fanout_queue')
            .innerJoin('follows', 'follows.followee_id', 'fanout_queue.owner_id')
            .select(['follows.follower_id', 'fanout_queue.post_id', 'fanout_queue.owner_id'])
            .where('fanout_queue.post_id', 'in', ids),
        )
        .onConflict((oc) => oc.doNothing())
        .execute();
      await tx.db.deleteFrom('fanout_queue').where('post_id', 'in', ids).execute();
      return batch.length;
    });

  function run(): Promise<void> {
    running ??= (async () => {
      try {
        // Until the queue is empty: posts queued meanwhile (here or, on PostgreSQL, by other processes that could
        // not drain while this one held the lock) are taken by the next batch.
        while (!closed && (await drainBatch()) > 0);
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

/**
 * Decorates the app with its fan-out worker, which runs after every committed new post, drains what earlier
 * processes left queued, and stops on close.
 */
export default fp(
  async (app) => {
    const fanout = createFanout(app.store, app.log);
    app.decorate('fanout', fanout);
    app.postChanges.subscribe((change) => {
      if (change.kind === 'created') fanout.schedule();
    });
    app.addHook('onReady', () => {
      fanout.schedule();
    });
    // preClose runs before any onClose hook, so the batch in progress finishes before the database closes.
    app.addHook('preClose', () => fanout.close());
  },
  { name: 'fanout', dependencies: ['database'] },
);
