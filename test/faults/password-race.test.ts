import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { e2eDatabase, killLeftovers, request, startServer, type E2eDatabase } from '../helpers/server-process.js';

/**
 * Issue 22, item 2: a sign-in racing a password change (CONTRACT §2). The change's 200 revokes every token minted
 * with the old password, also one whose sign-in verified the old password a moment before the change committed:
 * each sign-in with the old password is refused (401), or its token is dead by the time the change answers.
 * Real server process, both backends.
 */

const ROUNDS = 25;
const SIGN_INS = 10;
/** Mostly short: the change hashes and commits within a few milliseconds with the tests' cheap password hash. */
const DELAYS_MS = [0, 0, 1, 2, 3, 5, 8, 13, 21, 34, 55];
let db: E2eDatabase;

beforeAll(async () => {
  db = await e2eDatabase();
});
afterEach(killLeftovers);
afterAll(async () => {
  await db?.drop();
}, 30_000);

describe('sign-in racing a password change', () => {
  it('no token minted with the old password works after the change', async () => {
    const server = await startServer({ databaseUrl: db.url });
    const username = 'race_user';
    let password = 'password round 0';
    expect((await request(server.url, 'POST', '/users', { body: { username, password } })).status).toBe(201);
    const first = await request(server.url, 'POST', '/tokens', { body: { username, password } });
    expect(first.status).toBe(201);
    const { token: sessionToken, userId } = first.json<{ token: string; userId: number }>();

    const outcomes = { refused: 0, mintedThenDead: 0, alive: 0 };
    for (let round = 1; round <= ROUNDS; round++) {
      const old = password;
      password = `password round ${round}`;
      const change = request(server.url, 'PUT', `/users/${userId}/password`, {
        token: sessionToken,
        body: { currentPassword: old, newPassword: password },
      });
      // The sign-ins start 0–55 ms after the change, spread over the window in which it hashes and commits.
      await new Promise((resolve) => setTimeout(resolve, DELAYS_MS[round % DELAYS_MS.length]));
      const signIns = Array.from({ length: SIGN_INS }, () => request(server.url, 'POST', '/tokens', { body: { username, password: old } }));
      const changed = await change;
      expect(changed.status, changed.text).toBe(200);
      for (const res of await Promise.all(signIns)) {
        if (res.status === 401) {
          outcomes.refused++;
          continue;
        }
        expect(res.status, res.text).toBe(201);
        // Minted before the change committed: it must be dead now.
        const probe = await request(server.url, 'GET', `/users/${userId}/feed?limit=1`, { token: res.json<{ token: string }>().token });
        if (probe.status === 401) outcomes.mintedThenDead++;
        else outcomes.alive++;
      }
    }
    console.log(`[password race] ${ROUNDS}×${SIGN_INS} sign-ins with the old password:`, outcomes);
    expect(outcomes.alive).toBe(0);
    // The race was real: some sign-ins were minted just before the change, some refused after it.
    expect(outcomes.refused).toBeGreaterThan(0);

    // The session that changed the password is still signed in, and the new password works.
    expect((await request(server.url, 'GET', `/users/${userId}/feed?limit=1`, { token: sessionToken })).status).toBe(200);
    expect((await request(server.url, 'POST', '/tokens', { body: { username, password } })).status).toBe(201);
  }, 30_000);
});
