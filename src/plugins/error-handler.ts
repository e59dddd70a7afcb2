import fp from 'fastify-plugin';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../shared/errors.js';
import { readCaching } from '../shared/conditional.js';
import { normalize } from './errors/normalize.js';
import { sendError } from './errors/reply.js';
import { routeRefusal } from './errors/routing.js';
import { BODY_METHODS, hasBody, type ArrivingBodies } from './errors/framework.js';

export { isBoardRequest } from './errors/reply.js';
export { ArrivingBodies, BODY_METHODS, clientError, connectRequest, frameworkError } from './errors/framework.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** 405 with Allow when another method would be accepted on this path, else 404, in the usual error shape. */
    refuseRequest(request: FastifyRequest, reply: FastifyReply): FastifyReply;
    /** The methods that some route takes on this path (empty for a path no route matches). */
    allowedMethods(path: string): Set<string>;
  }
}

/**
 * The one error handler, and the answer to requests no route takes. The parts live in errors/: normalize.ts (any
 * error to a status, detail and fields), reply.ts (the two wire shapes), framework.ts (what Node and Fastify
 * reject before any hook runs) and routing.ts (404 and 405).
 */
export default fp<{ arriving: ArrivingBodies }>(
  async (app, { arriving }) => {
    const routes = routeRefusal();
    const rememberPath = (request: FastifyRequest, _reply: FastifyReply, done: () => void) => {
      if (hasBody(request)) arriving.remember(request);
      done();
    };
    app.addHook('onRoute', (route) => {
      routes.record(route);
      // Requests that send a body note their path, for a 408 while the body arrives (errors/framework.ts).
      if ([route.method].flat().some((method) => BODY_METHODS.has(method))) {
        route.onRequest = [...[route.onRequest ?? []].flat(), rememberPath];
      }
    });

    app.setErrorHandler((error, request, reply) => {
      // The body never fully arrived and its stream is gone: cut off by the 408 that framework.ts wrote on the
      // socket, or the client hung up. No answer can be sent; the request's line says which (not an error: a
      // client's, not the service's).
      if (request.raw.destroyed && !request.raw.complete) {
        const timedOut = arriving.timedOut(request);
        request.log.info({ req: request, status: timedOut ? 408 : undefined, responseTime: reply.elapsedTime }, timedOut ? 'request timed out' : 'request abandoned by the client');
        reply.hijack();
        return;
      }
      // A path that reached a route with a parameter only because no route of its own takes this method
      // (`PUT /boards/list`): 404 or 405, whichever check failed first (the id, or the body's type or JSON).
      if (request.routeOptions.url?.includes(':') && routes.misrouted(request)) return routes.refuse(request, reply);
      // Every answer to a GET says how to cache it (CONTRACT §6.1), a refusal before the conditional hook (a 429) too.
      if ((request.method === 'GET' || request.method === 'HEAD') && !reply.hasHeader('cache-control')) readCaching(request, reply);
      const n = normalize(error instanceof Error ? error : new Error(String(error)));
      // A failure (an unexpected error, the database unavailable) is logged at error with the error, its stack and
      // cause. An answer the service chose (an AppError: a client's mistake, or a 503 by which it protects itself,
      // such as STREAM_MAX reached) is no failure of the service: one line without a stack, at warn for a 5xx.
      // The detail, not the field list: it is bounded (see normalize), so the line stays small whatever the body.
      if (n.status >= 500 && !(error instanceof AppError)) request.log.error({ err: error }, 'request failed');
      else if (n.status >= 500) request.log.warn({ status: n.status, detail: n.detail }, 'request refused');
      else request.log.info({ status: n.status, detail: n.detail, fields: n.errors?.length }, 'request rejected');
      return sendError(request, reply, n);
    });

    app.decorate('allowedMethods', routes.allowedMethods);
    app.decorate('refuseRequest', routes.refuse);
    app.setNotFoundHandler(routes.refuse);
  },
  { name: 'error-handler' },
);
