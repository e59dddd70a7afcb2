import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { bearer, type Caller } from '../../plugins/auth.js';
import type { SuspensionRow } from '../../db/types.js';
import { AppError } from '../../shared/errors.js';
import { problems } from '../../shared/problems.js';
import { responses } from '../../plugins/route-docs.js';
import { DeletedSchema, toId } from '../../shared/schemas.js';
import { UserParamsSchema } from '../users/users.schemas.js';
import { createSuspensionsRepository } from './suspensions.repository.js';
import { SuspensionBodySchema, SuspensionSchema, type Suspension } from './suspensions.schemas.js';
import { lift, suspend } from './suspensions.service.js';

const ADMINS_ONLY = 'Admins only (a member gets 403).';

/** /users/{user_id}/suspension (CONTRACT §9): admins take an account out of the community, reversibly. */
const suspensionsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const suspensions = createSuspensionsRepository(app.db);
  const toSuspension = (row: SuspensionRow): Suspension => ({
    userId: row.user_id,
    reason: row.reason,
    createdAt: row.created_at,
    links: [
      { rel: 'self', href: app.links.url(`/users/${row.user_id}/suspension`), method: 'GET' },
      { rel: 'user', href: app.links.url(`/users/${row.user_id}`), method: 'GET' },
    ],
  });
  const adminOnly = (caller: Caller) => {
    if (caller.role !== 'admin') throw AppError.forbidden('Only an admin may see or change suspensions');
  };

  app.put(
    '/users/:user_id/suspension',
    {
      schema: {
        operationId: 'suspendUser',
        tags: ['suspensions'],
        summary: 'Suspend a user, or change the reason of a suspension',
        description:
          `${ADMINS_ONLY} Suspending an admin is a 403. Every token of the user is revoked at once (open streams ` +
          'close within 60 s) and signing in with the right password answers 403 with a problem type ending in ' +
          '/suspended. To everyone but admins the account is then hidden as if it did not exist: its profile, posts, ' +
          'replies, recommends, its entries in followers, following and recommends lists, and its share of the ' +
          'counters others see. On a standing suspension, changes the reason and keeps createdAt.',
        security: bearer,
        params: UserParamsSchema,
        body: SuspensionBodySchema,
        response: responses({ method: 'PUT', bearer: true }, {
          200: { description: 'The suspension', ...SuspensionSchema },
          401: problems[401],
          403: problems[403],
          404: problems[404]('user'),
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      adminOnly(caller);
      const result = await suspend(app.store, toId(request.params.user_id), request.body.reason);
      if (result.outcome === 'missing') throw AppError.notFound('user');
      if (result.outcome === 'admin') throw AppError.forbidden('An admin cannot be suspended');
      return toSuspension(result.suspension);
    },
  );

  app.get(
    '/users/:user_id/suspension',
    {
      schema: {
        operationId: 'getSuspension',
        tags: ['suspensions'],
        summary: "Read a user's suspension",
        description: `${ADMINS_ONLY} 404 when the user is not suspended.`,
        security: bearer,
        params: UserParamsSchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'The suspension', ...SuspensionSchema },
          401: problems[401],
          403: problems[403],
          404: problems[404]('suspension'),
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      adminOnly(caller);
      const row = await suspensions.find(toId(request.params.user_id));
      if (!row) throw AppError.notFound('suspension');
      return toSuspension(row);
    },
  );

  app.delete(
    '/users/:user_id/suspension',
    {
      schema: {
        operationId: 'liftSuspension',
        tags: ['suspensions'],
        summary: 'Lift a suspension',
        description: `${ADMINS_ONLY} The account shows again everywhere; its tokens stay revoked. 400 when the user is not suspended.`,
        security: bearer,
        params: UserParamsSchema,
        response: responses({ method: 'DELETE', bearer: true }, {
          200: { description: 'Lifted', ...DeletedSchema },
          400: problems[400]('Malformed id, or the user is not suspended'),
          401: problems[401],
          403: problems[403],
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      adminOnly(caller);
      if (!(await lift(app.store, toId(request.params.user_id)))) throw AppError.badRequest('user_id', 'names no suspended user');
      return { deleted: 1 };
    },
  );
};

export default suspensionsRoutes;
