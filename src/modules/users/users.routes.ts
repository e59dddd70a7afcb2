import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { bearer, isSelfOrAdmin, optionalBearer } from '../../plugins/auth.js';
import { isUniqueViolation } from '../../db/errors.js';
import { AppError } from '../../shared/errors.js';
import type { Links } from '../../shared/links.js';
import { keysetPage } from '../../shared/pagination.js';
import { hashPassword, verifyPassword } from '../../shared/passwords.js';
import { DeletedSchema, PAGE_HEADERS, ProblemSchema, toId } from '../../shared/schemas.js';
import { createTokensRepository } from '../tokens/tokens.repository.js';
import { createUsersRepository, type PublicUserRow } from './users.repository.js';
import {
  ChangePasswordBodySchema,
  CreateUserBodySchema,
  ListUsersQuerySchema,
  ReplaceUserBodySchema,
  UserParamsSchema,
  UserSchema,
  type User,
} from './users.schemas.js';
import { createUser, deleteAllUsers, deleteUser } from './users.service.js';
import { nowIso } from '../../shared/clock.js';

/** The one place a user row becomes the API's representation. */
export function toUser(row: PublicUserRow, links: Links): User {
  return {
    id: row.id,
    username: row.username,
    displayName: row.display_name,
    bio: row.bio,
    role: row.role,
    followerCount: row.follower_count,
    followingCount: row.following_count,
    postCount: row.post_count,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    links: links.user(row.id),
  };
}

const problem = (description: string) => ({ description, content: { 'application/problem+json': { schema: ProblemSchema } } });
export const problems = {
  401: problem('No valid bearer token (see WWW-Authenticate)'),
  403: problem('The caller may not do this'),
  404: (what: string) => problem(`No such ${what}`),
  409: (what: string) => problem(what),
  400: (what: string) => problem(what),
};

const usersRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const users = createUsersRepository(app.db);
  const tokens = createTokensRepository(app.db);
  const { passwordHashMemoryKib } = app.config;

  app.post(
    '/users',
    {
      schema: {
        operationId: 'createUser',
        tags: ['users'],
        summary: 'Sign up',
        description: 'Open to anyone. Rate-limited more tightly than other routes.',
        body: CreateUserBodySchema,
        response: {
          201: { description: 'The new user; Location names it', headers: Type.Object({ location: Type.String() }), ...UserSchema },
          409: problems[409]('The username is taken (case-insensitively)'),
        },
      },
      config: { rateLimitPolicy: 'auth' },
    },
    async (request, reply) => {
      const row = await createUser(app.db, request.body, passwordHashMemoryKib);
      reply.code(201).header('location', app.links.url(`/users/${row.id}`));
      return toUser(row, app.links);
    },
  );

  app.get(
    '/users',
    {
      schema: {
        operationId: 'listUsers',
        tags: ['users'],
        summary: 'List users',
        security: optionalBearer,
        description: 'In id order, paginated with `limit` and `cursor`; `username` filters to one user.',
        querystring: ListUsersQuerySchema,
        response: { 200: { description: 'A page of users', headers: PAGE_HEADERS, ...Type.Array(UserSchema) } },
      },
    },
    async (request, reply) => {
      const { username } = request.query;
      const scope = `users|${username?.toLowerCase() ?? ''}`;
      const rows = await keysetPage(request, reply, scope, request.query, (page) => users.list({ ...page, username }));
      return rows.map((r) => toUser(r, app.links));
    },
  );

  app.delete(
    '/users',
    {
      schema: {
        operationId: 'deleteAllUsers',
        tags: ['users'],
        summary: 'Remove all users',
        description: 'Admin only. Removes every user, the caller included, and everything that is theirs.',
        security: bearer,
        response: { 200: { description: 'How many users were removed', ...DeletedSchema }, 401: problems[401], 403: problems[403] },
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      if (caller.role !== 'admin') throw AppError.forbidden('Only an admin may remove all users');
      return { deleted: await deleteAllUsers(app.db) };
    },
  );

  app.get(
    '/users/:user_id',
    {
      schema: {
        operationId: 'getUser',
        tags: ['users'],
        summary: 'Read a user',
        security: optionalBearer,
        params: UserParamsSchema,
        response: { 200: { description: 'The user', ...UserSchema }, 404: problems[404]('user') },
      },
    },
    async (request) => {
      const row = await users.findById(toId(request.params.user_id));
      if (!row) throw AppError.notFound('user');
      return toUser(row, app.links);
    },
  );

  app.put(
    '/users/:user_id',
    {
      schema: {
        operationId: 'replaceUser',
        tags: ['users'],
        summary: 'Replace a user',
        description:
          'The complete representation (username, displayName, bio), not a patch. Read-only fields may be sent back ' +
          'and are ignored; `role` may be changed only by an admin. The user themself or an admin.',
        security: bearer,
        params: UserParamsSchema,
        body: ReplaceUserBodySchema,
        response: {
          200: { description: 'The updated user', ...UserSchema },
          401: problems[401],
          403: problems[403],
          404: problems[404]('user'),
          409: problems[409]('The username is taken (case-insensitively)'),
        },
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      const id = toId(request.params.user_id);
      const { body } = request;
      if (body.id !== undefined && body.id !== id) throw AppError.badRequest('id', 'must match the id in the path');
      const current = await users.findById(id);
      if (!current) throw AppError.notFound('user');
      if (!isSelfOrAdmin(caller, id)) throw AppError.forbidden('Only the user or an admin may replace this user');
      if (body.role !== undefined && body.role !== current.role && caller.role !== 'admin') {
        throw AppError.forbidden('Only an admin may change a role');
      }
      try {
        const row = await users.update(id, {
          username: body.username,
          display_name: body.displayName,
          bio: body.bio,
          ...(body.role !== undefined ? { role: body.role } : {}),
          updated_at: nowIso(),
        });
        if (!row) throw AppError.notFound('user');
        return toUser(row, app.links);
      } catch (error) {
        if (isUniqueViolation(error)) throw AppError.conflict('username', 'is already taken');
        throw error;
      }
    },
  );

  app.put(
    '/users/:user_id/password',
    {
      schema: {
        operationId: 'changePassword',
        tags: ['users'],
        summary: 'Change the password',
        description: "The user themself, with the current password. Revokes the user's other tokens.",
        security: bearer,
        params: UserParamsSchema,
        body: ChangePasswordBodySchema,
        response: {
          200: { description: 'The user', ...UserSchema },
          401: problems[401],
          403: problems[403],
          404: problems[404]('user'),
        },
      },
      config: { rateLimitPolicy: 'auth' },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      const id = toId(request.params.user_id);
      const stored = await users.findPasswordHash(id);
      if (!stored) throw AppError.notFound('user');
      if (caller.id !== id) throw AppError.forbidden('Only the user may change their password');
      if (!(await verifyPassword(request.body.currentPassword, stored.password_hash))) {
        throw new AppError(403, 'currentPassword is incorrect', [{ field: 'currentPassword', message: 'is incorrect' }]);
      }
      await users.setPassword(id, await hashPassword(request.body.newPassword, passwordHashMemoryKib), nowIso());
      await tokens.removeAllOfUserExcept(id, caller.tokenId);
      const row = await users.findById(id);
      if (!row) throw AppError.notFound('user');
      return toUser(row, app.links);
    },
  );

  app.delete(
    '/users/:user_id',
    {
      schema: {
        operationId: 'deleteUser',
        tags: ['users'],
        summary: 'Delete a user',
        description:
          'The user themself or an admin. Removes the user and everything that is theirs in one transaction. ' +
          'A user that does not exist is a 400 (seed §7).',
        security: bearer,
        params: UserParamsSchema,
        response: {
          200: { description: 'Removed', ...DeletedSchema },
          400: problems[400]('Malformed id, or no such user'),
          401: problems[401],
          403: problems[403],
        },
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      const id = toId(request.params.user_id);
      if (!isSelfOrAdmin(caller, id)) {
        if (!(await users.findById(id))) throw AppError.badRequest('user_id', 'names no user');
        throw AppError.forbidden('Only the user or an admin may delete this user');
      }
      if (!(await deleteUser(app.db, app.dialect, id))) throw AppError.badRequest('user_id', 'names no user');
      return { deleted: 1 };
    },
  );
};

export default usersRoutes;
