import fp from 'fastify-plugin';
import type { FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { EnvelopeErrorSchema, ProblemSchema } from '../shared/schemas.js';
import { normalize } from './errors/normalize.js';
import { isBoardRequest, sendError } from './errors/reply.js';
import { routeRefusal } from './errors/routing.js';

export { isBoardRequest, sendError } from './errors/reply.js';
export { clientError, connectRequest, frameworkError } from './errors/framework.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** 405 with Allow when another method would be accepted on this path, else 404, in the usual error shape. */
    refuseRequest(request: FastifyRequest, reply: FastifyReply): FastifyReply;
    /** The methods that some route takes on this path (empty for a path no route matches). */
    allowedMethods(path: string): Set<string>;
  }
}

/**
 * Every route declares the errors particular to it (401, 403, 404, 409); the ones any route can answer are added
 * here so that no route forgets them: 400 when it takes input, 413 and 415 when it takes a body, 429 and 500
 * always. The schema drives serialization and the OpenAPI document alike.
 */
function documentErrors(route: RouteOptions): void {
  const schema = route.schema;
  if (!schema || schema.hide) return;
  const response = (schema.response ??= {}) as Record<string, unknown>;
  const board = isBoardRequest(route.url);
  const shape = board ? EnvelopeErrorSchema : ProblemSchema;
  const add = (status: number, description: string) => {
    if (response[status] === undefined) {
      response[status] = board
        ? { description, ...shape }
        : { description, content: { 'application/problem+json': { schema: shape } } };
    }
  };
  if (schema.body || schema.params || schema.querystring) add(400, 'Malformed request: the field is named in `errors`');
  if ((schema.security as Array<Record<string, unknown>> | undefined)?.some((requirement) => 'bearerAuth' in requirement)) {
    add(401, 'The bearer token is missing, invalid, expired or revoked (see WWW-Authenticate)');
  }
  if (schema.body) {
    add(413, 'Request body too large');
    add(415, 'Request body is not application/json');
  }
  add(429, 'Too many requests; see Retry-After');
  add(500, 'Unexpected failure; the body carries a request id that is also in the log');
}

/**
 * The one error handler, and the answer to requests no route takes. The parts live in errors/: normalize.ts (any
 * error to a status, detail and fields), reply.ts (the two wire shapes), framework.ts (what Node and Fastify
 * reject before any hook runs) and routing.ts (404 and 405).
 */
export default fp(
  async (app) => {
    const routes = routeRefusal();
    app.addHook('onRoute', (route) => {
      documentErrors(route);
      routes.record(route);
    });

    app.setErrorHandler((error, request, reply) => {
      const n = normalize(error instanceof Error ? error : new Error(String(error)));
      if (n.status >= 500) request.log.error({ err: error }, 'request failed');
      // The detail, not the field list: it is bounded (see normalize), so the line stays small whatever the body.
      else request.log.info({ status: n.status, detail: n.detail, fields: n.errors?.length }, 'request rejected');
      return sendError(request, reply, n);
    });

    app.decorate('allowedMethods', routes.allowedMethods);
    app.decorate('refuseRequest', routes.refuse);
    app.setNotFoundHandler(routes.refuse);
  },
  { name: 'error-handler' },
);
