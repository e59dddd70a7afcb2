import fp from 'fastify-plugin';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Role } from '../db/types.js';
import { AppError } from '../shared/errors.js';
import { hashToken } from '../shared/tokens.js';

/** The authenticated user behind a request. */
export interface Caller {
  id: number;
  role: Role;
  tokenId: number;
  /** Whether the user is in a block (either side) / mutes anyone: see Viewer in shared/visibility.ts. */
  hasBlocks?: boolean;
  hasMutes?: boolean;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * A route where the token is optional whose handler finds the caller itself, in the statement that reads what
     * the route answers (GET /posts/{id}): the check before the handler only looks at the header's form, and the
     * handler resolves the token with `app.auth.hashOf` and `app.auth.adopt`, before it answers anything else.
     */
    callerInHandler?: boolean;
  }
  interface FastifyRequest {
    /** Memoised result of resolving the Authorization header (undefined until first asked). */
    callerPromise: Promise<Caller | undefined> | null;
  }
  interface FastifyInstance {
    auth: {
      /** The caller if the request carries a bearer token; 401 if it carries an invalid one. */
      optional(request: FastifyRequest): Promise<Caller | undefined>;
      /** The caller; 401 with WWW-Authenticate when there is no valid bearer token. */
      required(request: FastifyRequest): Promise<Caller>;
      /** The stored hash of the request's bearer token, undefined without one (a `callerInHandler` route). */
      hashOf(request: FastifyRequest): string | undefined;
      /**
       * The caller a `callerInHandler` route found for the token's hash (undefined: none, a 401 as `optional`
       * answers it), kept as the request's caller for anything that asks later.
       */
      adopt(request: FastifyRequest, caller: Caller | undefined): Caller;
    };
  }
}

/** A Bearer credential in form (RFC 6750 §2.1: the scheme, then a token68); the token itself may still be unknown. */
const BEARER = /^Bearer[ \t]+([A-Za-z0-9\-._~+/]+=*)[ \t]*$/i;
const BEARER_SCHEME = /^Bearer(?:[ \t]|$)/i;

/**
 * The token of a request's Authorization header: undefined without one. A header that is there but is no Bearer
 * credential in form (another scheme such as `token …` or `Basic …`, nothing at all, `Bearer` without a token) is
 * a 401 on every route, reads included (CONTRACT §2): a client's mistake never silently turns into an anonymous
 * request. Another scheme gets the bare challenge (RFC 6750 §3.1: no error code when no bearer credential was
 * sent); a Bearer header whose token is malformed is an invalid token.
 */
export function bearerToken(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (header === undefined) return undefined;
  const token = BEARER.exec(header)?.[1];
  if (token !== undefined) return token;
  if (BEARER_SCHEME.test(header)) throw AppError.invalidToken();
  throw AppError.unauthorized('The Authorization header must be a bearer token: Authorization: Bearer <token>');
}

/** OpenAPI security requirements. A route that declares `bearer` is authenticated right after its input is validated. */
export const bearer: Array<Record<string, string[]>> = [{ bearerAuth: [] }];
/** The token is optional: without one the caller is anonymous (and sees what anonymous callers may see). */
export const optionalBearer: Array<Record<string, string[]>> = [{}, { bearerAuth: [] }];

/** The token's owner, for a valid (existing, unexpired, not superseded by a password change) token hash. */
export type FindCaller = (tokenHash: string) => Promise<Caller | undefined>;

export interface AuthOptions {
  findCaller: FindCaller;
}

export const isAdmin = (caller: Caller | undefined) => caller?.role === 'admin';
export const isSelfOrAdmin = (caller: Caller, userId: number) => caller.id === userId || caller.role === 'admin';

/**
 * Resolves callers lazily: only routes that ask pay for the token lookup, and the lookup happens at most once
 * per request. A token is looked up by its hash on every request (no process-local cache), so a revocation
 * takes effect at once on every server behind a load balancer.
 */
export default fp<AuthOptions>(
  async (app, { findCaller }) => {
    app.decorateRequest('callerPromise', null);

    /** The caller behind a bearer token; 401 unless it is a valid, unexpired one. */
    async function resolve(token: string): Promise<Caller> {
      const caller = await findCaller(hashToken(token));
      if (!caller) throw AppError.invalidToken();
      return caller;
    }

    const optional = async (request: FastifyRequest): Promise<Caller | undefined> => {
      const token = bearerToken(request);
      return token === undefined ? undefined : (request.callerPromise ??= resolve(token));
    };
    const required = async (request: FastifyRequest) => {
      const caller = await optional(request);
      if (!caller) throw AppError.unauthorized();
      return caller;
    };
    const hashOf = (request: FastifyRequest): string | undefined => {
      const token = bearerToken(request);
      return token === undefined ? undefined : hashToken(token);
    };
    const adopt = (request: FastifyRequest, caller: Caller | undefined): Caller => {
      if (!caller) throw AppError.invalidToken();
      request.callerPromise = Promise.resolve(caller);
      return caller;
    };
    app.decorate('auth', { optional, required, hashOf, adopt });

    // The security a route declares in its schema (and so in the OpenAPI document) is the security it enforces,
    // checked first thing after validation. The contract's order of answers (CONTRACT §6.1) is 400 for a malformed
    // request, then 401, then 404, 403 and 412 from the handler: a malformed id, body or query is 400 whoever sends
    // it, and a well-formed request without a valid token is 401 before anything is looked up.
    // - a route that requires a bearer token answers an anonymous caller 401. Handlers then get the (memoised)
    //   caller from `app.auth.required`;
    // - a route where the token is optional (public reads) answers 401 to a token that is invalid, expired or
    //   revoked, whether or not its answer depends on the caller, so a client learns at once that its token is
    //   dead rather than silently seeing less (RFC 6750 §3.1, invalid_token). Without an Authorization header the
    //   check returns at once. A route that finds its caller in its own read (`callerInHandler`) gets the form
    //   check below, and its handler answers an invalid token 401 before anything else;
    // - every other route (sign-up, sign-in, the operational ones, /docs) only checks that an Authorization header,
    //   when there is one, is a bearer credential in form: another scheme is a 401 everywhere (CONTRACT §2). The
    //   token itself is not looked up there: a stale token must not stop a client from signing up or in again.
    const authenticate = async (request: FastifyRequest) => {
      await required(request);
    };
    const checkOptional = async (request: FastifyRequest) => {
      await optional(request);
    };
    const checkForm = (request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void) => {
      try {
        bearerToken(request);
        done();
      } catch (error) {
        done(error as Error);
      }
    };
    app.addHook('onRoute', (route) => {
      const security = route.schema?.security ?? [];
      const needsToken = security.length > 0 && security.every((requirement) => 'bearerAuth' in requirement);
      const takesToken = !needsToken && security.some((requirement) => 'bearerAuth' in requirement);
      const inHandler = (route.config as { callerInHandler?: boolean } | undefined)?.callerInHandler === true;
      if (inHandler && !takesToken) throw new Error(`${route.method} ${route.url}: callerInHandler is for routes where the token is optional`);
      const check = needsToken ? authenticate : takesToken && !inHandler ? checkOptional : checkForm;
      route.preHandler = [check, ...[route.preHandler ?? []].flat()];
    });
  },
  { name: 'auth' },
);
