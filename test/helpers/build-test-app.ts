import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { onTestFinished } from 'vitest';
import { buildApp } from '../../src/app.js';
import { parseConfig, type Config } from '../../src/config.js';
import type { StoreOptions } from '../../src/db/store.js';
import { freshDatabase } from './database.js';

export const PUBLIC_URL = 'http://corkboard.test';

export function testConfig(overrides: Partial<Config> = {}): Config {
  return parseConfig({
    port: 0,
    host: '127.0.0.1',
    databaseUrl: 'sqlite::memory:',
    pgPreparedStatements: true,
    sqliteGroupCommit: true,
    sqliteBackgroundCheckpoint: true,
    dbStatementTimeoutMs: 5000,
    publicUrl: PUBLIC_URL,
    rateLimit: { enabled: false, max: 1000, authMax: 1000, windowMs: 60_000 },
    logLevel: 'silent',
    tokenTtlSeconds: 3600,
    idempotencyTtlSeconds: 86_400,
    bodyLimit: 256 * 1024,
    // The cheapest Argon2id the config allows: tests sign up hundreds of users.
    passwordHashMemoryKib: 64,
    pgPoolMax: 10,
    trustProxy: false,
    redisKeyPrefix: 'corkboard-test:',
    requestTimeoutMs: 30_000,
    shutdownGraceMs: 10_000,
    streamHeartbeatSeconds: 15,
    streamMaxPerUser: 5,
    streamMax: 10_000,
    streamAuthRecheckSeconds: 30,
    streamRetentionSeconds: 3600,
    ...overrides,
  });
}

/**
 * The production app (same plugins, same Ajv options) on a fresh database, closed when the test finishes.
 * Call it inside a test. `storeOptions`: the store's own (an `onStatement` observer, say).
 */
export async function buildTestApp(overrides: Partial<Config> = {}, storeOptions: StoreOptions = {}): Promise<FastifyInstance> {
  const { store, drop } = await freshDatabase(storeOptions);
  const app = await buildApp(testConfig(overrides), { store, logger: false });
  await app.ready();
  onTestFinished(async () => {
    await app.close();
    await drop();
  });
  return app;
}

export type Response = LightMyRequestResponse;

/** Shorthand for inject with an optional bearer token and JSON body. */
export function call(
  app: FastifyInstance,
  method: InjectOptions['method'],
  url: string,
  options: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Response> {
  return app.inject({
    method,
    url,
    headers: {
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
      ...options.headers,
    },
    ...(options.body !== undefined ? { payload: options.body as InjectOptions['payload'] } : {}),
  });
}

/** Writes straight to the test's database in a transaction (to set up a state the API cannot produce). */
export function write<T>(app: FastifyInstance, work: (db: FastifyInstance['db']) => Promise<T>): Promise<T> {
  return app.store.transaction((tx) => work(tx.db));
}
