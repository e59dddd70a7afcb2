import { readFileSync } from 'node:fs';
import { Validator } from '@seriousme/openapi-schema-validator';
import { describe, expect, it } from 'vitest';
import { buildOpenApiDocument } from './helpers/openapi.js';
import { buildTestApp } from './helpers/build-test-app.js';

const METHODS = ['get', 'post', 'put', 'delete'] as const;
type Ref = { $ref: string };
type Response = { description?: string; headers?: Record<string, Ref>; content?: Record<string, { schema?: unknown }> };
type Operation = {
  operationId?: string;
  tags?: string[];
  summary?: string;
  security?: Array<Record<string, string[]>>;
  parameters?: Array<Ref | { name: string; in: string; schema?: { type?: string } }>;
  responses?: Record<string, Response>;
};

/** Every operation of the document as `METHOD /path` and its object. */
function operationsOf(document: Record<string, unknown>): Array<[string, Operation]> {
  const paths = document.paths as Record<string, Record<string, Operation>>;
  return Object.entries(paths).flatMap(([path, item]) =>
    METHODS.filter((method) => item[method]).map((method): [string, Operation] => [`${method.toUpperCase()} ${path}`, item[method]!]),
  );
}
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

  it('gives every operation an operationId, tags, a summary, and 500/429 responses (429 where rate-limited)', async () => {
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
        const statuses = Object.keys(op.responses ?? {});
        expect(statuses, where).toContain('500');
        // /health and /metrics are not rate-limited (probes and scrapers must always get through).
        if (!['GET /health', 'GET /metrics'].includes(where)) expect(statuses, where).toContain('429');
        else expect(statuses, where).not.toContain('429');
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
    // Path ids are shown as integers (the document transform), so the strings counted are queries' and bodies'.
    expect(strings).toBeGreaterThan(5);
    expect(unchecked).toEqual([]);
  });

  it('matches the committed openapi.json (run `npm run openapi` after changing a route)', async () => {
    const committed = JSON.parse(readFileSync(new URL('../openapi.json', import.meta.url), 'utf8')) as unknown;
    expect(await buildOpenApiDocument()).toEqual(committed);
  });
});

// CONTRACT §5: the document is a client-grade contract. These check the shape a client generator relies on.
describe('the OpenAPI document as a client contract', () => {
  const header = (name: string) => ({ $ref: `#/components/headers/${name}` });

  it('declares every response header the service sends, as header objects', async () => {
    const document = await buildOpenApiDocument();
    const components = document.components as { headers: Record<string, { schema: { type: string } }> };
    expect(Object.keys(components.headers).sort()).toEqual([
      'Access-Control-Allow-Headers', 'Access-Control-Allow-Methods', 'Access-Control-Allow-Origin', 'Access-Control-Expose-Headers',
      'Access-Control-Max-Age', 'Allow', 'Cache-Control', 'ETag', 'Idempotent-Replayed', 'Link', 'Location', 'RateLimit',
      'RateLimit-Policy', 'Retry-After', 'Vary', 'WWW-Authenticate', 'X-Accel-Buffering', 'X-Request-Id',
    ]);
    expect(components.headers['Retry-After']!.schema.type).toBe('integer');
    for (const [where, op] of operationsOf(document)) {
      const limited = !['GET /health', 'GET /metrics'].includes(where);
      for (const [status, response] of Object.entries(op.responses ?? {})) {
        const at = `${where} ${status}`;
        const headers = response.headers ?? {};
        // A whole TypeBox object given as `headers` used to show up as headers named type, required, properties.
        expect(Object.keys(headers), at).not.toEqual(expect.arrayContaining(['type']));
        expect(headers['X-Request-Id'], at).toEqual(header('X-Request-Id'));
        for (const name of ['Vary', 'Access-Control-Allow-Origin', 'Access-Control-Expose-Headers']) expect(headers[name], `${at} ${name}`).toEqual(header(name));
        if (where.startsWith('GET ')) expect(headers['Cache-Control'], at).toEqual(header('Cache-Control'));
        if (limited) {
          expect(headers.RateLimit, at).toEqual(header('RateLimit'));
          expect(headers['RateLimit-Policy'], at).toEqual(header('RateLimit-Policy'));
        }
        if (status === '201') expect(headers.Location, at).toEqual(header('Location'));
        if (status === '401') expect(headers['WWW-Authenticate'], at).toEqual(header('WWW-Authenticate'));
        if (status === '429' || status === '503') expect(headers['Retry-After'], at).toEqual(header('Retry-After'));
        if (where.startsWith('GET ') && (status === '200' || status === '304')) expect(headers.ETag, at).toEqual(header('ETag'));
      }
      if (where !== 'GET /metrics' && where !== 'GET /openapi.json') expect(Object.keys(op.responses ?? {}), where).toContain('503');
      if (/^(POST|PUT|DELETE) /.test(where)) expect(Object.keys(op.responses ?? {}), where).toEqual(expect.arrayContaining(['413', '415']));
    }
    const paths = document.paths as Record<string, Record<string, Operation>>;
    // A 405 belongs to a path, not to the operations it has: each path's OPTIONS documents it, and the preflight.
    for (const [path, item] of Object.entries(paths)) {
      expect(item.options?.responses?.['405']?.headers?.Allow, path).toEqual(header('Allow'));
      expect(item.options?.responses?.['204']?.headers?.['Access-Control-Allow-Methods'], path).toEqual(header('Access-Control-Allow-Methods'));
      expect(item.options?.security, path).toEqual([]);
    }
    for (const page of ['/users', '/posts', '/users/{user_id}/posts', '/users/{user_id}/feed', '/posts/{post_id}/replies']) {
      expect(paths[page]!.get!.responses!['200']!.headers!.Link, page).toEqual(header('Link'));
    }
  });

  it('documents conditional requests and idempotent creates with their header parameters and statuses', async () => {
    const document = await buildOpenApiDocument();
    const paths = document.paths as Record<string, Record<string, Operation>>;
    const refs = (op: Operation) => (op.parameters ?? []).flatMap((p) => ('$ref' in p ? [p.$ref] : []));
    const statuses = (op: Operation) => Object.keys(op.responses ?? {});
    const conditional = ['/users/{user_id}', '/posts/{post_id}', '/posts/{post_id}/replies/{reply_id}', '/boards/{board_id}'];
    for (const path of conditional) {
      for (const method of ['put', 'delete'] as const) {
        expect(refs(paths[path]![method]!), `${method} ${path}`).toContain('#/components/parameters/IfMatch');
        expect(statuses(paths[path]![method]!), `${method} ${path}`).toContain('412');
      }
      expect(paths[path]!.put!.responses!['200']!.headers!.ETag, path).toEqual(header('ETag'));
    }
    const creates = ['/users', '/users/{user_id}/followers', '/users/{user_id}/posts', '/posts/{post_id}/replies', '/posts/{post_id}/recommends', '/boards'];
    for (const path of creates) {
      const op = paths[path]!.post!;
      expect(refs(op), path).toContain('#/components/parameters/IdempotencyKey');
      expect(statuses(op), path).toEqual(expect.arrayContaining(['409', '422']));
      expect(op.responses!['201']!.headers!['Idempotent-Replayed'], path).toEqual(header('Idempotent-Replayed'));
      expect(op.responses!['409']!.headers!['Retry-After'], path).toEqual(header('Retry-After'));
    }
    expect(refs(paths['/tokens']!.post!)).not.toContain('#/components/parameters/IdempotencyKey');
    for (const [where, op] of operationsOf(document)) {
      if (!where.startsWith('GET ') || ['GET /health', 'GET /metrics', 'GET /openapi.json'].includes(where)) continue;
      expect(refs(op), where).toContain('#/components/parameters/IfNoneMatch');
      expect(op.responses!['304'], where).toMatchObject({ headers: { ETag: header('ETag') } });
      expect(op.responses!['304']!.content, where).toBeUndefined();
    }
  });

  it('says security: [] on public operations and keeps the optional bearer where a token is optional', async () => {
    const document = await buildOpenApiDocument();
    const byId = new Map(operationsOf(document).map(([, op]) => [op.operationId, op]));
    for (const id of ['getHealth', 'getMetrics', 'getOpenApi', 'createUser', 'createToken']) expect(byId.get(id)?.security, id).toEqual([]);
    expect(byId.get('getPost')?.security).toEqual([{}, { bearerAuth: [] }]);
    expect(byId.get('replaceUser')?.security).toEqual([{ bearerAuth: [] }]);
    for (const [where, op] of operationsOf(document)) expect(op.security, where).toBeDefined();
  });

  it('names the resources as component schemas and refers to them; every $ref resolves', async () => {
    const document = await buildOpenApiDocument();
    const schemas = (document.components as { schemas: Record<string, { title?: string }> }).schemas;
    for (const name of ['User', 'Post', 'Reply', 'Board', 'Problem', 'EnvelopeError', 'BoardEnvelope', 'BoardPageEnvelope', 'Link', 'Token']) {
      expect(schemas[name]?.title, name).toBe(name);
    }
    const byId = new Map(operationsOf(document).map(([, op]) => [op.operationId, op]));
    expect(byId.get('getUser')!.responses!['200']!.content!['application/json']!.schema).toEqual({ $ref: '#/components/schemas/User' });
    expect(byId.get('getUser')!.responses!['404']!.content!['application/problem+json']!.schema).toEqual({ $ref: '#/components/schemas/Problem' });
    expect(byId.get('getBoard')!.responses!['404']!.content!['application/json']!.schema).toEqual({ $ref: '#/components/schemas/EnvelopeError' });
    // No titled schema is left inline in the operations, and every reference points at something.
    const text = JSON.stringify(document.paths);
    expect(text).not.toMatch(/"title":"[A-Z]/);
    const resolve = (ref: string) => ref.slice(2).split('/').reduce<unknown>((node, key) => (node as Record<string, unknown>)?.[key], document);
    for (const [, ref] of JSON.stringify(document).matchAll(/"\$ref":"([^"]+)"/g)) expect(resolve(ref!), ref).toBeDefined();
  });

  it('types path ids as integers, while the service still refuses ids that are not canonical', async () => {
    const document = await buildOpenApiDocument();
    for (const [where, op] of operationsOf(document)) {
      for (const parameter of op.parameters ?? []) {
        if ('$ref' in parameter || parameter.in !== 'path') continue;
        expect(parameter.schema, `${where} ${parameter.name}`).toMatchObject({ type: 'integer', format: 'int64', minimum: 0 });
      }
    }
    const app = await buildTestApp();
    for (const id of ['007', '-3', '1.5']) {
      const res = await app.inject({ method: 'GET', url: `/users/${id}` });
      expect(res.statusCode, id).toBe(400);
      expect(res.json(), id).toMatchObject({ errors: [{ field: 'user_id' }] });
    }
  });

  it('is served at /openapi.json exactly as committed', async () => {
    const app = await buildTestApp({ publicUrl: 'http://localhost:3000' });
    const res = await app.inject({ method: 'GET', url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(JSON.parse(readFileSync(new URL('../openapi.json', import.meta.url), 'utf8')));
  });
});

