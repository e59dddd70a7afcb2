import { describe, expect, it } from 'vitest';
import { publish } from '../../../test/helpers/api.js';
import { buildTestApp, call } from '../../../test/helpers/build-test-app.js';
import { signUp } from '../../../test/helpers/factories.js';
import { hashToken } from '../../shared/tokens.js';
import { findCallerAndReadablePost } from '../posts/posts.repository.js';
import { findCallerByTokenHash } from './tokens.repository.js';

describe('the caller behind a token (plain SQL)', () => {
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
