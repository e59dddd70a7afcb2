import { readFileSync } from 'node:fs';
import { Validator } from '@seriousme/openapi-schema-validator';
import { describe, expect, it } from 'vitest';
import { buildOpenApiDocument } from './helpers/openapi.js';

const METHODS = ['get', 'post', 'put', 'delete'] as const;
type Operation = { operationId?: string; tags?: string[]; summary?: string; responses?: Record<string, unknown> };
interface SchemaNode {
  type?: string;
  pattern?: string;
  enum?: unknown[];
  const?: unknown;
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
  anyOf?: SchemaNode[];
  oneOf?: SchemaNode[];
}
type OperationInput = {
  parameters?: { name: string; in: string; schema?: SchemaNode }[];
  requestBody?: { content?: Record<string, { schema?: SchemaNode }> };
};

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

  // CONTRACT §1: text a database cannot store is a 400 on every backend alike. PostgreSQL refuses U+0000 in any
  // text it is handed, a lookup's parameter included (a 500 if it got that far), so every string a request can
  // carry, in its query or its body, must be checked before it reaches the database: by a pattern that rejects
  // U+0000, or by an enum.
  it('checks every string a request carries for text no database can store', async () => {
    const document = await buildOpenApiDocument();
    const paths = document.paths as Record<string, Record<string, OperationInput>>;
    const unchecked: string[] = [];
    const visit = (schema: SchemaNode | undefined, where: string) => {
      if (!schema) return;
      if (schema.type === 'string' && schema.enum === undefined && schema.const === undefined) {
        if (schema.pattern === undefined || new RegExp(schema.pattern, 'u').test('a\u0000b')) unchecked.push(where);
      }
      for (const [name, property] of Object.entries(schema.properties ?? {})) visit(property, `${where}.${name}`);
      if (schema.items) visit(schema.items, `${where}[]`);
      for (const branch of [...(schema.anyOf ?? []), ...(schema.oneOf ?? [])]) visit(branch, where);
    };
    let strings = 0;
    for (const [path, item] of Object.entries(paths)) {
      for (const method of METHODS) {
        const op = item[method];
        if (!op) continue;
        for (const parameter of op.parameters ?? []) {
          if (parameter.schema?.type === 'string') strings++;
          visit(parameter.schema, `${method.toUpperCase()} ${path} ${parameter.in} ${parameter.name}`);
        }
        visit(op.requestBody?.content?.['application/json']?.schema, `${method.toUpperCase()} ${path} body`);
      }
    }
    expect(strings).toBeGreaterThan(20);
    expect(unchecked).toEqual([]);
  });

  it('matches the committed openapi.json (run `npm run openapi` after changing a route)', async () => {
    const committed = JSON.parse(readFileSync(new URL('../openapi.json', import.meta.url), 'utf8')) as unknown;
    expect(await buildOpenApiDocument()).toEqual(committed);
  });
});
