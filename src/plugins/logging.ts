import { performance } from 'node:perf_hooks';
import type { DestinationStream } from 'pino';
import { pino, stdSerializers, type Bindings, type ChildLoggerOptions, type Logger, type LoggerOptions } from 'pino';
import fp from 'fastify-plugin';
import type { FastifyBaseLogger, FastifyReply } from 'fastify';

declare module 'fastify' {
  interface FastifyRequest {
    /** `performance.now()` when the request arrived: response times and the duration metric count from it. */
    startedAt: number;
  }
}

/**
 * Never log credentials: the Authorization and Cookie headers, and password or token fields of a request body or
 * of what a handler logs. The paths are spelled out rather than `*.password`: a top-level wildcard makes pino run
 * the redactor over every binding of every request's logger (measured ~0.9 µs a request), whereas these only
 * touch log lines that carry such objects.
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

/** Milliseconds since the request arrived (see `startedAt`): the logged response time and the duration metric. */
export const elapsedMs = (request: { startedAt: number }): number => performance.now() - request.startedAt;

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/**
 * A request's logger: every line carries the request id (`reqId`), as with Fastify's own request loggers, but the
 * pino child that adds it is made when the first line is written, and a method below the level returns at once.
 */
class RequestLogger implements FastifyBaseLogger {
  private bound: Logger | undefined;

  constructor(
    private readonly parent: Logger,
    private readonly reqId: string,
  ) {}

  /** The pino child that carries the request id, made on first use. */
  private bind(): Logger {
    return (this.bound ??= this.parent.child({ reqId: this.reqId }));
  }

  private write(level: Level, obj: unknown, msg: string | undefined, args: unknown[]): void {
    if ((this.bound ?? this.parent).isLevelEnabled(level)) this.bind()[level](obj, msg, ...args);
  }

  get level(): string {
    return (this.bound ?? this.parent).level;
  }
  set level(level: string) {
    this.bind().level = level;
  }

  fatal(obj: unknown, msg?: string, ...args: unknown[]) {
    this.write('fatal', obj, msg, args);
  }
  error(obj: unknown, msg?: string, ...args: unknown[]) {
    this.write('error', obj, msg, args);
  }
  warn(obj: unknown, msg?: string, ...args: unknown[]) {
    this.write('warn', obj, msg, args);
  }
  info(obj: unknown, msg?: string, ...args: unknown[]) {
    this.write('info', obj, msg, args);
  }
  debug(obj: unknown, msg?: string, ...args: unknown[]) {
    this.write('debug', obj, msg, args);
  }
  trace(obj: unknown, msg?: string, ...args: unknown[]) {
    this.write('trace', obj, msg, args);
  }
  silent() {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.bind().child(bindings, options);
  }
}

/**
 * Request logging: "incoming request" and "request completed" lines at info, and a logger on every request and
 * reply (`request.log`) that stamps its lines with the request id.
 *
 * Fastify can do all this itself when it is given the logger, but then it makes a pino child logger for every
 * request, and registers two listeners on every response to log its completion, whatever the level: counted with
 * callgrind on GET /posts/{id}, with the duration metric moved along to the same point, ~7,000 instructions a
 * request (5%), at level warn where no request line is written. So buildApp gives Fastify no logger and sets
 * `app.log` itself, and this plugin puts a `RequestLogger` on each request and reply, which makes the child only
 * when something is logged. Fastify's own messages about a request (a reply sent twice, say) go through
 * `reply.log`, so they keep the request id; a request that fails before routing (a malformed URL) is answered
 * without a log line, as Fastify would at any level above debug.
 */
export default fp(
  async (app) => {
    app.decorateRequest('startedAt', 0);
    const root = app.log as Logger;

    app.addHook('onRequest', (request, reply, done) => {
      request.startedAt = performance.now();
      request.log = reply.log = new RequestLogger(root, request.id);
      request.log.info({ req: request }, 'incoming request');
      done();
    });

    // onSend rather than onResponse: any onResponse hook makes Fastify listen on every response (see above). The
    // line is written when the response is handed to the socket, which for these small bodies is when it is sent.
    app.addHook('onSend', (request, reply, payload, done) => {
      if (root.isLevelEnabled('info')) {
        request.log.info({ res: reply, responseTime: elapsedMs(request) }, 'request completed');
      }
      done(null, payload);
    });
  },
  { name: 'logging' },
);
