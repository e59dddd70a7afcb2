import type net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { e2eDatabase, killLeftovers, startServer, type E2eDatabase, type ServerProcess } from '../helpers/server-process.js';
import { collect, connect, parseResponse, rawRequest, rssMiB } from './socket.js';

/**
 * Faults from slow clients, against the built server as a real process (CONTRACT §5): a request whose headers
 * and body have not fully arrived within REQUEST_TIMEOUT_MS is answered 408 and closed, so slow senders cannot
 * hold sockets or memory without bound, and the server keeps answering everyone else meanwhile.
 */

const TIMEOUT_MS = 1000;
let db: E2eDatabase;
let server: ServerProcess;

beforeAll(async () => {
  db = await e2eDatabase();
  server = await startServer({ databaseUrl: db.url, env: { REQUEST_TIMEOUT_MS: String(TIMEOUT_MS) } });
});
afterAll(async () => {
  await killLeftovers();
  await db?.drop();
}, 60_000);

/** A POST that announces 100,000 bytes and then sends one every `everyMs`, until the connection ends. */
async function dribble(port: number, everyMs: number, path = '/users', method = 'POST'): Promise<{ socket: net.Socket; outcome: ReturnType<typeof collect> }> {
  const socket = await connect(port);
  const outcome = collect(socket, 20_000);
  socket.write(`${method} ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{`);
  const timer = setInterval(() => {
    if (!socket.destroyed && socket.writable) socket.write(' ');
  }, everyMs);
  void outcome.finally(() => clearInterval(timer));
  return { socket, outcome };
}

describe('slow senders', () => {
  it('a body sent a byte at a time: 408 in problem+json with a request id, then the connection is closed', async () => {
    const { outcome } = await dribble(server.port, 100);
    const { text, ending, ms } = await outcome;
    expect(ending).toBe('close');
    const res = parseResponse(text);
    expect(res.status).toBe(408);
    expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(res.headers['x-request-id']).toMatch(/\S/);
    expect(res.headers.connection).toBe('close');
    expect(JSON.parse(res.body)).toMatchObject({ status: 408, title: 'Request Timeout', instance: '/users' });
    // The timeout, Node's check interval (a quarter of it) and the linger before the socket is destroyed.
    expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(ms).toBeLessThan(TIMEOUT_MS * 4);
    // The log tells the request's own story under the id the client saw: a 408 at info, not a failure of the
    // service's, and no line for a request the client never sent.
    const id = res.headers['x-request-id'];
    const own = await server.waitForLog((line) => line.reqId === id && line.msg === 'request timed out');
    expect(own).toMatchObject({ level: 30, status: 408, req: { method: 'POST', url: '/users' } });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(server.logs().filter((line) => line.reqId === id && Number(line.level) >= 40)).toEqual([]);
    expect(server.logs().filter((line) => line.code === 'HPE_INVALID_EOF_STATE')).toEqual([]);
  });

  it('a client that hangs up while sending its body: one info line for its request, no error and no answer', async () => {
    const { socket } = await dribble(server.port, 100);
    await new Promise((resolve) => setTimeout(resolve, 300)); // well within the timeout, with a few bytes sent
    socket.destroy();
    const line = await server.waitForLog((l) => l.msg === 'request abandoned by the client');
    expect(line).toMatchObject({ level: 30, req: { method: 'POST' } });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(server.logs().filter((l) => l.reqId === line.reqId && Number(l.level) >= 40)).toEqual([]);
    expect(server.logs().filter((l) => l.code === 'HPE_INVALID_EOF_STATE')).toEqual([]);
  });

  it.each([
    ['POST', '/boards?x=1'],
    ['DELETE', '/boards/1'],
  ])('a board body sent a byte at a time (%s %s): 408 in the board envelope (CONTRACT §4: every board response)', async (method, path) => {
    const { outcome } = await dribble(server.port, 100, path, method);
    const { text, ending } = await outcome;
    expect(ending).toBe('close');
    const res = parseResponse(text);
    expect(res.status).toBe(408);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['x-request-id']).toMatch(/\S/);
    expect(JSON.parse(res.body)).toEqual({ code: '408', message: 'The request did not arrive in time', data: null });
  });

  it('headers sent a line at a time: 408 and closed', async () => {
    const socket = await connect(server.port);
    const outcome = collect(socket, 20_000);
    socket.write('GET /posts HTTP/1.1\r\n');
    const timer = setInterval(() => socket.writable && socket.write('X-Slow: 1\r\n'), 100);
    const { text, ending, ms } = await outcome;
    clearInterval(timer);
    expect(parseResponse(text).status).toBe(408);
    expect(ending).toBe('close');
    expect(ms).toBeLessThan(TIMEOUT_MS * 4);
  });

  it('300 slow senders at once: all answered 408 and closed, others served quickly meanwhile, memory bounded', async () => {
    const before = await rssMiB(server.pid);
    const senders = await Promise.all(Array.from({ length: 300 }, () => dribble(server.port, 200)));
    // Meanwhile an ordinary client is served promptly.
    const started = Date.now();
    const health = await fetch(`${server.url}/posts?limit=1`);
    expect(health.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(1000);

    const outcomes = await Promise.all(senders.map((s) => s.outcome));
    expect(outcomes.filter((o) => o.ending !== 'close' || parseResponse(o.text).status !== 408)).toEqual([]);
    const after = await rssMiB(server.pid);
    expect(after - before).toBeLessThan(100);
    // Still serving, and the connections are gone (a new request is answered at once).
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  });
});

describe('malformed requests over a raw socket', () => {
  it('an absolute-form target is 400 and no Link or instance carries the client host', async () => {
    const { text } = await rawRequest(server.port, 'GET http://evil.example/posts?limit=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    const res = parseResponse(text);
    expect(res.status).toBe(400);
    expect(res.headers.link).toBeUndefined();
    expect(text).not.toContain('evil.example');
    expect(JSON.parse(res.body)).toMatchObject({ status: 400, instance: '/', errors: [{ field: 'target' }] });
  });

  it('two Host headers: 400 naming host', async () => {
    const { text } = await rawRequest(server.port, 'GET /posts HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\nConnection: close\r\n\r\n');
    const res = parseResponse(text);
    expect(res.status).toBe(400);
    expect(res.headers['x-request-id']).toMatch(/\S/);
    expect(JSON.parse(res.body)).toMatchObject({ errors: [{ field: 'host', message: 'must be sent once' }] });
  });

  it('HTTP/1.1 without Host: 400 naming host, with a request id (HTTP/1.0 needs none)', async () => {
    const { text } = await rawRequest(server.port, 'GET /health HTTP/1.1\r\nConnection: close\r\n\r\n');
    const res = parseResponse(text);
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(res.headers['x-request-id']).toMatch(/\S/);
    expect(JSON.parse(res.body)).toMatchObject({ status: 400, instance: '/health', errors: [{ field: 'host', message: 'is required in an HTTP/1.1 request' }] });
    const board = parseResponse((await rawRequest(server.port, 'GET /boards/list HTTP/1.1\r\nConnection: close\r\n\r\n')).text);
    expect(JSON.parse(board.body)).toMatchObject({ code: '400', data: null, errors: [{ field: 'host' }] });
    const old = parseResponse((await rawRequest(server.port, 'GET /health HTTP/1.0\r\n\r\n')).text);
    expect(old.status).toBe(200);
  });

  it('CONNECT to a host: 400 in problem+json with a request id, then closed', async () => {
    const { text, ending } = await rawRequest(server.port, 'CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n');
    const res = parseResponse(text);
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(res.headers['x-request-id']).toMatch(/\S/);
    expect(ending).toBe('close');
  });

  it('CONNECT to a path no route takes: 404', async () => {
    const { text, ending } = await rawRequest(server.port, 'CONNECT /nope HTTP/1.1\r\nHost: localhost\r\n\r\n');
    const res = parseResponse(text);
    expect(res.status).toBe(404);
    expect(JSON.parse(res.body)).toMatchObject({ status: 404, instance: '/nope' });
    expect(ending).toBe('close');
  });

  it('a method no route takes, with a body that never fully arrives: 405 at once, then the connection is closed (no stray 408)', async () => {
    const { text, ending, ms } = await rawRequest(
      server.port,
      'PATCH /users/1 HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a"',
    );
    expect(ending).toBe('close');
    expect(ms).toBeLessThan(TIMEOUT_MS);
    expect(text.match(/^HTTP\/1\.1 /gm)).toHaveLength(1);
    expect(parseResponse(text).status).toBe(405);
  });

  it('CONNECT to a known path: 405 with Allow', async () => {
    const { text } = await rawRequest(server.port, 'CONNECT /posts HTTP/1.1\r\nHost: localhost\r\n\r\n');
    const res = parseResponse(text);
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
    expect(JSON.parse(res.body)).toMatchObject({ status: 405, instance: '/posts' });
  });

  // Node's parser refuses a method it does not know before any route runs; the answer is still the contract's.
  it('a method Node does not know, on a known path: 405 with Allow, then closed', async () => {
    const { text, ending } = await rawRequest(server.port, 'FOO /users?limit=5 HTTP/1.1\r\nHost: localhost\r\n\r\n');
    const res = parseResponse(text);
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('DELETE, GET, HEAD, POST');
    expect(res.headers['x-request-id']).toMatch(/\S/);
    expect(JSON.parse(res.body)).toMatchObject({ status: 405, instance: '/users' });
    expect(ending).toBe('close');
  });

  it('a method Node does not know: 404 on an unknown path, the envelope under /boards', async () => {
    const unknown = parseResponse((await rawRequest(server.port, 'FOO /nope HTTP/1.1\r\nHost: localhost\r\n\r\n')).text);
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.body)).toMatchObject({ status: 404, instance: '/nope' });
    const board = parseResponse((await rawRequest(server.port, 'FOO /boards/1 HTTP/1.1\r\nHost: localhost\r\n\r\n')).text);
    expect(board.status).toBe(405);
    expect(board.headers.allow).toBe('DELETE, GET, HEAD, PUT');
    expect(JSON.parse(board.body)).toMatchObject({ code: '405', data: null });
  });
});
