import { readFileSync } from 'node:fs';
import { Validator } from '@seriousme/openapi-schema-validator';
import { describe, expect, it } from 'vitest';
import { buildOpenApiDocument } from './helpers/openapi.js';
import { buildTestApp, call } from './helpers/build-test-app.js';
import { createAdmin, signIn, signUp, uniqueName } from './helpers/factories.js';
import { openSse } from './helpers/sse.js';

const METHODS = ['get', 'post', 'put', 'delete'] as const;
type Ref = { $ref: string };
type Response = { description?: string; headers?: Record<string, Ref>; content?: Record<string, { schema?: unknown }> };
type Operation = {
  operationId?: string;
  tags?: string[];
  summary?: string;
  description?: string;
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

  it('gives every operation an operationId, tags, a summary, and 500/429 responses (429 where rate-limited, 408 where a body may be sent)', async () => {
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
        // A body that stalls on its way is a 408 (CONTRACT §5): any POST, PUT or DELETE may send one.
        if (['post', 'put', 'delete'].includes(method)) expect(statuses, where).toContain('408');
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

  // A CORS preflight is protocol-level (CONTRACT §1), like HEAD: as an operation, a generated client would offer it
  // as an API call and a fuzzer would call it. The service still answers it (the header test below checks that).
  it('has no OPTIONS (nor HEAD) operation: every operation is GET, POST, PUT or DELETE', async () => {
    const document = await buildOpenApiDocument();
    const paths = document.paths as Record<string, Record<string, unknown>>;
    expect(Object.keys(paths).length).toBeGreaterThan(10);
    for (const [path, item] of Object.entries(paths)) {
      expect(item.options, path).toBeUndefined();
      expect(Object.keys(item).filter((key) => !(METHODS as readonly string[]).includes(key) && key !== 'parameters'), path).toEqual([]);
    }
    expect(JSON.stringify(document)).not.toMatch(/"operationId":"options/);
    expect((document.tags as Array<{ name: string }>).map((tag) => tag.name)).not.toContain('cors');
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
      'Accept-Encoding', 'Access-Control-Allow-Origin', 'Access-Control-Expose-Headers',
      'Cache-Control', 'ETag', 'Idempotent-Replayed', 'Link', 'Location', 'RateLimit',
      'RateLimit-Policy', 'Retry-After', 'Vary', 'WWW-Authenticate', 'X-Accel-Buffering', 'X-Content-Type-Options', 'X-Request-Id',
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
        expect(headers['X-Content-Type-Options'], at).toEqual(header('X-Content-Type-Options'));
        for (const name of ['Vary', 'Access-Control-Allow-Origin', 'Access-Control-Expose-Headers']) expect(headers[name], `${at} ${name}`).toEqual(header(name));
        if (where.startsWith('GET ')) expect(headers['Cache-Control'], at).toEqual(header('Cache-Control'));
        if (limited) {
          expect(headers.RateLimit, at).toEqual(header('RateLimit'));
          expect(headers['RateLimit-Policy'], at).toEqual(header('RateLimit-Policy'));
        }
        if (status === '201') expect(headers.Location, at).toEqual(header('Location'));
        if (status === '415') expect(headers['Accept-Encoding'], at).toEqual(header('Accept-Encoding'));
        // A page's 304 carries its `next` link as the 200 does.
        if (status === '304' && op.responses?.['200']?.headers?.Link) expect(headers.Link, at).toEqual(header('Link'));
        if (status === '401') expect(headers['WWW-Authenticate'], at).toEqual(header('WWW-Authenticate'));
        if (status === '429' || status === '503') expect(headers['Retry-After'], at).toEqual(header('Retry-After'));
        if (where.startsWith('GET ') && (status === '200' || status === '304')) expect(headers.ETag, at).toEqual(header('ETag'));
      }
      if (where !== 'GET /metrics' && where !== 'GET /openapi.json') expect(Object.keys(op.responses ?? {}), where).toContain('503');
      if (/^(POST|PUT|DELETE) /.test(where)) expect(Object.keys(op.responses ?? {}), where).toEqual(expect.arrayContaining(['413', '415']));
    }
    const paths = document.paths as Record<string, Record<string, Operation>>;
    // The preflight and the 405 belong to no operation: the document's description names their headers.
    expect((document.info as { description: string }).description).toMatch(/preflight.*Access-Control-Allow-Methods.*405 with Allow/s);
    for (const page of ['/users', '/posts', '/users/{user_id}/posts', '/users/{user_id}/feed', '/users/{user_id}/tokens', '/posts/{post_id}/replies']) {
      expect(paths[page]!.get!.responses!['200']!.headers!.Link, page).toEqual(header('Link'));
    }
  });

  it('documents conditional requests and idempotent creates with their header parameters and statuses', async () => {
    const document = await buildOpenApiDocument();
    const paths = document.paths as Record<string, Record<string, Operation>>;
    const refs = (op: Operation) => (op.parameters ?? []).flatMap((p) => ('$ref' in p ? [p.$ref] : []));
    const statuses = (op: Operation) => Object.keys(op.responses ?? {});
    const conditional = ['/users/{user_id}', '/posts/{post_id}', '/posts/{post_id}/replies/{reply_id}', '/boards/{board_id}'];
    for (const path of [...conditional, '/reports/{report_id}']) {
      for (const method of ['put', 'delete'] as const) {
        if (!paths[path]![method]) continue;
        expect(refs(paths[path]![method]!), `${method} ${path}`).toContain('#/components/parameters/IfMatch');
        expect(statuses(paths[path]![method]!), `${method} ${path}`).toContain('412');
      }
      expect(paths[path]!.put!.responses!['200']!.headers!.ETag, path).toEqual(header('ETag'));
    }
    const creates = ['/users', '/users/{user_id}/followers', '/users/{user_id}/posts', '/posts/{post_id}/replies', '/posts/{post_id}/recommends', '/boards', '/reports'];
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

  it('says security: [] on every public operation, those where a token is optional included', async () => {
    const document = await buildOpenApiDocument();
    const byId = new Map(operationsOf(document).map(([, op]) => [op.operationId, op]));
    for (const id of ['getHealth', 'getOpenApi', 'createUser', 'createToken']) expect(byId.get(id)?.security, id).toEqual([]);
    // /metrics: no token, or the server's METRICS_TOKEN when it sets one (never a user's token); its 401 is listed.
    expect(byId.get('getMetrics')?.security).toEqual([{}, { metricsToken: [] }]);
    expect(Object.keys((byId.get('getMetrics') as { responses: object }).responses)).toContain('401');
    expect((document.components as { securitySchemes: object }).securitySchemes).toMatchObject({ metricsToken: { type: 'http', scheme: 'bearer' } });
    // A token is optional on public reads: still `security: []`, the optional token said in words, its 401 listed.
    expect(byId.get('getPost')?.security).toEqual([]);
    expect(byId.get('getPost')?.description).toMatch(/bearer token may be sent/);
    expect(Object.keys((byId.get('getPost') as { responses: object }).responses)).toContain('401');
    expect(byId.get('replaceUser')?.security).toEqual([{ bearerAuth: [] }]);
    for (const [where, op] of operationsOf(document)) expect(op.security, where).toBeDefined();
    // Every read is public but the feed, the tokens and notifications (self or admin, CONTRACT §4, §10) and reports
    // (their reporter, admins: §9).
    const signedIn = [
      'GET /users/{user_id}/feed',
      'GET /tokens/{token_id}',
      'GET /users/{user_id}/tokens',
      'GET /reports',
      'GET /reports/{report_id}',
      'GET /users/{user_id}/notifications',
      'GET /users/{user_id}/notifications/{notification_id}',
      'GET /users/{user_id}/notifications/marker',
      // §9's blocks, mutes and suspensions
      'GET /users/{user_id}/blocks',
      'GET /users/{user_id}/mutes',
      'GET /users/{user_id}/blocks/{blocked_id}',
      'GET /users/{user_id}/mutes/{muted_id}',
      'GET /users/{user_id}/suspension',
    ];
    for (const [where, op] of operationsOf(document).filter(([where]) => where.startsWith('GET '))) {
      expect(op.security, where).toEqual(signedIn.includes(where) ? [{ bearerAuth: [] }] : where === 'GET /metrics' ? [{}, { metricsToken: [] }] : []);
    }
  });

  it('names the resources as component schemas and refers to them; every $ref resolves', async () => {
    const document = await buildOpenApiDocument();
    const schemas = (document.components as { schemas: Record<string, { title?: string }> }).schemas;
    for (const name of ['User', 'Post', 'Reply', 'Board', 'Problem', 'EnvelopeError', 'BoardEnvelope', 'BoardPageEnvelope', 'Link', 'Token', 'Session']) {
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

// CONTRACT §5: "every response header the service sends is declared". Real answers of every operation (successes
// and the usual refusals, each request with an Origin, as a browser sends), compared with the document: each
// header the answer carries must be declared on that operation's response for that status (or its `default`).
// Only the framing and representation headers no client needs declared are left out.
describe('the OpenAPI document against the headers the service really sends', () => {
  const ORIGIN = 'https://client.example';
  const FRAMING = new Set(['content-type', 'content-length', 'content-encoding', 'transfer-encoding', 'date', 'connection', 'keep-alive']);
  type Doc = { paths: Record<string, Record<string, Operation>> };

  /** Collects, per answer, the headers its operation's response does not declare. */
  function checker(document: Doc) {
    const undeclared: string[] = [];
    const covered = new Set<string>();
    const check = (method: string, template: string, status: number, headers: Record<string, unknown>) => {
      const item = document.paths[template];
      expect(item, template).toBeDefined();
      const op = item![method.toLowerCase()];
      if (op === undefined) {
        undeclared.push(`${method} ${template} ${status}: no operation documents this answer`);
        return;
      }
      covered.add(`${method.toLowerCase()} ${template}`);
      const response = op.responses?.[String(status)] ?? op.responses?.default;
      if (response === undefined) {
        undeclared.push(`${method} ${template} ${status}: no such response`);
        return;
      }
      const declared = new Set(Object.keys(response.headers ?? {}).map((name) => name.toLowerCase()));
      for (const name of Object.keys(headers)) {
        if (!FRAMING.has(name) && !declared.has(name)) undeclared.push(`${method} ${template} ${status}: ${name}`);
      }
    };
    return { undeclared, covered, check };
  }

  it('declares on each operation and status every header its answers carry', async () => {
    const app = await buildTestApp({ rateLimit: { enabled: true, max: 10_000, authMax: 10_000, windowMs: 60_000 } });
    const document = JSON.parse(JSON.stringify(app.swagger())) as Doc;
    const { undeclared, covered, check } = checker(document);
    const send = async (
      method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH' | 'OPTIONS',
      template: string,
      url: string,
      status: number,
      options: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
    ) => {
      const res = await call(app, method, url, { ...options, headers: { origin: ORIGIN, ...options.headers } });
      expect(res.statusCode, `${method} ${url}: ${res.body.slice(0, 300)}`).toBe(status);
      check(method, template, status, res.headers);
      return res;
    };
    /** A GET's 200, then the same GET with its ETag in If-None-Match: 304. */
    const getTwice = async (template: string, url: string, token?: string) => {
      const ok = await send('GET', template, url, 200, { token });
      await send('GET', template, url, 304, { token, headers: { 'if-none-match': String(ok.headers.etag) } });
      return ok;
    };

    const admin = await createAdmin(app);
    const alice = await signUp(app);
    const bob = await signUp(app);
    const bad = { token: 'not-a-token' };

    for (const path of ['/health', '/metrics', '/openapi.json']) {
      // The metrics change with every request (they count it), so no ETag of /metrics is current for long.
      if (path === '/metrics') await send('GET', path, path, 200);
      else await getTwice(path, path);
      await send('GET', path, `${path}?unknown=1`, 400);
    }

    await send('POST', '/users', '/users', 201, { body: { username: uniqueName(), password: 'a long password' } });
    const key = { 'idempotency-key': `"${uniqueName('key')}"` };
    const once = { body: { username: uniqueName(), password: 'a long password' }, headers: key };
    await send('POST', '/users', '/users', 201, once);
    await send('POST', '/users', '/users', 201, once);
    await send('POST', '/users', '/users', 422, { ...once, body: { ...once.body, bio: 'other' } });
    await send('POST', '/users', '/users', 409, { body: { username: alice.username, password: 'a long password' } });
    await send('POST', '/users', '/users', 400, { body: { username: '' } });
    await send('POST', '/users', '/users', 415, { body: 'text', headers: { 'content-type': 'text/plain' } });
    await send('POST', '/users', '/users', 413, { body: { bio: 'x'.repeat(300 * 1024) } });
    await getTwice('/users', '/users');
    await send('GET', '/users', '/users', 200, { token: alice.token });
    await send('GET', '/users', '/users?limit=1', 200);
    await send('GET', '/users', '/users?unknown=1', 400);
    await send('GET', '/users', '/users', 401, bad);
    await send('DELETE', '/users', '/users', 403, { token: alice.token });
    await send('DELETE', '/users', '/users', 401);

    const user = '/users/{user_id}';
    await getTwice(user, `/users/${alice.id}`);
    await send('GET', user, '/users/007', 400);
    await send('GET', user, '/users/999999', 404);
    const alicePut = { username: alice.username, displayName: 'Alice', bio: '' };
    await send('PUT', user, `/users/${alice.id}`, 200, { token: alice.token, body: alicePut });
    await send('PUT', user, `/users/${alice.id}`, 412, { token: alice.token, body: alicePut, headers: { 'if-match': '"stale"' } });
    await send('PUT', user, `/users/${alice.id}`, 403, { token: bob.token, body: alicePut });
    await send('PUT', user, `/users/${alice.id}`, 400, { token: alice.token, body: {} });
    await send('DELETE', user, `/users/${alice.id}`, 401);
    const leaving = await signUp(app);
    await send('DELETE', user, `/users/${leaving.id}`, 200, { token: leaving.token });

    const password = '/users/{user_id}/password';
    await send('PUT', password, `/users/${bob.id}/password`, 200, { token: bob.token, body: { currentPassword: bob.password, newPassword: bob.password } });
    await send('PUT', password, `/users/${bob.id}/password`, 400, { token: bob.token, body: {} });
    await send('PUT', password, `/users/${bob.id}/password`, 401, { body: { currentPassword: bob.password, newPassword: bob.password } });

    const token = await send('POST', '/tokens', '/tokens', 201, { body: { username: bob.username, password: bob.password } });
    await send('POST', '/tokens', '/tokens', 401, { body: { username: bob.username, password: 'wrong password' } });
    await send('POST', '/tokens', '/tokens', 400, { body: {} });
    await getTwice('/tokens/{token_id}', `/tokens/${token.json().id}`, bob.token);
    await send('GET', '/tokens/{token_id}', `/tokens/${token.json().id}`, 404, { token: alice.token });
    await send('GET', '/tokens/{token_id}', `/tokens/${token.json().id}`, 401);
    await getTwice('/users/{user_id}/tokens', `/users/${bob.id}/tokens`, bob.token);
    await send('GET', '/users/{user_id}/tokens', `/users/${bob.id}/tokens?limit=1`, 200, { token: bob.token });
    await send('GET', '/users/{user_id}/tokens', `/users/${bob.id}/tokens`, 403, { token: alice.token });
    await send('GET', '/users/{user_id}/tokens', '/users/999999/tokens', 404, { token: admin.token });
    await send('GET', '/users/{user_id}/tokens', `/users/${bob.id}/tokens`, 401);
    await send('DELETE', '/tokens/{token_id}', `/tokens/${token.json().id}`, 200, { token: bob.token });
    await send('DELETE', '/tokens/{token_id}', `/tokens/${token.json().id}`, 401);

    const post = (await send('POST', '/users/{user_id}/posts', `/users/${alice.id}/posts`, 201, { token: alice.token, body: { title: 'Hi', content: 'Hello' } })).json();
    await send('POST', '/users/{user_id}/posts', `/users/${alice.id}/posts`, 403, { token: bob.token, body: { title: 'Hi', content: 'Hello' } });
    await send('POST', '/users/{user_id}/posts', `/users/${alice.id}/posts`, 400, { token: alice.token, body: {} });
    await getTwice('/posts', '/posts');
    await send('GET', '/posts', '/posts?limit=1', 200);
    await send('GET', '/posts', '/posts?unknown=1', 400);
    await getTwice('/posts/{post_id}', `/posts/${post.id}`);
    await send('GET', '/posts/{post_id}', '/posts/999999', 404);
    const postPut = { title: 'Hi', content: 'Hello again', visibility: 'public' };
    await send('PUT', '/posts/{post_id}', `/posts/${post.id}`, 200, { token: alice.token, body: postPut });
    await send('PUT', '/posts/{post_id}', `/posts/${post.id}`, 412, { token: alice.token, body: postPut, headers: { 'if-match': '"stale"' } });
    await send('PUT', '/posts/{post_id}', `/posts/${post.id}`, 403, { token: bob.token, body: postPut });
    await getTwice('/users/{user_id}/posts', `/users/${alice.id}/posts`);
    await send('GET', '/users/{user_id}/posts', '/users/999999/posts', 404);

    const followers = '/users/{user_id}/followers';
    await send('POST', followers, `/users/${alice.id}/followers`, 201, { token: bob.token, body: { id: bob.id } });
    await send('POST', followers, `/users/${alice.id}/followers`, 409, { token: bob.token, body: { id: bob.id } });
    await send('POST', followers, `/users/${alice.id}/followers`, 403, { token: bob.token, body: { id: alice.id } });
    await getTwice(followers, `/users/${alice.id}/followers`);
    await send('GET', followers, '/users/999999/followers', 404);
    await getTwice(`${followers}/{follower_id}`, `/users/${alice.id}/followers/${bob.id}`);
    await send('GET', `${followers}/{follower_id}`, `/users/${alice.id}/followers/${admin.id}`, 404);
    await getTwice('/users/{user_id}/following', `/users/${bob.id}/following`);
    await getTwice('/users/{user_id}/feed', `/users/${bob.id}/feed`, bob.token);
    await send('GET', '/users/{user_id}/feed', `/users/${bob.id}/feed`, 401);
    await send('GET', '/users/{user_id}/feed', `/users/${alice.id}/feed`, 403, { token: bob.token });
    const notifications = '/users/{user_id}/notifications';
    const [note] = (await getTwice(notifications, `/users/${alice.id}/notifications`, alice.token)).json();
    await send('GET', notifications, `/users/${alice.id}/notifications?types=bogus`, 400, { token: alice.token });
    await send('GET', notifications, `/users/${alice.id}/notifications`, 401);
    await send('GET', notifications, `/users/${alice.id}/notifications`, 403, { token: bob.token });
    await send('GET', notifications, '/users/999999/notifications', 404, { token: admin.token });
    await getTwice(`${notifications}/{notification_id}`, `/users/${alice.id}/notifications/${note.id}`, alice.token);
    await send('GET', `${notifications}/{notification_id}`, `/users/${alice.id}/notifications/999999`, 404, { token: alice.token });
    await getTwice(`${notifications}/marker`, `/users/${alice.id}/notifications/marker`, alice.token);
    await send('PUT', `${notifications}/marker`, `/users/${alice.id}/notifications/marker`, 200, { token: alice.token, body: { lastReadId: note.id } });
    await send('PUT', `${notifications}/marker`, `/users/${alice.id}/notifications/marker`, 400, { token: alice.token, body: {} });
    await send('PUT', `${notifications}/marker`, `/users/${alice.id}/notifications/marker`, 403, { token: admin.token, body: { lastReadId: 1 } });
    await send('PUT', `${notifications}/marker`, '/users/999999/notifications/marker', 404, { token: admin.token, body: { lastReadId: 1 } });
    await send('DELETE', `${followers}/{follower_id}`, `/users/${alice.id}/followers/${bob.id}`, 200, { token: bob.token });

    const replies = '/posts/{post_id}/replies';
    const reply = (await send('POST', replies, `/posts/${post.id}/replies`, 201, { token: bob.token, body: { content: 'Hey' } })).json();
    await send('POST', replies, '/posts/999999/replies', 404, { token: bob.token, body: { content: 'Hey' } });
    await getTwice(replies, `/posts/${post.id}/replies`);
    await getTwice(`${replies}/{reply_id}`, `/posts/${post.id}/replies/${reply.id}`);
    await send('GET', `${replies}/{reply_id}`, `/posts/${post.id}/replies/999999`, 404);
    await send('PUT', `${replies}/{reply_id}`, `/posts/${post.id}/replies/${reply.id}`, 200, { token: bob.token, body: { content: 'Hey!' } });
    await send('PUT', `${replies}/{reply_id}`, `/posts/${post.id}/replies/${reply.id}`, 412, { token: bob.token, body: { content: 'Hey' }, headers: { 'if-match': '"stale"' } });
    await send('DELETE', `${replies}/{reply_id}`, `/posts/${post.id}/replies/${reply.id}`, 200, { token: bob.token });

    const recommends = '/posts/{post_id}/recommends';
    await send('POST', recommends, `/posts/${post.id}/recommends`, 201, { token: bob.token, body: { id: bob.id } });
    await send('POST', recommends, `/posts/${post.id}/recommends`, 409, { token: bob.token, body: { id: bob.id } });
    await getTwice(recommends, `/posts/${post.id}/recommends`);
    await getTwice(`${recommends}/{user_id}`, `/posts/${post.id}/recommends/${bob.id}`);
    await send('GET', `${recommends}/{user_id}`, `/posts/${post.id}/recommends/${admin.id}`, 404);
    await send('DELETE', `${recommends}/{user_id}`, `/posts/${post.id}/recommends/${bob.id}`, 200, { token: bob.token });
    await send('DELETE', '/posts/{post_id}', `/posts/${post.id}`, 200, { token: alice.token });

    // CONTRACT §9: blocks and mutes (the same routes), suspensions.
    for (const [path, target] of [['blocks', 'blocked_id'], ['mutes', 'muted_id']] as const) {
      const list = `/users/{user_id}/${path}`;
      const one = `${list}/{${target}}`;
      await send('POST', list, `/users/${alice.id}/${path}`, 201, { token: alice.token, body: { id: bob.id } });
      await send('POST', list, `/users/${alice.id}/${path}`, 409, { token: alice.token, body: { id: bob.id } });
      await send('POST', list, `/users/${alice.id}/${path}`, 400, { token: alice.token, body: { id: alice.id } });
      await send('POST', list, `/users/${alice.id}/${path}`, 403, { token: bob.token, body: { id: admin.id } });
      await send('POST', list, `/users/${alice.id}/${path}`, 401, { body: { id: bob.id } });
      await getTwice(list, `/users/${alice.id}/${path}`, alice.token);
      await send('GET', list, `/users/${alice.id}/${path}`, 404, { token: bob.token });
      await getTwice(one, `/users/${alice.id}/${path}/${bob.id}`, alice.token);
      await send('GET', one, `/users/${alice.id}/${path}/${admin.id}`, 404, { token: alice.token });
      await send('DELETE', one, `/users/${alice.id}/${path}/${bob.id}`, 200, { token: alice.token });
      await send('DELETE', one, `/users/${alice.id}/${path}/${bob.id}`, 400, { token: alice.token });
    }
    const suspension = '/users/{user_id}/suspension';
    await send('GET', suspension, `/users/${bob.id}/suspension`, 404, { token: admin.token });
    await send('PUT', suspension, `/users/${bob.id}/suspension`, 403, { token: alice.token, body: { reason: 'spam' } });
    await send('PUT', suspension, `/users/${admin.id}/suspension`, 403, { token: admin.token, body: { reason: 'spam' } });
    await send('PUT', suspension, `/users/${bob.id}/suspension`, 200, { token: admin.token, body: { reason: 'spam' } });
    await getTwice(suspension, `/users/${bob.id}/suspension`, admin.token);
    await send('POST', '/tokens', '/tokens', 403, { body: { username: bob.username, password: bob.password } });
    await send('DELETE', suspension, `/users/${bob.id}/suspension`, 200, { token: admin.token });
    await send('DELETE', suspension, `/users/${bob.id}/suspension`, 400, { token: admin.token });
    // The suspension revoked bob's tokens; lifting it does not give them back.
    bob.token = await signIn(app, bob.username, bob.password);

    const board = (await send('POST', '/boards', '/boards', 201, { token: alice.token, body: { title: 'Notice', content: 'Text' } })).json();
    await send('POST', '/boards', '/boards', 400, { token: alice.token, body: {} });
    await send('POST', '/boards', '/boards', 401, { body: { title: 'Notice', content: 'Text' } });
    await getTwice('/boards', '/boards');
    await getTwice('/boards/list', '/boards/list');
    const boardId = board.data.id;
    await getTwice('/boards/{board_id}', `/boards/${boardId}`);
    await send('GET', '/boards/{board_id}', '/boards/999999', 404);
    const boardPut = { title: 'Notice', content: 'New text' };
    await send('PUT', '/boards/{board_id}', `/boards/${boardId}`, 200, { token: alice.token, body: boardPut });
    await send('PUT', '/boards/{board_id}', `/boards/${boardId}`, 412, { token: alice.token, body: boardPut, headers: { 'if-match': '"stale"' } });
    await send('DELETE', '/boards/{board_id}', `/boards/${boardId}`, 200, { token: alice.token });

    const reports = '/reports';
    const flagged = (await send('POST', reports, reports, 201, { token: bob.token, body: { subject: { type: 'user', id: alice.id }, reason: 'spam' } })).json();
    const reportKey = { 'idempotency-key': `"${uniqueName('key')}"` };
    await send('POST', reports, reports, 409, { token: bob.token, body: { subject: { type: 'user', id: alice.id }, reason: 'spam' }, headers: reportKey });
    await send('POST', reports, reports, 400, { token: bob.token, body: { subject: { type: 'user', id: 999999 }, reason: 'spam' } });
    await send('POST', reports, reports, 401, { body: { subject: { type: 'user', id: alice.id }, reason: 'spam' } });
    await send('POST', reports, reports, 422, { token: bob.token, body: { subject: { type: 'user', id: alice.id }, reason: 'other' }, headers: reportKey });
    await getTwice(reports, reports, admin.token);
    await send('GET', reports, '/reports?status=closed', 400, { token: admin.token });
    await send('GET', reports, reports, 403, { token: bob.token });
    await send('GET', reports, reports, 401);
    const report = `${reports}/{report_id}`;
    await getTwice(report, `/reports/${flagged.id}`, bob.token);
    await send('GET', report, `/reports/${flagged.id}`, 404, { token: alice.token });
    await send('GET', report, `/reports/${flagged.id}`, 401);
    const resolve = { status: 'resolved', resolution: 'Warned' };
    await send('PUT', report, `/reports/${flagged.id}`, 200, { token: admin.token, body: resolve });
    await send('PUT', report, `/reports/${flagged.id}`, 412, { token: admin.token, body: resolve, headers: { 'if-match': '"stale"' } });
    await send('PUT', report, `/reports/${flagged.id}`, 403, { token: bob.token, body: resolve });
    await send('PUT', report, `/reports/${flagged.id}`, 404, { token: alice.token, body: resolve });
    await send('PUT', report, `/reports/${flagged.id}`, 400, { token: admin.token, body: {} });
    await send('POST', reports, reports, 201, { token: bob.token, body: { subject: { type: 'user', id: alice.id }, reason: 'abuse' } });
    await send('PUT', report, `/reports/${flagged.id}`, 409, { token: admin.token, body: { status: 'open', resolution: '' } });

    // Every path, though the document lists no OPTIONS: a method it does not take and a plain OPTIONS are 405 with
    // Allow, and a CORS preflight is 204 with the headers the document's description names.
    for (const template of Object.keys(document.paths)) {
      const url = template.replace(/\{[^}]+\}/g, String(alice.id));
      for (const method of ['PATCH', 'OPTIONS'] as const) {
        const refused = await app.inject({ method, url, headers: method === 'PATCH' ? { origin: ORIGIN } : {} });
        expect(refused.statusCode, `${method} ${url}`).toBe(405);
        expect(refused.headers.allow, `${method} ${url}`).toMatch(/^[A-Z]+(, [A-Z]+)*$/);
      }
      const preflight = await call(app, 'OPTIONS', url, {
        headers: { origin: ORIGIN, 'access-control-request-method': 'PUT', 'access-control-request-headers': 'authorization' },
      });
      expect(preflight.statusCode, `preflight ${url}`).toBe(204);
      expect(preflight.headers, `preflight ${url}`).toMatchObject({
        'access-control-allow-origin': ORIGIN,
        'access-control-allow-methods': 'GET, HEAD, POST, PUT, DELETE',
        'access-control-allow-headers': 'authorization',
        'access-control-max-age': '600',
      });
    }

    // The live streams: GET /posts, GET /users/{user_id}/feed and GET /users/{user_id}/notifications with Accept: text/event-stream.
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as { port: number };
    for (const [template, url, token] of [
      ['/posts', '/posts', undefined],
      ['/users/{user_id}/feed', `/users/${bob.id}/feed`, bob.token],
      ['/users/{user_id}/notifications', `/users/${bob.id}/notifications`, bob.token],
    ] as const) {
      const stream = await openSse(`http://127.0.0.1:${port}`, url, { token, headers: { origin: ORIGIN } });
      stream.close();
      expect(stream.status, url).toBe(200);
      check('GET', template, 200, stream.headers as Record<string, unknown>);
    }

    const operations = Object.entries(document.paths).flatMap(([path, item]) => METHODS.filter((m) => item[m]).map((m) => `${m} ${path}`));
    expect(operations.filter((where) => !covered.has(where)), 'operations not exercised').toEqual([]);
    expect(undeclared).toEqual([]);
  }, 60_000);

  it('declares the headers of a 429', async () => {
    const app = await buildTestApp({ rateLimit: { enabled: true, max: 1, authMax: 1, windowMs: 60_000 } });
    const { undeclared, check } = checker(JSON.parse(JSON.stringify(app.swagger())) as Doc);
    for (const status of [200, 429]) {
      const res = await call(app, 'GET', '/openapi.json', { headers: { origin: ORIGIN } });
      expect(res.statusCode).toBe(status);
      check('GET', '/openapi.json', status, res.headers);
    }
    const res = await call(app, 'GET', '/boards', { headers: { origin: ORIGIN } });
    expect(res.statusCode).toBe(429);
    check('GET', '/boards', 429, res.headers);
    expect(undeclared).toEqual([]);
  });
});
