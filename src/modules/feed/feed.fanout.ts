import fp from 'fastify-plugin';
import type { FastifyBaseLogger } from 'fastify';
import type { ExpressionBuilder, InsertResult } from 'kysely';
import type { Store, Tx } from '../../db/store.js';
import type { Database } from '../../db/types.js';

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
   * Feed entries per transaction at most. A post whose owner has more followers than one transaction may write is
   * fanned out in chunks by ascending follower id, each its own transaction, with the small posts' batches in
   * between (see createFanout).
   */
  chunkSize?: number;
  /**
   * How long one fan-out transaction should take. The entries per transaction (at most `chunkSize`) follow the
   * time the last transactions took per entry, which grows with the size of `feed_entries`' indexes.
   */
  transactionMs?: number;
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
 * A post of an owner with many followers (more than one transaction may write, see `perTransaction`) would make
 * one such transaction write an entry per follower, holding SQLite's write lock (or, on PostgreSQL, the owner's row
 * against follows) for all of it while every other writer waits. Those posts are fanned out in chunks of followers instead, each
 * its own transaction, alternating with batches of the small posts queued behind them, so an ordinary post waits
 * for one chunk, not the whole fan-out. Read-time merging alone (never writing entries for such owners) was the
 * alternative: it would make every follower's feed read probe the big owners' posts on each page forever, while
 * chunking costs the same rows as before and keeps a feed read a range scan (bench/README.md, "Figures behind choices in the code").
 *
 * The same worker writes follows' backfills (the followee's existing posts into the new follower's feed), which a
 * follow leaves to it in `feed_backfill` rather than writing them inside the request; feeds merge those posts from
 * `posts` until then (see drainBackfill).
 *
 * Correctness against concurrent follows and unfollows is the same as if fan-out ran inside the create: the
 * owners' user rows are held (in ascending id order) before the entries are written, and unfollowing (a block, an
 * account's deletion) locks the same rows first (`lockRows`, FOR UPDATE), so each sees the other's committed rows. A
 * follow only shares them too (followers.service.ts): whatever a batch saw of it, the follow's own backfill writes
 * the followee's posts once it commits. The worker only shares them (`shareRows`, FOR KEY SHARE): enough to wait for
 * those, and not in the way of the owners' creates, whose post counter UPDATE takes the weaker lock that does not conflict with it. Locked
 * FOR UPDATE, one author posting steadily kept the worker queued behind every create on the row (on PostgreSQL
 * past statement_timeout, so nothing was fanned out) while each create queued behind the worker's batch.
 */
/**
 * The worker's transactions commit alone (SQLite group commit would otherwise let requests' writes share them, and
 * wait for a chunk of thousands of rows to commit).
 */
const BACKGROUND = { solo: true } as const;

/** Fewest entries a transaction is sized for, whatever the timing says: below this the per-transaction cost wins. */
const MIN_ROWS = 100;

/**
 * Lets the event loop serve what waits. On SQLite every query completes synchronously, so without a macrotask
 * turn between transactions a whole drain would run as one chain of microtasks and no request would be served
 * until it ended, however small its transactions.
 */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

export function createFanout(store: Store, log: FastifyBaseLogger, options: FanoutOptions = {}): Fanout {
  const batchSize = options.batchSize ?? 64;
  const chunkSize = options.chunkSize ?? 2_000;
  const transactionMs = options.transactionMs ?? 25;
  /**
   * Entries the next transaction may write: the time a transaction may hold SQLite's write lock (and, on SQLite,
   * the event loop) or an owner's row, turned into rows by the last transactions' time per entry. A feed with a
   * hundred million entries takes several times longer per entry than a small one, so a fixed number would
   * either stall other writers on a big database or waste transactions on a small one.
   */
  let perTransaction = chunkSize;
  const fewest = Math.min(MIN_ROWS, chunkSize);
  /** Once `tx` commits, resizes `perTransaction` by the time from `started` (the unit's start) for its entries. */
  const timeEntries = (tx: Tx, started: number, insert: InsertResult) =>
    tx.afterCommit(() => {
      const written = Number(insert.numInsertedOrUpdatedRows ?? 0);
      if (written < fewest) return; // too few for a steady figure
      // Halfway to the size that would have fitted, so that one slow transaction does not swing it.
      const fitting = (written * transactionMs) / Math.max(performance.now() - started, 0.1);
      perTransaction = Math.round(Math.min(chunkSize, Math.max(fewest, (perTransaction + fitting) / 2)));
    });
  let scheduled = false;
  let closed = false;
  let running: Promise<void> | undefined;
  /**
   * Big posts in progress: the last follower id each has been fanned out to. Kept in memory only: a process that
   * stops mid-way (or another process that takes the drain over) starts that post again from the first follower,
   * and `do nothing` on the entries already written makes the repeat harmless.
   */
  const progress = new Map<number, number>();

  /**
   * One batch of the oldest queued posts whose owners' followers fit in one transaction together (at least one
   * post): their entries and their removal from the queue in one transaction. Answers how many posts it fanned
   * out, and the oldest big post (more followers than one transaction may write) it passed over, if any.
   */
  const drainSmall = () =>
    store.transaction(async (tx) => {
      const started = performance.now();
      if (!(await tx.tryExclusive(DRAIN_LOCK))) return { done: 0, big: undefined };
      const queue = await tx.db
        .selectFrom('fanout_queue')
        .innerJoin('users', 'users.id', 'fanout_queue.owner_id')
        .select(['fanout_queue.post_id', 'fanout_queue.owner_id', 'users.follower_count'])
        .orderBy('fanout_queue.post_id')
        .limit(batchSize)
        .execute();
      const budget = perTransaction;
      const big = queue.find((r) => r.follower_count > budget);
      const small: typeof queue = [];
      let entries = 0;
      for (const post of queue) {
        if (post.follower_count > budget) continue;
        if (small.length > 0 && entries + post.follower_count > budget) break;
        small.push(post);
        entries += post.follower_count;
      }
      if (small.length === 0) return { done: 0, big };
      await tx.shareRows('users', [...new Set(small.map((b) => b.owner_id))]);
      const ids = small.map((b) => b.post_id);
      const written = await tx.db
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
        .executeTakeFirst();
      await tx.db.deleteFrom('fanout_queue').where('post_id', 'in', ids).execute();
      timeEntries(tx, started, written);
      return { done: small.length, big };
    }, BACKGROUND);

  /**
   * The next chunk of one big post: the entries of its next followers (as many as one transaction may write, by
   * ascending id, after the last chunk's), in a transaction of its own, so that no transaction holds the write
   * lock (SQLite) or the owner's row against follows (PostgreSQL) for longer than one chunk takes. The last chunk also removes the
   * post from the queue; until then feeds merge it in from the queue, so every follower sees it from the start.
   * Answers 1 when it did work.
   */
  const drainChunk = (post: { post_id: number; owner_id: number }) =>
    store.transaction(async (tx) => {
      const started = performance.now();
      if (!(await tx.tryExclusive(DRAIN_LOCK))) return 0;
      // Holding the owner orders this chunk with follows and unfollows of the owner (they lock the same row): a
      // follower who unfollowed is not in `follows` any more, and one who follows now gets the post from the
      // follow's own backfill, whichever chunk their id falls in.
      await tx.shareRows('users', [post.owner_id]);
      const after = progress.get(post.post_id) ?? 0;
      const last = await tx.db
        .selectFrom('follows')
        .select('follower_id')
        .where('followee_id', '=', post.owner_id)
        .where('follower_id', '>', after)
        .orderBy('follower_id')
        .offset(perTransaction - 1)
        .limit(1)
        .executeTakeFirst();
      let chunk = tx.db
        .selectFrom('fanout_queue')
        .innerJoin('follows', 'follows.followee_id', 'fanout_queue.owner_id')
        .select(['follows.follower_id', 'fanout_queue.post_id', 'fanout_queue.owner_id'])
        .where('fanout_queue.post_id', '=', post.post_id)
        .where('follows.follower_id', '>', after);
      if (last) chunk = chunk.where('follows.follower_id', '<=', last.follower_id);
      // Joined to the queue: a post deleted meanwhile (its queue row goes with it) writes nothing.
      const written = await tx.db
        .insertInto('feed_entries')
        .columns(['user_id', 'post_id', 'owner_id'])
        .expression(chunk)
        .onConflict((oc) => oc.doNothing())
        .executeTakeFirst();
      timeEntries(tx, started, written);
      if (last) {
        tx.afterCommit(() => progress.set(post.post_id, last.follower_id));
      } else {
        await tx.db.deleteFrom('fanout_queue').where('post_id', '=', post.post_id).execute();
        tx.afterCommit(() => progress.delete(post.post_id));
      }
      return 1;
    }, BACKGROUND);

  /**
   * A batch of follows' backfills (feed_backfill, written by the follow's transaction): the followees' posts into
   * their new followers' feeds, as many follows as fit in one transaction's entries (at least one), and their
   * removal from feed_backfill, together. Both users of each follow are locked first, as the follow and the unfollow
   * lock them: a follow undone meanwhile took its feed_backfill row with it, and the insert, which reads the rows
   * after the locks, writes nothing for it. Answers how many follows it backfilled.
   */
  const drainBackfill = () =>
    store.transaction(async (tx) => {
      const started = performance.now();
      if (!(await tx.tryExclusive(DRAIN_LOCK))) return 0;
      const pending = await tx.db
        .selectFrom('feed_backfill')
        .innerJoin('users', 'users.id', 'feed_backfill.owner_id')
        .select(['feed_backfill.user_id', 'feed_backfill.owner_id', 'users.post_count'])
        .limit(batchSize)
        .execute();
      const budget = perTransaction;
      const taken: typeof pending = [];
      let entries = 0;
      for (const follow of pending) {
        if (taken.length > 0 && entries + follow.post_count > budget) break;
        taken.push(follow);
        entries += follow.post_count;
      }
      if (taken.length === 0) return 0;
      await tx.shareRows('users', [...new Set(taken.flatMap((f) => [f.user_id, f.owner_id]))]);
      const these = (eb: ExpressionBuilder<Database, 'feed_backfill'>) =>
        eb.or(taken.map((f) => eb.and([eb('feed_backfill.user_id', '=', f.user_id), eb('feed_backfill.owner_id', '=', f.owner_id)])));
      const written = await tx.db
        .insertInto('feed_entries')
        .columns(['user_id', 'post_id', 'owner_id'])
        .expression((eb) =>
          eb
            .selectFrom('feed_backfill')
            .innerJoin('posts', 'posts.owner_id', 'feed_backfill.owner_id')
            .select(['feed_backfill.user_id', 'posts.id', 'posts.owner_id'])
            .where(these),
        )
        // A post fanned out to the new follower already (created after the follow) keeps its entry.
        .onConflict((oc) => oc.doNothing())
        .executeTakeFirst();
      await tx.db.deleteFrom('feed_backfill').where(these).execute();
      timeEntries(tx, started, written);
      return taken.length;
    }, BACKGROUND);

  /**
   * One step: a batch of small posts, a batch of follows' backfills, then one chunk of the oldest big post; answers
   * how much work it did.
   */
  async function drainBatch(): Promise<number> {
    const { done, big } = await drainSmall();
    if (closed) return done;
    await nextTurn();
    const backfilled = await drainBackfill();
    if (!big || closed) return done + backfilled;
    await nextTurn();
    return done + backfilled + (await drainChunk(big));
  }

  function run(): Promise<void> {
    running ??= (async () => {
      try {
        // Until the queue is empty: posts queued meanwhile (here or, on PostgreSQL, by other processes that could
        // not drain while this one held the lock) are taken by the next batch.
        while (!closed && (await drainBatch()) > 0) await nextTurn();
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
 * Decorates the app with its fan-out worker, which runs after every committed new post (and follow), drains what earlier
 * processes left queued, and stops on close.
 */
export default fp(
  async (app) => {
    const fanout = createFanout(app.store, app.log);
    app.decorate('fanout', fanout);
    app.postChanges.subscribe({
      afterCommit: (change) => {
        if (change.kind === 'created') fanout.schedule();
      },
    });
    app.addHook('onReady', () => {
      fanout.schedule();
    });
    // preClose runs before any onClose hook, so the batch in progress finishes before the database closes.
    app.addHook('preClose', () => fanout.close());
  },
  { name: 'fanout', dependencies: ['database'] },
);
