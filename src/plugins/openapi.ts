import fp from 'fastify-plugin';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { cacheControl } from './conditional.js';
import { transformDocument } from './openapi-transform.js';

/**
 * The OpenAPI 3.1 document is generated from the route schemas, the same ones that validate requests and
 * serialize responses, so it cannot drift from the code. /docs serves Swagger UI from the installed package:
 * no CDN, it works offline. The generated document is then made client-grade (named component schemas, integer
 * path ids, declared headers) by `transformDocument`; /openapi.json and the committed openapi.json are its output.
 * @see https://github.com/fastify/fastify-swagger
 */
export default fp(
  async (app) => {
    await app.register(swagger, {
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'corkboard',
          version: '0.1.0',
          license: { name: 'MIT', identifier: 'MIT' },
          description:
            'Community API: users, a follow graph, posts with replies and recommends, and a bulletin board. ' +
            'Errors are RFC 9457 problem details, except under /boards, which answers in the {code, message, data} envelope.',
        },
        // Relative: "Try it out" calls the origin /docs was loaded from (localhost, 127.0.0.1, a proxy's name), which
        // the page's CSP (connect-src 'self') allows; PUBLIC_URL stays the base of the links in the answers. It
        // also keeps the committed openapi.json independent of the machine's PUBLIC_URL.
        servers: [{ url: '/', description: 'The origin this document is served from' }],
        components: {
          securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'A token from POST /tokens' } },
        },
        tags: [
          { name: 'users', description: 'Accounts' },
          { name: 'tokens', description: 'Sign-in: bearer tokens' },
          { name: 'followers', description: 'The follow graph' },
          { name: 'posts', description: 'Posts and feeds' },
          { name: 'replies', description: 'Replies to posts' },
          { name: 'recommends', description: 'Users who recommend a post' },
          { name: 'blocks', description: 'Users a user blocks (CONTRACT §9): either of two shuts the other out' },
          { name: 'mutes', description: 'Users a user mutes (CONTRACT §9): left out of the muter’s listings' },
          { name: 'suspensions', description: 'Accounts taken out of the community by admins, reversibly' },
          { name: 'boards', description: 'The bulletin board (envelope interface)' },
          { name: 'system', description: 'Health, metrics and this document' },
          { name: 'cors', description: 'CORS preflights, and the 405 with Allow of methods a path does not take' },
        ],
      },
      transformObject: (documentObject) => transformDocument('openapiObject' in documentObject ? documentObject.openapiObject : documentObject.swaggerObject),
    });
    await app.register(async (docs) => {
      // Swagger UI's assets come from @fastify/static, which says `public, max-age=0` and takes no option to change
      // it; every GET answer says `no-cache` (CONTRACT §6.1), so this scope's hook says it after the asset's headers.
      docs.addHook('onSend', (request, reply, payload, done) => {
        if (reply.getHeader('cache-control') !== undefined) reply.header('cache-control', cacheControl(request));
        done(null, payload);
      });
      await docs.register(swaggerUi, { routePrefix: '/docs', staticCSP: true });
    });
  },
  { name: 'openapi' },
);
