import { createHmac, createSecretKey, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sql, type RawBuilder } from 'kysely';
import { AppError } from './errors.js';
import { URL_CHARACTER_CLASS } from './links.js';

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
  // A KeyObject made once: given the secret as a string, every createHmac call would convert it again.
  const key = createSecretKey(Buffer.from(secret));
  const sign = (payload: string) => createHmac('sha256', key).update(payload).digest().subarray(0, 12);
  return {
    encode(scope, key) {
      const payload = `${scope}|${key}`;
      return `${Buffer.from(String(key)).toString('base64url')}.${sign(payload).toString('base64url')}`;
    },
    decode(scope, cursor) {
      // Built only on failure: an error captures a stack trace, which cost ~20 µs on every page after the first.
      const invalid = () => AppError.badRequest('cursor', 'is not a valid cursor for this collection');
      const [keyPart, macPart, extra] = cursor.split('.');
      if (!keyPart || !macPart || extra !== undefined) throw invalid();
      const keyText = Buffer.from(keyPart, 'base64url').toString();
      if (!/^(0|[1-9][0-9]{0,15})$/.test(keyText)) throw invalid();
      const key = Number(keyText);
      const expected = sign(`${scope}|${key}`);
      const given = Buffer.from(macPart, 'base64url');
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid();
      return key;
    },
  };
}

/**
 * A page query's `LIMIT limit + 1` (one extra row tells whether a next page exists), written into the SQL text
 * rather than bound as a parameter. SQLite plans a join ordered by an index using the value of its LIMIT, and a
 * statement planned from a bound value is prepared again every time that parameter is bound: counted with
 * callgrind on the feed page, ~190,000 instructions a query, more than running it. A page size is one of at most
 * 100 values, so a literal only multiplies the statement texts by that. `limit` is a validated integer.
 */
export const pageLimit = (limit: number): RawBuilder<number> => sql.lit(limit + 1);

export interface PageRequest {
  limit?: number;
  cursor?: string;
}

/**
 * One page of a collection ordered by `id`: decodes the request's cursor for `scope` (400 when it is not one of
 * this collection's), fetches `limit + 1` rows after it, and, when that extra row shows that more follow, sets
 * `Link: <…>; rel="next"` (RFC 8288) to the same URL with the next cursor, rooted at the public base URL.
 * Answers the page's rows.
 */
export async function keysetPage<Row extends { id: number }>(
  request: FastifyRequest,
  reply: FastifyReply,
  scope: string,
  { limit = 20, cursor }: PageRequest,
  fetch: (page: { limit: number; after?: number }) => Promise<Row[]>,
): Promise<Row[]> {
  const { cursors, config } = request.server;
  const after = cursor === undefined ? undefined : cursors.decode(scope, cursor);
  const rows = await fetch({ limit, after });
  if (rows.length <= limit) return rows;
  const items = rows.slice(0, limit);
  const next = withCursor(request.url, cursors.encode(scope, (items[items.length - 1] as Row).id));
  reply.header('link', `<${config.publicUrl}${next}>; rel="next"`);
  return items;
}

/** A request target (path and query) of URL characters only: safe as it is inside `<…>` in a Link header. */
const URL_CHARACTERS = new RegExp(`^[${URL_CHARACTER_CLASS}/?]*$`);

/**
 * The request target (path and query, as sent) with its `cursor` parameter replaced by `cursor`, the other
 * parameters kept in their order. A target of URL characters only, which is what clients send, is rebuilt by
 * splitting on `&`: parsing it as a WHATWG URL and its query was a fifth of what a page after the first costs
 * more than the first page (counted with callgrind). Anything else goes through the URL parser, which
 * percent-encodes it.
 */
export function withCursor(target: string, cursor: string): string {
  if (!URL_CHARACTERS.test(target)) {
    const url = new URL(target, 'http://placeholder');
    url.searchParams.set('cursor', cursor);
    return `${url.pathname}?${url.searchParams.toString()}`;
  }
  const q = target.indexOf('?');
  const kept = q < 0 ? [] : target.slice(q + 1).split('&').filter((pair) => pair !== '' && parameterName(pair) !== 'cursor');
  kept.push(`cursor=${cursor}`);
  return `${q < 0 ? target : target.slice(0, q)}?${kept.join('&')}`;
}

/** A query pair's name as the query parser reads it (`cur%73or` is `cursor` too). */
function parameterName(pair: string): string {
  const eq = pair.indexOf('=');
  const name = eq < 0 ? pair : pair.slice(0, eq);
  if (!/[%+]/.test(name)) return name;
  try {
    return decodeURIComponent(name.replace(/\+/g, ' '));
  } catch {
    return name;
  }
}
