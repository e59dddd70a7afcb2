import { describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import { counterMismatches, createPost, expectNo5xx, send, signUpMany, useRaceServer, type RaceServer } from './race-helpers.js';

async function postCounts(race: RaceServer, id: number) {
  const post = await race.db.selectFrom('posts').select(['reply_count', 'recommend_count']).where('id', '=', id).executeTakeFirstOrThrow();
  return { replies: post.reply_count, recommends: post.recommend_count };
}

describe(`reply and recommend races on one post (${backend})`, () => {
  const race = useRaceServer();

  it('15 users recommend (each twice) and reply (each twice) to one post at once: recommend_count 15, reply_count 30', async () => {
    const [owner, ...readers] = await signUpMany(race, 16, 'reader');
    if (!owner) throw new Error('no owner');
    const postId = await createPost(race, owner);

    const recommend = (i: number) => {
      const reader = readers[i % readers.length]!;
      return send(race, 'POST', `/posts/${postId}/recommends`, { token: reader.token, body: { id: reader.id } });
    };
    const replyTo = (i: number) => {
      const reader = readers[i % readers.length]!;
      return send(race, 'POST', `/posts/${postId}/replies`, { token: reader.token, body: { content: `reply ${i}` } });
    };
    // Interleaved, so recommends and replies update the same post row at the same time.
    const responses = await Promise.all(Array.from({ length: 30 }, (_, i) => [recommend(i), replyTo(i)]).flat());
    expectNo5xx(responses);
    const recommendStatuses = responses.filter((_, i) => i % 2 === 0).map((r) => r.status);
    const replyStatuses = responses.filter((_, i) => i % 2 === 1).map((r) => r.status);
    expect(recommendStatuses.sort()).toEqual([...Array<number>(15).fill(201), ...Array<number>(15).fill(409)]);
    expect(replyStatuses).toEqual(Array<number>(30).fill(201));

    expect(await postCounts(race, postId)).toEqual({ replies: 30, recommends: 15 });
    const read = await send(race, 'GET', `/posts/${postId}`);
    expect(read.json()).toMatchObject({ replyCount: 30, recommendCount: 15 });
    const recommenders = await send(race, 'GET', `/posts/${postId}/recommends?limit=100`);
    expect(recommenders.json<{ id: number }[]>().map((u) => u.id)).toEqual(readers.map((r) => r.id).sort((a, b) => a - b));
  });

  it('withdrawals and deletions race with new recommends and replies (each delete sent twice): the counts stay exact', async () => {
    const [owner, ...readers] = await signUpMany(race, 13, 'churner');
    if (!owner) throw new Error('no owner');
    const postId = await createPost(race, owner);
    const early = readers.slice(0, 6);
    const late = readers.slice(6);
    const replyIds: number[] = [];
    for (const reader of early) {
      expect((await send(race, 'POST', `/posts/${postId}/recommends`, { token: reader.token, body: { id: reader.id } })).status).toBe(201);
      const reply = await send(race, 'POST', `/posts/${postId}/replies`, { token: reader.token, body: { content: 'early' } });
      expect(reply.status).toBe(201);
      replyIds.push(reply.json<{ id: number }>().id);
    }

    const withdraw = (i: number) =>
      send(race, 'DELETE', `/posts/${postId}/recommends/${early[i]!.id}`, { token: early[i]!.token });
    // The post's owner may delete any reply on it.
    const deleteReply = (i: number) => send(race, 'DELETE', `/posts/${postId}/replies/${replyIds[i]}`, { token: owner.token });
    const deletes = early.flatMap((_, i) => [withdraw(i), withdraw(i), deleteReply(i), deleteReply(i)]);
    const creates = late.flatMap((reader) => [
      send(race, 'POST', `/posts/${postId}/recommends`, { token: reader.token, body: { id: reader.id } }),
      send(race, 'POST', `/posts/${postId}/replies`, { token: reader.token, body: { content: 'late' } }),
    ]);
    const [deleted, created] = await Promise.all([Promise.all(deletes), Promise.all(creates)]);
    expectNo5xx([...deleted, ...created]);
    // Of each two identical deletes one removes the row (200), the other finds none (400).
    for (let i = 0; i < deleted.length; i += 2) expect([deleted[i]!.status, deleted[i + 1]!.status].sort()).toEqual([200, 400]);
    expect(created.map((r) => r.status)).toEqual(Array<number>(created.length).fill(201));

    expect(await postCounts(race, postId)).toEqual({ replies: late.length, recommends: late.length });
  });

  it('deleting a post while it is recommended and replied to: no 5xx, no counter left wrong', async () => {
    const [owner, ...readers] = await signUpMany(race, 11, 'latecomer');
    if (!owner) throw new Error('no owner');
    const postIds = [await createPost(race, owner), await createPost(race, owner), await createPost(race, owner)];
    const responses = await Promise.all(
      postIds.flatMap((postId) => [
        ...readers.flatMap((reader) => [
          send(race, 'POST', `/posts/${postId}/recommends`, { token: reader.token, body: { id: reader.id } }),
          send(race, 'POST', `/posts/${postId}/replies`, { token: reader.token, body: { content: 'in time?' } }),
        ]),
        send(race, 'DELETE', `/posts/${postId}`, { token: owner.token }),
      ]),
    );
    expectNo5xx(responses);
    const deletes = responses.filter((_, i) => i % (readers.length * 2 + 1) === readers.length * 2);
    expect(deletes.map((r) => r.status)).toEqual([200, 200, 200]);
    // Each create either landed before the delete (201, then cascaded away) or found the post gone (404).
    for (const res of responses) expect([200, 201, 404]).toContain(res.status);
    expect(await race.db.selectFrom('posts').select('id').where('id', 'in', postIds).execute()).toEqual([]);
    expect(await race.db.selectFrom('users').select('post_count').where('id', '=', owner.id).executeTakeFirst()).toEqual({ post_count: 0 });
  });

  it('leaves every counter in the database equal to its COUNT(*), and no response of this file was a 5xx', async () => {
    expect(await counterMismatches(race.db)).toEqual([]);
    expect(race.statuses.filter((s) => s >= 500)).toEqual([]);
  });
});
