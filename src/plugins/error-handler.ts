import { STATUS_CODES } from 'node:http';
import fp from 'fastify-plugin';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, type FieldError } from '../shared/errors.js';
import { PATTERN_MESSAGES } from '../shared/schemas.js';
import { allowOrigin } from './security.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** 405 with Allow when another method would be accepted on this path, else 404, in the usual error shape. */
    refuseRequest(request: FastifyRequest, reply: FastifyReply): FastifyReply;
    /** The methods that some route takes on this path (empty for a path no route matches). */
    allowedMethods(path: string): Set<string>;
  }
}

interface AjvError {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message?: string;
}

/** The board interface answers in its envelope; everything else in RFC 9457 problem details. */
export const isBoardRequest = (url: string) => url === '/boards' || url.startsWith('/boards/') || url.startsWith('/boards?');

/** Turns one Ajv error into a field name and a message a client can act on. */
function fieldError(error: AjvError, part: string | undefined): FieldError {
  const path = error.instancePath.split('/').filter(Boolean).join('.');
  const join = (name: unknown) => (path ? `${path}.${String(name)}` : String(name));
  switch (error.keyword) {
    case 'required':
      return { field: join(error.params.missingProperty), message: 'is required' };
    case 'additionalProperties':
      return { field: join(error.params.additionalProperty), message: 'is not an allowed field' };
    case 'type':
      if (!path && part === 'body') return { field: 'body', message: 'must be a JSON object' };
      return { field: path || part || 'request', message: `must be ${String(error.params.type)}` };
    case 'minLength':
      return { field: path, message: `must be at least ${String(error.params.limit)} characters` };
    case 'maxLength':
      return { field: path, message: `must be at most ${String(error.params.limit)} characters` };
    case 'pattern':
      return { field: path, message: PATTERN_MESSAGES[String(error.params.pattern)] ?? 'has an invalid format' };
    case 'format':
      return {
        field: path,
        message: error.params.format === 'int64' ? PATTERN_MESSAGES['^(0|[1-9][0-9]{0,18})$']! : `must be a valid ${String(error.params.format)}`,
      };
    case 'enum':
      return { field: path, message: `must be one of: ${(error.params.allowedValues as unknown[]).join(', ')}` };
    default:
      return { field: path || part || 'request', message: error.message ?? 'is invalid' };
  }
}

function dedupe(errors: FieldError[]): FieldError[] {
  const seen = new Set<string>();
  return errors.filter((e) => {
    const key = `${e.field}\u0001${e.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

interface Normalized {
  status: number;
  detail: string;
  errors?: FieldError[];
  headers?: Record<string, string>;
}

/** Maps any error (ours, Fastify's, a plugin's, or an unexpected one) to a status, message and field list. */
function normalize(error: FastifyError | AppError | Error): Normalized {
  if (error instanceof AppError) {
    return { status: error.statusCode, detail: error.message, errors: error.errors, headers: error.headers };
  }
  const fe = error as FastifyError & { validation?: AjvError[]; validationContext?: string };
  if (fe.validation) {
    // A 404-worthy id never reaches here: a malformed id is a malformed request (400), as the seed says.
    const errors = dedupe(fe.validation.map((e) => fieldError(e, fe.validationContext)));
    const detail = errors.map((e) => `${e.field} ${e.message}`).join('; ');
    return { status: 400, detail, errors };
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { status: 415, detail: 'Request bodies must be JSON, sent with Content-Type: application/json' };
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, detail: 'The request body is larger than the service accepts' };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { status: 400, detail: 'The request body is empty', errors: [{ field: 'body', message: 'is required' }] };
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return { status: 400, detail: 'The request body is not valid JSON', errors: [{ field: 'body', message: 'is not valid JSON' }] };
  }
  const status = fe.statusCode ?? 500;
  if (status === 400 && error instanceof SyntaxError) {
    return { status, detail: 'The request body is not valid JSON', errors: [{ field: 'body', message: 'is not valid JSON' }] };
  }
  if (status >= 400 && status < 500) return { status, detail: fe.message };
  return { status: status >= 500 && status < 600 ? status : 500, detail: 'An unexpected error occurred' };
}

export function sendError(request: FastifyRequest, reply: FastifyReply, n: Normalized) {
  if (n.headers) reply.headers(n.headers);
  const requestId = n.status >= 500 ? request.id : undefined;
  reply.code(n.status);
  if (isBoardRequest(request.url)) {
    return reply.type('application/json; charset=utf-8').send({
      code: String(n.status),
      message: n.detail,
      data: null,
      ...(n.errors ? { errors: n.errors } : {}),
      ...(requestId ? { requestId } : {}),
    });
  }
  return reply.type('application/problem+json; charset=utf-8').send({
    type: 'about:blank',
    title: STATUS_CODES[n.status] ?? 'Error',
    status: n.status,
    detail: n.detail,
    instance: request.url.split('?')[0] ?? request.url,
    ...(n.errors ? { errors: n.errors } : {}),
    ...(requestId ? { requestId } : {}),
  });
}

/**
 * Fastify's `frameworkErrors`: what its router rejects before any route or hook runs, a path whose percent-encoding
 * is not valid UTF-8 (`/users/%zz`) or a path segment longer than `maxParamLength`. Without this Fastify answers
 * in a shape of its own, without a request id; here they get the service's error shapes and headers. On a path
 * and method that a route takes, the request is malformed (400: no segment that long is an id, which is at most
 * 19 digits); on any other path it is answered as every unknown path or method is (404, or 405 with Allow).
 * Fastify gives these requests no logger of the service's, so the line goes to the app's.
 */
export function frameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id).header('vary', 'Origin');
  allowOrigin(request, reply);
  const path = request.url.split('?')[0] ?? '/';
  if (!request.server.allowedMethods(path).has(request.method)) {
    request.server.refuseRequest(request, reply);
    return;
  }
  const detail =
    error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? 'A path segment is longer than any identifier can be'
      : error.code === 'FST_ERR_BAD_URL'
        ? 'The path is not valid percent-encoded UTF-8'
        : 'The request path is malformed';
  request.server.log.info({ reqId: request.id, status: 400, code: error.code, detail }, 'request rejected');
  void sendError(request, reply, { status: 400, detail, errors: [{ field: 'path', message: 'is malformed' }] });
}

/**
 * Fastify's `clientErrorHandler`, for Node's `clientError`: a request whose HTTP framing is broken (a malformed
 * request line or header, headers over the size limit, a request that took too long to arrive) never becomes a
 * request of Fastify's, so no hook or error handler sees it. Fastify's default answers in a JSON shape of its own
 * without a request id; here the answer is problem details with one, written to the socket, which is then closed
 * (the stream cannot be trusted past the fault). The target is taken from the request line when it can be read.
 */
export function clientError(nextRequestId: () => string) {
  // `rawPacket` is the bytes read so far, when Node has them (Fastify's types describe it as a JSON-serialized Buffer).
  return function (this: FastifyInstance, error: Error & { code?: string; rawPacket?: unknown }, socket: Duplex): void {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const status = error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : error.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
    const detail =
      status === 408 ? 'The request did not arrive in time' : status === 431 ? 'The request headers are too large' : 'The request is not well-formed HTTP';
    const requestId = nextRequestId();
    const raw = Buffer.isBuffer(error.rawPacket) ? error.rawPacket.toString('latin1', 0, 2048) : '';
    const target = /^[A-Z]+ (\/[\x21-\x7e]*) HTTP\/1\.[01]\r?\n/.exec(raw)?.[1];
    const instance = target?.split('?')[0] ?? '/';
    const body = JSON.stringify({ type: 'about:blank', title: STATUS_CODES[status], status, detail, instance });
    this.log.info({ reqId: requestId, status, code: error.code, detail }, 'request rejected');
    if (socket.writable) {
      socket.end(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/problem+json; charset=utf-8\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
      );
    } else {
      socket.destroy(error);
    }
  };
}

/** Known route patterns and their methods, to tell 405 (known path, other method) from 404 (unknown path). */
interface RoutePattern {
  regex: RegExp;
  methods: Set<string>;
}

export default fp(
  async (app) => {
    const patterns = new Map<string, RoutePattern>();
    app.addHook('onRoute', (route) => {
      const source = route.url
        .split('/')
        .map((seg) => (seg.startsWith(':') ? '[^/]+' : seg === '*' ? '.*' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('/');
      const entry = patterns.get(route.url) ?? { regex: new RegExp(`^${source}$`), methods: new Set<string>() };
      for (const m of [route.method].flat()) entry.methods.add(m);
      patterns.set(route.url, entry);
    });

    app.setErrorHandler((error, request, reply) => {
      const n = normalize(error instanceof Error ? error : new Error(String(error)));
      if (n.status >= 500) request.log.error({ err: error }, 'request failed');
      else request.log.info({ status: n.status, detail: n.detail }, 'request rejected');
      return sendError(request, reply, n);
    });

    const allowedMethods = (path: string) => {
      const allowed = new Set<string>();
      for (const { regex, methods } of patterns.values()) {
        if (regex.test(path)) for (const m of methods) allowed.add(m);
      }
      return allowed;
    };
    app.decorate('allowedMethods', allowedMethods);

    /** Answers a request no route takes: 405 with Allow on a known path, else 404. */
    const refuse = (request: FastifyRequest, reply: FastifyReply) => {
      const path = request.url.split('?')[0] ?? '/';
      const allowed = allowedMethods(path);
      if (allowed.size > 0) {
        // The seed's interface uses only GET, POST, PUT and DELETE; anything else on a known path is 405.
        reply.header('allow', [...allowed].sort().join(', '));
        return sendError(request, reply, { status: 405, detail: `${request.method} is not allowed on ${path}` });
      }
      return sendError(request, reply, { status: 404, detail: `No resource at ${path}` });
    };
    app.decorate('refuseRequest', refuse);
    app.setNotFoundHandler(refuse);
  },
  { name: 'error-handler' },
);
