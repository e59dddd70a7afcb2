import { readFileSync } from 'node:fs';
import { Validator } from '@seriousme/openapi-schema-validator';
import { describe, expect, it } from 'vitest';
import { buildOpenApiDocument } from './helpers/openapi.js';

const METHODS = ['get', 'post', 'put', 'delete'] as const;
type Operation = { operationId?: string; tags?: string[]; summary?: string; responses?: Record<string, unknown> };

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const document = await buildOpenApiDocument();
    const result = await new Validator().validate(document);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(document.openapi).toBe('3.1.0');
  });

  it('gives every operation an operationId, tags, a summary, and 500/429 responses', async () => {
    const document = await buildOpenApiDocument();
    const paths = document.paths as Record<string, Record<string, Operation>>;
    const ids = new Set<string>();
    for (const [path, item] of Object.entries(paths)) {
      for (const method of METHODS) {
        const op = item[method];
        if (!op) continue;
        const where = `${method.toUpperCase()} ${path}`;
        expect(op.operationId, where).toEqual(expect.any(String));
        expect(ids.has(op.operationId!), `${where} duplicate operationId`).toBe(false);
        ids.add(op.operationId!);
        expect(op.tags?.length, where).toBeGreaterThan(0);
        expect(op.summary, where).toEqual(expect.any(String));
        expect(Object.keys(op.responses ?? {}), where).toEqual(expect.arrayContaining(['429', '500']));
      }
    }
  });

  it('matches the committed openapi.json (run `npm run openapi` after changing a route)', async () => {
    const committed = JSON.parse(readFileSync(new URL('../openapi.json', import.meta.url), 'utf8')) as unknown;
    expect(await buildOpenApiDocument()).toEqual(committed);
  });
});
