import { hash } from 'node:crypto';
import fp from 'fastify-plugin';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/types.js';
import { AppError } from './errors.js';

/**
 * Conditional requests, all in one module: the hooks every GET, HEAD, PUT and DELETE goes through (the default
 * export, registered by app.ts), the entity-tags and their comparisons, and the If-Match check a write runs inside
 * its transaction (`ifMatch`, on the routes declared with `config: { preconditions: true }`).
 *
 * Validators (CONTRACT §6.1, RFC 9110 §8.8 and §13). An entity-tag is a strong hash of the exact bytes a GET sends
 * (before any content coding), so equal bodies have equal tags and any change of what the caller is shown changes
 * the tag. The write side renders the current representation with the same serializer, so a tag read with GET is
 * the tag If-Match compares against.
 */

/** One parsed entity-tag: `opaque` keeps its quotes, as the header carries it. */
export interface EntityTag {
  weak: boolean;
  opaque: string;
}
/** A parsed If-Match or If-None-Match: `*` or at least one entity-tag. */
export type EntityTags = '*' | EntityTag[];

/** The strong entity-tag of a body: SHA-1 is collision-resistant enough for a validator and cheap on small bodies. */
export function entityTag(body: string | Buffer): string {
  return `"${hash('sha1', body, 'base64url')}"`;
}

// entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE; etagc = %x21 / %x23-7E / obs-text (RFC 9110 §8.8.3). Node hands header
// values over as latin1, so obs-text is U+0080–U+00FF.
const ENTITY_TAG = /[ \t]*(W\/)?("[\x21\x23-\x7e\x80-\xff]*")[ \t]*/y;
const EMPTY_ELEMENT = /[ \t]*/y;

/**
 * Parses `*` or a comma-separated list of entity-tags (RFC 9110 §13.1.1, §13.1.2). Empty list elements are
 * tolerated (§5.6.1.2); anything else, and a list with no tag at all, is a 400 naming the header, so a client's bug
 * never turns a conditional request into an unconditional one.
 */
export function parseEntityTags(value: string, header: string): EntityTags {
  if (value.trim() === '*') return '*';
  const tags: EntityTag[] = [];
  let at = 0;
  for (;;) {
    ENTITY_TAG.lastIndex = at;
    const match = ENTITY_TAG.exec(value);
    if (match) {
      tags.push({ weak: match[1] !== undefined, opaque: match[2]! });
      at = ENTITY_TAG.lastIndex;
    } else {
      EMPTY_ELEMENT.lastIndex = at;
      EMPTY_ELEMENT.exec(value);
      at = EMPTY_ELEMENT.lastIndex;
    }
    if (at === value.length) break;
    if (value[at] !== ',') throw malformed(header);
    at += 1;
  }
  if (tags.length === 0) throw malformed(header);
  return tags;
}

const malformed = (header: string) => AppError.badRequest(header, 'must be * or a comma-separated list of entity-tags ("…" or W/"…")');

/** If-None-Match's weak comparison (§8.8.3.2): the opaque parts match, whether either tag is weak or not. */
export function weakMatch(tags: EntityTags, tag: string): boolean {
  return tags === '*' || tags.some((t) => t.opaque === tag);
}

/** If-Match's strong comparison: only a strong listed tag can match (the service's own tags are all strong). */
export function strongMatch(tags: EntityTags, tag: string): boolean {
  return tags === '*' || tags.some((t) => !t.weak && t.opaque === tag);
}

/**
 * The entity-tag of `value` as a GET answering it with `schema` would tag it: the same compiled serializer Fastify
 * uses for that response schema (field order, dropped extras and all), then the same hash.
 */
export function tagOf(reply: FastifyReply, schema: object, value: unknown): string {
  return entityTag(reply.compileSerializationSchema(schema as Record<string, unknown>)(value as Record<string, unknown>));
}

/** `tagOf` for one schema, as the tag function of `ifMatch`. */
export const bodyTag =
  (reply: FastifyReply, schema: object) =>
  (value: unknown): string =>
    tagOf(reply, schema, value);

/**
 * Tags for a representation that is a function of its row's version alone (a post: the same body to every
 * caller), computed without rendering it. `context` is what the body is rendered with besides the row (its schema
 * and the public URL, fixed for the life of the process); a tag is a short hash of the context, then the version's
 * fields: ones that are all in the body and change whenever anything it shows changes (its id, its `updatedAt`,
 * which every write moves forward, and its counters). So equal bodies have equal tags and any change of the body
 * changes its tag, as with a hash of the body, for the cost of joining a few fields instead of hashing the bytes.
 */
export function versionTags(context: string): (...version: ReadonlyArray<string | number>) => string {
  const prefix = hash('sha1', context, 'base64url').slice(0, 10);
  return (...version) => `"${prefix}.${version.join('.')}"`;
}

/**
 * A check a service runs inside its write transaction, after locking the row and before changing it. It resolves to
 * the `updatedAt` of the representation it matched: a write stamps a later `updatedAt` (`updatedAfter`), so the
 * representation, hence its tag, always changes, even when the new fields equal the old within one millisecond. Of
 * two writes carrying the same If-Match, the second then never matches. Undefined when only If-None-Match was sent
 * and no current representation was rendered: nothing matched, so the write goes on as it would without the header.
 */
export type Precondition = (db: Kysely<Database>) => Promise<string | undefined>;

/** Now as an ISO timestamp, but at least one millisecond after `previous` (ISO strings order as the times do). */
export function updatedAfter(previous: string | undefined): string {
  const now = new Date().toISOString();
  return previous === undefined || now > previous ? now : new Date(Date.parse(previous) + 1).toISOString();
}

/**
 * The If-Match and If-None-Match preconditions of a PUT or DELETE, or undefined when the request has neither (the
 * write is unconditional, as before). `render` reads the current representation inside the transaction exactly as
 * the caller's GET would, and `tag` tags it as that GET does. If-Match (CONTRACT §6.1): when no listed tag matches
 * by strong comparison, or the caller can no longer see it (undefined: even `*` needs a current representation,
 * RFC 9110 §13.1.1), the answer is 412. If-None-Match (RFC 9110 §13.1.2, evaluated after If-Match): when the
 * representation exists and `*` or a listed tag matches it by weak comparison, the answer is 412. A 412 rolls the
 * transaction back. A resource already missing before the transaction is the route's usual 404 or 400.
 */
export function ifMatch<T>(
  request: FastifyRequest,
  tag: (current: T) => string,
  render: (db: Kysely<Database>) => Promise<T | undefined>,
  updatedAt: (current: T) => string,
): Precondition | undefined {
  // A route that checks preconditions says so in its options, which is what documents its If-Match and 412.
  if (request.routeOptions.config.preconditions !== true) {
    throw new Error(`${request.method} ${request.routeOptions.url}: declare config: { preconditions: true } to call ifMatch`);
  }
  const { ifMatch: tags, ifNoneMatch: noneOf } = request;
  if (!tags && !noneOf) return undefined;
  return async (db) => {
    const current = await render(db);
    if (tags && (current === undefined || !strongMatch(tags, tag(current)))) {
      throw new AppError(412, 'If-Match names no current entity-tag of this resource; read it again', [
        { field: 'If-Match', message: 'matches no current entity-tag' },
      ]);
    }
    if (current === undefined) return undefined;
    if (noneOf && weakMatch(noneOf, tag(current))) {
      throw new AppError(412, 'If-None-Match matches the current representation of this resource', [
        { field: 'If-None-Match', message: 'matches the current entity-tag' },
      ]);
    }
    return updatedAt(current);
  };
}

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
 * ETag: the one its route set (a post's version, `versionTags`), else a hash of the serialized body, here in
 * onSend. This hook is an instance hook, so it runs before the route-level onSend of @fastify/compress
 * (plugins/compression.ts): the tag is the identity body's, the same for br, gzip and plain. When If-None-Match
 * matches, the answer becomes a 304 without a body, which the compressor passes through.
 *
 * PUT and DELETE: If-Match and If-None-Match are parsed here and checked by the route inside its write transaction
 * (`ifMatch`).
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

declare module 'fastify' {
  interface FastifyRequest {
    /** The parsed If-Match of a PUT or DELETE; null without one (see the plugin above). */
    ifMatch: EntityTags | null;
    /** The parsed If-None-Match of a GET, HEAD, PUT or DELETE; null without one. */
    ifNoneMatch: EntityTags | null;
  }
}
