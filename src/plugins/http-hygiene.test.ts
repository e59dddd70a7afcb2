import net, { type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { describe, expect, it, onTestFinished } from 'vitest';
import { buildApp } from '../app.js';
import type { Config } from '../config.js';
import { buildTestApp, testConfig } from '../../test/helpers/build-test-app.js';
import { freshDatabase } from '../../test/helpers/database.js';
import { publish } from '../../test/helpers/api.js';
import { signUp } from '../../test/helpers/factories.js';
import { createLogger, loggerOptions } from './logging.js';

const PROBLEM = 'application/problem+json; charset=utf-8';

type Line = Record<string, unknown>;

/** The production app logging at info into an array of raw lines. */
async function appWithLog(overrides: Partial<Config> = {}): Promise<{ app: FastifyInstance; lines: string[] }> {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const { store, drop } = await freshDatabase();
  const app = await buildApp(testConfig(overrides), { store, logger: createLogger(loggerOptions({ logLevel: 'info' }), stream) });
  await app.ready();
  onTestFinished(async () => {
    await app.close();
    await drop();
  });
  return { app, lines };
}

/** CONTRACT §1: a query parameter the operation does not define is a 400 naming it, on every route. */
describe('unknown query parameters', () => {
  it.each(['/users?password=hunter2', '/health?verbose=1', '/users/1?password=hunter2', '/openapi.json?x=1', '/posts?limit=1&password=hunter2'])(
    'GET %s: 400 naming the parameter',
    async (url) => {
      const app = await buildTestApp();
      const res = await app.inject({ method: 'GET', url });
      expect(res.statusCode).toBe(400);
      expect(res.headers['content-type']).toBe(PROBLEM);
      const name = [...new URLSearchParams(url.split('?')[1]).keys()].find((key) => key !== 'limit');
      expect(res.json().errors).toEqual([{ field: name, message: 'is not an allowed field' }]);
    },
  );

  it.each([
    ['/users?username=%FF', 'username'],
    ['/users?username=ab%C3', 'username'],
    ['/posts?limit=2&cursor=%E2%82', 'cursor'],
    ['/users?%zz=1', '%zz'],
  ])('GET %s: 400 naming %s, whose percent-encoding is not UTF-8', async (url, field) => {
    const app = await buildTestApp();
    const res = await app.inject({ method: 'GET', url });
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toBe(PROBLEM);
    expect(res.json().errors).toEqual([{ field, message: 'is not valid percent-encoded UTF-8' }]);
  });

  it('a valid escape is read as the text it encodes; under /boards the 400 is in the envelope', async () => {
    const app = await buildTestApp();
    const user = await signUp(app);
    const escaped = [...user.username].map((c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`).join('');
    const res = await app.inject({ method: 'GET', url: `/users?username=${escaped}` });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual([expect.objectContaining({ id: user.id })]);
    const board = await app.inject({ method: 'GET', url: '/boards/list?start=%FF' });
    expect(board.statusCode).toBe(400);
    expect(board.json()).toMatchObject({ code: '400', data: null, errors: [{ field: 'start', message: 'is not valid percent-encoded UTF-8' }] });
  });

  it('under /boards: 400 in the envelope', async () => {
    const app = await buildTestApp();
    const res = await app.inject({ method: 'GET', url: '/boards?password=hunter2' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: '400', data: null, errors: [{ field: 'password', message: 'is not an allowed field' }] });
  });

  it('the parameters a route defines still work', async () => {
    const app = await buildTestApp();
    const user = await signUp(app);
    await publish(app, user, 'one');
    await publish(app, user, 'two');
    const res = await app.inject({ method: 'GET', url: '/posts?limit=1' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toHaveLength(1);
  });

  it('a query string is never logged, only the path', async () => {
    const { app, lines } = await appWithLog();
    const res = await app.inject({ method: 'GET', url: '/users?password=hunter2' });
    expect(res.statusCode).toBe(400);
    expect(lines.join('')).not.toContain('hunter2');
    const completed = lines.map((line) => JSON.parse(line) as Line).find((line) => line.msg === 'request completed');
    expect((completed?.req as Line).url).toBe('/users?[redacted]');
  });
});

/** CONTRACT §5: a 400 lists at most 20 field problems, and its log line stays small, whatever the bad body. */
describe('a body of many unknown keys', () => {
  const junk = (count: number, keyLength = 8) => Object.fromEntries(Array.from({ length: count }, (_, i) => [`k${String(i).padStart(keyLength, '0')}`, 1]));

  it('23,000 unknown keys: 400 with 20 field problems, a small answer and a small log line', async () => {
    const { app, lines } = await appWithLog();
    const body = JSON.stringify({ username: 'someone', password: 'correct horse battery', ...junk(23_000, 5) });
    expect(body.length).toBeGreaterThan(200_000);
    const res = await app.inject({ method: 'POST', url: '/users', headers: { 'content-type': 'application/json' }, payload: body });
    expect(res.statusCode).toBe(400);
    expect(res.json().errors).toHaveLength(20);
    expect(res.json().errors[0]).toEqual({ field: 'k00000', message: 'is not an allowed field' });
    expect(res.body.length).toBeLessThan(4096);
    const rejected = lines.find((line) => line.includes('"request rejected"'));
    expect(rejected).toBeDefined();
    expect(rejected!.length).toBeLessThan(4096);
  });

  it('a few unknown keys and a missing field are all named', async () => {
    const app = await buildTestApp();
    const res = await app.inject({ method: 'POST', url: '/users', payload: { username: 'someone', extra: 1, other: 2 } });
    expect(res.statusCode).toBe(400);
    expect(res.json().errors).toEqual(
      expect.arrayContaining([
        { field: 'password', message: 'is required' },
        { field: 'extra', message: 'is not an allowed field' },
        { field: 'other', message: 'is not an allowed field' },
      ]),
    );
  });

  it('a 100,000-character unknown key is named by its first 100 characters', async () => {
    const { app, lines } = await appWithLog();
    const key = 'x'.repeat(100_000);
    const res = await app.inject({ method: 'POST', url: '/users', payload: { username: 'someone', password: 'correct horse battery', [key]: 1 } });
    expect(res.statusCode).toBe(400);
    expect(res.json().errors).toEqual([{ field: `${'x'.repeat(100)}…`, message: 'is not an allowed field' }]);
    expect(lines.every((line) => line.length < 4096)).toBe(true);
  });
});

/** CONTRACT §2: with TRUST_PROXY, the client address is the rightmost untrusted X-Forwarded-For entry. */
describe('TRUST_PROXY and the client address', () => {
  const limited = { rateLimit: { enabled: true, max: 2, authMax: 2, windowMs: 60_000 } };
  const get = (app: FastifyInstance, forwarded: string | undefined) =>
    app.inject({ method: 'GET', url: '/posts', remoteAddress: '10.0.0.1', headers: forwarded ? { 'x-forwarded-for': forwarded } : {} });

  it('one hop: a client cannot pick its rate-limit key by writing X-Forwarded-For itself', async () => {
    const app = await buildTestApp({ ...limited, trustProxy: 1 });
    // The proxy appends the address it saw (203.0.113.7) to whatever the client sent.
    expect((await get(app, '1.1.1.1, 203.0.113.7')).statusCode).toBe(200);
    expect((await get(app, '2.2.2.2, 203.0.113.7')).statusCode).toBe(200);
    expect((await get(app, '3.3.3.3, 203.0.113.7')).statusCode).toBe(429);
    // Another client behind the same proxy has its own budget.
    expect((await get(app, '1.1.1.1, 198.51.100.9')).statusCode).toBe(200);
  });

  it('a list of proxies: entries from trusted addresses are skipped, the first untrusted one is the client', async () => {
    const { app, lines } = await appWithLog({ trustProxy: ['10.0.0.0/8'] });
    await get(app, '1.1.1.1, 203.0.113.7, 10.0.0.2');
    const completed = lines.map((line) => JSON.parse(line) as Line).find((line) => line.msg === 'request completed');
    expect((completed?.req as Line).remoteAddress).toBe('203.0.113.7');
  });

  it('off: X-Forwarded-For is ignored', async () => {
    const app = await buildTestApp({ ...limited, trustProxy: false });
    expect((await get(app, '1.1.1.1')).statusCode).toBe(200);
    expect((await get(app, '2.2.2.2')).statusCode).toBe(200);
    expect((await get(app, '3.3.3.3')).statusCode).toBe(429);
  });
});

/** A DELETE may carry a body: it is held to the same rules as any other (415 not JSON, 413 too large). */
describe('DELETE with a body', () => {
  it('415 for a body that is not JSON, 413 for one over the limit, and the post stays', async () => {
    const app = await buildTestApp({ bodyLimit: 1024 });
    const user = await signUp(app);
    const post = await publish(app, user, 'kept');
    const url = `/posts/${post.id}`;
    const auth = { authorization: `Bearer ${user.token}` };
    const text = await app.inject({ method: 'DELETE', url, headers: { ...auth, 'content-type': 'text/plain' }, payload: 'hello' });
    expect(text.statusCode).toBe(415);
    expect(text.headers['content-type']).toBe(PROBLEM);
    const big = await app.inject({ method: 'DELETE', url, headers: { ...auth, 'content-type': 'application/json' }, payload: JSON.stringify({ x: 'y'.repeat(2000) }) });
    expect(big.statusCode).toBe(413);
    expect(big.headers['content-type']).toBe(PROBLEM);
    expect((await app.inject({ method: 'GET', url })).statusCode).toBe(200);
  });
});

/** CONTRACT §5: every answer carries `X-Content-Type-Options: nosniff`, whatever answers it. */
describe('X-Content-Type-Options: nosniff on every answer', () => {
  it('in-process: successes, errors, 404, 405, 304, 429, preflights, a stream, /docs, /metrics, router errors', async () => {
    const app = await buildTestApp({ rateLimit: { enabled: true, max: 100, authMax: 2, windowMs: 60_000 } });
    const user = await signUp(app, { username: 'sniff', password: 'sniff password 1' });
    const post = await publish(app, user, 'a post');
    const etag = (await app.inject({ method: 'GET', url: `/posts/${post.id}` })).headers.etag as string;
    const cases: Array<[string, InjectOptions, number]> = [
      ['a read', { method: 'GET', url: `/posts/${post.id}` }, 200],
      ['a HEAD', { method: 'HEAD', url: '/users' }, 200],
      ['a create', { method: 'POST', url: `/users/${user.id}/posts`, headers: { authorization: `Bearer ${user.token}` }, payload: { title: 't', content: 'c' } }, 201],
      ['a 304', { method: 'GET', url: `/posts/${post.id}`, headers: { 'if-none-match': etag } }, 304],
      ['a 400', { method: 'GET', url: '/posts?limit=0' }, 400],
      ['a 400 under /boards', { method: 'GET', url: '/boards?start=-1' }, 400],
      ['a 401', { method: 'POST', url: `/users/${user.id}/posts`, payload: { title: 't', content: 'c' } }, 401],
      ['a 404', { method: 'GET', url: '/nowhere' }, 404],
      ['a 404 of a resource', { method: 'GET', url: '/posts/999999' }, 404],
      ['a 405', { method: 'PATCH', url: '/users' }, 405],
      ['a plain OPTIONS', { method: 'OPTIONS', url: '/users' }, 405],
      ['a preflight', { method: 'OPTIONS', url: '/users', headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' } }, 204],
      ['a 415', { method: 'POST', url: `/users/${user.id}/posts`, headers: { 'content-type': 'text/plain' }, payload: 'x' }, 415],
      ['a router error', { method: 'GET', url: '/users/%zz' }, 400],
      ['a stream opened with HEAD', { method: 'HEAD', url: '/posts', headers: { accept: 'text/event-stream' } }, 200],
      ['/docs', { method: 'GET', url: '/docs' }, 200],
      ['a /docs asset', { method: 'GET', url: '/docs/static/swagger-ui.css' }, 200],
      ['/openapi.json', { method: 'GET', url: '/openapi.json' }, 200],
      ['/metrics', { method: 'GET', url: '/metrics' }, 200],
      ['/health', { method: 'GET', url: '/health' }, 200],
    ];
    for (const [what, request, status] of cases) {
      const res = await app.inject(request);
      expect(res.statusCode, what).toBe(status);
      expect(res.headers['x-content-type-options'], what).toBe('nosniff');
    }
    // The auth policy's quota (2) is spent by the sign-up and sign-in above: a 429.
    const limited = await app.inject({ method: 'POST', url: '/tokens', payload: { username: 'sniff', password: 'sniff password 1' } });
    expect(limited.statusCode).toBe(429);
    expect(limited.headers['x-content-type-options']).toBe('nosniff');
  });

  it('over a socket: a live stream, and the answers written straight to the socket (broken HTTP, an unknown method, CONNECT)', async () => {
    const app = await buildTestApp();
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    // The stream's head, read from the socket; closing the connection ends the stream.
    const stream = await rawExchange(port, 'GET /posts HTTP/1.1\r\nHost: a\r\nAccept: text/event-stream\r\n\r\n', '\r\n\r\n');
    expect(stream).toMatch(/^HTTP\/1\.1 200 /);
    expect(stream).toMatch(/\r\ncontent-type: text\/event-stream/i);
    expect(stream).toMatch(/\r\nx-content-type-options: nosniff\r\n/i);
    for (const head of ['GET /users HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n', 'FOO /users HTTP/1.1\r\nHost: a\r\n\r\n', 'CONNECT example.com:443 HTTP/1.1\r\nHost: a\r\n\r\n']) {
      const answer = await rawExchange(port, head);
      expect(answer, head).toMatch(/^HTTP\/1\.1 40[05] /);
      expect(answer, head).toMatch(/\r\nX-Content-Type-Options: nosniff\r\n/i);
    }
  });
});

/** Sends raw bytes on a new connection and reads until the server closes it, or until `until` has arrived. */
function rawExchange(port: number, bytes: string, until?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes));
    let received = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      received += chunk;
      if (until !== undefined && received.includes(until)) socket.destroy();
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(received));
    socket.setTimeout(5000, () => socket.destroy());
  });
}
