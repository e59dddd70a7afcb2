import fp from 'fastify-plugin';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { cacheControl } from '../shared/conditional.js';
import { transformDocument } from './openapi-transform.js';

/**
 * The Content-Security-Policy of /docs and its assets: everything from the page's own origin (Swagger UI is served
 * from the installed package, no CDN; "Try it out" calls the same origin), no plugins, no inline script, no framing
 * by other sites. Not the plugin's `staticCSP: true`, which adds `upgrade-insecure-requests`: a browser then fetches
 * every asset over https, so over plain http the page was blank on any hostname but localhost and 127.0.0.1 (which
 * Chromium never upgrades), a LAN address or a proxy's name included (CONTRACT §5: /docs works from any hostname,
 * over http too). Nor its `https:` sources for styles and fonts, or validator.swagger.io for images: nothing is
 * loaded from elsewhere (the validator badge is off). The one inline style allowed, by its hash, is the `<style>` of
 * Swagger UI's logo (swagger-ui-standalone-preset.js); the browser test fails on any other violation.
 */
const LOGO_STYLE = "'sha256-RL3ie0nH+Lzz2YNqQN83mnU0J1ot4QL7b99vMdIX99w='";
const DOCS_CSP =
  "default-src 'self'; base-uri 'self'; connect-src 'self'; font-src 'self' data:; form-action 'self'; frame-ancestors 'self'; " +
  `img-src 'self' data:; object-src 'none'; script-src 'self'; script-src-attr 'none'; style-src 'self' ${LOGO_STYLE}`;

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
            'Errors are RFC 9457 problem details, except under /boards, which answers in the {code, message, data} envelope.\n\n' +
            'Protocol-level answers, not listed as operations: HEAD is answered wherever GET is. A CORS preflight (OPTIONS ' +
            'with Origin and Access-Control-Request-Method) is answered 204 on every path, neither rate-limited nor ' +
            'authenticated, with Access-Control-Allow-Methods (`GET, HEAD, POST, PUT, DELETE`), Access-Control-Allow-Headers ' +
            '(the headers asked for) and Access-Control-Max-Age (600); any origin may call the API (credentials are bearer ' +
            'tokens, not cookies). A method a path does not take, a plain OPTIONS included, is 405 with Allow naming the ' +
            "methods it takes, in the path's error shape.",
        },
        // Relative: "Try it out" calls the origin /docs was loaded from (localhost, 127.0.0.1, a proxy's name), which
        // the page's CSP (connect-src 'self') allows; PUBLIC_URL stays the base of the links in the answers. It
        // also keeps the committed openapi.json independent of the machine's PUBLIC_URL.
        servers: [{ url: '/', description: 'The origin this document is served from' }],
        components: {
          securitySchemes: {
            bearerAuth: { type: 'http', scheme: 'bearer', description: 'A token from POST /tokens' },
            metricsToken: { type: 'http', scheme: 'bearer', description: 'The server\'s METRICS_TOKEN, for GET /metrics when it is set' },
          },
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
          { name: 'reports', description: 'Members flag content; admins act on it' },
          { name: 'notifications', description: 'What others did that concerns a user: follows, replies, recommends, mentions' },
          { name: 'system', description: 'Health, metrics and this document' },
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
      await docs.register(swaggerUi, { routePrefix: '/docs', staticCSP: DOCS_CSP });
    });
  },
  { name: 'openapi' },
);
