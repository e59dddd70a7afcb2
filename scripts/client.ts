/** Regenerates client/schema.d.ts from openapi.json (run `npm run openapi` first when a route changed). */
import { writeFileSync } from 'node:fs';
import { CLIENT_SCHEMA, generateClientTypes } from './client-types.js';

writeFileSync(CLIENT_SCHEMA, await generateClientTypes());
process.stdout.write('wrote client/schema.d.ts\n');
