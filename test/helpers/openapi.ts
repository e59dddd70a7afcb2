import { buildApp } from '../../src/app.js';
import { openStore } from '../../src/db/open.js';
import { testConfig } from './build-test-app.js';

/** The document as the app generates it, with a fixed public URL so the output does not depend on the machine. */
export async function buildOpenApiDocument(): Promise<Record<string, unknown>> {
  const app = await buildApp(testConfig({ publicUrl: 'http://localhost:3000' }), {
    store: openStore('sqlite::memory:'),
    logger: false,
  });
  await app.ready();
  const document = app.swagger() as unknown as Record<string, unknown>;
  await app.close();
  return JSON.parse(JSON.stringify(document)) as Record<string, unknown>;
}
