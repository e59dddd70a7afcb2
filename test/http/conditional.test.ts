import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import { e2eDatabase, killLeftovers, request, startServer, type E2eDatabase, type ServerProcess } from '../helpers/server-process.js';

/**
 * CONTRACT §6.1 over real sockets: If-Match's check and write are one atomic step, so of two PUTs carrying the same
 * tag, sent at once, exactly one succeeds: within one process on either backend, and across two processes on one
 * PostgreSQL database. And a 304 leaves the server with no body and no content coding.
 */

interface Setup {
  token: string;
  urls: Array<[string, (n: number) => Record<string, unknown>]>;
}

async function setUp(server: ServerProcess, name: string): Promise<Setup> {
  const password = `${name} password`;
  const created = await request(server.url, 'POST', '/users', { body: { username: name, password } });
  expect(created.status).toBe(201);
  const id = created.json<{ id: number }>().id;
  const token = (await request(server.url, 'POST', '/tokens', { body: { username: name, password } })).json<{ token: string }>().token;
  const post = await request(server.url, 'POST', `/users/${id}/posts`, { token, body: { title: 't', content: 'c' } });
  const postId = post.json<{ id: number }>().id;
  const replyId = (await request(server.url, 'POST', `/posts/${postId}/replies`, { token, body: { content: 'r' } })).json<{ id: number }>().id;
  const board = await request(server.url, 'POST', '/boards', { token, body: { title: 't', content: 'c' } });
  const boardId = board.json<{ data: { id: number } }>().data.id;
  return {
    token,
    urls: [
      [`/posts/${postId}`, (n) => ({ title: `racer ${n}`, content: 'c', visibility: 'public' })],
      [`/posts/${postId}/replies/${replyId}`, (n) => ({ content: `racer ${n}` })],
      [`/boards/${boardId}`, (n) => ({ title: `racer ${n}`, content: 'c' })],
      [`/users/${id}`, (n) => ({ username: name, displayName: `racer ${n}`, bio: '' })],
    ],
  };
}

/** Rounds of two PUTs with the same If-Match, one through each of `servers`; every round exactly one 200. */
async function race(servers: [ServerProcess, ServerProcess], { token, urls }: Setup, rounds: number, sameBody: boolean) {
  for (let round = 0; round < rounds; round++) {
    for (const [url, bodyOf] of urls) {
      const tag = (await request(servers[0].url, 'GET', url, { token })).headers.get('etag')!;
      const answers = await Promise.all(
        servers.map((server, n) =>
          request(server.url, 'PUT', url, { token, body: bodyOf(sameBody ? round : round * 2 + n), headers: { 'if-match': tag } }),
        ),
      );
      expect(answers.map((a) => a.status).sort(), `${url} round ${round}`).toEqual([200, 412]);
      const winner = answers.find((a) => a.status === 200)!;
      const now = await request(servers[1].url, 'GET', url, { token });
      expect(winner.headers.get('etag')).toBe(now.headers.get('etag'));
    }
  }
}

function raw(port: number, path: string, headers: Record<string, string>): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('validators over a socket, one process', () => {
  let db: E2eDatabase;
  let server: ServerProcess;

  beforeAll(async () => {
    db = await e2eDatabase();
    server = await startServer({ databaseUrl: db.url });
  });
  afterAll(async () => {
    await server?.stop();
    await killLeftovers();
    await db?.drop();
  }, 60_000);

  it('two PUTs with the same If-Match at once: exactly one 200 and one 412, every time', async () => {
    const setup = await setUp(server, 'cond_one');
    await race([server, server], setup, 5, false);
    await race([server, server], setup, 5, true);
  });

  it('a 304 over the wire: no body, no Content-Encoding, no Content-Length; the ETag the same for br and plain', async () => {
    const { token, urls } = await setUp(server, 'cond_wire');
    for (let i = 0; i < 10; i++) {
      await request(server.url, 'POST', '/boards', { token, body: { title: `a title to pass the compression threshold ${i}`, content: 'c' } });
    }
    const plain = await raw(server.port, '/boards/list', {});
    const br = await raw(server.port, '/boards/list', { 'accept-encoding': 'br' });
    expect(br.headers['content-encoding']).toBe('br');
    expect(br.headers.etag).toBe(plain.headers.etag);
    for (const path of ['/boards/list', urls[0]![0]]) {
      const tag = (await raw(server.port, path, {})).headers.etag!;
      const not = await raw(server.port, path, { 'accept-encoding': 'br, gzip', 'if-none-match': tag });
      expect(not.status).toBe(304);
      expect(not.body.length).toBe(0);
      expect(not.headers['content-encoding']).toBeUndefined();
      expect(not.headers['content-length']).toBeUndefined();
      expect(not.headers.etag).toBe(tag);
      expect(not.headers['cache-control']).toBe('no-cache');
      expect(not.headers.vary).toBe('Origin, Authorization, accept-encoding');
      expect(not.headers['x-request-id']).toBeTruthy();
    }
  });
});

describe.skipIf(backend !== 'postgres')('If-Match across two server processes on one PostgreSQL database', () => {
  let db: E2eDatabase;
  let a: ServerProcess;
  let b: ServerProcess;

  beforeAll(async () => {
    db = await e2eDatabase();
    [a, b] = await Promise.all([startServer({ databaseUrl: db.url }), startServer({ databaseUrl: db.url })]);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await killLeftovers();
    await db?.drop();
  }, 120_000);

  it('two PUTs with the same If-Match, one to each process: exactly one 200 and one 412, every time', async () => {
    const setup = await setUp(a, 'cond_two');
    await race([a, b], setup, 5, false);
    await race([a, b], setup, 5, true);
  });
});
