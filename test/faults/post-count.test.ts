import { describe, expect, it } from 'vitest';
import { follow, publish } from '../helpers/api.js';
import { buildTestApp, call } from '../helpers/build-test-app.js';
import { createAdmin, signUp, type TestUser } from '../helpers/factories.js';

/**
 * Issue 22, item 1: a user's `postCount` counts only the posts the caller may see (CONTRACT §3), on every read that
 * returns the user, and stays right after a post changes visibility or is deleted.
 */
describe('postCount never reveals hidden posts', () => {
  it('counts what each caller may see on every read that returns the user, after PUT and DELETE too', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const fan = await signUp(app);
    const stranger = await signUp(app);
    const other = await signUp(app);
    const admin = await createAdmin(app);
    await follow(app, fan, owner);
    // The owner appears in other's followers list and in the recommends of other's post.
    await follow(app, owner, other);
    const otherPost = await publish(app, other, 'a post the owner recommends');
    const rec = await call(app, 'POST', `/posts/${otherPost.id}/recommends`, { token: owner.token, body: { id: owner.id } });
    expect(rec.statusCode).toBe(201);

    await publish(app, owner, 'public one', 'public');
    const followersOnly = await publish(app, owner, 'followers one', 'followers');
    const privateOne = await publish(app, owner, 'private one', 'private');

    const viewers: [string, TestUser | undefined][] = [
      ['anonymous', undefined],
      ['stranger', stranger],
      ['follower', fan],
      ['owner', owner],
      ['admin', admin],
    ];

    /** The owner's postCount on each read, per viewer. */
    async function counts(): Promise<Record<string, number[]>> {
      const result: Record<string, number[]> = {};
      for (const [name, viewer] of viewers) {
        const token = viewer?.token;
        const get = async (url: string) => {
          const res = await call(app, 'GET', url, { token });
          expect(res.statusCode, `${name} GET ${url}`).toBe(200);
          return res.json();
        };
        const find = (list: { id: number; postCount: number }[]) => list.find((u) => u.id === owner.id)?.postCount ?? -1;
        result[name] = [
          (await get(`/users/${owner.id}`)).postCount,
          find(await get('/users?limit=100')),
          find(await get(`/users/${fan.id}/following`)),
          find(await get(`/users/${other.id}/followers`)),
          find(await get(`/posts/${otherPost.id}/recommends`)),
        ];
      }
      return result;
    }
    const every = (n: number) => [n, n, n, n, n];

    expect(await counts()).toEqual({ anonymous: every(1), stranger: every(1), follower: every(2), owner: every(3), admin: every(3) });

    // private → public: one more post for everyone to see, none fewer for anyone.
    const put = await call(app, 'PUT', `/posts/${privateOne.id}`, {
      token: owner.token,
      body: { title: 'now public', content: 'now public', visibility: 'public' },
    });
    expect(put.statusCode).toBe(200);
    expect(await counts()).toEqual({ anonymous: every(2), stranger: every(2), follower: every(3), owner: every(3), admin: every(3) });

    // followers → private: the follower loses it, the owner and admins keep it.
    const hide = await call(app, 'PUT', `/posts/${followersOnly.id}`, {
      token: owner.token,
      body: { title: 'now private', content: 'now private', visibility: 'private' },
    });
    expect(hide.statusCode).toBe(200);
    expect(await counts()).toEqual({ anonymous: every(2), stranger: every(2), follower: every(2), owner: every(3), admin: every(3) });

    const del = await call(app, 'DELETE', `/posts/${followersOnly.id}`, { token: owner.token });
    expect(del.statusCode).toBe(200);
    expect(await counts()).toEqual({ anonymous: every(2), stranger: every(2), follower: every(2), owner: every(2), admin: every(2) });

    // The stored counters agree with the posts table.
    const row = await app.db
      .selectFrom('users')
      .select(['post_count', 'public_post_count', 'followers_post_count'])
      .where('id', '=', owner.id)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ post_count: 2, public_post_count: 2, followers_post_count: 0 });
  });
});
