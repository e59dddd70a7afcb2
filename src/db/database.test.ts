import { describe, expect, it } from 'vitest';
import { migratedDatabasePerTest } from '../../test/helpers/database.js';
import pg from 'pg';
import { pgTimestampToIso, readCompiled, rowBuilder, type DatabaseHandle } from './database.js';
import type { Eventually } from '../shared/eventually.js';

describe('readCompiled', () => {
  const database = migratedDatabasePerTest();

  const settingQuery = (h: DatabaseHandle) => h.db.selectFrom('settings').select(['key', 'value']).where('key', '=', 'probe').compile();

  it('answers the rows of a compiled SELECT, the same as Kysely does', async () => {
    await database.handle.db.insertInto('settings').values({ key: 'probe', value: 'v1' }).execute();
    const query = settingQuery(database.handle);
    expect(await readCompiled(database.handle.db, query)).toEqual([{ key: 'probe', value: 'v1' }]);
    expect(await readCompiled(database.handle.db, query)).toEqual((await database.handle.db.executeQuery(query)).rows);
  });

  it('answers at once on SQLite outside a transaction (no promise), and a promise on PostgreSQL', async () => {
    const rows = readCompiled(database.handle.db, settingQuery(database.handle));
    expect(rows instanceof Promise).toBe(database.handle.dialect === 'postgres');
    expect(await rows).toEqual([]);
  });

  it('never sees the uncommitted rows of a transaction that is awaiting its next step', async () => {
    let readDuringTransaction: Eventually<unknown[]> | undefined;
    await expect(
      database.handle.db.transaction().execute(async (trx) => {
        await trx.insertInto('settings').values({ key: 'probe', value: 'uncommitted' }).execute();
        // Another request's read arrives while this transaction is open.
        readDuringTransaction = readCompiled(database.handle.db, settingQuery(database.handle));
        await new Promise((resolve) => setTimeout(resolve, 20));
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await readDuringTransaction).toEqual([]);
    expect(await database.handle.db.selectFrom('settings').selectAll().where('key', '=', 'probe').execute()).toEqual([]);
  });

  it('runs inside a transaction through that transaction, seeing its own writes', async () => {
    const seen = await database.handle.db.transaction().execute(async (trx) => {
      await trx.insertInto('settings').values({ key: 'probe', value: 'mine' }).execute();
      return readCompiled(trx, settingQuery(database.handle));
    });
    expect(seen).toEqual([{ key: 'probe', value: 'mine' }]);
  });
});

describe('pgTimestampToIso', () => {
  const parseDate = pg.types.getTypeParser(1184) as (text: string) => Date;
  const viaDate = (text: string) => parseDate(text).toISOString();

  it('rewrites what PostgreSQL prints in a UTC session into the text toISOString gives, for every millisecond', () => {
    for (let ms = 0; ms < 1000; ms++) {
      // PostgreSQL drops trailing zeros of the fraction, and the fraction itself when it is zero.
      const fraction = ms === 0 ? '' : `.${String(ms).padStart(3, '0').replace(/0+$/, '')}`;
      const text = `2026-02-01 23:59:07${fraction}+00`;
      expect(pgTimestampToIso(text, parseDate)).toBe(viaDate(text));
    }
  });

  it('truncates microseconds to milliseconds as a Date does', () => {
    for (const text of ['2026-02-01 00:00:00.123999+00', '2026-02-01 00:00:00.000001+00', '1999-12-31 23:59:59.9999+00']) {
      expect(pgTimestampToIso(text, parseDate)).toBe(viaDate(text));
    }
  });

  it('leaves anything else to the Date route', () => {
    expect(pgTimestampToIso('2026-02-01 01:00:00+01', parseDate)).toBe('2026-02-01T00:00:00.000Z');
    expect(pgTimestampToIso('0044-03-15 12:00:00+00 BC', parseDate)).toBe(viaDate('0044-03-15 12:00:00+00 BC'));
  });
});

describe('rowBuilder', () => {
  it('makes an object of the values under the column names, in column order', () => {
    const row = rowBuilder(['id', 'title', 'owner_id'])([7, 'Hello', 3]);
    expect(row).toEqual({ id: 7, title: 'Hello', owner_id: 3 });
    expect(Object.keys(row)).toEqual(['id', 'title', 'owner_id']);
  });

  it('takes any name as a plain key, and the last of two equal names wins, as better-sqlite3 does', () => {
    const names = ['a "quoted" name', 'back\\slash', 'new\nline', 'x', 'x', '__proto__'];
    const row = rowBuilder(names)([1, 2, 3, 4, 5, { polluted: true }]);
    expect(row).toEqual({ 'a "quoted" name': 1, 'back\\slash': 2, 'new\nline': 3, x: 5, ['__proto__']: { polluted: true } });
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
    expect(Object.hasOwn(row, '__proto__')).toBe(true);
  });
});
