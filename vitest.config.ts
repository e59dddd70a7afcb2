import { randomBytes } from 'node:crypto';
import { defineConfig } from 'vitest/config';

// Names this run's PostgreSQL test databases (inherited by the workers); see test/helpers/database.ts.
process.env.CORKBOARD_TEST_RUN ??= randomBytes(4).toString('hex');

/**
 * The whole suite runs once per storage backend. SQLite always; PostgreSQL when TEST_DATABASE_URL is set
 * (`.ci/run` always sets it). Each test builds its own app on a fresh database (SQLite in memory, or a
 * throw-away PostgreSQL schema), so files run in parallel without sharing state.
 */
const backends = ['sqlite', ...(process.env.TEST_DATABASE_URL ? ['postgres'] : [])];

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    reporters: ['default', './test/summary-reporter.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    projects: [
      ...backends.map((backend) => ({
        extends: true as const,
        test: {
          name: backend,
          include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
          env: { TEST_BACKEND: backend },
        },
      })),
      // When TEST_PGBOUNCER_URL is set (`.ci/run` starts one with scripts/pgbouncer.sh), the end-to-end tests run once
      // more with the spawned servers behind PgBouncer in transaction-pooling mode (CONTRACT §8); the tests' own
      // database work stays direct, on TEST_DATABASE_URL. See databaseEnv in test/helpers/server-process.ts.
      ...(process.env.TEST_PGBOUNCER_URL
        ? [
            {
              extends: true as const,
              test: {
                name: 'pgbouncer',
                include: ['test/http/**/*.test.ts', 'test/races/**/*.test.ts'],
                env: { TEST_BACKEND: 'postgres', TEST_VIA_PGBOUNCER: '1' },
              },
            },
          ]
        : []),
    ],
  },
});
