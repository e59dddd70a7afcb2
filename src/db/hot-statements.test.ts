import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import { follow, publish } from '../../test/helpers/api.js';
import { buildTestApp } from '../../test/helpers/build-test-app.js';
import { call } from '../../test/helpers/build-test-app.js';
import { createAdmin, signUp } from '../../test/helpers/factories.js';
import { createFanout } from '../modules/feed/feed.fanout.js';
import { POST_COLUMNS, findVisiblePost, visibleTo } from '../shared/visibility.js';
import { hashToken } from '../shared/tokens.js';
import { findCallerAndReadablePost, findCallerByTokenHash, findKeptAnswer, findReadablePost, keepAnswer, readFeedPage } from './hot-statements.js';
import type { Database, PostRow, Role } from './types.js';

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

describe('hot statements', () => {
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

  it('finds the caller of a live token, and no caller for an unknown, expired or superseded one', async () => {
    const app = await buildTestApp();
    const user = await signUp(app);
    const now = new Date().toISOString();
    const post = await publish(app, user, 'mine');
    const caller = await findCallerByTokenHash(app.store, hashToken(user.token), now);
    expect(caller).toMatchObject({ id: user.id, role: 'member' });
    expect(typeof caller?.tokenId).toBe('number');
    expect(await findCallerByTokenHash(app.store, hashToken(`${user.token}x`), now)).toBeUndefined();
    expect(await findCallerByTokenHash(app.store, hashToken(user.token), '9999-12-31T00:00:00.000Z')).toBeUndefined();
    // GET /posts/{id}'s statement finds the same caller, with or without a post to show, and none for a dead token.
    const both = (hash: string, at = now, id = post.id) => findCallerAndReadablePost(app.store, hash, at, id);
    expect(await both(hashToken(user.token))).toEqual({ caller, post: expect.objectContaining({ id: post.id, title: 'mine' }) });
    expect(await both(hashToken(user.token), now, post.id + 1000)).toEqual({ caller, post: undefined });
    expect(await both(hashToken(`${user.token}x`))).toBeUndefined();
    expect(await both(hashToken(user.token), '9999-12-31T00:00:00.000Z')).toBeUndefined();

    // A password change bumps the user's password version; only the token that made the change carries it over.
    const other = await call(app, 'POST', '/tokens', { body: { username: user.username, password: user.password } });
    expect(other.statusCode).toBe(201);
    const otherToken = other.json<{ token: string }>().token;
    expect(await findCallerByTokenHash(app.store, hashToken(otherToken), now)).toMatchObject({ id: user.id });
    const changed = await call(app, 'PUT', `/users/${user.id}/password`, {
      token: user.token,
      body: { currentPassword: user.password, newPassword: 'another-long-password-1' },
    });
    expect(changed.statusCode).toBeLessThan(300);
    expect(await findCallerByTokenHash(app.store, hashToken(otherToken), now)).toBeUndefined();
    expect(await both(hashToken(otherToken))).toBeUndefined();
    expect(await findCallerByTokenHash(app.store, hashToken(user.token), now)).toMatchObject({ id: user.id });
    expect((await both(hashToken(user.token)))?.caller).toMatchObject({ id: user.id });
  });
});

describe('the Idempotency-Key statements', () => {
  const at = (ms: number) => new Date(Date.now() + ms).toISOString();
  const answer = (body: string, expiresInMs: number) => ({
    caller_id: 7,
    target: 'POST /boards',
    idempotency_key: 'k',
    fingerprint: `print of ${body}`,
    started_at: at(0),
    expires_at: at(expiresInMs),
    status: 201,
    content_type: 'application/json; charset=utf-8',
    location: 'http://localhost/boards/1',
    etag: null,
    body,
  });

  it('keeps an answer once, and reads it back as the builder does', async () => {
    const app = await buildTestApp();
    expect(await findKeptAnswer(app.store, 7, 'POST /boards', 'k')).toBeUndefined();
    expect(await app.store.transaction((tx) => keepAnswer(tx, answer('first', 60_000)))).toBe(true);
    // A live answer stays: the second request with the key learns it kept nothing.
    expect(await app.store.transaction((tx) => keepAnswer(tx, answer('second', 60_000)))).toBe(false);
    const byBuilder = await app.db
      .selectFrom('idempotency_keys')
      .select(['fingerprint', 'expires_at', 'status', 'content_type', 'location', 'etag', 'body'])
      .where('caller_id', '=', 7)
      .where('target', '=', 'POST /boards')
      .where('idempotency_key', '=', 'k')
      .executeTakeFirstOrThrow();
    expect(byBuilder.body).toBe('first');
    expect(await findKeptAnswer(app.store, 7, 'POST /boards', 'k')).toEqual(byBuilder);
    // Another scope is another key.
    expect(await findKeptAnswer(app.store, 8, 'POST /boards', 'k')).toBeUndefined();
    expect(await findKeptAnswer(app.store, 7, 'POST /users', 'k')).toBeUndefined();
    expect(await findKeptAnswer(app.store, 7, 'POST /boards', 'K')).toBeUndefined();
  });

  it('replaces an answer that expired before the request started, and a row without an answer', async () => {
    const app = await buildTestApp();
    await app.store.transaction((tx) => keepAnswer(tx, answer('expired', -1_000)));
    expect(await app.store.transaction((tx) => keepAnswer(tx, answer('fresh', 60_000)))).toBe(true);
    expect(await findKeptAnswer(app.store, 7, 'POST /boards', 'k')).toMatchObject({ body: 'fresh', fingerprint: 'print of fresh' });

    // A claim of an earlier version: no status, no body.
    await app.store.transaction((tx) => tx.db.updateTable('idempotency_keys').set({ status: null, body: null, claim_token: 'old' }).execute());
    expect(await app.store.transaction((tx) => keepAnswer(tx, answer('after the claim', 60_000)))).toBe(true);
    const rows = await app.db.selectFrom('idempotency_keys').select(['claim_token', 'status', 'body']).execute();
    expect(rows).toEqual([{ claim_token: null, status: 201, body: 'after the claim' }]);
  });

  it('writes nothing when the transaction that kept the answer rolls back', async () => {
    const app = await buildTestApp();
    const failed = app.store.transaction(async (tx) => {
      expect(await keepAnswer(tx, answer('rolled back', 60_000))).toBe(true);
      throw new Error('the create failed after keeping its answer');
    });
    await expect(failed).rejects.toThrow('the create failed');
    expect(await findKeptAnswer(app.store, 7, 'POST /boards', 'k')).toBeUndefined();
  });
});

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
