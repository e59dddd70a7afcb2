import { readFileSync } from 'node:fs';
import type { FastifyPluginAsync } from 'fastify';

/**
 * The moderation page (GET /admin): three static files served from memory, read once at start-up. The page talks
 * to the public API alone (fetch, same origin), so it can do nothing an admin's token could not do with curl.
 * Not an API operation: hidden from the OpenAPI document.
 */
const FILES = {
  '/admin': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/admin/admin.js': { file: 'admin.js', type: 'text/javascript; charset=utf-8' },
  '/admin/admin.css': { file: 'admin.css', type: 'text/css; charset=utf-8' },
} as const;

/**
 * Scripts, styles and calls from this origin only, no inline script or style, no framing. No
 * `upgrade-insecure-requests`: the page must work over plain http on any hostname the service is reached by.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

// Beside this module in src/; `npm run build` copies the folder beside the compiled module in dist/.
const PUBLIC = new URL('./public/', import.meta.url);

const adminRoutes: FastifyPluginAsync = async (app) => {
  for (const [url, { file, type }] of Object.entries(FILES)) {
    const body = readFileSync(new URL(file, PUBLIC), 'utf8');
    app.get(url, { schema: { hide: true } }, async (_request, reply) => {
      reply.type(type).header('content-security-policy', CONTENT_SECURITY_POLICY).header('referrer-policy', 'no-referrer');
      return body;
    });
  }
};

export default adminRoutes;
