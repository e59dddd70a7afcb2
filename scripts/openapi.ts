/**
 * Writes the OpenAPI document generated from the route schemas to openapi.json (committed, so reviewers see API
 * changes in diffs). test/openapi.test.ts fails when the committed file is stale.
 */
import { writeFileSync } from 'node:fs';
import { buildOpenApiDocument } from '../test/helpers/openapi.js';

writeFileSync(new URL('../openapi.json', import.meta.url), `${JSON.stringify(await buildOpenApiDocument(), null, 2)}\n`);
process.stdout.write('wrote openapi.json\n');
