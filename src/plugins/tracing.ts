import fp from 'fastify-plugin';
import { context } from '@opentelemetry/api';
import { endRequestSpan, startRequestSpan, type RequestTrace } from '../tracing.js';
import type { AccessLog } from './logging.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's server span, when tracing is on (src/tracing.ts). */
    trace?: RequestTrace;
  }
}

/**
 * A server span per request (registered only when tracing is on). The request's hooks and handler run inside the
 * span's context, so the store's statement spans are its children: entered on arrival, and again once the body has
 * been read (its chunks arrive in the socket's context, not the request's). The span ends when the access log hears
 * the request complete (an event stream the client closed included), before its line, which carries the trace id.
 * @see https://opentelemetry.io/docs/specs/semconv/http/http-spans/
 */
export default fp<{ completions: AccessLog }>(
  async (app, { completions }) => {
    app.addHook('onRequest', (request, _reply, done) => {
      request.trace = startRequestSpan(request.method, request.headers);
      context.with(request.trace.context, done);
    });
    app.addHook('preValidation', (request, _reply, done) => {
      if (request.trace) context.with(request.trace.context, done);
      else done();
    });
    completions.observe((request, reply) => {
      if (request.trace) endRequestSpan(request.trace, request.method, request.routeOptions.url, reply.statusCode);
    });
  },
  { name: 'tracing' },
);
