import { describe, expect, it } from 'vitest';
import { buildTestApp } from '../../../test/helpers/build-test-app.js';
import { findKeptAnswer, keepAnswer } from './idempotency.repository.js';

describe('the Idempotency-Key statements', () => {
  const at = (ms: number) => new Date(Date.now() + ms).toISOString();
  const answer = (body: string, expiresInMs: number) => ({
    caller_id: 7,
    target: 'POST /boards',
    idempotency_key: 'k',
    fingerprint: `print of ${body}`,
    started_at: at(0),
    expires_at: at(expiresInMs),
    status: 201,
    content_type: 'application/json; charset=utf-8',
    location: 'http://localhost/boards/1',
    etag: null,
    body,
  });

  it('keeps an answer once, and reads it back as the builder does', async () => {
    const app = await buildTestApp();
    expect(await findKeptAnswer(app.store, 7, 'POST /boards', 'k')).toBeUndefined();
    expect(await app.store.transaction((tx) => keepAnswer(tx, answer('first', 60_000)))).toBe(true);
    // A live answer stays: the second request with the key learns it kept nothing.
    expect(await app.store.transaction((tx) => keepAnswer(tx, answer('second', 60_000)))).toBe(false);
    const byBuilder = await app.db
      .selectFrom('idempotency_keys')
      .select(['fingerprint', 'expires_at', 'status', 'content_type', 'location', 'etag', 'body'])
      .where('caller_id', '=', 7)
      .where('target', '=', 'POST /boards')
      .where('idempotency_key', '=', 'k')
      .executeTakeFirstOrThrow();
    expect(byBuilder.body).toBe('first');
    expect(await findKeptAnswer(app.store, 7, 'POST /boards', 'k')).toEqual(byBuilder);
    // Another scope is another key.
    expect(await findKeptAnswer(app.store, 8, 'POST /boards', 'k')).toBeUndefined();
    expect(await findKeptAnswer(app.store, 7, 'POST /users', 'k')).toBeUndefined();
    expect(await findKeptAnswer(app.store, 7, 'POST /boards', 'K')).toBeUndefined();
  });

  it('replaces an answer that expired before the request started, and a row without an answer', async () => {
    const app = await buildTestApp();
    await app.store.transaction((tx) => keepAnswer(tx, answer('expired', -1_000)));
    expect(await app.store.transaction((tx) => keepAnswer(tx, answer('fresh', 60_000)))).toBe(true);
    expect(await findKeptAnswer(app.store, 7, 'POST /boards', 'k')).toMatchObject({ body: 'fresh', fingerprint: 'print of fresh' });

    // A claim of an earlier version: no status, no body.
    await app.store.transaction((tx) => tx.db.updateTable('idempotency_keys').set({ status: null, body: null, claim_token: 'old' }).execute());
    expect(await app.store.transaction((tx) => keepAnswer(tx, answer('after the claim', 60_000)))).toBe(true);
    const rows = await app.db.selectFrom('idempotency_keys').select(['claim_token', 'status', 'body']).execute();
    expect(rows).toEqual([{ claim_token: null, status: 201, body: 'after the claim' }]);
  });

  it('writes nothing when the transaction that kept the answer rolls back', async () => {
    const app = await buildTestApp();
    const failed = app.store.transaction(async (tx) => {
      expect(await keepAnswer(tx, answer('rolled back', 60_000))).toBe(true);
      throw new Error('the create failed after keeping its answer');
    });
    await expect(failed).rejects.toThrow('the create failed');
    expect(await findKeptAnswer(app.store, 7, 'POST /boards', 'k')).toBeUndefined();
  });
});
