import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { PostRow } from '../../db/types.js';
import { bearer, isSelfOrAdmin, optionalBearer, type Caller } from '../../plugins/auth.js';
import { ifMatch, versionTags } from '../../shared/conditional.js';
import { writeCreated } from '../../plugins/idempotency/index.js';
import { AppError } from '../../shared/errors.js';
import { keysetPage } from '../../shared/pagination.js';
import { problems } from '../../shared/problems.js';
import { responses } from '../../plugins/route-docs.js';
import { toPost } from '../../shared/representations.js';
import { DeletedSchema, PAGE_HEADERS, checkBodyId, toId } from '../../shared/schemas.js';
import { countsDiffer, findVisiblePost, requireVisiblePost, withVisibleCounts, type Viewer } from '../../shared/visibility.js';
import { canonicalQuery, parsePostQuery } from '../search/search.query.js';
import { SearchPostsQuerySchema } from '../search/search.schemas.js';
import { checkLastEventId, negotiateStream, openStream } from '../streams/streams.plugin.js';
import { createUsersRepository } from '../users/users.repository.js';
import { UserParamsSchema } from '../users/users.schemas.js';
import { createPostsRepository, findCallerAndReadablePost, findReadablePost, listPostsPage, searchPosts } from './posts.repository.js';
import { CreatePostBodySchema, PostParamsSchema, PostSchema, ReplacePostBodySchema, type Post } from './posts.schemas.js';
import { createPost, deletePost, replacePost } from './posts.service.js';

const VISIBILITY_NOTE = 'A post the caller may not see is answered as if it did not exist.';
const AUTH_FIRST = 'Without a valid token the answer is 401 before the request is validated.';

const postsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const posts = createPostsRepository(app.db);
  const users = createUsersRepository(app.db);
  // A post reads the same to every caller who may see it, so its ETag is its version rather than a hash of its
  // bytes (shared/conditional.ts): GET /posts/{id} is the most frequent request, and the hash was among its larger
  // costs (bench/README.md, "Figures behind choices in the code").
  const postTags = versionTags(JSON.stringify(PostSchema) + app.config.publicUrl);
  const postTag = (post: Post) => postTags(post.id, post.updatedAt, post.replyCount, post.recommendCount);
  /** If-Match against the post as GET /posts/{id} shows it to this caller (CONTRACT §6.1). */
  const postPrecondition = (request: FastifyRequest, id: number, caller: Viewer) =>
    ifMatch(request, postTag, async (db) => {
      const row = await findVisiblePost(db, id, caller);
      return row && toPost(row, app.links);
    }, (post) => post.updatedAt);

  app.get(
    '/posts',
    {
      preValidation: checkLastEventId,
      schema: {
        operationId: 'listPosts',
        tags: ['posts'],
        summary: 'List the posts the caller may see',
        security: optionalBearer,
        description:
          'Newest first, paginated with `limit` and `cursor` (follow the `next` link). Without a token: public ' +
          'posts; with one: also the caller’s own posts and followers-only posts of users they follow; admins see all. ' +
          'With `q`, the posts among these that match the search (a JSON page, also when a stream is asked for).',
        querystring: SearchPostsQuerySchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'A page of posts', headers: PAGE_HEADERS, ...Type.Array(PostSchema) },
          401: problems[401],
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.optional(request);
      const { q } = request.query;
      if (q === undefined && negotiateStream(request, reply)) return openStream(app, request, reply, { kind: 'posts', viewer: caller, caller });
      const search = q === undefined ? undefined : parsePostQuery(q);
      // A cursor belongs to one search: the scope names it.
      const scope = search ? `posts?q=${canonicalQuery(search)}` : 'posts';
      const rows = await keysetPage(request, reply, scope, request.query, (page) =>
        search ? searchPosts(app.store, caller, page, search) : listPostsPage(app.store, caller, page),
      );
      return (await withVisibleCounts(app.db, caller, rows)).map((r) => toPost(r, app.links));
    },
  );

  app.get(
    '/posts/:post_id',
    {
      schema: {
        operationId: 'getPost',
        tags: ['posts'],
        summary: 'Read a post',
        security: optionalBearer,
        description: VISIBILITY_NOTE,
        params: PostParamsSchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'The post', ...PostSchema },
          401: problems[401],
          404: problems[404]('post'),
        }),
      },
      // Signed in, the token's caller and the post are one statement (findCallerAndReadablePost), not two.
      config: { callerInHandler: true },
    },
    async (request, reply) => {
      const id = toId(request.params.post_id);
      const tokenHash = app.auth.hashOf(request);
      // The most frequent read: plain SQL (posts.repository.ts), the same rule as findVisiblePost. A token that
      // finds no caller is a 401 whether or not the post exists, as on every route where the token is optional.
      let caller: Caller | undefined;
      let row: PostRow | undefined;
      if (tokenHash === undefined) {
        row = await findReadablePost(app.store, id, undefined);
      } else {
        const found = await findCallerAndReadablePost(app.store, tokenHash, new Date().toISOString(), id);
        caller = app.auth.adopt(request, found?.caller);
        row = found?.post;
      }
      if (!row) throw AppError.notFound('post');
      // The counters this caller may see: the stored ones, unless the caller is in a block or an admin.
      if (countsDiffer(caller)) row = (await withVisibleCounts(app.db, caller, [row]))[0]!;
      const post = toPost(row, app.links);
      reply.header('etag', postTag(post));
      return post;
    },
  );

  app.put(
    '/posts/:post_id',
    {
      // If-Match and If-None-Match, checked inside the write (ifMatch below): 412 when they fail.
      config: { preconditions: true },
      schema: {
        operationId: 'replacePost',
        tags: ['posts'],
        summary: 'Replace a post',
        description:
          'The complete representation (title, content, visibility), not a patch. Read-only fields may be sent ' +
          `back and are ignored; an \`id\` that differs from the path is a 400. Its owner or an admin. ${VISIBILITY_NOTE} ` +
          AUTH_FIRST,
        security: bearer,
        params: PostParamsSchema,
        body: ReplacePostBodySchema,
        response: responses({ method: 'PUT', bearer: true, preconditions: true }, {
          200: { description: 'The updated post', ...PostSchema },
          401: problems[401],
          403: problems[403],
          404: problems[404]('post'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      const id = toId(request.params.post_id);
      const { body } = request;
      checkBodyId(body.id, request.params.post_id);
      const current = await requireVisiblePost(app.db, id, caller);
      if (!isSelfOrAdmin(caller, current.owner_id)) throw AppError.forbidden('Only its owner or an admin may replace a post');
      const input = { title: body.title, content: body.content, visibility: body.visibility };
      const replaced = await replacePost(app.store, current, input, { ifMatch: postPrecondition(request, id, caller) });
      if (!replaced) throw AppError.notFound('post');
      const [row] = await withVisibleCounts(app.db, caller, [replaced]);
      const post = toPost(row!, app.links);
      reply.header('etag', postTag(post));
      return post;
    },
  );

  app.delete(
    '/posts/:post_id',
    {
      // If-Match and If-None-Match, checked inside the write (ifMatch below): 412 when they fail.
      config: { preconditions: true },
      schema: {
        operationId: 'deletePost',
        tags: ['posts'],
        summary: 'Delete a post',
        description:
          'Its owner or an admin. Removes its replies and recommends too. A post that does not exist, or that the ' +
          `caller may not see, is a 400 (seed §7). ${AUTH_FIRST}`,
        security: bearer,
        params: PostParamsSchema,
        response: responses({ method: 'DELETE', bearer: true, preconditions: true }, {
          200: { description: 'Removed', ...DeletedSchema },
          400: problems[400]('Malformed id, or no such post'),
          401: problems[401],
          403: problems[403],
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      const id = toId(request.params.post_id);
      const noSuchPost = () => AppError.badRequest('post_id', 'names no post');
      const current = await requireVisiblePost(app.db, id, caller, noSuchPost);
      if (!isSelfOrAdmin(caller, current.owner_id)) throw AppError.forbidden('Only its owner or an admin may delete a post');
      const options = { ifMatch: postPrecondition(request, id, caller) };
      if (!(await deletePost(app.store, current, options))) throw AppError.badRequest('post_id', 'names no post');
      return { deleted: 1 };
    },
  );

  app.get(
    '/users/:user_id/posts',
    {
      schema: {
        operationId: 'listUserPosts',
        tags: ['posts'],
        summary: "List a user's posts the caller may see",
        security: optionalBearer,
        description:
          'Newest first, paginated with `limit` and `cursor` (follow the `next` link). With `q`, those of them that ' +
          'match the search, as GET /posts?q= finds them.',
        params: UserParamsSchema,
        querystring: SearchPostsQuerySchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'A page of posts', headers: PAGE_HEADERS, ...Type.Array(PostSchema) },
          401: problems[401],
          404: problems[404]('user'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.optional(request);
      const ownerId = toId(request.params.user_id);
      const { q } = request.query;
      const search = q === undefined ? undefined : { ...parsePostQuery(q), ownerId };
      // With `q`, the GET /posts?q= query narrowed to the owner, so that every rule of that listing holds here too.
      const scope = `user-posts|${ownerId}${search ? `?q=${canonicalQuery(search)}` : ''}`;
      const rows = await keysetPage(request, reply, scope, request.query, (page) =>
        search ? searchPosts(app.store, caller, page, search) : posts.listByOwner(ownerId, caller, page),
      );
      // A page with posts proves the user exists; only an empty one needs the second query.
      if (rows.length === 0 && !(await users.exists(ownerId, caller))) throw AppError.notFound('user');
      return (await withVisibleCounts(app.db, caller, rows)).map((r) => toPost(r, app.links));
    },
  );

  app.post(
    '/users/:user_id/posts',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createPost',
        tags: ['posts'],
        summary: 'Publish a post',
        description:
          'The user themself only (an admin may not publish in another user’s name: a post speaks for its owner). ' +
          '`visibility` defaults to `public`. The post enters the home feed of each of the user’s followers. ' +
          AUTH_FIRST,
        security: bearer,
        params: UserParamsSchema,
        body: CreatePostBodySchema,
        response: responses({ method: 'POST', bearer: true, idempotent: true }, {
          201: { description: 'The new post; Location names it', headers: Type.Object({ location: Type.String() }), ...PostSchema },
          401: problems[401],
          403: problems[403],
          404: problems[404]('user'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      const ownerId = toId(request.params.user_id);
      if (caller.id !== ownerId) {
        if (!(await users.exists(ownerId, caller))) throw AppError.notFound('user');
        throw AppError.forbidden('Only the user may publish posts as themself');
      }
      return writeCreated(reply, async (tx) => {
        const post = await createPost(tx, ownerId, request.body);
        if (!post) throw AppError.notFound('user');
        const shown = toPost(post, app.links);
        return { location: app.links.url(`/posts/${post.id}`), body: shown, etag: postTag(shown) };
      });
    },
  );
};

export default postsRoutes;
