import { randomBytes } from 'node:crypto';
import fp from 'fastify-plugin';
import { sql, type Kysely } from 'kysely';
import type { Store } from '../db/store.js';
import type { Database } from '../db/types.js';
import { createCursorCodec, type CursorCodec } from '../shared/pagination.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The database: reads through `store.db`, writes through `store.transaction`. */
    store: Store;
    /** `store.db`: reads outside a transaction. */
    db: Kysely<Database>;
    cursors: CursorCodec;
  }
}

export interface DatabasePluginOptions {
  store: Store;
  /** Run migrations on start (the default: a fresh install needs no extra step). */
  migrate: boolean;
}

/**
 * The secret that signs pagination cursors lives in the database, not in one process: every server on the same
 * database then accepts the others' cursors. The first process to start creates it; the rest read it.
 */
async function cursorSecret(store: Store): Promise<string> {
  await store.transaction(({ db }) =>
    db
      .insertInto('settings')
      .values({ key: 'cursor_secret', value: randomBytes(32).toString('base64url') })
      .onConflict((oc) => oc.column('key').doNothing())
      .execute(),
  );
  const row = await store.db.selectFrom('settings').select('value').where('key', '=', 'cursor_secret').executeTakeFirstOrThrow();
  return row.value;
}

export default fp<DatabasePluginOptions>(
  async (app, { store, migrate }) => {
    if (migrate) await store.migrate();
    app.decorate('store', store);
    app.decorate('db', store.db);
    app.decorate('cursors', createCursorCodec(await cursorSecret(store)));
    // Behind a transaction pooler (PG_PREPARED_STATEMENTS=off) no session settings reach the server, so
    // DB_STATEMENT_TIMEOUT_MS cannot be set: the role's statement_timeout applies (docs/OPERATIONS.md, "Behind PgBouncer").
    // Without one, a statement waiting on a lock waits without bound; say so at start-up rather than in an incident.
    if (store.dialect === 'postgres' && !app.config.pgPreparedStatements) {
      const { rows } = await sql<{ statement_timeout: string }>`show statement_timeout`.execute(store.db);
      if (rows[0]?.statement_timeout === '0') {
        app.log.warn(
          'DB_STATEMENT_TIMEOUT_MS cannot be applied through a transaction pooler (PG_PREPARED_STATEMENTS=off) and the ' +
            "database role has no statement_timeout: statements may wait without bound; set one (ALTER ROLE … SET statement_timeout = '5s')",
        );
      }
    }
    app.addHook('onClose', async () => {
      await store.close();
    });
  },
  { name: 'database' },
);
