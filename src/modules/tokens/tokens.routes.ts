import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { bearer, isSelfOrAdmin } from '../../plugins/auth.js';
import { Type } from 'typebox';
import { AppError } from '../../shared/errors.js';
import { tooManyRequests } from '../../plugins/rate-limit/index.js';
import { dummyHash, verifyPassword } from '../../shared/passwords.js';
import { keysetPage } from '../../shared/pagination.js';
import { DeletedSchema, PAGE_HEADERS, PageQuerySchema, toId } from '../../shared/schemas.js';
import { PROBLEM_TYPES, problems } from '../../shared/problems.js';
import { responses } from '../../plugins/route-docs.js';
import type { Links } from '../../shared/links.js';
import { suspendedAmong } from '../suspensions/suspensions.repository.js';
import { createUsersRepository } from '../users/users.repository.js';
import { UserParamsSchema } from '../users/users.schemas.js';
import { createTokensRepository, type SessionRow } from './tokens.repository.js';
import { mintToken } from './tokens.service.js';
import { CreateTokenBodySchema, SessionSchema, TokenParamsSchema, TokenSchema, type Session } from './tokens.schemas.js';

/** A live token as its owner and admins see it: when and for how long, never the secret. */
function toSession(row: SessionRow, links: Links): Session {
  return {
    id: row.id,
    userId: row.user_id,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    links: [
      { rel: 'self', href: links.url(`/tokens/${row.id}`), method: 'GET' },
      { rel: 'user', href: links.url(`/users/${row.user_id}`), method: 'GET' },
    ],
  };
}

const HIDDEN =
  'A token that is revoked, expired or not the caller\'s (unless the caller is an admin) is answered as one that does not exist.';

const tokensRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const users = createUsersRepository(app.db);
  const tokens = createTokensRepository(app.db);
  const { passwordHashMemoryKib, tokenTtlSeconds } = app.config;
  // Computed once, lazily: the hash an unknown username is checked against (equal timing for both failures).
  let decoy: Promise<string> | undefined;

  app.post(
    '/tokens',
    {
      schema: {
        operationId: 'createToken',
        tags: ['tokens'],
        summary: 'Sign in: exchange a username and password for a bearer token',
        description: `Tokens expire (TOKEN_TTL_SECONDS) and are revoked when the user changes password or is deleted. Rate-limited tightly.`,
        body: CreateTokenBodySchema,
        response: responses({ method: 'POST' }, {
          201: { description: 'The token; Location names it', headers: Type.Object({ location: Type.String() }), ...TokenSchema },
          401: problems[401],
          403: problems.forbidden('The account is suspended (problem type ending in /suspended); only with the right password'),
        }),
      },
      config: { rateLimitPolicy: 'auth' },
    },
    async (request, reply) => {
      const { username, password } = request.body;
      // Counted against the username before the password is checked (CONTRACT §2; see sign-in-throttle.ts).
      const attempt = await app.signInThrottle.begin(username);
      if ('retryAfterSeconds' in attempt) throw tooManyRequests('auth', attempt.retryAfterSeconds);
      const user = await users.findCredentialsByUsername(username);
      const ok = await verifyPassword(password, user?.password_hash ?? (await (decoy ??= dummyHash(passwordHashMemoryKib))));
      if (!user || !ok) throw AppError.unauthorized('The username or password is incorrect');
      await attempt.succeeded();
      // Told only to whoever knows the password (a wrong one is the 401 above): CONTRACT §9.
      if ((await suspendedAmong(app.db, [user.id])).size > 0) {
        throw AppError.forbidden('This account is suspended', PROBLEM_TYPES.suspended);
      }
      const token = await mintToken(app.store, user, tokenTtlSeconds);
      if (!token) throw AppError.unauthorized('The password was changed while signing in');
      reply.code(201).header('location', app.links.url(`/tokens/${token.id}`));
      return token;
    },
  );

  app.get(
    '/tokens/:token_id',
    {
      schema: {
        operationId: 'getToken',
        tags: ['tokens'],
        summary: 'Read a signed-in token (a session), without its secret',
        description: `Its owner or an admin. ${HIDDEN}`,
        security: bearer,
        params: TokenParamsSchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'The token', ...SessionSchema },
          401: problems[401],
          404: problems[404]('token'),
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      const token = await tokens.findLive(toId(request.params.token_id), new Date().toISOString());
      if (!token || !isSelfOrAdmin(caller, token.user_id)) throw AppError.notFound('token');
      return toSession(token, app.links);
    },
  );

  app.get(
    '/users/:user_id/tokens',
    {
      schema: {
        operationId: 'listUserTokens',
        tags: ['tokens'],
        summary: "List a user's signed-in tokens (the devices signed in as them)",
        description:
          'The live tokens (neither revoked nor expired), newest first, paginated with `limit` and `cursor` (follow ' +
          'the `next` link); never their secrets. The user themself or an admin. Revoke one with DELETE /tokens/{token_id}.',
        security: bearer,
        params: UserParamsSchema,
        querystring: PageQuerySchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'A page of tokens', headers: PAGE_HEADERS, ...Type.Array(SessionSchema) },
          401: problems[401],
          403: problems[403],
          404: problems[404]('user'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      const userId = toId(request.params.user_id);
      // A valid token proves its own user exists; another user is looked up first, so an unknown one is a 404.
      if (caller.id !== userId) {
        if (!(await users.findById(userId, caller))) throw AppError.notFound('user');
        if (caller.role !== 'admin') throw AppError.forbidden("Only the user or an admin may list a user's tokens");
      }
      const now = new Date().toISOString();
      const rows = await keysetPage(request, reply, `tokens|${userId}`, request.query, (page) => tokens.listLive(userId, now, page));
      return rows.map((row) => toSession(row, app.links));
    },
  );

  app.delete(
    '/tokens/:token_id',
    {
      schema: {
        operationId: 'deleteToken',
        tags: ['tokens'],
        summary: 'Revoke a token',
        description: `Its owner or an admin. A token that does not exist is a 400. ${HIDDEN}`,
        security: bearer,
        params: TokenParamsSchema,
        response: responses({ method: 'DELETE', bearer: true }, {
          200: { description: 'Revoked', ...DeletedSchema },
          400: problems[400]('Malformed id, or no such token'),
          401: problems[401],
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      const token = await tokens.findLive(toId(request.params.token_id), new Date().toISOString());
      // Another member's token is answered as a missing one (CONTRACT §2), as GET /tokens/{token_id} answers it.
      if (!token || !isSelfOrAdmin(caller, token.user_id)) throw AppError.badRequest('token_id', 'names no token');
      // Two revocations of one token at once: the one that deleted nothing finds no such token, like a later one.
      if (!(await app.store.transaction(({ db }) => createTokensRepository(db).remove(token.id)))) {
        throw AppError.badRequest('token_id', 'names no token');
      }
      return { deleted: 1 };
    },
  );
};

export default tokensRoutes;
