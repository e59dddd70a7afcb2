import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { readCaching } from '../../shared/conditional.js';
import { allowOrigin } from '../security.js';
import { sendError, writeRawError } from './reply.js';

/**
 * Fastify's `frameworkErrors`: what its router rejects before any route or hook runs, a path whose percent-encoding
 * is not valid UTF-8 (`/users/%zz`) or a path segment longer than `maxParamLength`. Without this Fastify answers
 * in a shape of its own, without a request id; here they get the service's error shapes and headers. On a path
 * and method that a route takes, the request is malformed (400: no segment that long is an id, which is at most
 * 19 digits); on any other path it is answered as every unknown path or method is (404, or 405 with Allow).
 * Fastify gives these requests no logger of the service's, so the line goes to the app's.
 */
export function frameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  earlyAnswerHeaders(request, reply);
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

/** `X-Content-Type-Options` of every answer (CONTRACT §5; http-hygiene.ts sets it first thing on each request). */
export const NOSNIFF = 'nosniff';

/**
 * For an answer given before the request's hooks run (or instead of them): what those hooks would have set that
 * every answer carries. The request id, `nosniff`, CORS, and for a GET or HEAD the caching headers (CONTRACT §6.1).
 */
export function earlyAnswerHeaders(request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id).header('x-content-type-options', NOSNIFF).header('vary', 'Origin');
  allowOrigin(request, reply);
  if (request.method === 'GET' || request.method === 'HEAD') readCaching(request, reply);
}

/** The methods of the routes that may be sent a body: what a slow one gets (a 408) is theirs to document. */
export const BODY_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'DELETE']);

/** Whether a request announces a body (RFC 9112 §6.3: a Transfer-Encoding, or a Content-Length above 0). */
export function hasBody(request: FastifyRequest): boolean {
  const { headers } = request;
  return headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0');
}

/**
 * The request whose body is still arriving on a connection, for the 408 that cuts it off: Node reports that timeout
 * with the socket only, and the bytes it read then are the body's, not the request line. Requests that carry a body
 * (to a POST, PUT or DELETE route) are recorded as their headers complete; the 408 then carries that request's id,
 * names the right `instance` and takes the envelope under /boards, and the request's own end is logged as a 408.
 */
export class ArrivingBodies {
  private readonly requests = new WeakMap<object, { id: string; path: string; timedOut: boolean }>();
  remember(request: FastifyRequest): void {
    this.requests.set(request.raw.socket, { id: request.id, path: request.url.split('?')[0] ?? '/', timedOut: false });
  }
  /** The request whose body was arriving on `socket`, now answered 408. */
  timeOut(socket: Duplex): { id: string; path: string } | undefined {
    const arriving = this.requests.get(socket);
    if (arriving) arriving.timedOut = true;
    return arriving;
  }
  /** Whether `request` was cut off by a 408 while its body arrived. */
  timedOut(request: FastifyRequest): boolean {
    const arriving = this.requests.get(request.raw.socket);
    return arriving !== undefined && arriving.id === request.id && arriving.timedOut;
  }
}

/**
 * Fastify's `clientErrorHandler`, for Node's `clientError`: a request whose HTTP framing is broken (a malformed
 * request line or header, headers over the size limit) or that did not fully arrive within REQUEST_TIMEOUT_MS
 * (Node's `requestTimeout`, which counts headers and body alike). No hook or error handler sees these. Fastify's
 * default answers in a JSON shape of its own without a request id; here the answer is problem details with one,
 * and the connection is closed (the stream cannot be trusted past the fault, and a slow sender must not keep its
 * socket). The target is taken from the request line when it can be read.
 */
export function clientError(nextRequestId: () => string, bodies: ArrivingBodies) {
  // `rawPacket` is the bytes read so far, when Node has them (Fastify's types describe it as a JSON-serialized Buffer).
  return function (this: FastifyInstance, error: Error & { code?: string; rawPacket?: unknown }, socket: Duplex): void {
    // Not writable: this connection was answered already (the 408 below ends it, and Node then reports the
    // unfinished body as a parse error of a request the client never sent).
    if (error.code === 'ECONNRESET' || socket.destroyed || !socket.writable) return;
    // The client closed its side in the middle of a request: nobody waits for an answer. A request whose body was
    // arriving logs its own end (error-handler.ts).
    if (error.code === 'HPE_INVALID_EOF_STATE') {
      socket.destroy();
      return;
    }
    const status = error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : error.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
    // A request whose body was arriving is a request of Fastify's already: its 408 carries that request's id.
    const arriving = status === 408 ? bodies.timeOut(socket) : undefined;
    const requestId = arriving?.id ?? nextRequestId();
    const raw = Buffer.isBuffer(error.rawPacket) ? error.rawPacket.toString('latin1', 0, 2048) : '';
    const line = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\/[\x21-\x7e]*) HTTP\/1\.[01]\r?\n/.exec(raw);
    const target = line?.[2]?.split('?')[0];
    // Node's parser knows a fixed list of methods and refuses any other token (`FOO /users`) before Fastify sees
    // the request. Such a request is well-formed HTTP: it is answered as every method no route takes (CONTRACT §1).
    if (error.code === 'HPE_INVALID_METHOD' && line?.[1] !== undefined && target !== undefined) {
      refuseMethod(this, socket, line[1], target, requestId);
      return;
    }
    const detail =
      status === 408 ? 'The request did not arrive in time' : status === 431 ? 'The request headers are too large' : 'The request is not well-formed HTTP';
    // No request line in what was read: the headers had arrived and the body had not.
    const path = target ?? arriving?.path ?? '/';
    this.log.info({ reqId: requestId, status, code: error.code, detail }, 'request rejected');
    // A request that timed out while its body was arriving is already a request of Fastify's: its answer has not
    // begun, so the raw answer is the only one the client gets.
    writeRawError(socket, status, detail, requestId, path);
  };
}

/**
 * Node's `connect` event: with no listener, a CONNECT request (`CONNECT host:443 HTTP/1.1`) is dropped without an
 * answer. The service is no proxy: a CONNECT to a path a route takes is 405 with Allow, any other target 400 (an
 * authority such as `host:443` names no resource here), and to a path no route takes 404. Then the connection is
 * closed.
 */
export function connectRequest(app: FastifyInstance, nextRequestId: () => string) {
  return (request: IncomingMessage, socket: Duplex): void => {
    const requestId = nextRequestId();
    const target = request.url ?? '';
    const path = target.startsWith('/') ? (target.split('?')[0] ?? '/') : undefined;
    if (path !== undefined) {
      refuseMethod(app, socket, 'CONNECT', path, requestId);
      return;
    }
    app.log.info({ reqId: requestId, method: 'CONNECT', status: 400 }, 'request rejected');
    writeRawError(socket, 400, 'The service is not a proxy: CONNECT is not supported', requestId, '/');
  };
}

/** A method no route takes, answered on the raw socket and closed: 405 with Allow on a path a route takes, else 404. */
function refuseMethod(app: FastifyInstance, socket: Duplex, method: string, path: string, requestId: string): void {
  const allowed = app.allowedMethods(path);
  app.log.info({ reqId: requestId, method, status: allowed.size > 0 ? 405 : 404 }, 'request rejected');
  if (allowed.size > 0) {
    writeRawError(socket, 405, `${method} is not allowed on ${path}`, requestId, path, { Allow: [...allowed].sort().join(', ') });
  } else {
    writeRawError(socket, 404, `No resource at ${path}`, requestId, path);
  }
}
