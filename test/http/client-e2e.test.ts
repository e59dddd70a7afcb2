import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCorkboardClient, type CorkboardClient } from '../../client/index.js';
import { E2E_PUBLIC_URL, e2eDatabase, killLeftovers, startServer, type E2eDatabase, type ServerProcess } from '../helpers/server-process.js';

/**
 * The README's walk-through, driven by the generated typed client (client/) against the built server on a real
 * socket: what a client developer gets from openapi.json. No casts: every path, parameter, body and answer below
 * is checked by the compiler against the document (path ids are the numbers read from earlier answers).
 */

let db: E2eDatabase;
let server: ServerProcess;
beforeAll(async () => {
  db = await e2eDatabase();
  server = await startServer({ databaseUrl: db.url });
}, 60_000);
afterAll(async () => {
  await killLeftovers();
  await db?.drop();
}, 60_000);

/** The body of a successful answer, after checking its status (the error body is shown when it differs). */
function body<T>(result: { data?: T; error?: unknown; response: Response }, status: number): T {
  expect(result.response.status, JSON.stringify(result.error)).toBe(status);
  if (result.data === undefined) throw new Error(`HTTP ${result.response.status} without a body`);
  return result.data;
}

/** The error body of a failed answer, after checking its status. */
function failure<E>(result: { error?: E; response: Response }, status: number): E {
  expect(result.response.status).toBe(status);
  if (result.error === undefined) throw new Error(`HTTP ${result.response.status} without an error body`);
  return result.error;
}

async function signIn(api: CorkboardClient, username: string, password: string): Promise<string> {
  const token = body(await api.POST('/tokens', { body: { username, password } }), 201);
  expect(token.token).toEqual(expect.any(String));
  return token.token;
}

describe('the typed client, over a real socket, through the README walk-through', () => {
  it('signs up, posts, follows, replies, recommends, uses the board, changes a password and deletes a user', async () => {
    const anonymous = createCorkboardClient(server.url);

    // Sign up two users, then sign in.
    const signUp = await anonymous.POST('/users', {
      body: { username: 'ada', password: 'correct horse battery', displayName: 'Ada' },
    });
    const ada = body(signUp, 201);
    expect(ada).toMatchObject({ username: 'ada', displayName: 'Ada', bio: '', role: 'member', postCount: 0 });
    expect(signUp.response.headers.get('location')).toBe(`${E2E_PUBLIC_URL}/users/${ada.id}`);
    expect(signUp.response.headers.get('x-request-id')).toEqual(expect.any(String));
    const bob = body(await anonymous.POST('/users', { body: { username: 'bob', password: 'another good secret' } }), 201);
    expect(bob.id).not.toBe(ada.id);
    const asAda = createCorkboardClient(server.url, await signIn(anonymous, 'ada', 'correct horse battery'));
    const asBob = createCorkboardClient(server.url, await signIn(anonymous, 'bob', 'another good secret'));

    // Read (no token needed), then replace.
    expect(body(await anonymous.GET('/users/{user_id}', { params: { path: { user_id: ada.id } } }), 200)).toEqual(ada);
    const replaced = await asAda.PUT('/users/{user_id}', {
      params: { path: { user_id: ada.id } },
      body: { username: 'ada', displayName: 'Ada L.', bio: 'Engines' },
    });
    expect(body(replaced, 200)).toMatchObject({ id: ada.id, displayName: 'Ada L.', bio: 'Engines' });
    // Someone else may not: the error is typed as problem details.
    const refused = await asBob.PUT('/users/{user_id}', {
      params: { path: { user_id: ada.id } },
      body: { username: 'ada', displayName: 'Mallory', bio: '' },
    });
    expect(failure(refused, 403)).toMatchObject({ status: 403, title: 'Forbidden', instance: `/users/${ada.id}` });

    // Ada posts; the post carries its links; it is listed.
    const published = await asAda.POST('/users/{user_id}/posts', {
      params: { path: { user_id: ada.id } },
      body: { title: 'Hello', content: 'First post' },
    });
    const post = body(published, 201);
    expect(post).toMatchObject({ title: 'Hello', content: 'First post', ownerId: ada.id, replyCount: 0, recommendCount: 0 });
    expect(post.links.map((link) => link.rel)).toEqual(expect.arrayContaining(['self', 'replies', 'recommends', 'owner']));
    expect(published.response.headers.get('location')).toBe(`${E2E_PUBLIC_URL}/posts/${post.id}`);
    const listed = body(await anonymous.GET('/posts', { params: { query: { limit: 20 } } }), 200);
    expect(listed.map((p) => p.id)).toEqual([post.id]);

    // Bob follows Ada, reads his feed, replies and recommends.
    const follower = body(
      await asBob.POST('/users/{user_id}/followers', { params: { path: { user_id: ada.id } }, body: { id: bob.id } }),
      201,
    );
    expect(follower).toMatchObject({ id: bob.id, followingCount: 1 });
    const feed = body(await asBob.GET('/users/{user_id}/feed', { params: { path: { user_id: bob.id } } }), 200);
    expect(feed.map((p) => p.id)).toEqual([post.id]);
    const reply = body(
      await asBob.POST('/posts/{post_id}/replies', { params: { path: { post_id: post.id } }, body: { content: 'Nice' } }),
      201,
    );
    expect(reply).toMatchObject({ postId: post.id, authorId: bob.id, content: 'Nice' });
    const recommender = body(
      await asBob.POST('/posts/{post_id}/recommends', { params: { path: { post_id: post.id } }, body: { id: bob.id } }),
      201,
    );
    expect(recommender.id).toBe(bob.id);

    // The counters.
    const counted = body(await anonymous.GET('/posts/{post_id}', { params: { path: { post_id: post.id } } }), 200);
    expect(counted).toMatchObject({ id: post.id, replyCount: 1, recommendCount: 1 });
    const adaNow = body(await anonymous.GET('/users/{user_id}', { params: { path: { user_id: ada.id } } }), 200);
    expect(adaNow).toMatchObject({ followerCount: 1, postCount: 1 });

    // The board interface answers in its envelope.
    const created = body(await asAda.POST('/boards', { body: { title: 'Notice', content: 'Meeting at 5' } }), 201);
    expect(created).toMatchObject({ code: '201', message: 'Created', data: { title: 'Notice', content: 'Meeting at 5', authorId: ada.id } });
    const board = created.data;
    const page = body(await anonymous.GET('/boards/list', { params: { query: { start: 0, limit: 20 } } }), 200);
    expect(page).toMatchObject({ code: '200', message: 'OK', data: { total: 1, start: 0, end: 1, limit: 20 } });
    expect(page.data.items).toEqual([board]);
    const read = body(await anonymous.GET('/boards/{board_id}', { params: { path: { board_id: board.id } } }), 200);
    expect(read.data).toEqual(board);
    const updated = await asAda.PUT('/boards/{board_id}', {
      params: { path: { board_id: board.id } },
      body: { title: 'Notice', content: 'Meeting at 6' },
    });
    expect(body(updated, 200)).toEqual({ code: '200', message: 'OK', data: 'updated' });
    const reread = body(await anonymous.GET('/boards/{board_id}', { params: { path: { board_id: board.id } } }), 200);
    expect(reread.data).toMatchObject({ id: board.id, content: 'Meeting at 6' });
    expect(body(await asAda.DELETE('/boards/{board_id}', { params: { path: { board_id: board.id } } }), 200)).toEqual({
      code: '200',
      message: 'OK',
      data: 'deleted',
    });
    const gone = await anonymous.GET('/boards/{board_id}', { params: { path: { board_id: board.id } } });
    expect(failure(gone, 404)).toMatchObject({ code: '404', data: null });

    // Change the password: the old one no longer signs in, the new one does.
    const changed = await asAda.PUT('/users/{user_id}/password', {
      params: { path: { user_id: ada.id } },
      body: { currentPassword: 'correct horse battery', newPassword: 'an even better one' },
    });
    expect(body(changed, 200).id).toBe(ada.id);
    expect(failure(await anonymous.POST('/tokens', { body: { username: 'ada', password: 'correct horse battery' } }), 401)).toMatchObject({
      status: 401,
    });
    await signIn(anonymous, 'ada', 'an even better one');

    // Delete Ada: she and everything that is hers are gone; Bob stays.
    expect(body(await asAda.DELETE('/users/{user_id}', { params: { path: { user_id: ada.id } } }), 200)).toEqual({ deleted: 1 });
    const missing = await anonymous.GET('/users/{user_id}', { params: { path: { user_id: ada.id } } });
    expect(failure(missing, 404)).toMatchObject({ status: 404, instance: `/users/${ada.id}` });
    expect(failure(await anonymous.GET('/posts/{post_id}', { params: { path: { post_id: post.id } } }), 404).status).toBe(404);
    expect(body(await anonymous.GET('/users/{user_id}', { params: { path: { user_id: bob.id } } }), 200)).toMatchObject({
      id: bob.id,
      followingCount: 0,
    });
  }, 60_000);
});
