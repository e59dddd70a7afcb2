import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { backend, migratedDatabasePerTest } from '../../test/helpers/database.js';
import { createDatabase, type DatabaseHandle } from './database.js';
import { migrateToLatest } from './migrate.js';
import { inTransaction } from './transaction.js';

const setting = (handle: DatabaseHandle, key: string) =>
  handle.db.selectFrom('settings').select('value').where('key', '=', key).executeTakeFirst();
const keys = async (handle: DatabaseHandle) =>
  (await handle.db.selectFrom('settings').select('key').where('key', 'like', 'unit-%').orderBy('key').execute()).map((r) => r.key);

/** What callers of inTransaction rely on, on either backend: serial transactions, each all or nothing. */
describe('inTransaction, several at once', () => {
  const database = migratedDatabasePerTest();

  it('commits every one of them and answers each its own result', async () => {
    const results = await Promise.all(
      ['a', 'b', 'c'].map((name) =>
        inTransaction(database.handle.db, async (trx) => {
          await trx.insertInto('settings').values({ key: `unit-${name}`, value: name }).execute();
          return name.toUpperCase();
        }),
      ),
    );
    expect(results).toEqual(['A', 'B', 'C']);
    expect(await keys(database.handle)).toEqual(['unit-a', 'unit-b', 'unit-c']);
  });

  it('rolls back only the one that throws, after its writes, and rejects it with its own error', async () => {
    const outcomes = await Promise.allSettled([
      inTransaction(database.handle.db, (trx) => trx.insertInto('settings').values({ key: 'unit-a', value: 'a' }).execute()),
      inTransaction(database.handle.db, async (trx) => {
        await trx.insertInto('settings').values({ key: 'unit-b', value: 'b' }).execute();
        throw new Error('b changed its mind');
      }),
      inTransaction(database.handle.db, (trx) => trx.insertInto('settings').values({ key: 'unit-c', value: 'c' }).execute()),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toEqual(new Error('b changed its mind'));
    expect(await keys(database.handle)).toEqual(['unit-a', 'unit-c']);
  });

  it('rolls back a statement that violates a constraint without disturbing the others', async () => {
    await database.handle.db.insertInto('settings').values({ key: 'unit-taken', value: 'first' }).execute();
    const outcomes = await Promise.allSettled([
      inTransaction(database.handle.db, (trx) => trx.updateTable('settings').set({ value: 'second' }).where('key', '=', 'unit-taken').execute()),
      inTransaction(database.handle.db, (trx) => trx.insertInto('settings').values({ key: 'unit-taken', value: 'duplicate' }).execute()),
      inTransaction(database.handle.db, (trx) => trx.insertInto('settings').values({ key: 'unit-z', value: 'z' }).execute()),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(await setting(database.handle, 'unit-taken')).toEqual({ value: 'second' });
    expect(await keys(database.handle)).toEqual(['unit-taken', 'unit-z']);
  });
});

/** The SQLite mechanism itself: one transaction for the units of one turn. PostgreSQL runs them on a pool. */
describe.skipIf(backend === 'postgres')('group commit (SQLite)', () => {
  let dir: string;
  let handle: DatabaseHandle;

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'corkboard-group-'));
    handle = createDatabase(`sqlite:${path.join(dir, 'db.sqlite')}`);
    await migrateToLatest(handle.db);
  });
  afterEach(async () => {
    await handle.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('runs the units started in one turn before answering any of them, each seeing the writes before it', async () => {
    const events: string[] = [];
    const unit = (name: string) =>
      inTransaction(handle.db, async (trx) => {
        const before = await trx.selectFrom('settings').select('key').where('key', 'like', 'unit-%').execute();
        events.push(`${name} ran after ${before.length}`);
        await trx.insertInto('settings').values({ key: `unit-${name}`, value: name }).execute();
      }).then(() => events.push(`${name} answered`));
    await Promise.all([unit('a'), unit('b'), unit('c')]);
    expect(events).toEqual(['a ran after 0', 'b ran after 1', 'c ran after 2', 'a answered', 'b answered', 'c answered']);
  });

  it('answers only once the writes are committed: another connection to the file sees them', async () => {
    const other = new SQLite(path.join(dir, 'db.sqlite'), { readonly: true });
    try {
      const seenOnAnswer = await Promise.all(
        ['a', 'b'].map((name) =>
          inTransaction(handle.db, (trx) => trx.insertInto('settings').values({ key: `unit-${name}`, value: name }).execute()).then(
            () => other.prepare("select count(*) as n from settings where key like 'unit-%'").get() as { n: number },
          ),
        ),
      );
      expect(seenOnAnswer).toEqual([{ n: 2 }, { n: 2 }]);
    } finally {
      other.close();
    }
  });

  it('when the COMMIT fails, runs each unit again alone: only the one at fault is rejected, with its own error', async () => {
    const runs = { a: 0, b: 0, c: 0 };
    const outcomes = await Promise.allSettled([
      inTransaction(handle.db, (trx) => {
        runs.a++;
        return trx.insertInto('settings').values({ key: 'unit-a', value: 'a' }).execute();
      }),
      inTransaction(handle.db, async (trx) => {
        runs.b++;
        // A foreign key checked only at COMMIT, pointing at no user: the COMMIT fails.
        await sql`pragma defer_foreign_keys = on`.execute(trx);
        await trx.insertInto('tokens').values({ user_id: 999, token_hash: 'h', created_at: 'x', expires_at: 'y' }).execute();
      }),
      inTransaction(handle.db, (trx) => {
        runs.c++;
        return trx.insertInto('settings').values({ key: 'unit-c', value: 'c' }).execute();
      }),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toMatchObject({ code: 'SQLITE_CONSTRAINT_FOREIGNKEY' });
    // Once together (the group that failed), once alone.
    expect(runs).toEqual({ a: 2, b: 2, c: 2 });
    expect(await keys(handle)).toEqual(['unit-a', 'unit-c']);
    expect(await handle.db.selectFrom('tokens').selectAll().execute()).toEqual([]);
  });

  it('when a unit ends the transaction itself, rejects that unit alone and commits the others', async () => {
    const outcomes = await Promise.allSettled([
      inTransaction(handle.db, (trx) => trx.insertInto('settings').values({ key: 'unit-a', value: 'a' }).execute()),
      inTransaction(handle.db, async (trx) => {
        await trx.insertInto('settings').values({ key: 'unit-b', value: 'b' }).execute();
        // What SQLite does by itself on an I/O error or a full disk: the whole transaction is gone.
        await sql`rollback`.execute(trx);
      }),
      inTransaction(handle.db, (trx) => trx.insertInto('settings').values({ key: 'unit-c', value: 'c' }).execute()),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(String((outcomes[1] as PromiseRejectedResult).reason)).toMatch(/SQLite ended the transaction/);
    expect(await keys(handle)).toEqual(['unit-a', 'unit-c']);
    // The connection is usable again afterwards.
    await inTransaction(handle.db, (trx) => trx.insertInto('settings').values({ key: 'unit-after', value: 'ok' }).execute());
    expect(await keys(handle)).toEqual(['unit-a', 'unit-after', 'unit-c']);
  });

  it('runs the units again alone when another process wrote to the file under the group (a stale snapshot)', async () => {
    const other = new SQLite(path.join(dir, 'db.sqlite'));
    let interfered = false;
    try {
      const outcomes = await Promise.allSettled([
        inTransaction(handle.db, async (trx) => {
          await trx.selectFrom('settings').select('key').execute(); // the transaction's snapshot starts here
          if (!interfered) {
            interfered = true;
            other.prepare("insert into settings (key, value) values ('unit-other', 'o')").run();
          }
          await trx.insertInto('settings').values({ key: 'unit-a', value: 'a' }).execute();
        }),
        inTransaction(handle.db, (trx) => trx.insertInto('settings').values({ key: 'unit-b', value: 'b' }).execute()),
      ]);
      expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled']);
      expect(await keys(handle)).toEqual(['unit-a', 'unit-b', 'unit-other']);
    } finally {
      other.close();
    }
  });

  it('commits a queue longer than one group in several, in order', async () => {
    const names = Array.from({ length: 300 }, (_, i) => `unit-${String(i).padStart(3, '0')}`);
    const seen = await Promise.all(
      names.map((name) =>
        inTransaction(handle.db, async (trx) => {
          const before = await trx.selectFrom('settings').select('key').where('key', 'like', 'unit-%').execute();
          await trx.insertInto('settings').values({ key: name, value: 'x' }).execute();
          return before.length;
        }),
      ),
    );
    expect(seen).toEqual(names.map((_, i) => i));
    expect(await keys(handle)).toEqual(names);
  });

  it('puts a unit started while a group commits into the next group, which sees the first group committed', async () => {
    const events: string[] = [];
    let later: Promise<number> | undefined;
    await inTransaction(handle.db, async (trx) => {
      await trx.insertInto('settings').values({ key: 'unit-first', value: '1' }).execute();
      later = inTransaction(handle.db, async (trx2) => {
        events.push('later ran');
        return (await trx2.selectFrom('settings').select('key').where('key', 'like', 'unit-%').execute()).length;
      });
    }).then(() => events.push('first answered'));
    expect(await later).toBe(1);
    expect(events).toEqual(['first answered', 'later ran']);
  });
});
