import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import { Type } from 'typebox';
import { constraintKind } from '../../db/errors.js';
import type { Tx } from '../../db/store.js';
import type { Database } from '../../db/types.js';
import { bearer, isSelfOrAdmin } from '../../plugins/auth.js';
import { writeCreated } from '../../plugins/idempotency/index.js';
import { AppError } from '../../shared/errors.js';
import { keysetPage } from '../../shared/pagination.js';
import { problems } from '../../shared/problems.js';
import { responses } from '../../plugins/route-docs.js';
import { toUser } from '../../shared/representations.js';
import { DeletedSchema, IdParam, PAGE_HEADERS, PageQuerySchema, ReadOnlyEcho, toId } from '../../shared/schemas.js';
import type { PublicUserRow, Viewer } from '../../shared/visibility.js';
import { createUsersRepository } from '../users/users.repository.js';
import { UserParamsSchema, UserSchema } from '../users/users.schemas.js';

/** A user on one's list of blocks or mutes, with the id of the relation's row (the list's order and cursor). */
export type ListedUserRow = PublicUserRow & { relation_id: number };

/** The rows of one kind of user-to-user relation (blocks, mutes), by the user who made it. */
export interface UserRelationRepository {
  /** The targets of `ownerId`'s relations, newest first, `limit + 1` rows after the relation id `after`. */
  list(ownerId: number, viewer: Viewer, page: { limit: number; after?: number }): Promise<ListedUserRow[]>;
  find(ownerId: number, targetId: number, viewer: Viewer): Promise<ListedUserRow | undefined>;
  /** Throws the driver's unique violation when the relation exists, its foreign key violation when a user is gone. */
  insert(ownerId: number, targetId: number, now: string): Promise<void>;
  /** True when the relation existed and is now gone. */
  remove(ownerId: number, targetId: number): Promise<boolean>;
}

/** What sets blocks and mutes apart; the routes, statuses and privacy are the same (CONTRACT §9). */
export interface UserRelationKind {
  /** The collection's segment: `/users/{user_id}/<path>`. */
  path: 'blocks' | 'mutes';
  noun: 'block' | 'mute';
  /** The path parameter naming the target. */
  target: 'blocked_id' | 'muted_id';
  /** Operation id stem: `Block` gives createBlock, listBlocks, getBlock, deleteBlock. */
  operation: 'Block' | 'Mute';
  /** What the relation does, for the OpenAPI descriptions. */
  effect: string;
  repository: (db: Kysely<Database>) => UserRelationRepository;
  /** More work inside the create's transaction, both users' rows locked (a block removes the follows). */
  created?: (tx: Tx, ownerId: number, targetId: number) => Promise<void>;
}

const ignored = Type.Optional(Type.Unknown({ description: 'Read-only; ignored' }));

/** The routes of one relation kind: POST, GET list, GET one and DELETE under /users/{user_id}/<path>. */
export function userRelationRoutes(kind: UserRelationKind): FastifyPluginAsyncTypebox {
  const { path, noun, target, operation } = kind;
  const BodySchema = Type.Object(
    {
      id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: `The id of the user to ${noun}`, examples: [2] }),
      username: ignored,
      displayName: ignored,
      bio: ignored,
      role: ignored,
      followerCount: ignored,
      followingCount: ignored,
      postCount: ignored,
      createdAt: ReadOnlyEcho.createdAt,
      updatedAt: ReadOnlyEcho.updatedAt,
      links: ReadOnlyEcho.links,
    },
    { additionalProperties: false, title: `New${operation}` },
  );
  const ParamsSchema = Type.Object({ user_id: IdParam(`The user whose ${path} these are`), [target]: IdParam(`The ${noun}d user`) });
  const PRIVACY =
    `A ${noun} is known to its author and to admins only: anyone else gets 404 on GET and 400 on DELETE, as for a ` +
    `${noun} that does not exist.`;

  return async (app) => {
    const users = createUsersRepository(app.db);
    const relations = kind.repository(app.db);

    app.post(
      `/users/:user_id/${path}`,
      {
        config: { idempotent: true },
        schema: {
          operationId: `create${operation}`,
          tags: [path],
          summary: `${operation} a user`,
          description:
            `${kind.effect} The user themself or an admin. ${operation === 'Block' ? 'Blocking' : 'Muting'} oneself is a 400, twice a 409, an \`id\` ` +
            'that names no user a 400. The answer is the user, as GET /users/{id} shows them to the caller.',
          security: bearer,
          params: UserParamsSchema,
          body: BodySchema,
          response: responses({ method: 'POST', bearer: true, idempotent: true }, {
            201: { description: `The ${noun}d user; Location names the ${noun}`, headers: Type.Object({ location: Type.String() }), ...UserSchema },
            400: problems[400](`Malformed request, ${noun}ing oneself, or an \`id\` that names no user`),
            401: problems[401],
            403: problems[403],
            404: problems[404]('user'),
            409: problems[409](`Already ${noun}d`),
          }),
        },
      },
      async (request, reply) => {
        const caller = await app.auth.required(request);
        const ownerId = toId(request.params.user_id);
        const targetId = request.body.id;
        if (!isSelfOrAdmin(caller, ownerId)) throw AppError.forbidden(`Only the user or an admin may ${noun} in their name`);
        if (caller.id !== ownerId && !(await users.exists(ownerId, caller))) throw AppError.notFound('user');
        if (targetId === ownerId) throw AppError.badRequest('id', `must not be the user themself: a user cannot ${noun} themself`);
        const noSuchUser = () => AppError.badRequest('id', 'names no user');
        if (!(await users.exists(targetId, caller))) throw noSuchUser();
        try {
          await writeCreated(reply, async (tx) => {
            // Both rows locked in id order, as a follow locks them: a follow and a block of the same two never cross.
            if ((await tx.lockRows('users', [ownerId, targetId])).length < 2) throw noSuchUser();
            await kind.repository(tx.db).insert(ownerId, targetId, new Date().toISOString());
            await kind.created?.(tx, ownerId, targetId);
            const row = await kind.repository(tx.db).find(ownerId, targetId, caller);
            if (!row) throw noSuchUser();
            return { location: app.links.url(`/users/${ownerId}/${path}/${targetId}`), body: toUser(row, app.links) };
          });
        } catch (error) {
          if (constraintKind(error) === 'unique') throw AppError.conflict('id', `is already ${noun}d`);
          if (constraintKind(error) === 'foreign_key') throw noSuchUser();
          throw error;
        }
        return reply;
      },
    );

    app.get(
      `/users/:user_id/${path}`,
      {
        schema: {
          operationId: `list${operation}s`,
          tags: [path],
          summary: `List the users a user ${noun}s`,
          description: `Newest ${noun} first, paginated with \`limit\` and \`cursor\`. The user themself or an admin. ${PRIVACY}`,
          security: bearer,
          params: UserParamsSchema,
          querystring: PageQuerySchema,
          response: responses({ method: 'GET', bearer: true }, {
            200: { description: `A page of ${noun}d users`, headers: PAGE_HEADERS, ...Type.Array(UserSchema) },
            401: problems[401],
            404: problems[404]('user'),
          }),
        },
      },
      async (request, reply) => {
        const caller = await app.auth.required(request);
        const ownerId = toId(request.params.user_id);
        if (!isSelfOrAdmin(caller, ownerId) || !(await users.exists(ownerId, caller))) throw AppError.notFound('user');
        // The cursor is the relation's id: the order is newest relation first, not user id.
        const rows = await keysetPage(request, reply, `${path}|${ownerId}`, request.query, async (page) =>
          (await relations.list(ownerId, caller, page)).map((row) => ({ id: row.relation_id, row })),
        );
        return rows.map(({ row }) => toUser(row, app.links));
      },
    );

    app.get(
      `/users/:user_id/${path}/:${target}`,
      {
        schema: {
          operationId: `get${operation}`,
          tags: [path],
          summary: `Read one ${noun}`,
          description: `The ${noun}d user, as GET /users/{id} shows them. The user themself or an admin. ${PRIVACY}`,
          security: bearer,
          params: ParamsSchema,
          response: responses({ method: 'GET', bearer: true }, {
            200: { description: `The ${noun}d user`, ...UserSchema },
            401: problems[401],
            404: problems[404](noun),
          }),
        },
      },
      async (request) => {
        const caller = await app.auth.required(request);
        const params = request.params as Record<string, string>;
        const ownerId = toId(params.user_id!);
        const targetId = toId(params[target]!);
        const row = isSelfOrAdmin(caller, ownerId) ? await relations.find(ownerId, targetId, caller) : undefined;
        if (!row) throw AppError.notFound(noun);
        return toUser(row, app.links);
      },
    );

    app.delete(
      `/users/:user_id/${path}/:${target}`,
      {
        schema: {
          operationId: `delete${operation}`,
          tags: [path],
          summary: `Lift a ${noun}`,
          description: `The user themself or an admin. ${PRIVACY}${operation === 'Block' ? ' Lifting a block does not restore the follows it removed.' : ''}`,
          security: bearer,
          params: ParamsSchema,
          response: responses({ method: 'DELETE', bearer: true }, {
            200: { description: 'Removed', ...DeletedSchema },
            400: problems[400](`Malformed id, or no such ${noun}`),
            401: problems[401],
          }),
        },
      },
      async (request) => {
        const caller = await app.auth.required(request);
        const params = request.params as Record<string, string>;
        const ownerId = toId(params.user_id!);
        const targetId = toId(params[target]!);
        const noSuch = () => AppError.badRequest(target, `names no ${noun} of this user`);
        if (!isSelfOrAdmin(caller, ownerId)) throw noSuch();
        // A suspended user's entry is hidden from all but admins (CONTRACT §9): GET answers 404, so DELETE answers 400.
        if (!(await users.exists(targetId, caller))) throw noSuch();
        const removed = await app.store.transaction(async (tx) => {
          await tx.lockRows('users', [ownerId, targetId]);
          return kind.repository(tx.db).remove(ownerId, targetId);
        });
        if (!removed) throw noSuch();
        return { deleted: 1 };
      },
    );
  };
}
