import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { bearer, isAdmin, optionalBearer } from '../../plugins/auth.js';
import { bodyTag, ifMatch, tagOf } from '../../shared/conditional.js';
import { writeCreated } from '../../plugins/idempotency/index.js';
import { AppError } from '../../shared/errors.js';
import { keysetPage } from '../../shared/pagination.js';
import { problems } from '../../shared/problems.js';
import { responses } from '../../plugins/route-docs.js';
import { toReply } from '../../shared/representations.js';
import { DeletedSchema, PAGE_HEADERS, PageQuerySchema, checkBodyId, toId } from '../../shared/schemas.js';
import { findVisiblePost, requireVisiblePost, type Viewer } from '../../shared/visibility.js';
import { createRepliesRepository } from './replies.repository.js';
import {
  CreateReplyBodySchema,
  PostRepliesParamsSchema,
  ReplaceReplyBodySchema,
  ReplyParamsSchema,
  ReplySchema,
} from './replies.schemas.js';
import { createReply, deleteReply, replaceReply } from './replies.service.js';

// A token is optional on reads: it may widen what the caller sees (followers-only and private posts).

/**
 * Replies hang off a post: whoever may not see the post finds neither it nor its replies (404; 400 on DELETE,
 * seed §7), and src/shared/visibility.ts (`requireVisiblePost`, `replyShownTo`) is the only statement of who sees what.
 */
const repliesRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const replies = createRepliesRepository(app.db);
  /** If-Match against the reply as this caller's GET renders it (a 404 once its post is hidden from them). */
  const replyPrecondition = (request: FastifyRequest, reply: FastifyReply, postId: number, id: number, caller: Viewer) =>
    ifMatch(request, bodyTag(reply, ReplySchema), async (db) => {
      if (!(await findVisiblePost(db, postId, caller))) return undefined;
      const row = await createRepliesRepository(db).findInPost(postId, id, caller);
      return row && toReply(row, app.links);
    }, (result) => result.updatedAt);

  app.get(
    '/posts/:post_id/replies',
    {
      schema: {
        operationId: 'listReplies',
        tags: ['replies'],
        summary: "List a post's replies",
        description: 'Oldest first, paginated with `limit` and `cursor`. Anyone who may see the post.',
        security: optionalBearer,
        params: PostRepliesParamsSchema,
        querystring: PageQuerySchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'A page of replies', headers: PAGE_HEADERS, ...Type.Array(ReplySchema) },
          401: problems[401],
          404: problems[404]('post'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.optional(request);
      const postId = toId(request.params.post_id);
      await requireVisiblePost(app.db, postId, caller);
      const rows = await keysetPage(request, reply, `replies|${postId}`, request.query, (page) => replies.listByPost(postId, caller, page));
      return rows.map((r) => toReply(r, app.links));
    },
  );

  app.post(
    '/posts/:post_id/replies',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createReply',
        tags: ['replies'],
        summary: 'Reply to a post',
        description: 'Any signed-in user who may see the post. Counts the reply on the post in the same transaction.',
        security: bearer,
        params: PostRepliesParamsSchema,
        body: CreateReplyBodySchema,
        response: responses({ method: 'POST', bearer: true, idempotent: true }, {
          201: { description: 'The new reply; Location names it', headers: Type.Object({ location: Type.String() }), ...ReplySchema },
          401: problems[401],
          404: problems[404]('post'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      const postId = toId(request.params.post_id);
      await requireVisiblePost(app.db, postId, caller);
      return writeCreated(reply, async (tx) => {
        const created = await createReply(tx, { postId, authorId: caller.id, content: request.body.content });
        // The post (or the caller's account) was deleted between the check and the insert.
        if (!created) throw AppError.notFound('post');
        return { location: app.links.url(`/posts/${postId}/replies/${created.id}`), body: toReply(created, app.links) };
      });
    },
  );

  app.get(
    '/posts/:post_id/replies/:reply_id',
    {
      schema: {
        operationId: 'getReply',
        tags: ['replies'],
        summary: 'Read a reply',
        description: 'Anyone who may see the post. A reply of another post is not found here.',
        security: optionalBearer,
        params: ReplyParamsSchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'The reply', ...ReplySchema },
          401: problems[401],
          404: problems[404]('post or reply'),
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.optional(request);
      const postId = toId(request.params.post_id);
      await requireVisiblePost(app.db, postId, caller);
      const row = await replies.findInPost(postId, toId(request.params.reply_id), caller);
      if (!row) throw AppError.notFound('reply');
      return toReply(row, app.links);
    },
  );

  app.put(
    '/posts/:post_id/replies/:reply_id',
    {
      // If-Match and If-None-Match, checked inside the write (ifMatch below): 412 when they fail.
      config: { preconditions: true },
      schema: {
        operationId: 'replaceReply',
        tags: ['replies'],
        summary: 'Replace a reply',
        description:
          'Its author only (not even an admin edits another user\'s words). The body is `{ content }`; read-only ' +
          'fields read before may be sent back and are ignored, except that an `id` differing from the path is a 400.',
        security: bearer,
        params: ReplyParamsSchema,
        body: ReplaceReplyBodySchema,
        response: responses({ method: 'PUT', bearer: true, preconditions: true }, {
          200: { description: 'The updated reply', ...ReplySchema },
          401: problems[401],
          403: problems[403],
          404: problems[404]('post or reply'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      const postId = toId(request.params.post_id);
      const id = toId(request.params.reply_id);
      checkBodyId(request.body.id, request.params.reply_id);
      await requireVisiblePost(app.db, postId, caller);
      const current = await replies.findInPost(postId, id, caller);
      if (!current) throw AppError.notFound('reply');
      if (current.author_id !== caller.id) throw AppError.forbidden('Only its author may replace a reply');
      const row = await replaceReply(app.store, postId, id, request.body.content, {
        ifMatch: replyPrecondition(request, reply, postId, id, caller),
      });
      if (!row) throw AppError.notFound('reply');
      const result = toReply(row, app.links);
      reply.header('etag', tagOf(reply, ReplySchema, result));
      return result;
    },
  );

  app.delete(
    '/posts/:post_id/replies/:reply_id',
    {
      // If-Match and If-None-Match, checked inside the write (ifMatch below): 412 when they fail.
      config: { preconditions: true },
      schema: {
        operationId: 'deleteReply',
        tags: ['replies'],
        summary: 'Delete a reply',
        description:
          "Its author, the post's owner or an admin. A reply that does not exist, or one under a post the caller may " +
          'not see, is a 400 (seed §7).',
        security: bearer,
        params: ReplyParamsSchema,
        response: responses({ method: 'DELETE', bearer: true, preconditions: true }, {
          200: { description: 'Removed', ...DeletedSchema },
          400: problems[400]('Malformed id, or no such reply'),
          401: problems[401],
          403: problems[403],
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      const postId = toId(request.params.post_id);
      const id = toId(request.params.reply_id);
      const post = await requireVisiblePost(app.db, postId, caller, () => AppError.badRequest('post_id', 'names no post'));
      const current = await replies.findInPost(postId, id, caller);
      if (!current) throw AppError.badRequest('reply_id', 'names no reply of this post');
      if (current.author_id !== caller.id && post.owner_id !== caller.id && !isAdmin(caller)) {
        throw AppError.forbidden("Only the reply's author, the post's owner or an admin may delete a reply");
      }
      const options = { ifMatch: replyPrecondition(request, reply, postId, id, caller) };
      if (!(await deleteReply(app.store, postId, id, options))) throw AppError.badRequest('reply_id', 'names no reply of this post');
      return { deleted: 1 };
    },
  );
};

export default repliesRoutes;
