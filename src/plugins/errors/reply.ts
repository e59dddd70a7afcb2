import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Normalized } from './normalize.js';

/** The board interface answers in its envelope; everything else in RFC 9457 problem details. */
export const isBoardRequest = (url: string) => url === '/boards' || url.startsWith('/boards/') || url.startsWith('/boards?');

/** Writes an error in its wire shape: the /boards envelope, or problem+json everywhere else. */
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
    type: n.type ?? 'about:blank',
    title: STATUS_CODES[n.status] ?? 'Error',
    status: n.status,
    detail: n.detail,
    instance: request.url.split('?')[0] ?? request.url,
    ...(n.errors ? { errors: n.errors } : {}),
    ...(requestId ? { requestId } : {}),
  });
}

/**
 * An error answer written straight to a socket, for what never becomes a Fastify request (broken framing, a
 * timed-out request, CONNECT): problem+json (the envelope under /boards) with a request id, then the connection is
 * closed. The socket is half-closed first and destroyed a moment later, so the client reads the answer before the
 * connection goes (destroying it at once with unread input would reset it, and the client might lose the answer).
 */
export function writeRawError(
  socket: Duplex,
  status: number,
  detail: string,
  requestId: string,
  instance: string,
  headers: Record<string, string> = {},
): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const board = isBoardRequest(instance);
  const body = JSON.stringify(
    board ? { code: String(status), message: detail, data: null } : { type: 'about:blank', title: STATUS_CODES[status], status, detail, instance },
  );
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: ${board ? 'application/json' : 'application/problem+json'}; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nX-Content-Type-Options: nosniff\r\n${extra}Connection: close\r\n\r\n${body}`,
  );
  const linger = setTimeout(() => socket.destroy(), LINGER_MS);
  linger.unref();
  socket.once('close', () => clearTimeout(linger));
}

/** How long a connection answered with an error may still deliver input before it is destroyed. */
const LINGER_MS = 1000;
