import { Writable } from 'node:stream';
import net, { type AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config.js';
import { describe, expect, it, onTestFinished } from 'vitest';
import { buildApp } from '../app.js';
import { testConfig } from '../../test/helpers/build-test-app.js';
import { freshDatabase } from '../../test/helpers/database.js';
import { DatabaseUnavailableError } from '../db/errors.js';
import { AppError } from '../shared/errors.js';
import { signUp } from '../../test/helpers/factories.js';
import { createLogger, loggerOptions } from './logging.js';

type Line = Record<string, unknown>;

/** The production app logging at `level` into an array, with two extra routes that misbehave on purpose. */
async function appLoggingAt(level: string, overrides: Partial<Config> = {}): Promise<{ app: FastifyInstance; lines: Line[] }> {
  const lines: Line[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Line);
      done();
    },
  });
  const { store, drop } = await freshDatabase();
  const app = await buildApp(testConfig(overrides), { store, logger: createLogger(loggerOptions({ logLevel: level }), stream) });
  // Test-only routes, outside the document (route-docs requires responses() of every documented route).
  const hidden = { schema: { hide: true } };
  app.get('/test/boom', hidden, () => {
    throw new Error('boom');
  });
  app.get('/test/twice', hidden, (_request, reply) => {
    void reply.send({ first: true });
    void reply.send({ second: true });
    return reply;
  });
  app.get('/test/refuse', hidden, () => {
    throw new AppError(503, 'Too many open event streams on this server; retry later', undefined, { 'retry-after': '5' });
  });
  app.get('/test/unavailable', hidden, () => {
    throw new DatabaseUnavailableError('could not connect to PostgreSQL', { cause: new Error('connect ECONNREFUSED 127.0.0.1:5432') });
  });
  app.get('/test/child', hidden, (request) => {
    request.log.child({ step: 'lookup' }).warn('slow step');
    return { ok: true };
  });
  await app.ready();
  onTestFinished(async () => {
    await app.close();
    await drop();
  });
  return { app, lines };
}

const withMsg = (lines: Line[], msg: string) => lines.filter((line) => line.msg === msg);

describe('request logging', () => {
  it('at info: one access line per request, when it completes, with the request id, the request and the status', async () => {
    const { app, lines } = await appLoggingAt('info');
    const response = await app.inject({ method: 'GET', url: '/posts/999', headers: { 'x-request-id': 'log-test-1' } });
    expect(response.statusCode).toBe(404);

    expect(withMsg(lines, 'incoming request')).toEqual([]);
    const rejected = withMsg(lines, 'request rejected');
    expect(rejected).toEqual([expect.objectContaining({ reqId: 'log-test-1', status: 404 })]);
    const completed = withMsg(lines, 'request completed');
    expect(completed).toEqual([
      expect.objectContaining({ level: 30, reqId: 'log-test-1', req: expect.objectContaining({ method: 'GET', url: '/posts/999' }), res: { statusCode: 404 } }),
    ]);
    expect(completed[0]?.responseTime).toEqual(expect.any(Number));
    expect(completed[0]?.responseTime as number).toBeGreaterThanOrEqual(0);
    expect(lines.map((line) => line.msg).filter((msg) => msg !== 'admin bootstrap')).toEqual(['request rejected', 'request completed']);
  });

  it('at debug: also a line when the request arrives, before anything else it logs', async () => {
    const { app, lines } = await appLoggingAt('debug');
    expect((await app.inject({ method: 'GET', url: '/posts/999', headers: { 'x-request-id': 'log-test-5' } })).statusCode).toBe(404);
    const ours = lines.filter((line) => line.reqId === 'log-test-5');
    expect(ours.map((line) => line.msg)).toEqual(['incoming request', 'request rejected', 'request completed']);
    expect(ours[0]).toMatchObject({ level: 20, req: { method: 'GET', url: '/posts/999' } });
  });

  it('at warn: no request lines, but a failure is still logged at error with its request id and the error', async () => {
    const { app, lines } = await appLoggingAt('warn');
    expect((await app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200);
    expect(lines).toEqual([]);

    const failed = await app.inject({ method: 'GET', url: '/test/boom', headers: { 'x-request-id': 'log-test-2' } });
    expect(failed.statusCode).toBe(500);
    expect(lines).toEqual([expect.objectContaining({ level: 50, reqId: 'log-test-2', msg: 'request failed', err: expect.objectContaining({ message: 'boom' }) })]);
  });

  it('a 503 the service chooses (STREAM_MAX reached) is one warning without a stack; the database unavailable stays an error with its cause', async () => {
    const { app, lines } = await appLoggingAt('warn');
    const refused = await app.inject({ method: 'GET', url: '/test/refuse', headers: { 'x-request-id': 'log-test-6' } });
    expect(refused.statusCode).toBe(503);
    expect(refused.headers['retry-after']).toBe('5');
    expect(lines).toEqual([
      { level: 40, time: expect.any(Number), pid: expect.any(Number), hostname: expect.any(String), reqId: 'log-test-6', status: 503, detail: 'Too many open event streams on this server; retry later', msg: 'request refused' },
    ]);
    lines.length = 0;

    const failed = await app.inject({ method: 'GET', url: '/test/unavailable', headers: { 'x-request-id': 'log-test-7' } });
    expect(failed.statusCode).toBe(503);
    expect(lines).toEqual([expect.objectContaining({ level: 50, reqId: 'log-test-7', msg: 'request failed' })]);
    // pino's serializer folds the cause into the message and the stack.
    const err = lines[0]?.err as { message?: string; stack?: string };
    expect(err.message).toBe('could not connect to PostgreSQL: connect ECONNREFUSED 127.0.0.1:5432');
    expect(err.stack).toMatch(/^DatabaseUnavailableError: could not connect to PostgreSQL\n\s+at [^]*caused by: Error: connect ECONNREFUSED/);
  });

  it('a stream refused at STREAM_MAX: 503 with Retry-After, logged as one warning without a stack', async () => {
    const { app, lines } = await appLoggingAt('warn', { streamMax: 1 });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    // One stream open (a signed-in one: anonymous streams may not take the whole of STREAM_MAX) holds the only place.
    const user = await signUp(app);
    const socket = net.connect(port, '127.0.0.1');
    onTestFinished(() => void socket.destroy());
    await new Promise<void>((resolve) => {
      socket.on('data', (chunk: Buffer) => {
        if (chunk.toString('latin1').startsWith('HTTP/1.1 200')) resolve();
      });
      socket.write(`GET /users/${user.id}/feed HTTP/1.1\r\nHost: a\r\nAccept: text/event-stream\r\nAuthorization: Bearer ${user.token}\r\n\r\n`);
    });
    lines.length = 0;
    const refused = await fetch(`http://127.0.0.1:${port}/users/${user.id}/feed`, {
      headers: { accept: 'text/event-stream', authorization: `Bearer ${user.token}`, 'x-request-id': 'log-test-8' },
    });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    await refused.body?.cancel();
    expect(lines).toEqual([expect.objectContaining({ level: 40, reqId: 'log-test-8', status: 503, msg: 'request refused' })]);
    expect(lines[0]).not.toHaveProperty('err');
  });

  it("Fastify's own warnings about a request go through its logger, with the request id", async () => {
    const { app, lines } = await appLoggingAt('warn');
    const response = await app.inject({ method: 'GET', url: '/test/twice', headers: { 'x-request-id': 'log-test-3' } });
    expect(response.json()).toEqual({ first: true });
    expect(lines).toEqual([expect.objectContaining({ level: 40, reqId: 'log-test-3', err: expect.objectContaining({ code: 'FST_ERR_REP_ALREADY_SENT' }) })]);
  });

  it("a request logger's child keeps the request id and adds its own bindings", async () => {
    const { app, lines } = await appLoggingAt('warn');
    expect((await app.inject({ method: 'GET', url: '/test/child', headers: { 'x-request-id': 'log-test-4' } })).statusCode).toBe(200);
    expect(lines).toEqual([expect.objectContaining({ level: 40, reqId: 'log-test-4', step: 'lookup', msg: 'slow step' })]);
  });

  it('app.log is the same logger, without a request id', async () => {
    const { app, lines } = await appLoggingAt('info');
    app.log.info({ probe: 1 }, 'from the app');
    expect(lines).toEqual([expect.objectContaining({ level: 30, probe: 1, msg: 'from the app' })]);
    expect(lines[0]).not.toHaveProperty('reqId');
  });
});
