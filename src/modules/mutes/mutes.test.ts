import { describe, expect, it } from 'vitest';
import { follow, publish } from '../../../test/helpers/api.js';
import { buildTestApp, call } from '../../../test/helpers/build-test-app.js';
import { signUp } from '../../../test/helpers/factories.js';
import { listedTo, notMutedBy } from '../../shared/visibility.js';

// The routes' statuses and privacy are tested with those of blocks (blocks.test.ts); this is what a mute does.
describe('mutes (CONTRACT §9)', () => {
  it("leaves the muted user's posts and replies out of the muter's listings only; reads by id, user posts, recommends, counters and follows stay", async () => {
    const app = await buildTestApp();
    const [muter, muted, third] = [await signUp(app), await signUp(app), await signUp(app)];
    await follow(app, muter, muted);
    await follow(app, muted, muter);
    const loud = await publish(app, muted, 'loud');
    const shy = await publish(app, muted, 'for followers', 'followers');
    const other = await publish(app, third, 'by third');
    const reply = (await call(app, 'POST', `/posts/${other.id}/replies`, { token: muted.token, body: { content: 'noise' } })).json();
    await call(app, 'POST', `/posts/${other.id}/recommends`, { token: muted.token, body: { id: muted.id } });
    await app.fanout.drain();
    const res = await call(app, 'POST', `/users/${muter.id}/mutes`, { token: muter.token, body: { id: muted.id } });
    expect(res.statusCode).toBe(201);

    const ids = (items: Array<{ id: number }>) => items.map((item) => item.id);
    expect(ids((await call(app, 'GET', '/posts', { token: muter.token })).json())).toEqual([other.id]);
    expect(ids((await call(app, 'GET', `/users/${muter.id}/feed`, { token: muter.token })).json())).toEqual([]);
    expect((await call(app, 'GET', `/posts/${other.id}/replies`, { token: muter.token })).json()).toEqual([]);
    // Not filtered: reads by id, the muted user's own listing, recommends lists, counters.
    expect((await call(app, 'GET', `/posts/${loud.id}`, { token: muter.token })).statusCode).toBe(200);
    expect((await call(app, 'GET', `/posts/${other.id}/replies/${reply.id}`, { token: muter.token })).statusCode).toBe(200);
    expect(ids((await call(app, 'GET', `/users/${muted.id}/posts`, { token: muter.token })).json())).toEqual([shy.id, loud.id]);
    expect(ids((await call(app, 'GET', `/posts/${other.id}/recommends`, { token: muter.token })).json())).toEqual([muted.id]);
    expect((await call(app, 'GET', `/posts/${other.id}`, { token: muter.token })).json()).toMatchObject({ replyCount: 1, recommendCount: 1 });
    expect((await call(app, 'GET', `/users/${muted.id}`, { token: muter.token })).json()).toMatchObject({ postCount: 2, followerCount: 1 });
    // Follows are untouched; the muted user is not told and sees everything as before.
    expect((await call(app, 'GET', `/users/${muted.id}/followers/${muter.id}`)).statusCode).toBe(200);
    expect((await call(app, 'GET', `/users/${muter.id}/followers/${muted.id}`)).statusCode).toBe(200);
    expect(ids((await call(app, 'GET', '/posts', { token: muted.token })).json())).toEqual([other.id, shy.id, loud.id]);
    expect((await call(app, 'GET', `/users/${muted.id}/mutes/${muter.id}`, { token: muted.token })).statusCode).toBe(404);
    // Others see it all.
    expect(ids((await call(app, 'GET', '/posts', { token: third.token })).json())).toEqual([other.id, loud.id]);
    expect((await call(app, 'GET', `/posts/${other.id}/replies`, { token: third.token })).json()).toHaveLength(1);

    // Lifted: the listings show them again.
    expect((await call(app, 'DELETE', `/users/${muter.id}/mutes/${muted.id}`, { token: muter.token })).statusCode).toBe(200);
    expect(ids((await call(app, 'GET', '/posts', { token: muter.token })).json())).toEqual([other.id, shy.id, loud.id]);
    expect(ids((await call(app, 'GET', `/users/${muter.id}/feed`, { token: muter.token })).json())).toEqual([shy.id, loud.id]);
  });

  it('gives search a filter to add to its listing (notMutedBy) that matches listedTo', async () => {
    const app = await buildTestApp();
    const [muter, muted] = [await signUp(app), await signUp(app)];
    const post = await publish(app, muted, 'findable');
    await call(app, 'POST', `/users/${muter.id}/mutes`, { token: muter.token, body: { id: muted.id } });
    const viewer = { id: muter.id, role: 'member' as const };
    const search = (withFilter: boolean) =>
      app.db
        .selectFrom('posts')
        .select('posts.id')
        .where('posts.visibility', '=', 'public')
        .$if(withFilter, (q) => q.where(notMutedBy(viewer)))
        .execute();
    expect(await search(false)).toEqual([{ id: post.id }]);
    expect(await search(true)).toEqual([]);
    expect(await app.db.selectFrom('posts').select('posts.id').where(listedTo(viewer)).execute()).toEqual([]);
    // A viewer known to mute nobody gets no condition at all.
    expect(await app.db.selectFrom('posts').select('posts.id').where(notMutedBy({ ...viewer, hasMutes: false })).execute()).toEqual([{ id: post.id }]);
  });
});
