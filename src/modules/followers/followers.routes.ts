import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { bearer, isSelfOrAdmin, optionalBearer } from '../../plugins/auth.js';
import { Type } from 'typebox';
import { writeCreated } from '../../plugins/idempotency/index.js';
import { AppError } from '../../shared/errors.js';
import { keysetPage } from '../../shared/pagination.js';
import { DeletedSchema, PAGE_HEADERS, PageQuerySchema, toId } from '../../shared/schemas.js';
import { problems } from '../../shared/problems.js';
import { responses } from '../../plugins/route-docs.js';
import { toUser } from '../../shared/representations.js';
import type { Viewer } from '../../shared/visibility.js';
import { createUsersRepository } from '../users/users.repository.js';
import { UserParamsSchema, UserSchema } from '../users/users.schemas.js';
import { createFollowersRepository } from './followers.repository.js';
import { FollowBodySchema, FollowerParamsSchema } from './followers.schemas.js';
import { follow, unfollow } from './followers.service.js';


const followersRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const users = createUsersRepository(app.db);
  const follows = createFollowersRepository(app.db);

  /**
   * 404 unless the user exists for the caller (a suspended account does not, but to admins). Asked only when a page
   * came back empty, so a full page costs one query; a suspended user's lists are empty to all but admins.
   */
  async function mustExist(id: number, caller: Viewer): Promise<void> {
    if (!(await users.exists(id, caller))) throw AppError.notFound('user');
  }

  app.get(
    '/users/:user_id/followers',
    {
      schema: {
        operationId: 'listFollowers',
        tags: ['followers'],
        summary: 'List the users who follow a user',
        security: optionalBearer,
        description: 'In follower id order, paginated with `limit` and `cursor`. Open to anyone.',
        params: UserParamsSchema,
        querystring: PageQuerySchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'A page of followers (users)', headers: PAGE_HEADERS, ...Type.Array(UserSchema) },
          404: problems[404]('user'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.optional(request);
      const id = toId(request.params.user_id);
      const rows = await keysetPage(request, reply, `followers|${id}`, request.query, (page) => follows.listFollowers(id, caller, page));
      if (rows.length > 0 && !(await users.exists(id, caller))) throw AppError.notFound('user');
      if (rows.length === 0) await mustExist(id, caller);
      return rows.map((r) => toUser(r, app.links));
    },
  );

  app.post(
    '/users/:user_id/followers',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createFollower',
        tags: ['followers'],
        summary: 'Follow a user',
        description:
          'Registers `id` as a follower of the user. The follower themself or an admin. Following oneself is a 400, ' +
          'following twice a 409. The answer is the follower, with their counters already updated. ' +
          'Without a valid token the answer is 401 before the body is looked at.',
        security: bearer,
        params: UserParamsSchema,
        body: FollowBodySchema,
        response: responses({ method: 'POST', bearer: true, idempotent: true }, {
          201: {
            description: 'The follower (a user); Location names the relation',
            headers: Type.Object({ location: Type.String() }),
            ...UserSchema,
          },
          400: problems[400]('Malformed request, following oneself, or an `id` that names no user'),
          401: problems[401],
          403: problems.forbidden('Not the follower nor an admin; or a block stands between the two users (problem type ending in /blocked)'),
          404: problems[404]('user'),
          409: problems[409]('Already following'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      const followeeId = toId(request.params.user_id);
      const followerId = request.body.id;
      // The checks in the order the contract gives them. A caller following in their own name (nearly every follow)
      // skips the followee's lookup here: the follow's transaction finds a missing followee under its lock.
      const self = followerId === caller.id;
      if (!self && !(await users.exists(followeeId, caller))) throw AppError.notFound('user');
      if (!isSelfOrAdmin(caller, followerId)) {
        throw AppError.forbidden('Only the follower themself or an admin may register a follower');
      }
      if (followerId === followeeId) throw AppError.badRequest('id', 'must not be the followed user: a user cannot follow themself');
      if (!self && !(await users.exists(followerId, caller))) throw AppError.badRequest('id', 'names no user');
      await writeCreated(reply, async (tx) => {
        const follower = await follow(tx, followeeId, followerId, caller);
        return { location: app.links.url(`/users/${followeeId}/followers/${followerId}`), body: toUser(follower, app.links) };
      });
      app.fanout.schedule(); // the followee's posts, into the follower's feed entries
      return reply;
    },
  );

  app.get(
    '/users/:user_id/followers/:follower_id',
    {
      schema: {
        operationId: 'getFollower',
        tags: ['followers'],
        summary: 'Read one follower',
        security: optionalBearer,
        description: 'The same representation as GET /users/{follower_id}, if that user follows user_id. Open to anyone.',
        params: FollowerParamsSchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'The follower (a user)', ...UserSchema },
          404: problems[404]('follower: the user does not follow user_id, or either user does not exist'),
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.optional(request);
      const row = await follows.findFollower(toId(request.params.user_id), toId(request.params.follower_id), caller);
      if (!row) throw AppError.notFound('follower');
      return toUser(row, app.links);
    },
  );

  app.delete(
    '/users/:user_id/followers/:follower_id',
    {
      schema: {
        operationId: 'deleteFollower',
        tags: ['followers'],
        summary: 'Unfollow: remove a follower relation',
        description:
          'Either of the two users or an admin. Also removes the followed user\'s posts from the follower\'s feed. ' +
          'A relation that does not exist is a 400 (seed §7).',
        security: bearer,
        params: FollowerParamsSchema,
        response: responses({ method: 'DELETE', bearer: true }, {
          200: { description: 'Removed', ...DeletedSchema },
          400: problems[400]('Malformed id, or no such follower relation'),
          401: problems[401],
          403: problems[403],
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      const followeeId = toId(request.params.user_id);
      const followerId = toId(request.params.follower_id);
      const noSuchRelation = () => AppError.badRequest('follower_id', 'does not follow this user');
      if (!isSelfOrAdmin(caller, followeeId) && caller.id !== followerId) {
        if (!(await follows.exists(followeeId, followerId))) throw noSuchRelation();
        throw AppError.forbidden('Only either of the two users or an admin may remove a follower relation');
      }
      // The other user of the relation, if suspended, is hidden from all but admins (CONTRACT §9): as if not there.
      const other = caller.id === followeeId ? followerId : followeeId;
      if (caller.role !== 'admin' && !(await users.exists(other, caller))) throw noSuchRelation();
      if (!(await unfollow(app.store, followeeId, followerId))) throw noSuchRelation();
      return { deleted: 1 };
    },
  );

  app.get(
    '/users/:user_id/following',
    {
      schema: {
        operationId: 'listFollowing',
        tags: ['followers'],
        summary: 'List the users a user follows',
        security: optionalBearer,
        description: 'In followee id order, paginated with `limit` and `cursor`. Open to anyone.',
        params: UserParamsSchema,
        querystring: PageQuerySchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'A page of followed users', headers: PAGE_HEADERS, ...Type.Array(UserSchema) },
          404: problems[404]('user'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.optional(request);
      const id = toId(request.params.user_id);
      const rows = await keysetPage(request, reply, `following|${id}`, request.query, (page) => follows.listFollowing(id, caller, page));
      if (rows.length > 0 && !(await users.exists(id, caller))) throw AppError.notFound('user');
      if (rows.length === 0) await mustExist(id, caller);
      return rows.map((r) => toUser(r, app.links));
    },
  );
};

export default followersRoutes;
