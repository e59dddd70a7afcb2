import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { bearer } from '../../plugins/auth.js';
import { Type } from 'typebox';
import { AppError } from '../../shared/errors.js';
import { keysetPage } from '../../shared/pagination.js';
import { PAGE_HEADERS, PageQuerySchema, toId } from '../../shared/schemas.js';
import { problems } from '../../shared/problems.js';
import { responses } from '../../plugins/route-docs.js';
import { toPost } from '../../shared/representations.js';
import { withVisibleCounts } from '../../shared/visibility.js';
import { PostSchema } from '../posts/posts.schemas.js';
import { checkLastEventId, negotiateStream, openStream } from '../streams/streams.plugin.js';
import { createUsersRepository } from '../users/users.repository.js';
import { UserParamsSchema } from '../users/users.schemas.js';
import { createFeedRepository, type FeedOwner } from './feed.repository.js';

const feedRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const feed = createFeedRepository(app.store);
  const users = createUsersRepository(app.db);

  app.get(
    '/users/:user_id/feed',
    {
      preValidation: checkLastEventId,
      schema: {
        operationId: 'getFeed',
        tags: ['posts'],
        summary: "Read a user's home feed",
        description:
          'Posts by the users user_id follows that user_id may see (judged for user_id, also when an admin reads ' +
          'it), newest first, paginated with `limit` and `cursor`. The user themself or an admin. Without a valid ' +
          'token the answer is 401 before the request is validated.',
        security: bearer,
        params: UserParamsSchema,
        querystring: PageQuerySchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'A page of posts', headers: PAGE_HEADERS, ...Type.Array(PostSchema) },
          401: problems[401],
          403: problems[403],
          404: problems[404]('user'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      const userId = toId(request.params.user_id);
      let owner: FeedOwner;
      if (caller.id === userId) {
        owner = caller; // a valid token proves its user exists
      } else {
        const user = await users.findById(userId, caller);
        if (!user) throw AppError.notFound('user');
        if (caller.role !== 'admin') throw AppError.forbidden("Only the user or an admin may read a user's feed");
        owner = user;
      }
      if (negotiateStream(request, reply)) return openStream(app, request, reply, { kind: 'feed', viewer: owner, caller });
      const rows = await keysetPage(request, reply, `feed|${userId}`, request.query, (page) => feed.page(owner, page));
      return (await withVisibleCounts(app.db, owner, rows)).map((r) => toPost(r, app.links));
    },
  );
};

export default feedRoutes;
