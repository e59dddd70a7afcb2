import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Tx } from '../../db/store.js';
import { Type, type Static } from 'typebox';
import { bearer, isSelfOrAdmin, optionalBearer } from '../../plugins/auth.js';
import { bodyTag, ifMatch, tagOf, updatedAfter, type Precondition } from '../../shared/conditional.js';
import { writeCreated } from '../../plugins/idempotency/index.js';
import { AppError } from '../../shared/errors.js';
import { toBoard } from '../../shared/representations.js';
import { EnvelopeErrorSchema, checkBodyId, toId } from '../../shared/schemas.js';
import { createBoardsRepository } from './boards.repository.js';
import {
  BoardEnvelope,
  BoardPageEnvelope,
  BoardParamsSchema,
  CreateBoardBodySchema,
  DEFAULT_LIMIT,
  DeletedEnvelope,
  ListBoardsQuerySchema,
  ReplaceBoardBodySchema,
  UpdatedEnvelope,
} from './boards.schemas.js';
import { responses } from '../../plugins/route-docs.js';

/** Success envelopes (seed §2): `code` is the status as text, `message` its status text. */
const ok = <T>(data: T) => ({ code: '200', message: 'OK', data });
const created = <T>(data: T) => ({ code: '201', message: 'Created', data });

/** Route-specific errors, declared in the envelope shape (the error handler renders them so under /boards). */
const envelopeError = (description: string) => ({ description, ...EnvelopeErrorSchema });
const errors = {
  401: envelopeError('No valid bearer token (see WWW-Authenticate)'),
  403: envelopeError('Only the author or an admin may do this'),
  404: envelopeError('No such board'),
};

/**
 * The seed's PUT names `Content-Type: application/json` as part of the request. Without this check a PUT with no
 * body and no content type would get as far as validation (400); the missing content type is the first fault, so
 * it is a 415 whatever the body. Checked before the body is read.
 */
async function requireJsonContentType(request: FastifyRequest): Promise<void> {
  const type = request.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/json') {
    throw new AppError(415, 'Request bodies must be JSON, sent with Content-Type: application/json');
  }
}

/**
 * With an If-Match precondition (CONTRACT §6.1), locks the board's row and runs it inside the write's transaction,
 * so check and write are one atomic step: `seen` is the matched board's updatedAt. Undefined when the row is gone.
 * Without a precondition there is nothing to do.
 */
async function lockForPrecondition(tx: Tx, id: number, precondition: Precondition | undefined): Promise<{ seen?: string } | undefined> {
  if (!precondition) return {};
  if ((await tx.lockRows('boards', [id])).length === 0) return undefined;
  return { seen: await precondition(tx.db) };
}

/** If-Match against the board as GET /boards/{id} renders it: the whole envelope, as its ETag hashes it. */
const boardPrecondition = (request: FastifyRequest, reply: FastifyReply, id: number) =>
  ifMatch(request, bodyTag(reply, BoardEnvelope), async (db) => {
    const row = await createBoardsRepository(db).findById(id);
    return row && ok(toBoard(row));
  }, (envelope) => envelope.data.updatedAt);

const boardsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const boards = createBoardsRepository(app.db);

  const listSchema = {
    tags: ['boards'],
    description:
      'Boards newest first. The page is the offsets [start, min(end, start + limit)); the answer echoes start ' +
      'and limit as applied, sets end to start + the number of items (the start of the next page) and total to ' +
      'the number of boards. All three parameters are optional decimal integers ("1e1" or "0x10" is a 400).',
    security: optionalBearer,
    querystring: ListBoardsQuerySchema,
    response: responses({ method: 'GET', board: true, bearer: true }, { 200: { description: 'A page of boards', ...BoardPageEnvelope } }),
  };
  const list = async (query: Static<typeof ListBoardsQuerySchema>) => {
    const { start = 0, end, limit = DEFAULT_LIMIT } = query;
    if (end !== undefined && end < start) throw AppError.badRequest('end', 'must not be less than start');
    // min(end, start + limit) - start, computed without adding to start (which may be near 2^53).
    const count = end === undefined ? limit : Math.min(end - start, limit);
    const { rows, total } = await boards.window(start, count);
    return ok({ items: rows.map(toBoard), total, start, end: start + rows.length, limit });
  };

  app.get(
    '/boards/list',
    {
      schema: { operationId: 'listBoards', summary: 'List boards (seed §4)', ...listSchema },
    },
    async (request) => list(request.query),
  );

  app.get(
    '/boards',
    {
      schema: { operationId: 'listBoardsAtRoot', summary: 'List boards (the same as GET /boards/list)', ...listSchema },
    },
    async (request) => list(request.query),
  );

  app.get(
    '/boards/:board_id',
    {
      schema: {
        operationId: 'getBoard',
        tags: ['boards'],
        summary: 'Read a board',
        security: optionalBearer,
        params: BoardParamsSchema,
        response: responses({ method: 'GET', board: true, bearer: true }, {
          200: { description: 'The board', ...BoardEnvelope },
          404: errors[404],
        }),
      },
    },
    async (request) => {
      const row = await boards.findById(toId(request.params.board_id));
      if (!row) throw AppError.notFound('board');
      return ok(toBoard(row));
    },
  );

  app.post(
    '/boards',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createBoard',
        tags: ['boards'],
        summary: 'Write a board',
        description: 'Any signed-in user; they become its author.',
        security: bearer,
        body: CreateBoardBodySchema,
        response: responses({ method: 'POST', board: true, bearer: true, idempotent: true }, {
          201: {
            description: 'The new board; Location names it',
            headers: Type.Object({ location: Type.String() }),
            ...BoardEnvelope,
          },
          401: errors[401],
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      return writeCreated(reply, async (tx) => {
        const row = await createBoardsRepository(tx.db).insert({
          author_id: caller.id,
          title: request.body.title,
          content: request.body.content,
          now: new Date().toISOString(),
        });
        // The body is the 201 envelope; the ETag is the one GET /boards/{id} shows (its 200 envelope's).
        const board = toBoard(row);
        return { location: app.links.url(`/boards/${row.id}`), body: created(board), etag: tagOf(reply, BoardEnvelope, ok(board)) };
      });
    },
  );

  app.put(
    '/boards/:board_id',
    {
      // If-Match and If-None-Match, checked inside the write (ifMatch below): 412 when they fail.
      config: { preconditions: true },
      schema: {
        operationId: 'replaceBoard',
        tags: ['boards'],
        summary: 'Replace a board',
        description:
          'Requires `Content-Type: application/json` (else 415). The complete `{ title, content }`, not a patch; ' +
          'read-only fields a client read (id, authorId, createdAt, updatedAt) may be sent back and are ignored, ' +
          'but an id that differs from the path is a 400. The author or an admin.',
        security: bearer,
        params: BoardParamsSchema,
        body: ReplaceBoardBodySchema,
        response: responses({ method: 'PUT', board: true, bearer: true, preconditions: true }, {
          200: { description: 'Replaced; `data` is "updated"', ...UpdatedEnvelope },
          401: errors[401],
          403: errors[403],
          404: errors[404],
        }),
      },
      onRequest: requireJsonContentType,
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      const id = toId(request.params.board_id);
      const { body } = request;
      checkBodyId(body.id, request.params.board_id);
      const current = await boards.findById(id);
      if (!current) throw AppError.notFound('board');
      if (!isSelfOrAdmin(caller, current.author_id)) throw AppError.forbidden('Only the author or an admin may replace this board');
      // The author never changes, so the check above still holds; only a concurrent delete can intervene.
      const precondition = boardPrecondition(request, reply, id);
      const updated = await app.store.transaction(async (tx) => {
        const checked = await lockForPrecondition(tx, id, precondition);
        if (!checked) return undefined;
        const values = { title: body.title, content: body.content, updated_at: updatedAfter(checked.seen) };
        const repository = createBoardsRepository(tx.db);
        return (await repository.update(id, values)) ? repository.findById(id) : undefined;
      });
      if (!updated) throw AppError.notFound('board');
      // The answer's body is `"updated"`, but its ETag is the one GET /boards/{id} now shows.
      reply.header('etag', tagOf(reply, BoardEnvelope, ok(toBoard(updated))));
      return ok('updated' as const);
    },
  );

  app.delete(
    '/boards/:board_id',
    {
      // If-Match and If-None-Match, checked inside the write (ifMatch below): 412 when they fail.
      config: { preconditions: true },
      schema: {
        operationId: 'deleteBoard',
        tags: ['boards'],
        summary: 'Delete a board',
        description: 'The author or an admin. A board that does not exist is a 400 (seed §7).',
        security: bearer,
        params: BoardParamsSchema,
        response: responses({ method: 'DELETE', board: true, bearer: true, preconditions: true }, {
          200: { description: 'Removed; `data` is "deleted"', ...DeletedEnvelope },
          400: envelopeError('Malformed id, or no such board'),
          401: errors[401],
          403: errors[403],
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      const id = toId(request.params.board_id);
      const current = await boards.findById(id);
      if (!current) throw AppError.badRequest('board_id', 'names no board');
      if (!isSelfOrAdmin(caller, current.author_id)) throw AppError.forbidden('Only the author or an admin may delete this board');
      const precondition = boardPrecondition(request, reply, id);
      const removed = await app.store.transaction(
        async (tx) => (await lockForPrecondition(tx, id, precondition)) !== undefined && createBoardsRepository(tx.db).remove(id),
      );
      if (!removed) throw AppError.badRequest('board_id', 'names no board');
      return ok('deleted' as const);
    },
  );
};

export default boardsRoutes;
