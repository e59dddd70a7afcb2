import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from './errors.js';

/**
 * Keyset pagination. Every collection is ordered by one integer key (an id, which only grows), so a page is
 * "the next `limit` rows after key K" over an index: its cost depends on neither the table size nor the depth.
 *
 * The cursor carries the collection it belongs to and the last key, signed with a key kept in the database (so
 * every server process behind a load balancer accepts every other's cursors). A cursor from another collection,
 * an edited one or garbage is a 400.
 */
export interface CursorCodec {
  encode(scope: string, key: number): string;
  /** The key after which the next page starts; throws a 400 naming `cursor` when the cursor is not valid here. */
  decode(scope: string, cursor: string): number;
}

export function createCursorCodec(secret: string): CursorCodec {
  const sign = (payload: string) => createHmac('sha256', secret).update(payload).digest().subarray(0, 12);
  return {
    encode(scope, key) {
      const payload = `${scope}|${key}`;
      return `${Buffer.from(String(key)).toString('base64url')}.${sign(payload).toString('base64url')}`;
    },
    decode(scope, cursor) {
      const invalid = AppError.badRequest('cursor', 'is not a valid cursor for this collection');
      const [keyPart, macPart, extra] = cursor.split('.');
      if (!keyPart || !macPart || extra !== undefined) throw invalid;
      const keyText = Buffer.from(keyPart, 'base64url').toString();
      if (!/^(0|[1-9][0-9]{0,15})$/.test(keyText)) throw invalid;
      const key = Number(keyText);
      const expected = sign(`${scope}|${key}`);
      const given = Buffer.from(macPart, 'base64url');
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid;
      return key;
    },
  };
}

export interface Page<T> {
  items: T[];
  /** The key to continue after, when more items follow. */
  nextKey?: number;
}

/** Repositories fetch `limit + 1` rows; this trims the extra one and says where the next page starts. */
export function toPage<T>(rows: T[], limit: number, keyOf: (row: T) => number): Page<T> {
  if (rows.length <= limit) return { items: rows };
  const items = rows.slice(0, limit);
  return { items, nextKey: keyOf(items[items.length - 1] as T) };
}

/**
 * Sets `Link: <…>; rel="next"` (RFC 8288) when the page has a successor: the same URL with the new cursor,
 * rooted at the public base URL.
 */
export function setNextLink(
  request: FastifyRequest,
  reply: FastifyReply,
  page: Page<unknown>,
  scope: string,
): void {
  if (page.nextKey === undefined) return;
  const { publicUrl } = request.server.config;
  const current = new URL(request.url, 'http://placeholder');
  current.searchParams.set('cursor', request.server.cursors.encode(scope, page.nextKey));
  reply.header('link', `<${publicUrl}${current.pathname}?${current.searchParams.toString()}>; rel="next"`);
}

/** Decodes the request's cursor for `scope`, if it has one. */
export function afterKey(request: FastifyRequest, scope: string, cursor: string | undefined): number | undefined {
  return cursor === undefined ? undefined : request.server.cursors.decode(scope, cursor);
}
