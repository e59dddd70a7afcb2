import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { sql, type Kysely } from 'kysely';
import { describe, expect, it, onTestFinished } from 'vitest';
import { backend } from '../../test/helpers/database.js';
import { CHECKPOINT_EVERY_MS } from './sqlite-checkpoint.js';
import { createSqliteStore, MAX_BATCH_MS, MAX_UNITS_PER_TRANSACTION } from './sqlite-store.js';
import type { Store, Tx } from './store.js';
import type { Database } from './types.js';

/**
 * Group commit on SQLite: units of work queued together run in one transaction, each in a savepoint, and share its
 * COMMIT. Whether two units shared a COMMIT shows on the read connection (`store.db`), which sees a unit's writes
 * only once the transaction holding them has committed.
 */

/**
 * A store for these tests. Batches have no time bound unless a test sets one (only the test of that bound does): a
 * pause of the machine longer than MAX_BATCH_MS would otherwise split a batch the test expects whole.
 */
async function openStore(groupCommit: boolean, groupCommitMaxMs = Number.POSITIVE_INFINITY): Promise<Store> {
  const store = createSqliteStore(':memory:', { groupCommit, groupCommitMaxMs });
  onTestFinished(() => store.close());
  await store.transaction(async ({ db }) => {
    await sql`create table items (id integer primary key, label text not null unique)`.execute(db);
  });
  return store;
}

const insert = (db: Kysely<Database>, label: string) => sql`insert into items (label) values (${label})`.execute(db);

async function labels(db: Kysely<Database>): Promise<string[]> {
  const { rows } = await sql<{ label: string }>`select label from items order by id`.execute(db);
  return rows.map((r) => r.label);
}

/** A unit that inserts `label` and notes what the read connection and its own transaction see at that point. */
function inserting(store: Store, label: string, hookLog?: string[]) {
  return async (tx: Tx) => {
    await insert(tx.db, label);
    if (hookLog) tx.afterCommit(() => hookLog.push(label));
    return { label, committedBefore: (await labels(store.db)).length, seenInside: (await labels(tx.db)).length };
  };
}

describe.skipIf(backend !== 'sqlite')('SqliteStore group commit', () => {
  it('runs units queued together in one transaction, in order, each seeing the ones before it, answering each caller its own value', async () => {
    const store = await openStore(true);
    const results = await Promise.all(['a', 'b', 'c'].map((label) => store.transaction(inserting(store, label))));
    expect(results).toEqual([
      { label: 'a', committedBefore: 0, seenInside: 1 },
      { label: 'b', committedBefore: 0, seenInside: 2 },
      { label: 'c', committedBefore: 0, seenInside: 3 },
    ]);
    expect(await labels(store.db)).toEqual(['a', 'b', 'c']);
  });

  it('answers a caller only after the COMMIT: the read connection then sees the whole batch', async () => {
    const store = await openStore(true);
    const seenByFirstCaller = store.transaction(inserting(store, 'a')).then(() => labels(store.db));
    await Promise.all([store.transaction(inserting(store, 'b')), store.transaction(inserting(store, 'c'))]);
    expect(await seenByFirstCaller).toEqual(['a', 'b', 'c']);
  });

  it('rolls back only the unit that throws; its hooks never run, the others commit and their hooks run in order', async () => {
    const store = await openStore(true);
    const hookLog: string[] = [];
    const heard: string[] = [];
    const failure = new Error('b fails');
    const a = store.transaction(inserting(store, 'a', hookLog));
    const b = store.transaction(async (tx) => {
      await insert(tx.db, 'b');
      tx.afterCommit(() => hookLog.push('b'));
      throw failure;
    });
    // A statement error: its own statement is undone by SQLite, the unit's earlier insert by the savepoint.
    const duplicate = store.transaction(async (tx) => {
      await insert(tx.db, 'd');
      tx.afterCommit(() => hookLog.push('d'));
      await insert(tx.db, 'a');
    });
    const c = store.transaction(inserting(store, 'c', hookLog));
    const bHeard = b.catch(async (error: unknown) => {
      heard.push(`b: ${(await labels(store.db)).join()} ${hookLog.join()}`);
      return error;
    });

    expect(await bHeard).toBe(failure);
    await expect(duplicate).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_UNIQUE' });
    expect(await a).toEqual({ label: 'a', committedBefore: 0, seenInside: 1 });
    // b's and d's writes are gone, so c sees a and itself.
    expect(await c).toEqual({ label: 'c', committedBefore: 0, seenInside: 2 });
    expect(await labels(store.db)).toEqual(['a', 'c']);
    expect(hookLog).toEqual(['a', 'c']);
    // The failed unit hears back after the COMMIT too, like a serial transaction after the ones before it.
    expect(heard).toEqual(['b: a,c a,c']);
  });

  it("runs the units' atCommit steps after the last unit, outside the savepoints, in order; a failed unit's never run", async () => {
    const store = await openStore(true);
    const seen: string[] = [];
    const step = (tx: Tx, label: string) => async () => {
      // After every unit: the step sees the batch's rows, the failed unit's not among them.
      seen.push(`${label}: ${(await labels(tx.db)).join()}`);
      await insert(tx.db, `${label}-step`);
    };
    const a = store.transaction(async (tx) => {
      await insert(tx.db, 'a');
      tx.atCommit(step(tx, 'a'));
    });
    const b = store.transaction(async (tx) => {
      await insert(tx.db, 'b');
      tx.atCommit(step(tx, 'b'));
      throw new Error('b fails');
    });
    const c = store.transaction(async (tx) => {
      await insert(tx.db, 'c');
      tx.atCommit(step(tx, 'c'));
    });
    await a;
    await expect(b).rejects.toThrow('b fails');
    await c;
    expect(seen).toEqual(['a: a,c', 'c: a,c,a-step']);
    expect(await labels(store.db)).toEqual(['a', 'c', 'a-step', 'c-step']);
  });

  it('a failing atCommit step rejects every unit of the batch and keeps none of its writes', async () => {
    const store = await openStore(true);
    const failure = new Error('the step fails');
    const a = store.transaction(inserting(store, 'a'));
    const b = store.transaction(async (tx) => {
      await insert(tx.db, 'b');
      tx.atCommit(() => Promise.reject(failure));
    });
    await expect(a).rejects.toBe(failure);
    await expect(b).rejects.toBe(failure);
    expect(await labels(store.db)).toEqual([]);
  });

  it(`commits at most ${MAX_UNITS_PER_TRANSACTION} units together; the queue behind them goes into the next transaction`, async () => {
    // Only the count may split the batch.
    const store = await openStore(true);
    const count = MAX_UNITS_PER_TRANSACTION + 6;
    const results = await Promise.all(Array.from({ length: count }, (_, i) => store.transaction(inserting(store, `u${i}`))));
    expect(MAX_UNITS_PER_TRANSACTION).toBe(64);
    expect(results.map((r) => r.committedBefore)).toEqual([...Array<number>(64).fill(0), ...Array<number>(6).fill(64)]);
    expect(results.map((r) => r.seenInside)).toEqual(Array.from({ length: count }, (_, i) => i + 1));
    expect(await labels(store.db)).toHaveLength(count);
  });

  it(`stops taking units once the batch has run ${MAX_BATCH_MS} ms: a slow unit does not hold the queue behind it until its end`, async () => {
    const store = await openStore(true, MAX_BATCH_MS);
    const slow = async (tx: Tx) => {
      await insert(tx.db, 'slow');
      await new Promise((resolve) => setTimeout(resolve, MAX_BATCH_MS * 4));
      return { label: 'slow', committedBefore: (await labels(store.db)).length, seenInside: (await labels(tx.db)).length };
    };
    const first = store.transaction(slow);
    // Queued while the slow unit runs: the batch is past its time when the slow unit ends, so these commit apart.
    await new Promise((resolve) => setTimeout(resolve, MAX_BATCH_MS));
    const later = await Promise.all(['a', 'b'].map((label) => store.transaction(inserting(store, label))));
    expect((await first).committedBefore).toBe(0);
    expect(later.map((r) => r.committedBefore)).toEqual([1, 1]);
    expect(await labels(store.db)).toEqual(['slow', 'a', 'b']);
  });

  it('commits a solo unit alone: the units queued before and after it are not in its transaction', async () => {
    const store = await openStore(true);
    const results = await Promise.all([
      store.transaction(inserting(store, 'a')),
      store.transaction(inserting(store, 'b')),
      store.transaction(inserting(store, 'solo'), { solo: true }),
      store.transaction(inserting(store, 'c')),
    ]);
    expect(results.map((r) => r.committedBefore)).toEqual([0, 0, 2, 3]);
    expect(await labels(store.db)).toEqual(['a', 'b', 'solo', 'c']);
  });

  it('a failed COMMIT (a deferred foreign key) rejects every unit of the batch, runs no hook and keeps no write', async () => {
    const store = await openStore(true);
    await store.transaction(async ({ db }) => {
      await sql`create table parents (id integer primary key)`.execute(db);
      await sql`create table children (parent_id integer references parents (id) deferrable initially deferred)`.execute(db);
    });
    const hookLog: string[] = [];
    const units = [
      store.transaction(inserting(store, 'a', hookLog)),
      // Passes its statement; the foreign key is checked only at COMMIT.
      store.transaction(async (tx) => {
        await sql`insert into children (parent_id) values (42)`.execute(tx.db);
        tx.afterCommit(() => hookLog.push('orphan'));
      }),
      store.transaction(inserting(store, 'c', hookLog)),
    ];
    const outcomes = await Promise.allSettled(units);
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected']);
    for (const outcome of outcomes) expect((outcome as PromiseRejectedResult).reason).toMatchObject({ code: 'SQLITE_CONSTRAINT_FOREIGNKEY' });
    expect(hookLog).toEqual([]);
    expect(await labels(store.db)).toEqual([]);
    // The write connection is usable again.
    await store.transaction(inserting(store, 'after'));
    expect(await labels(store.db)).toEqual(['after']);
  });

  it('SQLite ending the transaction itself under a unit fails the batch so far with that error; units not yet taken run next', async () => {
    const store = await openStore(true);
    await store.transaction(async ({ db }) => {
      await sql`create trigger items_abort before insert on items when new.label like 'abort%' begin select raise(rollback, 'aborted'); end`.execute(db);
    });
    const hookLog: string[] = [];
    const a = store.transaction(inserting(store, 'a', hookLog));
    const aborting = store.transaction(inserting(store, 'abort', hookLog));
    const c = store.transaction(inserting(store, 'c', hookLog));
    await expect(a).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_TRIGGER', message: 'aborted' });
    await expect(aborting).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_TRIGGER', message: 'aborted' });
    expect(await c).toEqual({ label: 'c', committedBefore: 0, seenInside: 1 });
    expect(await labels(store.db)).toEqual(['c']);
    expect(hookLog).toEqual(['c']);

    // A unit that catches that error and carries on still fails its batch, with an error that says what happened.
    const d = store.transaction(inserting(store, 'd', hookLog));
    const swallowing = store.transaction(async (tx) => {
      await insert(tx.db, 'abort again').catch(() => {});
    });
    await expect(d).rejects.toThrow('SQLite ended the transaction during this unit of work');
    await expect(swallowing).rejects.toThrow('SQLite ended the transaction during this unit of work');
    expect(await labels(store.db)).toEqual(['c']);
    expect(hookLog).toEqual(['c']);
  });

  it('with group commit off, every unit commits alone', async () => {
    const store = await openStore(false);
    const hookLog: string[] = [];
    const results = await Promise.allSettled([
      store.transaction(inserting(store, 'a', hookLog)),
      store.transaction(async (tx) => {
        await insert(tx.db, 'b');
        throw new Error('b fails');
      }),
      store.transaction(inserting(store, 'c', hookLog)),
    ]);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : 'rejected'))).toEqual([
      { label: 'a', committedBefore: 0, seenInside: 1 },
      'rejected',
      { label: 'c', committedBefore: 1, seenInside: 2 },
    ]);
    expect(hookLog).toEqual(['a', 'c']);
  });
});

describe.skipIf(backend !== 'sqlite')('SqliteStore checkpoints', () => {
  /** A store on a file of its own, with a table that `fill(pages)` grows by about that many 4 KiB pages. */
  async function fileStore(backgroundCheckpoint: boolean) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'corkboard-checkpoint-'));
    const file = path.join(dir, 'test.db');
    const store = createSqliteStore(file, { backgroundCheckpoint });
    onTestFinished(async () => {
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    });
    await store.transaction(async ({ db }) => {
      await sql`create table blobs (id integer primary key, data blob not null)`.execute(db);
    });
    const fill = (pages: number) =>
      store.transaction(async ({ db }) => {
        await sql`with recursive n(i) as (select 1 union all select i + 1 from n where i < ${pages}) insert into blobs (data) select randomblob(4000) from n`.execute(db);
      });
    return { store, fill, size: () => fs.statSync(file).size };
  }

  it('copies the WAL into the database file from its own thread, not inside the COMMIT', async () => {
    const { store, fill, size } = await fileStore(true);
    const before = size();
    // 500 pages, under SQLite's own 1,000: the COMMIT only appends them to the WAL (the next test shows it), and
    // no further write comes. The thread's next checkpoint (every CHECKPOINT_EVERY_MS) copies the 2 MB all the same.
    await fill(500);
    await expect.poll(size, { timeout: 5000, interval: CHECKPOINT_EVERY_MS }).toBeGreaterThan(before + 1_900_000);
    const { rows } = await sql<{ n: number }>`select count(*) as n from blobs`.execute(store.db);
    expect(rows).toEqual([{ n: 500 }]);
  });

  it('with background checkpoints off, only the COMMIT that takes the WAL past 1,000 pages copies it, itself', async () => {
    const { fill, size } = await fileStore(false);
    const before = size();
    await fill(500);
    await new Promise((resolve) => setTimeout(resolve, 5 * CHECKPOINT_EVERY_MS));
    expect(size()).toBe(before);
    await fill(1000);
    expect(size()).toBeGreaterThan(before + 5_000_000);
  });

  it('close() keeps the process alive until the thread has stopped, so a command line tool exits with its own code', async () => {
    // A process with nothing else to do (the CLI's seed and backup commands): before, it could end with code 0 while
    // close() still waited for the unreferenced thread, and never reach its own exit code. Five rounds, each a store
    // opened, written and closed, then a line; the process then sets exit code 3. Runs the build (`npm test` makes it).
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'corkboard-checkpoint-exit-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    const storeModule = path.resolve('dist/src/db/sqlite-store.js');
    const script = `
      import { createSqliteStore } from ${JSON.stringify(storeModule)};
      for (let round = 1; round <= 5; round++) {
        const store = createSqliteStore(${JSON.stringify(path.join(dir, 'test.db'))}, { backgroundCheckpoint: true });
        await store.transaction(({ db }) => db.schema.createTable('t' + round).addColumn('id', 'integer').execute());
        await store.close();
        console.log('closed ' + round);
      }
      process.exitCode = 3;`;
    const outcome = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]).then(
      () => ({ code: 0, stdout: '' }),
      (error: { code: number; stdout: string }) => ({ code: error.code, stdout: error.stdout }),
    );
    expect(outcome).toEqual({ code: 3, stdout: [1, 2, 3, 4, 5].map((round) => `closed ${round}\n`).join('') });
  });
});
