import { describe, expect, it } from 'vitest';
import { publish } from '../../test/helpers/api.js';
import { buildTestApp } from '../../test/helpers/build-test-app.js';
import { signUp } from '../../test/helpers/factories.js';
import { findVisiblePost } from '../shared/visibility.js';
import { findPublicPost } from './hot-statements.js';

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
});
