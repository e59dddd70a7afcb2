import { describe, expect, it } from 'vitest';
import { follow, publish } from '../../../test/helpers/api.js';
import { buildTestApp } from '../../../test/helpers/build-test-app.js';
import { createAdmin, signUp } from '../../../test/helpers/factories.js';
import { findVisiblePost } from '../../shared/visibility.js';
import { hashToken } from '../../shared/tokens.js';
import { findCallerAndReadablePost, findReadablePost } from './posts.repository.js';

describe('the post read by id (plain SQL)', () => {
  it('reads a post exactly as the builder does, for every kind of reader and every visibility', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const follower = await signUp(app);
    const stranger = await signUp(app);
    const admin = await createAdmin(app);
    await follow(app, follower, owner);
    const posts = [
      await publish(app, owner, 'for everyone'),
      await publish(app, owner, 'for followers', 'followers'),
      await publish(app, owner, 'for the owner', 'private'),
    ];
    const ids = [...posts.map((post) => post.id), posts[2]!.id + 1000];
    const readers = { anonymous: undefined, owner, follower, stranger, admin };

    const seen: Record<string, string[]> = {};
    for (const [name, reader] of Object.entries(readers)) {
      const viewer = reader && { id: reader.id, role: reader === admin ? ('admin' as const) : ('member' as const) };
      for (const id of ids) {
        const row = await findReadablePost(app.store, id, viewer);
        expect(row).toEqual(await findVisiblePost(app.db, id, viewer));
        if (row) (seen[name] ??= []).push(row.visibility);
        if (reader) {
          // Signed in, the token's caller and the post in one statement: the same post for this reader.
          const both = await findCallerAndReadablePost(app.store, hashToken(reader.token), new Date().toISOString(), id);
          expect(both?.caller).toMatchObject({ id: reader.id, role: viewer!.role, hasBlocks: false, hasMutes: false });
          expect(both?.post).toEqual(row);
        }
      }
    }
    // What CONTRACT §3 says each reader sees; the missing id is found by no one.
    expect(seen).toEqual({
      anonymous: ['public'],
      owner: ['public', 'followers', 'private'],
      follower: ['public', 'followers'],
      stranger: ['public'],
      admin: ['public', 'followers', 'private'],
    });
  });
});
