import { describe, expect, it } from 'vitest';
import { buildTestApp, write } from '../../../test/helpers/build-test-app.js';
import { createEventsRepository } from './events.js';

/** Users 1..count, and follows given as [follower, followee] pairs, written straight to the database. */
async function seed(app: Awaited<ReturnType<typeof buildTestApp>>, count: number, follows: Array<[number, number]>) {
  const now = new Date().toISOString();
  const users = Array.from({ length: count }, (_, i) => ({
    username: `u${i + 1}`,
    username_key: `u${i + 1}`,
    display_name: '',
    bio: '',
    role: 'member' as const,
    password_hash: 'x',
    created_at: now,
    updated_at: now,
  }));
  const rows = follows.map(([follower_id, followee_id]) => ({ follower_id, followee_id, created_at: now }));
  await write(app, async (db) => {
    for (let i = 0; i < users.length; i += 100) await db.insertInto('users').values(users.slice(i, i + 100)).execute();
    for (let i = 0; i < rows.length; i += 200) await db.insertInto('follows').values(rows.slice(i, i + 200)).execute();
  });
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('which open streams’ viewers follow an event’s owner (followersAmong)', () => {
  it('answers exactly the candidates who follow, whether the owner has fewer followers than candidates or more', async () => {
    const app = await buildTestApp();
    // User 1 has three followers; user 2 (a "celebrity") has 900: users 101..1000.
    await seed(app, 1000, [
      [5, 1],
      [700, 1],
      [999, 1],
      ...range(101, 1000).map((id): [number, number] => [id, 2]),
    ]);
    const events = createEventsRepository(app.db);
    // 600 candidates, more than one statement's worth: the owner's followers are read and matched.
    const candidates = range(1, 600);
    expect([...(await events.followersAmong(1, candidates))].sort((a, b) => a - b)).toEqual([5]);
    // More followers (900) than candidates (600): the candidates are looked up among the follows instead. Some of
    // them (701..1000) lie past the first 601 followers that the first read stops at.
    const spread = [...range(1, 300), ...range(701, 1000)];
    expect([...(await events.followersAmong(2, spread))].sort((a, b) => a - b)).toEqual([...range(101, 300), ...range(701, 1000)]);
    // A few candidates: looked up among the follows at once.
    expect([...(await events.followersAmong(1, [5, 6, 999]))].sort((a, b) => a - b)).toEqual([5, 999]);
    expect([...(await events.followersAmong(2, [99, 100, 101, 1000]))].sort((a, b) => a - b)).toEqual([101, 1000]);
    expect(await events.followersAmong(3, candidates)).toEqual(new Set());
  });
});
