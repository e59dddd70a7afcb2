import { describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import { counterMismatches, createPost, expectNo5xx, feedMismatches, send, signUpMany, useRaceServer, type RaceServer, type RaceUser } from './race-helpers.js';

const follow = (race: RaceServer, followee: RaceUser, follower: RaceUser) =>
  send(race, 'POST', `/users/${followee.id}/followers`, { token: follower.token, body: { id: follower.id } });

async function counts(race: RaceServer, id: number) {
  const user = await race.db.selectFrom('users').select(['follower_count', 'following_count']).where('id', '=', id).executeTakeFirstOrThrow();
  return { followers: user.follower_count, following: user.following_count };
}

describe(`follow races (${backend})`, () => {
  const race = useRaceServer();

  it('five pairs of users follow each other at the same instant: all 201, counts 1/1 each', async () => {
    const users = await signUpMany(race, 10, 'mutual');
    const pairs = Array.from({ length: 5 }, (_, i) => [users[2 * i], users[2 * i + 1]] as [RaceUser, RaceUser]);
    const responses = await Promise.all(pairs.flatMap(([a, b]) => [follow(race, b, a), follow(race, a, b)]));
    expectNo5xx(responses);
    expect(responses.map((r) => r.status)).toEqual(Array<number>(10).fill(201));
    for (const user of users) expect(await counts(race, user.id)).toEqual({ followers: 1, following: 1 });
    // The 201 body is the follower with their counters already moved by this very follow.
    for (const res of responses) expect(res.json<{ followingCount: number }>().followingCount).toBe(1);
  });

  it('two identical follow requests race, five times over: one 201 and one 409 each, follower_count 1', async () => {
    const users = await signUpMany(race, 10, 'twice');
    const pairs = Array.from({ length: 5 }, (_, i) => [users[2 * i], users[2 * i + 1]] as [RaceUser, RaceUser]);
    const outcomes = await Promise.all(
      pairs.map(async ([followee, follower]) => {
        const responses = await Promise.all([follow(race, followee, follower), follow(race, followee, follower)]);
        expectNo5xx(responses);
        return responses.map((r) => r.status).sort();
      }),
    );
    expect(outcomes).toEqual(Array(5).fill([201, 409]));
    for (const [followee, follower] of pairs) {
      expect(await counts(race, followee.id)).toEqual({ followers: 1, following: 0 });
      expect(await counts(race, follower.id)).toEqual({ followers: 0, following: 1 });
      const rows = await race.db.selectFrom('follows').select('follower_id').where('followee_id', '=', followee.id).execute();
      expect(rows).toEqual([{ follower_id: follower.id }]);
    }
  });

  it('20 users follow one user concurrently: follower_count is exactly 20, and the list has all 20', async () => {
    const [star, ...fans] = await signUpMany(race, 21, 'fan');
    if (!star) throw new Error('no star');
    const responses = await Promise.all(fans.map((fan) => follow(race, star, fan)));
    expectNo5xx(responses);
    expect(responses.map((r) => r.status)).toEqual(Array<number>(20).fill(201));
    expect(await counts(race, star.id)).toEqual({ followers: 20, following: 0 });
    const listed = await send(race, 'GET', `/users/${star.id}/followers?limit=100`);
    expect(listed.json<{ id: number }[]>().map((u) => u.id)).toEqual(fans.map((f) => f.id).sort((a, b) => a - b));
    expect((await send(race, 'GET', `/users/${star.id}`)).json()).toMatchObject({ followerCount: 20 });
  });

  it('follows and unfollows of one user race with each other (each unfollow twice): counts stay exact', async () => {
    const [star, ...fans] = await signUpMany(race, 13, 'churn');
    if (!star) throw new Error('no star');
    const leaving = fans.slice(0, 6);
    const joining = fans.slice(6);
    for (const fan of leaving) expect((await follow(race, star, fan)).status).toBe(201);

    const unfollow = (fan: RaceUser) => send(race, 'DELETE', `/users/${star.id}/followers/${fan.id}`, { token: fan.token });
    const responses = await Promise.all([
      ...joining.map((fan) => follow(race, star, fan)),
      ...leaving.flatMap((fan) => [unfollow(fan), unfollow(fan)]),
    ]);
    expectNo5xx(responses);
    expect(responses.slice(0, joining.length).map((r) => r.status)).toEqual(Array<number>(joining.length).fill(201));
    // Of each pair of identical unfollows one removes the relation (200), the other finds none (400).
    const unfollows = responses.slice(joining.length).map((r) => r.status);
    for (let i = 0; i < unfollows.length; i += 2) expect([unfollows[i], unfollows[i + 1]].sort()).toEqual([200, 400]);
    expect(await counts(race, star.id)).toEqual({ followers: joining.length, following: 0 });
    for (const fan of leaving) expect(await counts(race, fan.id)).toEqual({ followers: 0, following: 0 });
  });

  it('an author publishes 10 posts while 10 users start following them: every follower’s feed has all 10', async () => {
    const [author, ...readers] = await signUpMany(race, 11, 'feedrace');
    if (!author) throw new Error('no author');
    const early = await createPost(race, author);
    const [follows, posts] = await Promise.all([
      Promise.all(readers.map((reader) => follow(race, author, reader))),
      Promise.all(Array.from({ length: 10 }, () => createPost(race, author))),
    ]);
    expectNo5xx(follows);
    expect(follows.map((r) => r.status)).toEqual(Array<number>(10).fill(201));
    const expected = [early, ...posts].sort((a, b) => b - a);
    for (const reader of readers) {
      const feed = await send(race, 'GET', `/users/${reader.id}/feed?limit=100`, { token: reader.token });
      expect(feed.status).toBe(200);
      expect(feed.json<{ id: number }[]>().map((p) => p.id)).toEqual(expected);
    }
    expect(await counts(race, author.id)).toEqual({ followers: 10, following: 0 });
    expect((await send(race, 'GET', `/users/${author.id}`)).json()).toMatchObject({ postCount: 11 });
  });

  it('leaves every counter in the database equal to its COUNT(*), and no response of this file was a 5xx', async () => {
    expect(await counterMismatches(race.db)).toEqual([]);
    expect(await feedMismatches(race.db)).toEqual({ missing: [], stale: [] });
    expect(race.statuses.filter((s) => s >= 500)).toEqual([]);
    expect(race.statuses.length).toBeGreaterThan(100);
  });

  it('the feed check itself notices a missing and a stale feed entry', async () => {
    const entry = await race.db.selectFrom('feed_entries').selectAll().orderBy('post_id').executeTakeFirstOrThrow();
    const [stranger] = await signUpMany(race, 1, 'stranger');
    await race.write((db) => db.deleteFrom('feed_entries').where('user_id', '=', entry.user_id).where('post_id', '=', entry.post_id).execute());
    await race.write((db) => db.insertInto('feed_entries').values({ ...entry, user_id: stranger!.id }).execute());
    try {
      expect(await feedMismatches(race.db)).toEqual({
        missing: [`user ${entry.user_id} post ${entry.post_id}`],
        stale: [`user ${stranger!.id} post ${entry.post_id}`],
      });
    } finally {
      await race.write((db) => db.deleteFrom('feed_entries').where('user_id', '=', stranger!.id).execute());
      await race.write((db) => db.insertInto('feed_entries').values(entry).execute());
    }
    expect(await feedMismatches(race.db)).toEqual({ missing: [], stale: [] });
  });
});
