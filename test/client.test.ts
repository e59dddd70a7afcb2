import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CLIENT_SCHEMA, generateClientTypes } from '../scripts/client-types.js';

describe('the typed client', () => {
  it('matches the committed client/schema.d.ts (run `npm run openapi` then `npm run client` after changing a route)', async () => {
    expect(await generateClientTypes()).toBe(readFileSync(CLIENT_SCHEMA, 'utf8'));
  });
});
