import { describe, expect, it } from 'vitest';
import { buildTestApp, write } from '../../test/helpers/build-test-app.js';
import { createAdmin, signUp } from '../../test/helpers/factories.js';
import { findVisiblePost, type Viewer } from './visibility.js';

// The rule is exercised through the API by the posts, replies and recommends tests; this pins the predicate
// itself (including the correlated follows lookup) against rows written directly.
describe('visibleTo', () => {
  it.each([
    ['public', { anonymous: true, follower: true, stranger: true, owner: true, admin: true }],
    ['followers', { anonymous: false, follower: true, stranger: false, owner: true, admin: true }],
    ['private', { anonymous: false, follower: false, stranger: false, owner: true, admin: true }],
  ] as const)('a %s post', async (visibility, expected) => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const follower = await signUp(app);
    const stranger = await signUp(app);
    const admin = await createAdmin(app);
    // The stranger follows someone else: the lookup must be correlated to the post's owner, not "follows anyone".
    const now = new Date().toISOString();
    await write(app, (db) =>
      db
        .insertInto('follows')
        .values([
          { follower_id: follower.id, followee_id: owner.id, created_at: now },
          { follower_id: stranger.id, followee_id: follower.id, created_at: now },
        ])
        .execute(),
    );
    const post = await write(app, (db) =>
      db
        .insertInto('posts')
        .values({ owner_id: owner.id, title: 't', content: 'c', visibility, created_at: now, updated_at: now })
        .returning('id')
        .executeTakeFirstOrThrow(),
    );
    const as = (id: number, role: 'member' | 'admin' = 'member'): Viewer => ({ id, role });
    const sees = async (viewer: Viewer) => (await findVisiblePost(app.db, post.id, viewer)) !== undefined;
    expect({
      anonymous: await sees(undefined),
      follower: await sees(as(follower.id)),
      stranger: await sees(as(stranger.id)),
      owner: await sees(as(owner.id)),
      admin: await sees(as(admin.id, 'admin')),
    }).toEqual(expected);
  });
});
