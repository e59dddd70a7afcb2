import { migrations } from '../../src/db/migrations/index.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import net from 'node:net';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import {
  E2E_PUBLIC_URL,
  GRACE_OVER,
  e2eDatabase,
  killLeftovers,
  openDatabase,
  request,
  runUntilExit,
  sqliteFile,
  startServer,
  type E2eDatabase,
  type ServerProcess,
} from '../helpers/server-process.js';

/**
 * The built server (dist/src/server.js) as a real process on a real socket: start-up, configuration, the
 * operational endpoints, logs, signals and crash durability. Runs on SQLite and on PostgreSQL.
 */

const PROBLEM = 'application/problem+json; charset=utf-8';
const ADMIN = { username: 'e2e_admin', password: 'admin secret e2e 1' };

// One database for the whole file, first migrated by the server in the first describe and then reused by the
// servers started later (a new PostgreSQL database costs a checkpoint to drop, seconds on a busy machine).
let db: E2eDatabase;
beforeAll(async () => {
  db = await e2eDatabase();
});
afterAll(async () => {
  await killLeftovers();
  await db?.drop();
}, 120_000);

/**
 * A JSON POST over a keep-alive connection whose body is sent in two halves: the headers and the first half at
 * once, the rest when `finish()` is called. Until then the request is in flight on the server, whatever the timing.
 */
function halfSentPost(port: number, urlPath: string, body: string, requestId: string) {
  const agent = new http.Agent({ keepAlive: true });
  const req = http.request({
    host: '127.0.0.1',
    port,
    path: urlPath,
    method: 'POST',
    agent,
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-request-id': requestId },
  });
  const response = new Promise<{ status: number; text: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
  }).finally(() => agent.destroy());
  const half = Math.floor(body.length / 2);
  req.flushHeaders();
  req.write(body.slice(0, half));
  return { response, finish: () => req.end(body.slice(half)) };
}

/** Table names (and applied migrations) in a database, read directly, not through the server. */
async function inspect(databaseUrl: string): Promise<{ tables: string[]; migrations: string[] }> {
  const handle = openDatabase(databaseUrl);
  try {
    const tables = (await handle.db.introspection.getTables({ withInternalKyselyTables: true })).map((t) => t.name).sort();
    const migrations = tables.includes('kysely_migration')
      ? (await sql<{ name: string }>`select name from kysely_migration order by name`.execute(handle.db)).rows.map((r) => r.name)
      : [];
    return { tables, migrations };
  } finally {
    await handle.close();
  }
}

describe(`one server process on a fresh ${backend} database`, () => {
  let server: ServerProcess;
  let before: { fileExisted: boolean; tables: string[] };

  beforeAll(async () => {
    before = {
      fileExisted: backend === 'sqlite' && fs.existsSync(sqliteFile(db.url)),
      tables: backend === 'postgres' ? (await inspect(db.url)).tables : [],
    };
    server = await startServer({
      databaseUrl: db.url,
      env: { ADMIN_USERNAME: ADMIN.username, ADMIN_PASSWORD: ADMIN.password },
    });
  });
  afterAll(async () => {
    const exit = await server?.stop();
    expect(exit).toEqual({ code: 0, signal: null });
  });

  it('created and migrated the database at start-up', async () => {
    expect(before).toEqual({ fileExisted: false, tables: [] });
    if (backend === 'sqlite') expect(fs.existsSync(sqliteFile(db.url))).toBe(true);
    const after = await inspect(db.url);
    expect(after.migrations).toEqual(Object.keys(migrations).sort());
    expect(after.tables).toEqual(
      expect.arrayContaining(['users', 'tokens', 'follows', 'posts', 'replies', 'recommends', 'boards', 'feed_entries', 'settings']),
    );
  });

  it('answers GET /health with 200 and a request id', async () => {
    const res = await request(server.url, 'GET', '/health');
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({ status: 'ok', database: 'up' });
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f]{16}-[0-9a-z]+$/);
  });

  // What Node's HTTP parser rejects never reaches Fastify's routing; it still gets problem details and a request id.
  it.each([
    ['a Content-Length that is not a number', 'POST /users HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n', 400, '/users'],
    ['a header line without a colon', 'GET /posts HTTP/1.1\r\nHost: x\r\nbroken header\r\n\r\n', 400, '/posts'],
    ['headers over the size limit', `GET /users HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431, '/users'],
  ])('answers a request with %s in problem details, then closes the connection', async (_case, raw, status, instance) => {
    const { port } = new URL(server.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(raw));
      let text = '';
      socket.setEncoding('latin1').on('data', (chunk: string) => (text += chunk));
      socket.on('end', () => resolve(text)).on('error', reject);
    });
    const [head = '', body = ''] = answer.split('\r\n\r\n');
    expect(head).toMatch(new RegExp(`^HTTP/1.1 ${status} `));
    expect(head).toMatch(/\r\nContent-Type: application\/problem\+json; charset=utf-8\r\n/);
    expect(head).toMatch(/\r\nX-Request-Id: [0-9a-f]{16}-[0-9a-z]+\r\n/);
    expect(head).toMatch(/\r\nConnection: close(\r\n|$)/);
    expect(JSON.parse(body)).toEqual({ type: 'about:blank', title: expect.any(String), status, detail: expect.any(String), instance });
    // The server is unharmed.
    expect((await request(server.url, 'GET', '/health')).status).toBe(200);
  });

  it('answers Expect: 100-continue with 413 before the body when the declared body is over the limit, else 100 then the answer', async () => {
    const { port } = new URL(server.url);
    /** Writes the head, then the body only once `100 Continue` has come; resolves with all it read, at the end. */
    const send = (head: string, body: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(head));
        let text = '';
        socket.setEncoding('latin1').on('data', (chunk: string) => {
          text += chunk;
          if (text === 'HTTP/1.1 100 Continue\r\n\r\n') socket.write(body);
          if (/^HTTP\/1\.1 [2-5]\d\d /m.test(text) && text.includes('}')) socket.end();
        });
        socket.on('close', () => resolve(text)).on('error', reject);
      });
    const big = await send(
      'POST /users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 99000000\r\n\r\n',
      'never sent',
    );
    expect(big).toMatch(/^HTTP\/1\.1 413 /);
    expect(big).not.toContain('100 Continue');
    // A sign-in for nobody: the body is read and judged (401), and nothing is left behind for the other tests.
    const body = JSON.stringify({ username: 'nobody_continued', password: 'a good long secret' });
    const small = await send(
      `POST /tokens HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
      body,
    );
    expect(small).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 401 /);
    expect(small).toContain('"status":401');
  });

  it('signs up, signs in, reads, replaces and deletes a user over the socket; the logs never carry the secrets', async () => {
    const password = 'e2e-Pa55word-never-logged';
    const username = 'e2e_flow_user';

    const created = await request(server.url, 'POST', '/users', {
      body: { username, password, displayName: 'Flow' },
      headers: { 'x-request-id': 'e2e-flow-signup' },
    });
    expect(created.status).toBe(201);
    expect(created.headers.get('x-request-id')).toBe('e2e-flow-signup');
    const user = created.json<{ id: number; username: string }>();
    expect(created.headers.get('location')).toBe(`${E2E_PUBLIC_URL}/users/${user.id}`);
    expect(user).toMatchObject({ username, displayName: 'Flow', role: 'member', followerCount: 0 });
    expect(created.text).not.toContain(password);

    const signedIn = await request(server.url, 'POST', '/tokens', { body: { username, password } });
    expect(signedIn.status).toBe(201);
    const token = signedIn.json<{ id: number; token: string; userId: number; expiresAt: string }>();
    expect(token.userId).toBe(user.id);
    expect(signedIn.headers.get('location')).toBe(`${E2E_PUBLIC_URL}/tokens/${token.id}`);
    expect(Date.parse(token.expiresAt)).toBeGreaterThan(Date.now());

    const read = await request(server.url, 'GET', `/users/${user.id}`);
    expect(read.status).toBe(200);
    expect(read.json()).toEqual(user);
    expect(read.json<{ links: { href: string }[] }>().links[0]).toEqual({
      rel: 'self',
      href: `${E2E_PUBLIC_URL}/users/${user.id}`,
      method: 'GET',
    });

    const anonymousPut = await request(server.url, 'PUT', `/users/${user.id}`, {
      body: { username, displayName: 'Nope', bio: '' },
    });
    expect(anonymousPut.status).toBe(401);
    expect(anonymousPut.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(anonymousPut.headers.get('content-type')).toBe(PROBLEM);

    const replaced = await request(server.url, 'PUT', `/users/${user.id}`, {
      token: token.token,
      body: { username, displayName: 'Flow Two', bio: 'over a real socket' },
    });
    expect(replaced.status).toBe(200);
    expect(replaced.json()).toMatchObject({ id: user.id, displayName: 'Flow Two', bio: 'over a real socket' });
    expect(replaced.headers.get('x-request-id')).toBeTruthy();

    const deleted = await request(server.url, 'DELETE', `/users/${user.id}`, {
      token: token.token,
      headers: { 'x-request-id': 'e2e-flow-delete' },
    });
    expect(deleted.status).toBe(200);
    expect(deleted.json()).toEqual({ deleted: 1 });

    const gone = await request(server.url, 'GET', `/users/${user.id}`);
    expect(gone.status).toBe(404);
    expect(gone.headers.get('content-type')).toBe(PROBLEM);
    const revoked = await request(server.url, 'PUT', `/users/${user.id}`, {
      token: token.token,
      body: { username, displayName: 'x', bio: '' },
    });
    expect(revoked.status).toBe(401);

    // The request ids of the flow are in the log; the password and the token are nowhere in it.
    await server.waitForLog((line) => line.reqId === 'e2e-flow-delete' && line.msg === 'request completed');
    expect(server.logs().some((line) => line.reqId === 'e2e-flow-signup')).toBe(true);
    const output = server.stdout() + server.stderr();
    expect(output).not.toContain(password);
    expect(output).not.toContain(token.token);
    expect(output).not.toContain(ADMIN.password);
  });

  it('serves the OpenAPI 3.1 document, and /docs with only its own assets', async () => {
    const openapi = await request(server.url, 'GET', '/openapi.json');
    expect(openapi.status).toBe(200);
    const document = openapi.json<{ openapi: string; paths: Record<string, unknown>; servers: { url: string }[] }>();
    expect(document.openapi).toBe('3.1.0');
    // Relative: Swagger UI calls the origin /docs was opened from; links stay on PUBLIC_URL (E2E_PUBLIC_URL here).
    expect(document.servers).toEqual([{ url: '/', description: 'The origin this document is served from' }]);
    expect(Object.keys(document.paths)).toEqual(expect.arrayContaining(['/users', '/users/{user_id}', '/tokens', '/health']));

    const docs = await fetch(`${server.url}/docs`);
    expect(docs.status).toBe(200);
    expect(docs.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await docs.text();
    const assets = [...html.matchAll(/<(?:script|link)\b[^>]*?\s(?:src|href)="([^"]+)"/g)].map((m) => new URL(m[1] ?? '', docs.url));
    expect(assets.length).toBeGreaterThanOrEqual(3);
    expect(assets.some((u) => u.pathname.endsWith('.js'))).toBe(true);
    expect(assets.some((u) => u.pathname.endsWith('.css'))).toBe(true);
    for (const asset of assets) {
      expect(asset.origin, `${asset.href} is served from another host`).toBe(server.url);
      const res = await fetch(asset);
      await res.arrayBuffer();
      expect(res.status, asset.href).toBe(200);
      expect(res.headers.get('cache-control'), asset.href).toBe('no-cache'); // not @fastify/static's own
    }
    // The page loads the document from next to itself, not from elsewhere.
    const spec = await request(server.url, 'GET', '/docs/json');
    expect(spec.status).toBe(200);
    expect(spec.json<{ openapi: string }>().openapi).toBe('3.1.0');
  });

  it('exposes Prometheus metrics, including the request-duration histogram by route pattern', async () => {
    await request(server.url, 'GET', '/users/1');
    const res = await request(server.url, 'GET', '/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.text).toContain('# TYPE corkboard_http_request_duration_seconds histogram');
    expect(res.text).toMatch(/corkboard_http_request_duration_seconds_count\{method="GET",route="\/users\/:user_id",status_code="(200|404)"\} \d+/);
    expect(res.text).toMatch(/^corkboard_process_cpu_user_seconds_total /m);
  });

  it('answers a CORS preflight and exposes the API headers to browsers', async () => {
    const origin = 'https://app.example';
    const preflight = await fetch(`${server.url}/users`, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe(origin);
    expect(preflight.headers.get('access-control-allow-methods')).toContain('POST');

    const simple = await fetch(`${server.url}/users`, { headers: { origin } });
    await simple.arrayBuffer();
    expect(simple.status).toBe(200);
    expect(simple.headers.get('access-control-allow-origin')).toBe(origin);
    expect(simple.headers.get('access-control-expose-headers')).toMatch(/Location.*Link.*X-Request-Id/);
  });

  it('bootstraps the admin from ADMIN_USERNAME/ADMIN_PASSWORD; the admin may remove all users, a member may not', async () => {
    const member = await request(server.url, 'POST', '/users', { body: { username: 'e2e_member', password: 'member password' } });
    expect(member.status).toBe(201);
    const memberToken = (await request(server.url, 'POST', '/tokens', { body: { username: 'e2e_member', password: 'member password' } })).json<{
      token: string;
    }>().token;
    const forbidden = await request(server.url, 'DELETE', '/users', { token: memberToken });
    expect(forbidden.status).toBe(403);

    const listed = await request(server.url, 'GET', `/users?username=${ADMIN.username}`);
    expect(listed.json()).toEqual([expect.objectContaining({ username: ADMIN.username, role: 'admin' })]);
    const signedIn = await request(server.url, 'POST', '/tokens', { body: ADMIN });
    expect(signedIn.status).toBe(201);
    const removed = await request(server.url, 'DELETE', '/users', { token: signedIn.json<{ token: string }>().token });
    expect(removed.status).toBe(200);
    expect(removed.json()).toEqual({ deleted: 2 });
    const remaining = await request(server.url, 'GET', '/users');
    expect(remaining.json()).toEqual([]);
    expect(server.logs()).toContainEqual(expect.objectContaining({ msg: 'admin bootstrap', username: ADMIN.username, outcome: 'created' }));
  });
});

describe('start-up with a bad configuration value', () => {
  // A file that exists but is no SQLite database: the failure comes from SQLite's first statement, not from parsing.
  const notADatabase = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'corkboard-config-')), 'notes.txt');
  fs.writeFileSync(notADatabase, 'not a database\n'.repeat(400));
  afterAll(() => fs.rmSync(path.dirname(notADatabase), { recursive: true, force: true }));

  // Each process exits on its own within a second or two; they run side by side.
  it.concurrent.for([
    ['PORT', 'abc'],
    ['RATE_LIMIT', 'maybe'],
    ['DATABASE_URL', 'mysql://x'],
    ['TOKEN_TTL_SECONDS', '10'],
    ['DATABASE_URL', 'postgres://postgres@127.0.0.1:notaport/x'],
    ['HOST', 'bad host'],
    ['ADMIN_USERNAME', 'bad-name'],
    // Well-formed values that fail once used: the message still names the variable.
    ['HOST', '256.0.0.1'],
    ['DATABASE_URL', `sqlite:${notADatabase}`],
    ['DATABASE_URL', `sqlite:${notADatabase}/under-a-file/x.db`],
    // Node's recursive mkdir never returns for a folder under /proc (it retries ENOENT forever).
    ['DATABASE_URL', 'sqlite:/proc/corkboard-no-such-folder/x.db'],
    ['DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/corkboard_no_such_database'],
  ] as const)('%s=%s stops start-up with a non-zero exit and a message naming the variable', async ([variable, value], { expect }) => {
    const admin = { ADMIN_USERNAME: 'config_admin', ADMIN_PASSWORD: 'long enough password' };
    const result = await runUntilExit({ PORT: '0', DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'info', ...admin, [variable]: value });
    expect(result.signal).toBeNull();
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(variable);
    expect(result.stderr).not.toMatch(/\n\s+at /); // a message, not a stack trace
  });
});

describe('processes started and stopped by the test', () => {
  afterEach(killLeftovers);

  it('rate-limits sign-up: with RATE_LIMIT_AUTH_MAX=3 the 4th POST /users is a 429 problem with Retry-After', async () => {
    const server = await startServer({ databaseUrl: db.url, env: { RATE_LIMIT: 'on', RATE_LIMIT_AUTH_MAX: '3' } });
    const statuses = [];
    for (let i = 1; i <= 3; i++) {
      statuses.push((await request(server.url, 'POST', '/users', { body: { username: `limited_${i}`, password: 'password 1234' } })).status);
    }
    expect(statuses).toEqual([201, 201, 201]);
    const fourth = await request(server.url, 'POST', '/users', { body: { username: 'limited_4', password: 'password 1234' } });
    expect(fourth.status).toBe(429);
    expect(Number(fourth.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(fourth.headers.get('content-type')).toBe(PROBLEM);
    expect(fourth.json()).toMatchObject({ type: 'about:blank', title: 'Too Many Requests', status: 429, instance: '/users' });
    // The rate-limit fields of draft-ietf-httpapi-ratelimit-headers-11, not the older ones.
    expect(fourth.headers.get('ratelimit-policy')).toBe('"auth";q=3;w=60');
    expect(fourth.headers.get('ratelimit')).toBe(`"auth";r=0;t=${fourth.headers.get('retry-after')}`);
    expect([...fourth.headers.keys()].filter((name) => /^(x-)?ratelimit-(limit|remaining|reset)$/.test(name))).toEqual([]);
    expect((await request(server.url, 'GET', '/health')).headers.get('ratelimit')).toBeNull();
    // Ordinary routes have their own, looser limit.
    expect((await request(server.url, 'GET', '/users')).status).toBe(200);
    expect(await server.stop()).toEqual({ code: 0, signal: null });
    const handle = openDatabase(db.url);
    try {
      const rows = await handle.db.selectFrom('users').select('username').where('username', 'like', 'limited%').orderBy('id').execute();
      expect(rows.map((r) => r.username)).toEqual(['limited_1', 'limited_2', 'limited_3']);
    } finally {
      await handle.close();
    }
  });

  it('SIGTERM drains: in-flight requests on keep-alive connections still complete with 201, then the process exits 0', async () => {
    // A costly password hash (64 MiB Argon2id): each sign-in takes a while.
    // At debug the server logs each request as it arrives (below, how the test knows all three are in flight).
    const server = await startServer({ databaseUrl: db.url, env: { PASSWORD_HASH_MEMORY_KIB: '65536', LOG_LEVEL: 'debug' } });
    const credentials = { username: 'drain_user', password: 'drain password 1' };
    const created = await request(server.url, 'POST', '/users', { body: credentials });
    expect(created.status).toBe(201);

    // One request is surely in flight whatever the timing: its body is only half sent when the signal goes out.
    const upload = halfSentPost(server.port, '/tokens', JSON.stringify(credentials), 'drain-upload');
    // Two more over fetch, whose connections stay alive: the drain must not wait for the client to hang up.
    const ids = ['drain-1', 'drain-2'];
    const fetched = ids.map((id) => request(server.url, 'POST', '/tokens', { body: credentials, headers: { 'x-request-id': id } }));
    // The server has begun all three (it logs each on arrival) before it is told to stop.
    await Promise.all(['drain-upload', ...ids].map((id) => server.waitForLog((line) => line.reqId === id && line.msg === 'incoming request')));
    const started = Date.now();
    const exit = server.stop('SIGTERM');
    await server.waitForLog((line) => line.msg === 'shutting down' && line.signal === 'SIGTERM');
    upload.finish();

    const responses = [await upload.response, ...(await Promise.all(fetched))];
    expect(responses.map((r) => r.status)).toEqual([201, 201, 201]);
    expect(await exit).toEqual({ code: 0, signal: null });
    // Without waiting out the 10 s grace period (as it would if it waited for the keep-alive clients to hang up).
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(server.logs().some((line) => line.msg === GRACE_OVER)).toBe(false);
    // The half-sent request completed after the shutdown began.
    const messages = server.logs().map((line) => `${String(line.reqId ?? '')} ${String(line.msg)}`);
    expect(messages.indexOf('drain-upload request completed')).toBeGreaterThan(messages.indexOf(' shutting down'));

    // All three tokens were written before the database was closed.
    const handle = openDatabase(db.url);
    try {
      const tokens = await handle.db.selectFrom('tokens').select('id').where('user_id', '=', created.json<{ id: number }>().id).execute();
      expect(tokens.map((t) => t.id).sort()).toEqual(responses.map((r) => JSON.parse(r.text).id).sort());
    } finally {
      await handle.close();
    }
  });

  it('does not promote a member who signed up under ADMIN_USERNAME before a restart (CONTRACT §2: created only if missing)', async () => {
    const first = await startServer({ databaseUrl: db.url });
    const squatter = { username: 'would_be_root', password: 'squatter password' };
    expect((await request(first.url, 'POST', '/users', { body: squatter })).status).toBe(201);
    expect(await first.stop()).toEqual({ code: 0, signal: null });

    const second = await startServer({ databaseUrl: db.url, env: { ADMIN_USERNAME: 'Would_Be_Root', ADMIN_PASSWORD: 'the operator password' } });
    const listed = await request(second.url, 'GET', '/users?username=would_be_root');
    expect(listed.json()).toEqual([expect.objectContaining({ username: 'would_be_root', role: 'member' })]);
    // The operator's password does not open the member's account; the member's own still does, as a member.
    expect((await request(second.url, 'POST', '/tokens', { body: { username: 'would_be_root', password: 'the operator password' } })).status).toBe(401);
    const token = (await request(second.url, 'POST', '/tokens', { body: squatter })).json<{ token: string }>().token;
    expect((await request(second.url, 'DELETE', '/users', { token })).status).toBe(403);
    expect(second.logs()).toContainEqual(expect.objectContaining({ level: 40, username: 'Would_Be_Root', outcome: 'exists as a member' }));
    expect(await second.stop()).toEqual({ code: 0, signal: null });
  });

  it('keeps acknowledged writes across kill -9 and a restart on the same database', async () => {
    const first = await startServer({ databaseUrl: db.url });
    const credentials = { username: 'durable_user', password: 'durable password' };
    const created = await request(first.url, 'POST', '/users', { body: { ...credentials, bio: 'survives a crash' } });
    expect(created.status).toBe(201);
    const { id } = created.json<{ id: number }>();
    expect(await first.stop('SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });

    const second = await startServer({ databaseUrl: db.url });
    const read = await request(second.url, 'GET', `/users/${id}`);
    expect(read.status).toBe(200);
    expect(read.json()).toMatchObject({ id, username: 'durable_user', bio: 'survives a crash' });
    expect((await request(second.url, 'POST', '/tokens', { body: credentials })).status).toBe(201);
    expect(await second.stop()).toEqual({ code: 0, signal: null });
  });
});
