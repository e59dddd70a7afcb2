import { describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { openStore } from '../src/db/open.js';
import { testConfig } from './helpers/build-test-app.js';

/**
 * The document names its server relatively, so Swagger UI's "Try it out" calls whatever origin /docs was loaded
 * from (the page's CSP allows only that one) and the committed openapi.json does not depend on PUBLIC_URL.
 */
async function documentFor(publicUrl: string) {
  const app = await buildApp(testConfig({ publicUrl }), { store: openStore('sqlite::memory:'), logger: false });
  try {
    await app.ready();
    return JSON.stringify(app.swagger());
  } finally {
    await app.close();
  }
}

describe('the OpenAPI servers entry', () => {
  it('is the relative "/" and the document is the same whatever PUBLIC_URL is', async () => {
    const [a, b] = await Promise.all([documentFor('http://localhost:3000'), documentFor('https://api.example.org')]);
    expect((JSON.parse(a) as { servers: unknown }).servers).toEqual([{ url: '/', description: 'The origin this document is served from' }]);
    expect(a).toBe(b);
    expect(a).not.toContain('localhost:3000');
  });
});
