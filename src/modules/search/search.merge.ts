import fp from 'fastify-plugin';
import { sql, type Kysely } from 'kysely';
import type { Store } from '../../db/store.js';
import type { Database } from '../../db/types.js';

/** How often the background merge looks for FTS5 segments to merge (SQLite). */
export const MERGE_EVERY_MS = 1000;
/** Leaf pages (FTS5's, ~1 KB) one merge step writes at most: each step is a short transaction of its own. */
export const MERGE_STEP_PAGES = 64;
/** Steps of one round at most: a round is bounded, the next one goes on where it stopped. */
export const MERGE_STEPS_PER_ROUND = 32;

/**
 * One step of FTS5's incremental merge of the post index (`'merge', N`: merges segments of a level that holds
 * `usermerge` of them, or goes on with a merge begun, writing about N leaf pages). True when it did some work:
 * FTS5 then counts two or more changes (its documented test).
 */
export async function mergeStep(db: Kysely<Database>, pages = MERGE_STEP_PAGES): Promise<boolean> {
  const changes = async () => Number((await sql<{ n: number }>`select total_changes() as n`.execute(db)).rows[0]!.n);
  const before = await changes();
  await sql`insert into post_search (post_search, rank) values ('merge', ${pages})`.execute(db);
  return (await changes()) - before >= 2;
}

/** Merges while there is work, a round at most (see the constants); answers the steps that did work. */
export async function mergeRound(store: Store, steps = MERGE_STEPS_PER_ROUND): Promise<number> {
  let done = 0;
  // Each step in its own transaction: writes queued meanwhile wait for one step, not for the round.
  while (done < steps && (await store.transaction((tx) => mergeStep(tx.db)))) done++;
  return done;
}

/**
 * SQLite: merges the post search index's segments in the background, never inside a request's transaction
 * (migration 20261127T1531_post_search_merge says why). PostgreSQL has nothing to do.
 */
export default fp(
  async (app) => {
    if (app.store.dialect !== 'sqlite') return;
    let running: Promise<unknown> | undefined;
    const timer = setInterval(() => {
      running ??= mergeRound(app.store)
        .catch((error: unknown) => app.log.warn({ err: error }, 'merging the post search index failed; retried later'))
        .finally(() => (running = undefined));
    }, MERGE_EVERY_MS);
    timer.unref();
    app.addHook('preClose', async () => {
      clearInterval(timer);
      await running;
    });
  },
  { name: 'search-merge', dependencies: ['database'] },
);
