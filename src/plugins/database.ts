import { randomBytes } from 'node:crypto';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import type { DatabaseHandle, Dialect } from '../db/database.js';
import type { Database } from '../db/types.js';
import { migrateToLatest } from '../db/migrate.js';
import { createCursorCodec, type CursorCodec } from '../shared/pagination.js';

declare module 'fastify' {
  interface FastifyInstance {
    db: Kysely<Database>;
    dialect: Dialect;
    database: DatabaseHandle;
    cursors: CursorCodec;
  }
}

export interface DatabasePluginOptions {
  database: DatabaseHandle;
  /** Run migrations on start (the default: a fresh install needs no extra step). */
  migrate: boolean;
}

/**
 * The secret that signs pagination cursors lives in the database, not in one process: every server on the same
 * database then accepts the others' cursors. The first process to start creates it; the rest read it.
 */
async function cursorSecret(db: Kysely<Database>): Promise<string> {
  await db
    .insertInto('settings')
    .values({ key: 'cursor_secret', value: randomBytes(32).toString('base64url') })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  const row = await db.selectFrom('settings').select('value').where('key', '=', 'cursor_secret').executeTakeFirstOrThrow();
  return row.value;
}

export default fp<DatabasePluginOptions>(
  async (app, { database, migrate }) => {
    if (migrate) await migrateToLatest(database.db);
    app.decorate('database', database);
    app.decorate('db', database.db);
    app.decorate('dialect', database.dialect);
    app.decorate('cursors', createCursorCodec(await cursorSecret(database.db)));
    app.addHook('onClose', async () => {
      await database.destroy();
    });
  },
  { name: 'database' },
);
