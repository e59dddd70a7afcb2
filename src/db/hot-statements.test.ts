import { describe, expect, it } from 'vitest';
import { publish } from '../../test/helpers/api.js';
import { buildTestApp } from '../../test/helpers/build-test-app.js';
import { call } from '../../test/helpers/build-test-app.js';
import { signUp } from '../../test/helpers/factories.js';
import { findVisiblePost } from '../shared/visibility.js';
import { hashToken } from '../shared/tokens.js';
import { findCallerByTokenHash, findPublicPost } from './hot-statements.js';

describe('hot statements', () => {
  it('finds a public post exactly as the builder does for an anonymous reader, and no other post', async () => {
    const app = await buildTestApp();
    const owner = await signUp(app);
    const open = await publish(app, owner, 'for everyone');
    const followersOnly = await publish(app, owner, 'for followers', 'followers');
    const hidden = await publish(app, owner, 'for the owner', 'private');

    const row = await findPublicPost(app.store, open.id);
    expect(row).toEqual(await findVisiblePost(app.db, open.id, undefined));
    expect(row).toMatchObject({ id: open.id, owner_id: owner.id, title: 'for everyone', visibility: 'public' });
    expect(await findPublicPost(app.store, followersOnly.id)).toBeUndefined();
    expect(await findPublicPost(app.store, hidden.id)).toBeUndefined();
    expect(await findPublicPost(app.store, hidden.id + 1000)).toBeUndefined();
  });

  it('finds the caller of a live token, and no caller for an unknown, expired or superseded one', async () => {
    const app = await buildTestApp();
    const user = await signUp(app);
    const now = new Date().toISOString();
    const caller = await findCallerByTokenHash(app.store, hashToken(user.token), now);
    expect(caller).toMatchObject({ id: user.id, role: 'member' });
    expect(typeof caller?.tokenId).toBe('number');
    expect(await findCallerByTokenHash(app.store, hashToken(`${user.token}x`), now)).toBeUndefined();
    expect(await findCallerByTokenHash(app.store, hashToken(user.token), '9999-12-31T00:00:00.000Z')).toBeUndefined();

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
    expect(await findCallerByTokenHash(app.store, hashToken(user.token), now)).toMatchObject({ id: user.id });
  });
});
