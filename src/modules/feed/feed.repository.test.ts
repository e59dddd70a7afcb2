import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import { follow, publish } from '../../../test/helpers/api.js';
import { buildTestApp } from '../../../test/helpers/build-test-app.js';
import { createAdmin, signUp } from '../../../test/helpers/factories.js';
import type { Store } from '../../db/store.js';
import type { Database, PostRow, Role } from '../../db/types.js';
import { POST_COLUMNS, visibleTo } from '../../shared/visibility.js';
import { createFanout } from './feed.fanout.js';
import { createFeedRepository, type FeedOwner } from './feed.repository.js';

const readFeedPage = (store: Store, owner: FeedOwner, limit: number, after?: number) => createFeedRepository(store).page(owner, { limit, after });

/**
 * The feed page by its definition, with the builder and `visibleTo`: the owner's entries, the queued posts by
 * users the owner follows and the posts of the users whose backfill is pending, each post once, those the owner
 * may see, newest first, `limit + 1` of them after `after`.
 */
async function feedPageByDefinition(
  db: Kysely<Database>,
  owner: { id: number; role: Role },
  limit: number,
  after: number | undefined,
): Promise<PostRow[]> {
  const written = await db
    .selectFrom('feed_entries')
    .innerJoin('posts', 'posts.id', 'feed_entries.post_id')
    .select(POST_COLUMNS)
    .where('feed_entries.user_id', '=', owner.id)
    .where(visibleTo(owner))
    .execute();
  const queued = await db
    .selectFrom('fanout_queue')
    .innerJoin('follows', (join) => join.onRef('follows.followee_id', '=', 'fanout_queue.owner_id').on('follows.follower_id', '=', owner.id))
    .innerJoin('posts', 'posts.id', 'fanout_queue.post_id')
    .select(POST_COLUMNS)
    .where(visibleTo(owner))
    .execute();
  const pending = await db
    .selectFrom('feed_backfill')
    .innerJoin('posts', 'posts.owner_id', 'feed_backfill.owner_id')
    .select(POST_COLUMNS)
    .where('feed_backfill.user_id', '=', owner.id)
    .where(visibleTo(owner))
    .execute();
  const byId = new Map([...written, ...queued, ...pending].map((row) => [row.id, row]));
  return [...byId.values()]
    .filter((row) => after === undefined || row.id < after)
    .sort((a, b) => b.id - a.id)
    .slice(0, limit + 1);
}

describe('the feed page statement', () => {
  it('answers what the definition answers, page by page, for a member and an admin, over written and queued posts', async () => {
    const app = await buildTestApp();
    await app.fanout.close(); // posts stay queued until `worker` drains them
    const worker = createFanout(app.store, app.log, { sweepMs: 60_000 });
    const member = await signUp(app);
    const admin = await createAdmin(app);
    const [x, y, z, s] = [await signUp(app), await signUp(app), await signUp(app), await signUp(app)];
    await follow(app, member, x);
    await follow(app, member, y);
    await follow(app, admin, x);
    const post = async (user: typeof x, title: string, visibility: string) => (await publish(app, user, title, visibility)).id;

    // Written: every visibility by followed users, posts by users nobody here follows, the member's own.
    const x1 = await post(x, 'x1', 'public');
    const x2 = await post(x, 'x2', 'followers');
    const x3 = await post(x, 'x3', 'private');
    const y1 = await post(y, 'y1', 'followers');
    const z1 = await post(z, 'z1', 'followers');
    const s1 = await post(s, 's1', 'public');
    const own = await post(member, 'own', 'private');
    await worker.drain();
    // Entries no fan-out writes but the rule must judge: the member's own private post (theirs, so visible), a
    // followers-only post of a user they do not follow (hidden).
    await app.store.transaction((tx) =>
      tx.db
        .insertInto('feed_entries')
        .values([
          { user_id: member.id, post_id: own, owner_id: member.id },
          { user_id: member.id, post_id: z1, owner_id: z.id },
        ])
        .execute(),
    );

    // Queued: again every visibility; then the member follows s, whose posts wait for the worker's backfill (s1
    // written nowhere for the member, s2 queued as well), and one of them also has an entry already (as when the
    // worker wrote s2's fan-out first): each must appear once.
    const x4 = await post(x, 'x4', 'followers');
    const x5 = await post(x, 'x5', 'private');
    const y2 = await post(y, 'y2', 'public');
    const s2 = await post(s, 's2', 'followers');
    await post(z, 'z2', 'public');
    await follow(app, member, s);
    const x6 = await post(x, 'x6', 'public');
    const queued = await app.db.selectFrom('fanout_queue').select('post_id').execute();
    expect(queued.map((q) => q.post_id)).toContain(s2);
    expect(await app.db.selectFrom('feed_backfill').selectAll().execute()).toEqual([{ user_id: member.id, owner_id: s.id }]);
    const entries = await app.db.selectFrom('feed_entries').select('post_id').where('user_id', '=', member.id).execute();
    expect(entries.map((e) => e.post_id)).not.toContain(s1);
    expect(entries.map((e) => e.post_id)).not.toContain(s2);
    await app.store.transaction((tx) => tx.db.insertInto('feed_entries').values({ user_id: member.id, post_id: s2, owner_id: s.id }).execute());

    const cases = [
      [{ id: member.id, role: 'member' as const }, [x6, s2, y2, x4, own, s1, y1, x2, x1]],
      [{ id: admin.id, role: 'admin' as const }, [x6, x5, x4, x3, x2, x1]],
    ] as const;
    const pagesMatch = async () => {
      for (const [owner, expected] of cases) {
        expect((await readFeedPage(app.store, owner, 100)).map((row) => row.id)).toEqual(expected);
        for (const limit of [1, 2, 3, 100]) {
          let after: number | undefined;
          for (;;) {
            const rows = await readFeedPage(app.store, owner, limit, after);
            expect({ owner, limit, after, rows }).toEqual({ owner, limit, after, rows: await feedPageByDefinition(app.db, owner, limit, after) });
            if (rows.length <= limit) break;
            after = rows[limit - 1]!.id;
          }
        }
      }
    };
    await pagesMatch();
    // Once the worker has written the queue and the backfill, the same feeds, from the entries alone.
    await worker.drain();
    expect(await app.db.selectFrom('feed_backfill').selectAll().execute()).toEqual([]);
    expect(await app.db.selectFrom('fanout_queue').selectAll().execute()).toEqual([]);
    await pagesMatch();
    await worker.close();
  });
});
