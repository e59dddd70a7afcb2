import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { bearer, isSelfOrAdmin, optionalBearer } from '../../plugins/auth.js';
import { writeCreated } from '../../plugins/idempotency/index.js';
import { AppError } from '../../shared/errors.js';
import { keysetPage } from '../../shared/pagination.js';
import { DeletedSchema, PAGE_HEADERS, PageQuerySchema, toId } from '../../shared/schemas.js';
import { problems } from '../../shared/problems.js';
import { responses } from '../../plugins/route-docs.js';
import { toUser } from '../../shared/representations.js';
import { requireVisiblePost } from '../../shared/visibility.js';
import { UserSchema } from '../users/users.schemas.js';
import { createRecommendsRepository } from './recommends.repository.js';
import { CreateRecommendBodySchema, PostRecommendsParamsSchema, RecommendParamsSchema } from './recommends.schemas.js';
import { createRecommend, deleteRecommend } from './recommends.service.js';

// A token is optional on reads: it may widen what the caller sees (followers-only and private posts).

/**
 * The users who recommend a post. Members are user representations (the same JSON as GET /users/{id}). Whoever
 * may not see the post finds neither it nor its recommends (404; 400 on DELETE, seed §7).
 */
const recommendsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const recommends = createRecommendsRepository(app.db);

  app.get(
    '/posts/:post_id/recommends',
    {
      schema: {
        operationId: 'listRecommends',
        tags: ['recommends'],
        summary: 'List the users who recommend a post',
        description: 'In user id order, paginated with `limit` and `cursor`. Anyone who may see the post.',
        security: optionalBearer,
        params: PostRecommendsParamsSchema,
        querystring: PageQuerySchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'A page of users', headers: PAGE_HEADERS, ...Type.Array(UserSchema) },
          401: problems[401],
          404: problems[404]('post'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.optional(request);
      const postId = toId(request.params.post_id);
      await requireVisiblePost(app.db, postId, caller);
      const scope = `recommends|${postId}`;
      const rows = await keysetPage(request, reply, scope, request.query, (page) => recommends.listRecommenders(postId, caller, page));
      return rows.map((r) => toUser(r, app.links));
    },
  );

  app.post(
    '/posts/:post_id/recommends',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createRecommend',
        tags: ['recommends'],
        summary: 'Recommend a post',
        description:
          'The body names the recommending user, who must be the caller: a recommend is a personal endorsement, so ' +
          'not even an admin makes one on behalf of someone else (an admin may remove one). The post must be visible ' +
          'to the caller. Recommending the same post twice is a 409.',
        security: bearer,
        params: PostRecommendsParamsSchema,
        body: CreateRecommendBodySchema,
        response: responses({ method: 'POST', bearer: true, idempotent: true }, {
          201: { description: 'The recommending user; Location names the recommend', headers: Type.Object({ location: Type.String() }), ...UserSchema },
          401: problems[401],
          403: problems[403],
          404: problems[404]('post'),
          409: problems[409]('The user already recommends this post'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      const postId = toId(request.params.post_id);
      const userId = request.body.id;
      await requireVisiblePost(app.db, postId, caller);
      if (userId !== caller.id) throw AppError.forbidden('A user may recommend a post only for themself');
      return writeCreated(reply, async (tx) => {
        const user = await createRecommend(tx, postId, userId, caller);
        return { location: app.links.url(`/posts/${postId}/recommends/${userId}`), body: toUser(user, app.links) };
      });
    },
  );

  app.get(
    '/posts/:post_id/recommends/:user_id',
    {
      schema: {
        operationId: 'getRecommend',
        tags: ['recommends'],
        summary: 'Read a user who recommends a post',
        description: 'The same representation as GET /users/{user_id}; 404 if that user does not recommend the post.',
        security: optionalBearer,
        params: RecommendParamsSchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'The user', ...UserSchema },
          401: problems[401],
          404: problems[404]('post or recommend'),
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.optional(request);
      const postId = toId(request.params.post_id);
      await requireVisiblePost(app.db, postId, caller);
      const row = await recommends.findRecommender(postId, toId(request.params.user_id), caller);
      if (!row) throw AppError.notFound('recommend');
      return toUser(row, app.links);
    },
  );

  app.delete(
    '/posts/:post_id/recommends/:user_id',
    {
      schema: {
        operationId: 'deleteRecommend',
        tags: ['recommends'],
        summary: 'Withdraw a recommend',
        description:
          'The recommending user or an admin. No such recommend, or a post the caller may not see, is a 400 (seed §7).',
        security: bearer,
        params: RecommendParamsSchema,
        response: responses({ method: 'DELETE', bearer: true }, {
          200: { description: 'Removed', ...DeletedSchema },
          400: problems[400]('Malformed id, or no such recommend'),
          401: problems[401],
          403: problems[403],
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      const postId = toId(request.params.post_id);
      const userId = toId(request.params.user_id);
      await requireVisiblePost(app.db, postId, caller, () => AppError.badRequest('post_id', 'names no post'));
      if (!isSelfOrAdmin(caller, userId)) {
        if (!(await recommends.findRecommender(postId, userId, caller))) throw AppError.badRequest('user_id', 'does not recommend this post');
        throw AppError.forbidden('Only the recommending user or an admin may withdraw a recommend');
      }
      if (!(await deleteRecommend(app.store, postId, userId))) throw AppError.badRequest('user_id', 'does not recommend this post');
      return { deleted: 1 };
    },
  );
};

export default recommendsRoutes;
