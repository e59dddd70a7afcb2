import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { bearer, isSelfOrAdmin, optionalBearer } from '../../plugins/auth.js';
import { bodyTag, ifMatch, tagOf } from '../../shared/conditional.js';
import { writeCreated } from '../../plugins/idempotency/index.js';
import { AppError } from '../../shared/errors.js';
import { keysetPage, textKeysetPage } from '../../shared/pagination.js';
import { hashPassword, verifyPassword } from '../../shared/passwords.js';
import { problems } from '../../shared/problems.js';
import { responses } from '../../plugins/route-docs.js';
import { toUser } from '../../shared/representations.js';
import { DeletedSchema, PAGE_HEADERS, checkBodyId, toId } from '../../shared/schemas.js';
import type { Viewer } from '../../shared/visibility.js';
import { parseUserQuery } from '../search/search.query.js';
import { createUsersRepository, usernameKey } from './users.repository.js';
import {
  ChangePasswordBodySchema,
  CreateUserBodySchema,
  ListUsersQuerySchema,
  ReplaceUserBodySchema,
  UserParamsSchema,
  UserSchema,
} from './users.schemas.js';
import { changePassword, createUser, deleteAllUsers, deleteUser, replaceUser } from './users.service.js';

const usersRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const users = createUsersRepository(app.db);
  const { passwordHashMemoryKib } = app.config;
  /** If-Match against the user as this caller's GET /users/{id} renders it: postCount counts what the caller may see. */
  const userPrecondition = (request: FastifyRequest, reply: FastifyReply, id: number, caller: Viewer) =>
    ifMatch(request, bodyTag(reply, UserSchema), async (db) => {
      const row = await createUsersRepository(db).findById(id, caller);
      return row && toUser(row, app.links);
    }, (user) => user.updatedAt);

  app.post(
    '/users',
    {
      schema: {
        operationId: 'createUser',
        tags: ['users'],
        summary: 'Sign up',
        description: 'Open to anyone. Rate-limited more tightly than other routes.',
        body: CreateUserBodySchema,
        response: responses({ method: 'POST', idempotent: true }, {
          201: { description: 'The new user; Location names it', headers: Type.Object({ location: Type.String() }), ...UserSchema },
          409: problems[409]('The username is taken (case-insensitively)'),
        }),
      },
      config: { rateLimitPolicy: 'auth', idempotent: true },
    },
    async (request, reply) => {
      const { username, password, displayName, bio } = request.body;
      const passwordHash = await hashPassword(password, passwordHashMemoryKib);
      return writeCreated(reply, async (tx) => {
        const id = await createUser(tx, { username, passwordHash, displayName, bio });
        // Read back as the public sees it: a new user has no posts, hidden or not.
        const row = await createUsersRepository(tx.db).findById(id, undefined);
        if (!row) throw AppError.notFound('user');
        return { location: app.links.url(`/users/${id}`), body: toUser(row, app.links) };
      });
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
        description:
          'In id order, paginated with `limit` and `cursor`; `username` filters to one user. With `q`, the users ' +
          'found by name, in lower-cased username order.',
        querystring: ListUsersQuerySchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'A page of users', headers: PAGE_HEADERS, ...Type.Array(UserSchema) },
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.optional(request);
      const { username, q } = request.query;
      if (q !== undefined) {
        // Search (CONTRACT §11): keyset over the lower-cased username, in a scope of this query's words.
        const words = parseUserQuery(q);
        const scope = `users?q=${words.join(' ')}|${username?.toLowerCase() ?? ''}`;
        const rows = await textKeysetPage(
          request,
          reply,
          scope,
          request.query,
          (page) => users.searchByName(caller, words, { ...page, username }),
          (row) => usernameKey(row.username),
        );
        return rows.map((r) => toUser(r, app.links));
      }
      const scope = `users|${username?.toLowerCase() ?? ''}`;
      const rows = await keysetPage(request, reply, scope, request.query, (page) => users.list(caller, { ...page, username }));
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
        response: responses({ method: 'DELETE', bearer: true }, {
          200: { description: 'How many users were removed', ...DeletedSchema },
          401: problems[401],
          403: problems[403],
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      if (caller.role !== 'admin') throw AppError.forbidden('Only an admin may remove all users');
      return { deleted: await deleteAllUsers(app.store) };
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
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'The user', ...UserSchema },
          404: problems[404]('user'),
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.optional(request);
      const row = await users.findById(toId(request.params.user_id), caller);
      if (!row) throw AppError.notFound('user');
      return toUser(row, app.links);
    },
  );

  app.put(
    '/users/:user_id',
    {
      // If-Match and If-None-Match, checked inside the write (ifMatch below): 412 when they fail.
      config: { preconditions: true },
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
        response: responses({ method: 'PUT', bearer: true, preconditions: true }, {
          200: { description: 'The updated user', ...UserSchema },
          401: problems[401],
          403: problems[403],
          404: problems[404]('user'),
          409: problems[409]('The username is taken (case-insensitively)'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      const id = toId(request.params.user_id);
      const { body } = request;
      checkBodyId(body.id, request.params.user_id);
      const current = await users.findById(id, caller);
      if (!current) throw AppError.notFound('user');
      if (!isSelfOrAdmin(caller, id)) throw AppError.forbidden('Only the user or an admin may replace this user');
      if (body.role !== undefined && body.role !== current.role && caller.role !== 'admin') {
        throw AppError.forbidden('Only an admin may change a role');
      }
      if (!(await replaceUser(app.store, id, body, { ifMatch: userPrecondition(request, reply, id, caller) }))) throw AppError.notFound('user');
      const row = await users.findById(id, caller);
      if (!row) throw AppError.notFound('user');
      const user = toUser(row, app.links);
      reply.header('etag', tagOf(reply, UserSchema, user));
      return user;
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
        response: responses({ method: 'PUT', bearer: true }, {
          200: { description: 'The user', ...UserSchema },
          401: problems[401],
          403: problems[403],
          404: problems[404]('user'),
        }),
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
      const hash = await hashPassword(request.body.newPassword, passwordHashMemoryKib);
      if (!(await changePassword(app.store, id, caller.tokenId, hash))) throw AppError.notFound('user');
      const row = await users.findById(id, caller);
      if (!row) throw AppError.notFound('user');
      return toUser(row, app.links);
    },
  );

  app.delete(
    '/users/:user_id',
    {
      // If-Match and If-None-Match, checked inside the write (ifMatch below): 412 when they fail.
      config: { preconditions: true },
      schema: {
        operationId: 'deleteUser',
        tags: ['users'],
        summary: 'Delete a user',
        description:
          'The user themself or an admin. Removes the user and everything that is theirs in one transaction. ' +
          'A user that does not exist is a 400 (seed §7).',
        security: bearer,
        params: UserParamsSchema,
        response: responses({ method: 'DELETE', bearer: true, preconditions: true }, {
          200: { description: 'Removed', ...DeletedSchema },
          400: problems[400]('Malformed id, or no such user'),
          401: problems[401],
          403: problems[403],
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      const id = toId(request.params.user_id);
      if (!isSelfOrAdmin(caller, id)) {
        if (!(await users.exists(id, caller))) throw AppError.badRequest('user_id', 'names no user');
        throw AppError.forbidden('Only the user or an admin may delete this user');
      }
      if (!(await deleteUser(app.store, id, { ifMatch: userPrecondition(request, reply, id, caller) }))) {
        throw AppError.badRequest('user_id', 'names no user');
      }
      return { deleted: 1 };
    },
  );
};

export default usersRoutes;
