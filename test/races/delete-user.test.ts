import { describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import {
  counterMismatches,
  createPost,
  expectNo5xx,
  feedMismatches,
  rowCounts,
  send,
  signUpMany,
  useRaceServer,
  type RaceServer,
  type RaceUser,
} from './race-helpers.js';

/**
 * A user is deleted while everyone around them follows, recommends and replies to them, and while they themself
 * still follow, recommend, reply and post. Whatever interleaving the database picks, nothing may answer 5xx, and
 * afterwards every counter must equal the rows it counts.
 */
async function deleteAmidTraffic(race: RaceServer, victim: RaceUser, others: RaceUser[]) {
  const victimPost = await createPost(race, victim);
  const otherPosts = await Promise.all(others.map((other) => createPost(race, other)));
  // What the victim already has, to be undone by the delete: a follower, a followee, a recommend and a reply.
  const [first, second] = others as [RaceUser, RaceUser];
  const setup = await Promise.all([
    send(race, 'POST', `/users/${victim.id}/followers`, { token: first.token, body: { id: first.id } }),
    send(race, 'POST', `/users/${second.id}/followers`, { token: victim.token, body: { id: victim.id } }),
    send(race, 'POST', `/posts/${otherPosts[0]}/recommends`, { token: victim.token, body: { id: victim.id } }),
    send(race, 'POST', `/posts/${otherPosts[0]}/replies`, { token: victim.token, body: { content: 'before' } }),
    send(race, 'POST', `/posts/${victimPost}/replies`, { token: second.token, body: { content: 'before' } }),
  ]);
  expect(setup.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);

  const traffic = [
    ...others.slice(1).map((other) => send(race, 'POST', `/users/${victim.id}/followers`, { token: other.token, body: { id: other.id } })),
    ...others.map((other) => send(race, 'POST', `/posts/${victimPost}/recommends`, { token: other.token, body: { id: other.id } })),
    ...others.map((other) => send(race, 'POST', `/posts/${victimPost}/replies`, { token: other.token, body: { content: 'racing' } })),
    ...others.slice(2).map((other) => send(race, 'POST', `/users/${other.id}/followers`, { token: victim.token, body: { id: victim.id } })),
    ...otherPosts.slice(1).map((post) => send(race, 'POST', `/posts/${post}/recommends`, { token: victim.token, body: { id: victim.id } })),
    ...otherPosts.map((post) => send(race, 'POST', `/posts/${post}/replies`, { token: victim.token, body: { content: 'racing' } })),
    send(race, 'POST', `/users/${victim.id}/posts`, { token: victim.token, body: { title: 'last words', content: 'racing' } }),
  ];
  // The delete goes out in the middle of the traffic.
  const deletion = send(race, 'DELETE', `/users/${victim.id}`, { token: victim.token });
  const more = others.map((other) => send(race, 'GET', `/users/${victim.id}/followers?limit=100`, { token: other.token }));
  const responses = await Promise.all([deletion, ...traffic, ...more]);
  return { responses, deletion: await deletion, victimPost };
}

describe(`deleting a user amid concurrent traffic (${backend})`, () => {
  const race = useRaceServer();

  it('four users deleted at once while 8 others each follow, recommend and reply to them: no 5xx, nothing of them left', async () => {
    const victims = await signUpMany(race, 4, 'victim');
    const crowds = await Promise.all(victims.map(() => signUpMany(race, 8, 'crowd')));
    const rounds = await Promise.all(victims.map((victim, i) => deleteAmidTraffic(race, victim, crowds[i]!)));

    for (const round of rounds) {
      expectNo5xx(round.responses);
      expect(round.deletion.status).toBe(200);
      expect(round.deletion.json()).toEqual({ deleted: 1 });
      // Every other answer is a success that came before the delete or a client error that came after it.
      for (const res of round.responses) expect([200, 201, 401, 404, 409]).toContain(res.status);
    }
    const ids = victims.map((v) => v.id);
    expect(await race.db.selectFrom('users').select('id').where('id', 'in', ids).execute()).toEqual([]);
    expect(await race.db.selectFrom('follows').select('follower_id').where((eb) => eb.or([eb('follower_id', 'in', ids), eb('followee_id', 'in', ids)])).execute()).toEqual([]);
    expect(await race.db.selectFrom('posts').select('id').where('owner_id', 'in', ids).execute()).toEqual([]);
    expect(await race.db.selectFrom('replies').select('id').where('author_id', 'in', ids).execute()).toEqual([]);
    expect(await race.db.selectFrom('recommends').select('post_id').where('user_id', 'in', ids).execute()).toEqual([]);
    expect(await race.db.selectFrom('tokens').select('id').where('user_id', 'in', ids).execute()).toEqual([]);
    for (const victim of victims) expect((await send(race, 'GET', `/users/${victim.id}`)).status).toBe(404);
  });

  it('leaves every counter in the database equal to its COUNT(*), and no response of this file was a 5xx', async () => {
    const rows = await rowCounts(race.db);
    // The crowd's own posts, replies and recommends survive: the check below has rows to look at.
    expect(rows.users).toBe(32);
    expect(rows.posts).toBeGreaterThanOrEqual(32);
    expect(await counterMismatches(race.db)).toEqual([]);
    expect(await feedMismatches(race.db)).toEqual({ missing: [], stale: [] });
    expect(race.statuses.filter((s) => s >= 500)).toEqual([]);
  });

  it('the counter check itself notices a counter that is off by one', async () => {
    const before = await counterMismatches(race.db);
    const untouched = <T extends { id: number }>(rows: T[], table: string) => {
      const row = rows.find((r) => !before.some((m) => m.table === table && m.id === r.id));
      if (!row) throw new Error(`no ${table} row to corrupt`);
      return row;
    };
    const user = untouched(await race.db.selectFrom('users').select(['id', 'follower_count']).orderBy('id').execute(), 'users');
    const post = untouched(await race.db.selectFrom('posts').select(['id', 'reply_count']).orderBy('id').execute(), 'posts');
    await race.write((db) => db.updateTable('users').set({ follower_count: user.follower_count + 1 }).where('id', '=', user.id).execute());
    await race.write((db) => db.updateTable('posts').set({ reply_count: post.reply_count + 1 }).where('id', '=', post.id).execute());
    try {
      const after = await counterMismatches(race.db);
      expect(after).toHaveLength(before.length + 2);
      expect(after).toEqual(
        expect.arrayContaining([
          { table: 'users', id: user.id, column: 'follower_count', stored: user.follower_count + 1, actual: user.follower_count },
          { table: 'posts', id: post.id, column: 'reply_count', stored: post.reply_count + 1, actual: post.reply_count },
        ]),
      );
    } finally {
      await race.write((db) => db.updateTable('users').set({ follower_count: user.follower_count }).where('id', '=', user.id).execute());
      await race.write((db) => db.updateTable('posts').set({ reply_count: post.reply_count }).where('id', '=', post.id).execute());
    }
  });
});
