import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { freshDatabase } from '../../test/helpers/database.js';
import { readCompiled, type DatabaseHandle } from './database.js';
import { migrateToLatest } from './migrate.js';
import type { Eventually } from '../shared/eventually.js';

describe('readCompiled', () => {
  let handle: DatabaseHandle;
  let drop: () => Promise<void>;

  beforeEach(async () => {
    ({ handle, drop } = await freshDatabase());
    await migrateToLatest(handle.db);
  });
  afterEach(async () => {
    await handle.destroy();
    await drop();
  });

  const settingQuery = (h: DatabaseHandle) => h.db.selectFrom('settings').select(['key', 'value']).where('key', '=', 'probe').compile();

  it('answers the rows of a compiled SELECT, the same as Kysely does', async () => {
    await handle.db.insertInto('settings').values({ key: 'probe', value: 'v1' }).execute();
    const query = settingQuery(handle);
    expect(await readCompiled(handle.db, query)).toEqual([{ key: 'probe', value: 'v1' }]);
    expect(await readCompiled(handle.db, query)).toEqual((await handle.db.executeQuery(query)).rows);
  });

  it('answers at once on SQLite outside a transaction (no promise), and a promise on PostgreSQL', async () => {
    const rows = readCompiled(handle.db, settingQuery(handle));
    expect(rows instanceof Promise).toBe(handle.dialect === 'postgres');
    expect(await rows).toEqual([]);
  });

  it('never sees the uncommitted rows of a transaction that is awaiting its next step', async () => {
    let readDuringTransaction: Eventually<unknown[]> | undefined;
    await expect(
      handle.db.transaction().execute(async (trx) => {
        await trx.insertInto('settings').values({ key: 'probe', value: 'uncommitted' }).execute();
        // Another request's read arrives while this transaction is open.
        readDuringTransaction = readCompiled(handle.db, settingQuery(handle));
        await new Promise((resolve) => setTimeout(resolve, 20));
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await readDuringTransaction).toEqual([]);
    expect(await handle.db.selectFrom('settings').selectAll().where('key', '=', 'probe').execute()).toEqual([]);
  });

  it('runs inside a transaction through that transaction, seeing its own writes', async () => {
    const seen = await handle.db.transaction().execute(async (trx) => {
      await trx.insertInto('settings').values({ key: 'probe', value: 'mine' }).execute();
      return readCompiled(trx, settingQuery(handle));
    });
    expect(seen).toEqual([{ key: 'probe', value: 'mine' }]);
  });
});
