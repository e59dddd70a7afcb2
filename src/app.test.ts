import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, loggerOptions } from './plugins/logging.js';

/** The service's own logger, writing JSON lines into an array. */
function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { log: createLogger(loggerOptions({ logLevel: 'info' }), stream), lines };
}

describe('logger', () => {
  it('never writes credentials: auth headers, and password or token fields of bodies and logged objects', () => {
    const { log, lines } = capture();
    const child = log.child({ reqId: 'r1' });
    child.info({ req: { method: 'POST', headers: { authorization: 'Bearer secret-token', cookie: 'sid=1', host: 'h' } } }, 'incoming');
    child.info({ body: { username: 'alice', password: 'hunter2 hunter2', newPassword: 'n', currentPassword: 'c', token: 't' } }, 'body');
    child.info({ user: { id: 1, password: 'p' }, input: { token: 'x' }, req: { body: { password: 'q' } } }, 'objects');

    const text = JSON.stringify(lines);
    for (const secret of ['secret-token', 'sid=1', 'hunter2', '"n"', '"c"', '"t"', '"p"', '"x"', '"q"']) expect(text).not.toContain(secret);
    // The request serializer keeps no headers at all; the header paths guard code that logs them raw.
    expect(lines[0]).toMatchObject({ reqId: 'r1', req: { method: 'POST' } });
    child.info({ headers: { authorization: 'Bearer raw' } }, 'raw');
    expect(JSON.stringify(lines[3])).not.toContain('Bearer raw');
    expect(lines[1]).toMatchObject({ body: { username: 'alice', password: '[redacted]', newPassword: '[redacted]', token: '[redacted]' } });
    expect(lines[2]).toMatchObject({ user: { id: 1, password: '[redacted]' }, input: { token: '[redacted]' } });
  });
});
