import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ProblemSchema } from '../../shared/schemas.js';
import { AppError } from '../../shared/errors.js';
import { metricsAccess } from '../../plugins/metrics.js';
import { responses } from '../../plugins/route-docs.js';

/** Operational endpoints: liveness with a database check, Prometheus metrics, and the OpenAPI document. */
const systemRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const metricsAuth = metricsAccess(app.config.metricsToken);
  app.get(
    '/health',
    {
      schema: {
        operationId: 'getHealth',
        tags: ['system'],
        summary: 'Health: 200 when the database answers and its schema is current, 503 when not',
        response: responses({ method: 'GET', rateLimit: false }, {
          200: { description: 'Healthy', ...Type.Object({ status: Type.Literal('ok'), database: Type.Literal('up') }) },
          503: { description: 'The database does not answer', content: { 'application/problem+json': { schema: ProblemSchema } } },
        }),
      },
      config: { rateLimit: false },
    },
    async () => {
      if (!(await app.store.healthy())) {
        throw new AppError(503, 'The database does not answer, or its schema is not the one this build expects', undefined, {
          'retry-after': '5',
        });
      }
      return { status: 'ok' as const, database: 'up' as const };
    },
  );

  app.get(
    '/metrics',
    {
      schema: {
        operationId: 'getMetrics',
        tags: ['system'],
        summary: 'Prometheus metrics (text exposition format)',
        description: 'Open to anyone, unless the server sets METRICS_TOKEN: then `Authorization: Bearer <METRICS_TOKEN>` is needed.',
        produces: ['text/plain'],
        // No token, or the metrics token (never a user's token from POST /tokens): which one is the server's setting.
        security: [{}, { metricsToken: [] }],
        response: responses({ method: 'GET', rateLimit: false, database: false }, {
          200: { description: 'Metrics', content: { 'text/plain': { schema: Type.String() } } },
          401: {
            description:
              'METRICS_TOKEN is set and the request does not carry it as its bearer token (a user\'s token does not do), ' +
              'or the Authorization header is not `Bearer <token>` (see WWW-Authenticate)',
            content: { 'application/problem+json': { schema: ProblemSchema } },
          },
        }),
      },
      // Never touches the database, so never a 503.
      config: { rateLimit: false, database: false },
      ...(metricsAuth ? { preHandler: metricsAuth } : {}),
    },
    async (_request, reply) => {
      reply.type(app.metrics.contentType);
      return app.metrics.metrics();
    },
  );

  app.get(
    '/openapi.json',
    {
      schema: {
        operationId: 'getOpenApi',
        tags: ['system'],
        summary: 'This OpenAPI 3.1 document',
        response: responses({ method: 'GET', database: false }, {
          200: { description: 'The document', content: { 'application/json': { schema: Type.Object({}, { additionalProperties: true }) } } },
        }),
      },
      config: { database: false },
    },
    async () => app.swagger(),
  );
};

export default systemRoutes;
