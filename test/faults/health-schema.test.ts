import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { EXPECTED_SCHEMA } from '../../src/db/migrate.js';
import { e2eDatabase, killLeftovers, openDatabase, request, startServer, type E2eDatabase } from '../helpers/server-process.js';

/**
 * Issue 22, item 4: GET /health says whether this process can serve, not only whether the database answers
 * (CONTRACT §5): 503 with Retry-After when the schema is not the one this build expects (the newest migration is
 * missing, or there is no schema at all), 200 once it is. A load balancer then keeps traffic away from it.
 */

let db: E2eDatabase | undefined;
afterEach(async () => {
  await killLeftovers();
  await db?.drop();
  db = undefined;
});

describe('GET /health checks the schema version', () => {
  it('200 when current, 503 without the newest migration or with no schema at all', async () => {
    db = await e2eDatabase();
    const server = await startServer({ databaseUrl: db.url });
    const health = () => request(server.url, 'GET', '/health');
    expect((await health()).status).toBe(200);

    const store = openDatabase(db.url);
    try {
      const { rows } = await sql<{ name: string; timestamp: string }>`select name, timestamp from kysely_migration where name = ${EXPECTED_SCHEMA}`.execute(store.db);
      const latest = rows[0]!;

      // A database an older build migrated: its newest migration is not this build's.
      await store.transaction(({ db: tx }) => sql`delete from kysely_migration where name = ${EXPECTED_SCHEMA}`.execute(tx));
      const stale = await health();
      expect(stale.status, stale.text).toBe(503);
      expect(stale.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(stale.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(stale.json()).toMatchObject({ status: 503 });

      await store.transaction(({ db: tx }) =>
        sql`insert into kysely_migration (name, timestamp) values (${latest.name}, ${latest.timestamp})`.execute(tx),
      );
      expect((await health()).status).toBe(200);

      // No schema bookkeeping at all (an empty database): not servable either.
      await store.transaction(({ db: tx }) => sql`drop table kysely_migration`.execute(tx));
      const empty = await health();
      expect(empty.status).toBe(503);
      expect(empty.headers.get('retry-after')).toMatch(/^\d+$/);
      // The process itself stays up and answers.
      expect((await request(server.url, 'GET', '/openapi.json')).status).toBe(200);
    } finally {
      await store.close();
    }
  });
});
