import type { DestinationStream } from 'pino';
import { pino, stdSerializers, type Logger, type LoggerOptions } from 'pino';
import type { FastifyReply } from 'fastify';

// The process's pino logger, given to Fastify (`loggerInstance`), which logs every request ("incoming request",
// "request completed") and gives each request a child logger carrying its id (`reqId`).

/**
 * Never log credentials: the Authorization and Cookie headers, and password or token fields of a request body or
 * of what a handler logs. The paths are spelled out rather than `*.password`, so the redactor runs only on log
 * lines that carry such objects.
 */
const CREDENTIAL_FIELDS = ['password', 'currentPassword', 'newPassword', 'token'];
const REDACT_PATHS = [
  ...['req.headers', 'headers'].flatMap((parent) => [`${parent}.authorization`, `${parent}.cookie`]),
  ...['body', 'req.body', 'user', 'input'].flatMap((parent) => CREDENTIAL_FIELDS.map((field) => `${parent}.${field}`)),
];

/**
 * A URL as logged: the path, and `?[redacted]` for a query string. The query is the client's text and is logged
 * before validation has refused what it should not carry (a password pasted into a URL, CONTRACT §1).
 */
function loggedUrl(url: string | undefined): string | undefined {
  const query = url?.indexOf('?') ?? -1;
  return query === -1 ? url : `${url!.slice(0, query)}?[redacted]`;
}

/** What a request and a response look like in a log line: the fields Fastify's own logger writes. */
const serializers = {
  // Typed by what it reads: handlers may log a plain object as `req` too.
  req: (request: { method: string; url?: string; host?: string; ip?: string; socket?: { remotePort?: number } }) => ({
    method: request.method,
    url: loggedUrl(request.url),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  }),
  res: (reply: FastifyReply) => ({ statusCode: reply.statusCode }),
  err: stdSerializers.err,
};

export function loggerOptions(config: { logLevel: string }): LoggerOptions {
  return { level: config.logLevel, redact: { paths: REDACT_PATHS, censor: '[redacted]' } };
}

/** The process's logger: JSON lines on stdout (or `destination`); `false` logs nothing. */
export function createLogger(options: LoggerOptions | false, destination?: DestinationStream): Logger {
  if (options === false) return pino({ enabled: false });
  const withSerializers = { ...options, serializers: { ...serializers, ...options.serializers } };
  return destination ? pino(withSerializers, destination) : pino(withSerializers);
}
