import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import zlib from 'node:zlib';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { isCompressible } from '../../src/plugins/compression.js';
import { testConfig } from '../helpers/build-test-app.js';
import { freshDatabase } from '../helpers/database.js';
import { e2eDatabase, killLeftovers, request, startServer, type E2eDatabase, type ServerProcess } from '../helpers/server-process.js';

/**
 * Response compression over a real socket (CONTRACT §5): answers of 1 KiB or more are br or gzip encoded when the
 * client accepts it (a HEAD says what the GET would send), smaller ones are not, every compressible answer says
 * `Vary: Accept-Encoding`, and
 * server-sent event streams are never compressed or held back. Bodies are read raw (node:http, which does not
 * decode) and decoded here with node:zlib, then compared byte for byte with the identity answer.
 */

interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

function raw(base: string, method: string, path: string, headers: Record<string, string> = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${path}`, { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const decoders: Record<string, (body: Buffer) => Buffer> = {
  br: (body) => zlib.brotliDecompressSync(body),
  gzip: (body) => zlib.gunzipSync(body),
};

/** The response's Content-Length, when it has one, is the number of bytes that came (the encoded ones). */
function expectHonestLength(res: RawResponse): void {
  if (res.headers['content-length'] !== undefined) expect(Number(res.headers['content-length'])).toBe(res.body.length);
}

const varies = (res: RawResponse) => String(res.headers.vary ?? '').toLowerCase().split(/\s*,\s*/).includes('accept-encoding');

/** GETs `path` plain and with each encoding; checks each encoded body decodes to the plain one. Returns the plain body. */
async function expectCompressed(base: string, path: string, extra: Record<string, string> = {}): Promise<Buffer> {
  const plain = await raw(base, 'GET', path, extra);
  expect(plain.status).toBe(200);
  expect(plain.headers['content-encoding']).toBeUndefined();
  expect(varies(plain)).toBe(true);
  expectHonestLength(plain);
  expect(plain.body.length).toBeGreaterThanOrEqual(1024);
  for (const encoding of ['br', 'gzip']) {
    const res = await raw(base, 'GET', path, { ...extra, 'accept-encoding': encoding });
    expect(res.status).toBe(200);
    expect(res.headers['content-encoding']).toBe(encoding);
    expect(varies(res)).toBe(true);
    expect(res.headers['content-type']).toBe(plain.headers['content-type']);
    expectHonestLength(res);
    expect(res.body.length).toBeLessThan(plain.body.length);
    expect(decoders[encoding]!(res.body).equals(plain.body)).toBe(true);
  }
  return plain.body;
}

describe('compression of the built server', () => {
  let db: E2eDatabase;
  let server: ServerProcess;
  let boardId: number;

  beforeAll(async () => {
    db = await e2eDatabase();
    server = await startServer({ databaseUrl: db.url });
    const credentials = { username: 'squeezer', password: 'correct horse battery' };
    expect((await request(server.url, 'POST', '/users', { body: credentials })).status).toBe(201);
    const { token, userId } = (await request(server.url, 'POST', '/tokens', { body: credentials })).json<{ token: string; userId: number }>();
    for (let i = 0; i < 5; i++) {
      const res = await request(server.url, 'POST', `/users/${userId}/posts`, {
        token,
        body: { title: `Post ${i}`, content: `Post number ${i}. ${'All work and no play. '.repeat(20)}` },
      });
      expect(res.status).toBe(201);
    }
    const board = await request(server.url, 'POST', '/boards', { token, body: { title: 'Notice', content: 'Pinned. '.repeat(200) } });
    expect(board.status).toBe(201);
    boardId = board.json<{ data: { id: number } }>().data.id;
  }, 60_000);

  afterAll(async () => {
    await killLeftovers();
    await db?.drop();
  }, 60_000);

  it('GET /openapi.json is br or gzip encoded on request and decodes to the plain document', async () => {
    const plain = await expectCompressed(server.url, '/openapi.json');
    expect(JSON.parse(plain.toString('utf8'))).toMatchObject({ openapi: '3.1.0' });
  });

  it('a page of posts, a board and the board list (the {code, message, data} envelope) decode to the plain answers', async () => {
    const posts = JSON.parse((await expectCompressed(server.url, '/posts?limit=100')).toString('utf8')) as unknown[];
    expect(posts).toHaveLength(5);
    const board = JSON.parse((await expectCompressed(server.url, `/boards/${boardId}`)).toString('utf8')) as Record<string, unknown>;
    expect(board).toMatchObject({ code: '200', data: { id: boardId, title: 'Notice' } });
    const list = JSON.parse((await expectCompressed(server.url, '/boards/list')).toString('utf8')) as Record<string, unknown>;
    expect(list).toMatchObject({ code: '200', data: { total: 1, items: [expect.objectContaining({ id: boardId })] } });
  });

  it("Swagger UI's assets are compressed too", async () => {
    const page = await raw(server.url, 'GET', '/docs');
    expect(page.status).toBe(200);
    expect(page.body.toString('utf8')).toContain('static/swagger-ui-bundle.js"');
    await expectCompressed(server.url, '/docs/static/swagger-ui-bundle.js');
  });

  it('answers under 1 KiB go out as they are, with an exact Content-Length and Vary', async () => {
    for (const path of ['/health', '/boards/999999', '/users/999999']) {
      const res = await raw(server.url, 'GET', path, { 'accept-encoding': 'br, gzip' });
      expect(res.body.length).toBeLessThan(1024);
      expect(res.headers['content-encoding']).toBeUndefined();
      expect(Number(res.headers['content-length'])).toBe(res.body.length);
      expect(varies(res)).toBe(true);
    }
    // The envelope's 404 is still the envelope.
    const missing = await raw(server.url, 'GET', '/boards/999999', { 'accept-encoding': 'br, gzip' });
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body.toString('utf8'))).toMatchObject({ code: '404', message: 'board not found' });
  });

  it('HEAD: no body, and the headers the GET sends (Content-Encoding and Content-Length included), and Vary', async () => {
    // /posts is compressed in one go (a Content-Length), the document as a stream (chunked, no length).
    for (const path of ['/posts', '/openapi.json']) {
      for (const accept of [undefined, 'br', 'gzip', 'br, gzip']) {
        const headers: Record<string, string> = accept ? { 'accept-encoding': accept } : {};
        const get = await raw(server.url, 'GET', path, headers);
        const head = await raw(server.url, 'HEAD', path, headers);
        const where = `${path} ${accept ?? 'identity'}`;
        expect(head.status, where).toBe(200);
        expect(head.body.length, where).toBe(0);
        for (const name of ['content-type', 'content-encoding', 'content-length', 'etag', 'vary', 'cache-control']) {
          expect(head.headers[name], `${where}: ${name}`).toBe(get.headers[name]);
        }
        expect(head.headers['content-encoding'], where).toBe(accept?.split(',')[0]);
        expect(varies(head), where).toBe(true);
      }
    }
  });

  it('follows the client: identity or an unsupported coding get the plain body, a refused br falls back to gzip', async () => {
    for (const accept of ['identity', 'deflate', 'compress', 'br;q=0, gzip;q=0']) {
      const res = await raw(server.url, 'GET', '/openapi.json', { 'accept-encoding': accept });
      expect(res.status).toBe(200);
      expect(res.headers['content-encoding']).toBeUndefined();
      expectHonestLength(res);
    }
    const res = await raw(server.url, 'GET', '/openapi.json', { 'accept-encoding': 'br;q=0, gzip' });
    expect(res.headers['content-encoding']).toBe('gzip');
    // Both offered: br, whatever the order.
    expect((await raw(server.url, 'GET', '/openapi.json', { 'accept-encoding': 'gzip, deflate, br' })).headers['content-encoding']).toBe('br');
  });
});

describe('compression and streams (throw-away routes on the production app)', () => {
  let app: FastifyInstance;
  let base: string;
  let drop: () => Promise<void>;
  // Each streaming route writes its first event, then waits here until the test has seen it before finishing.
  const releases = new Map<string, () => void>();
  const EVENT = `data: ${JSON.stringify({ filler: 'x'.repeat(2000) })}\n\n`;

  beforeAll(async () => {
    const database = await freshDatabase();
    drop = database.drop;
    app = await buildApp(testConfig(), { store: database.store, logger: false });
    const streamed = (type: string) => async (request: { query: unknown }, reply: FastifyReply) => {
      const id = (request.query as { id: string }).id;
      const stream = new PassThrough();
      releases.set(id, () => stream.end('data: "bye"\n\n'));
      stream.write(EVENT);
      return reply.header('content-type', type).header('cache-control', 'no-cache').send(stream);
    };
    // Every route's query string is closed (unknown parameters are a 400): these declare the `id` they take.
    // Test-only routes, outside the document (route-docs requires responses() of every documented route).
    const withId = { schema: { hide: true, querystring: { type: 'object', properties: { id: { type: 'string' } } } } };
    app.get('/test/events', withId, streamed('text/event-stream'));
    app.get('/test/events-charset', withId, streamed('text/event-stream; charset=utf-8'));
    // The control: the same stream as text/plain is compressed, so the assertions below can see compression.
    app.get('/test/plain-stream', withId, streamed('text/plain; charset=utf-8'));
    // The way an SSE route may also answer: the raw Node response, written by hand.
    app.get('/test/events-raw', withId, (request, reply) => {
      const id = (request.query as { id: string }).id;
      reply.hijack();
      reply.raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      reply.raw.write(EVENT);
      releases.set(id, () => reply.raw.end('data: "bye"\n\n'));
    });
    // A conditional GET answered 304 (no body) for a compressible type, as the ETag support does.
    app.get('/test/not-modified', { schema: { hide: true } }, (_request, reply) => {
      reply.code(304).header('etag', '"v1"').header('content-type', 'application/json; charset=utf-8').send();
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  }, 60_000);

  afterAll(async () => {
    for (const release of releases.values()) release();
    await app?.close();
    await drop?.();
  }, 60_000);

  /**
   * Opens the stream and waits up to `holdMs` for its first bytes while the server holds it open; then lets the
   * server finish. `heldBack` says whether nothing (not even the headers) came before that release.
   */
  function openStream(path: string, id: string, holdMs: number) {
    return new Promise<{ headers: http.IncomingHttpHeaders; first: Buffer; rest: Buffer; heldBack: boolean }>((resolve, reject) => {
      let heldBack = false;
      const timer = setTimeout(() => {
        heldBack = true;
        releases.get(id)?.();
      }, holdMs);
      const req = http.get(`${base}${path}?id=${id}`, { headers: { 'accept-encoding': 'br, gzip', accept: 'text/event-stream' }, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        let first: Buffer | undefined;
        res.on('data', (chunk: Buffer) => {
          if (first === undefined) {
            first = chunk;
            if (!heldBack) {
              clearTimeout(timer);
              releases.get(id)?.();
            }
          } else chunks.push(chunk);
        });
        res.on('end', () => resolve({ headers: res.headers, first: first ?? Buffer.alloc(0), rest: Buffer.concat(chunks), heldBack }));
        res.on('error', reject);
      });
      req.on('error', reject);
    });
  }

  it.each(['/test/events', '/test/events-charset', '/test/events-raw'])(
    '%s: text/event-stream is neither compressed nor buffered',
    async (path) => {
      const { headers, first, rest, heldBack } = await openStream(path, `${path}-1`, 10_000);
      expect(heldBack).toBe(false);
      expect(headers['content-type']).toMatch(/^text\/event-stream/);
      expect(headers['content-encoding']).toBeUndefined();
      // The first event arrived whole, in plain text, before the server ended the stream.
      expect(Buffer.concat([first, rest]).toString('utf8')).toBe(`${EVENT}data: "bye"\n\n`);
      expect(first.toString('utf8').startsWith('data: {"filler"')).toBe(true);
    },
  );

  it('the same stream as text/plain is compressed and held back (so the test can see both)', async () => {
    const { headers, first, rest, heldBack } = await openStream('/test/plain-stream', 'plain-1', 1000);
    // The compressor kept the first 2 KB to itself until the stream ended: what an event stream must never suffer.
    expect(heldBack).toBe(true);
    expect(headers['content-encoding']).toBe('br');
    expect(zlib.brotliDecompressSync(Buffer.concat([first, rest])).toString('utf8')).toBe(`${EVENT}data: "bye"\n\n`);
  });

  it('a 304 has no body and no Content-Encoding', async () => {
    const res = await raw(base, 'GET', '/test/not-modified', { 'accept-encoding': 'br, gzip', 'if-none-match': '"v1"' });
    expect(res.status).toBe(304);
    expect(res.body.length).toBe(0);
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(res.headers.etag).toBe('"v1"');
    expect(varies(res)).toBe(true);
  });

  it('decides by media type: JSON, problem+json and text yes; event streams and images no', () => {
    for (const type of ['application/json', 'application/json; charset=utf-8', 'application/problem+json; charset=utf-8',
      'text/plain; version=0.0.4', 'text/html; charset=utf-8', 'text/css', 'application/javascript; charset=utf-8', 'image/svg+xml']) {
      expect([type, isCompressible(type)]).toEqual([type, true]);
    }
    for (const type of ['text/event-stream', 'text/event-stream; charset=utf-8', 'TEXT/EVENT-STREAM', 'image/png', 'application/octet-stream']) {
      expect([type, isCompressible(type)]).toEqual([type, false]);
    }
  });
});
