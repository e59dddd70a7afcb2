import fp from 'fastify-plugin';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { entityTag, parseEntityTags, weakMatch } from '../shared/conditional.js';

/**
 * What every answer to a GET or HEAD says to caches (CONTRACT §6.1), errors included: revalidate before reuse,
 * `private` when the request carried a token, and vary on Authorization besides what is already named.
 */
export function readCaching(request: FastifyRequest, reply: FastifyReply): void {
  reply.header('cache-control', cacheControl(request));
  appendVary(reply, 'Authorization');
}

/** `no-cache`, and `private` too when the request carried a token (its answer may be the caller's own view). */
export function cacheControl(request: FastifyRequest): string {
  return request.headers.authorization === undefined ? 'no-cache' : 'private, no-cache';
}

/** Names one more request header the answer depends on, after those `Vary` names already. */
export function appendVary(reply: FastifyReply, name: string): void {
  const vary = reply.getHeader('vary');
  reply.header('vary', typeof vary === 'string' && vary !== '' ? `${vary}, ${name}` : name);
}

/**
 * Conditional requests (CONTRACT §6.1).
 *
 * GET and HEAD: every answer says `Cache-Control: no-cache` (`private, no-cache` when the request carried a token,
 * since its body may be the caller's own view) and varies on Authorization besides Origin. Every 200 gets a strong
 * ETag: the one its route set (a post's version, shared/conditional.ts), else a hash of the serialized body, here in
 * onSend. This hook is an instance hook, so it runs before the route-level onSend of @fastify/compress
 * (plugins/compression.ts): the tag is the identity body's, the same for br, gzip and plain. When If-None-Match
 * matches, the answer becomes a 304 without a body, which the compressor passes through.
 *
 * PUT and DELETE: If-Match and If-None-Match are parsed here and checked by the route inside its write transaction
 * (shared/conditional.ts).
 * A malformed If-Match or If-None-Match is a 400 before anything else, authentication included.
 */
export default fp(
  async (app) => {
    app.decorateRequest('ifMatch', null);
    app.decorateRequest('ifNoneMatch', null);

    app.addHook('onRequest', (request, reply, done) => {
      const { method, headers } = request;
      if (method === 'GET' || method === 'HEAD') {
        readCaching(request, reply);
        const value = headers['if-none-match'];
        if (value !== undefined) request.ifNoneMatch = parseEntityTags(value, 'If-None-Match');
      } else if (method === 'PUT' || method === 'DELETE') {
        const value = headers['if-match'];
        if (value !== undefined) request.ifMatch = parseEntityTags(value, 'If-Match');
        const none = headers['if-none-match'];
        if (none !== undefined) request.ifNoneMatch = parseEntityTags(none, 'If-None-Match');
      }
      done();
    });

    app.addHook('onSend', (request, reply, payload, done) => {
      const { method } = request;
      if ((method !== 'GET' && method !== 'HEAD') || reply.statusCode !== 200) {
        done(null, payload);
        return;
      }
      // A route whose representation has a version tags it itself (posts); the others are tagged by their bytes.
      let tag = reply.getHeader('etag');
      if (typeof tag !== 'string') {
        if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) {
          done(null, payload);
          return;
        }
        tag = entityTag(payload);
        reply.header('etag', tag);
      }
      if (request.ifNoneMatch === null || !weakMatch(request.ifNoneMatch, tag)) {
        done(null, payload);
        return;
      }
      // 304: no body and no headers that describe one (RFC 9110 §15.4.5). Fastify's HEAD handler needs a payload
      // to measure (null breaks it): an empty one, too small to compress; compression.ts drops the length it sets.
      reply.code(304).removeHeader('content-type').removeHeader('content-length');
      done(null, method === 'HEAD' ? '' : null);
    });
  },
  { name: 'conditional', dependencies: ['security'] },
);
