import type { DestinationStream } from 'pino';
import { pino, stdSerializers, type Logger, type LoggerOptions } from 'pino';
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';

// The process's pino logger, given to Fastify (`loggerInstance`), which gives each request a child logger carrying
// its id (`reqId`) and writes the access log through `AccessLog` below.

/**
 * Never log credentials: the Authorization and Cookie headers, and password or token fields of a request body or
 * of what a handler logs. The paths are spelled out rather than `*.password`, so the redactor runs only on log
 * lines that carry such objects. None starts with `req.`: the `req` serializer below keeps neither headers nor a
 * body, whatever object is logged under that key, and a path there would make every access line pay the redactor.
 */
const CREDENTIAL_FIELDS = ['password', 'currentPassword', 'newPassword', 'token'];
const REDACT_PATHS = [
  ...['authorization', 'cookie'].map((header) => `headers.${header}`),
  ...['body', 'user', 'input'].flatMap((parent) => CREDENTIAL_FIELDS.map((field) => `${parent}.${field}`)),
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
  req: (request: {
    method: string;
    url?: string;
    host?: string;
    ip?: string;
    socket?: { remotePort?: number };
    trace?: { span: { spanContext(): { traceId: string } } };
  }) => ({
    method: request.method,
    url: loggedUrl(request.url),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
    // With tracing on (src/tracing.ts): the request's trace, to find its spans from its log line.
    traceId: request.trace?.span.spanContext().traceId,
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

/** Something told of every request as it completes, after the access log's line (metrics.ts counts them). */
export type CompletionObserver = (request: FastifyRequest, reply: FastifyReply) => void;

/**
 * The access log: one line per request, when it completes ("request completed", or "request errored" at error),
 * with the request (method, path, host, client address), the status and the response time. Fastify's default also
 * writes a line when a request arrives; that line is at debug here, where it shows requests that never complete.
 * At info it was a second serialisation and write per request: measured with the benchmark at LOG_LEVEL=info,
 * logging was the largest cost of a small GET after the socket and the database (bench/README.md).
 *
 * It is also where other observers of completed requests hear of them (`observe`): Fastify tracks every response's
 * completion for its logger anyway, and an `onResponse` hook would add a second pass of hook dispatch per request.
 */
export class AccessLog extends LogController {
  private readonly observers: CompletionObserver[] = [];

  observe(observer: CompletionObserver): void {
    this.observers.push(observer);
  }

  override incomingRequest(request: FastifyRequest): void {
    if (!this.isLogDisabled(request)) request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    for (const observer of this.observers) observer(request, reply);
    if (this.isLogDisabled(request)) return;
    if (error) reply.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored');
    else reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }

  /**
   * A streamed answer (an event stream) that the client closed before it ended never completes, so Fastify reports
   * it here alone: it gets its access line and its observation too, marked as closed by the client.
   */
  override streamError(error: Error & { code?: string }, request: FastifyRequest, reply: FastifyReply): void {
    if (error.code !== 'ERR_STREAM_PREMATURE_CLOSE') {
      super.streamError(error, request, reply);
      return;
    }
    for (const observer of this.observers) observer(request, reply);
    if (this.isLogDisabled(request)) return;
    reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime, closedByClient: true }, 'request completed');
  }
}
