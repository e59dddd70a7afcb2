import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { bearer } from '../../plugins/auth.js';
import { Type } from 'typebox';
import { AppError } from '../../shared/errors.js';
import { tooManyRequests } from '../../plugins/rate-limit/index.js';
import { dummyHash, verifyPassword } from '../../shared/passwords.js';
import { DeletedSchema, toId } from '../../shared/schemas.js';
import { PROBLEM_TYPES, problems } from '../../shared/problems.js';
import { suspendedAmong } from '../suspensions/suspensions.repository.js';
import { createUsersRepository } from '../users/users.repository.js';
import { createTokensRepository } from './tokens.repository.js';
import { mintToken } from './tokens.service.js';
import { CreateTokenBodySchema, TokenParamsSchema, TokenSchema } from './tokens.schemas.js';

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
        response: {
          201: { description: 'The token; Location names it', headers: Type.Object({ location: Type.String() }), ...TokenSchema },
          401: problems[401],
          403: problems.forbidden('The account is suspended (problem type ending in /suspended); only with the right password'),
        },
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

  app.delete(
    '/tokens/:token_id',
    {
      schema: {
        operationId: 'deleteToken',
        tags: ['tokens'],
        summary: 'Revoke a token',
        description: 'Its owner or an admin. A token that does not exist is a 400.',
        security: bearer,
        params: TokenParamsSchema,
        response: {
          200: { description: 'Revoked', ...DeletedSchema },
          400: problems[400]('Malformed id, or no such token'),
          401: problems[401],
          403: problems[403],
        },
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      const token = await tokens.findById(toId(request.params.token_id));
      if (!token) throw AppError.badRequest('token_id', 'names no token');
      if (token.user_id !== caller.id && caller.role !== 'admin') throw AppError.forbidden('Only its owner or an admin may revoke a token');
      await app.store.transaction(({ db }) => createTokensRepository(db).remove(token.id));
      return { deleted: 1 };
    },
  );
};

export default tokensRoutes;
