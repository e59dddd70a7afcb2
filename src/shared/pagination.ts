import { createHmac, createSecretKey } from 'node:crypto';
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
  /** The same for a collection ordered by a text key (users found by name, in username order). */
  encodeText(scope: string, key: string): string;
  decodeText(scope: string, cursor: string): string;
}

/** A cursor's MAC: the first 12 bytes of HMAC-SHA256(secret, `scope|key`) in base64url, which makes 16 characters. */
const MAC_LENGTH = 16;
const KEY_TEXT = /^(0|[1-9][0-9]{0,15})$/;

/**
 * Cursors read `<key>.<MAC>`. The key is in plain digits: it is no secret (every item shows its id), and the MAC is
 * what makes an edited cursor a 400. Earlier versions wrote the key in base64url (`MTQ4NQ` for 1485, always a letter
 * first, the same MAC); such cursors are still accepted, so that a client paging through an upgrade is not cut off.
 */
export function createCursorCodec(secret: string): CursorCodec {
  // A KeyObject made once: given the secret as a string, every createHmac call would convert it again.
  const key = createSecretKey(Buffer.from(secret));
  const macOf = (payload: string) => createHmac('sha256', key).update(payload).digest('base64url').slice(0, MAC_LENGTH);
  return {
    encode(scope, key) {
      return `${key}.${macOf(`${scope}|${key}`)}`;
    },
    decode(scope, cursor) {
      // Built only on failure: an error captures a stack trace.
      const invalid = () => AppError.badRequest('cursor', 'is not a valid cursor for this collection');
      const dot = cursor.indexOf('.');
      if (dot < 0 || cursor.length !== dot + 1 + MAC_LENGTH) throw invalid();
      let keyText = cursor.slice(0, dot);
      if (!KEY_TEXT.test(keyText)) keyText = Buffer.from(keyText, 'base64url').toString();
      if (!KEY_TEXT.test(keyText)) throw invalid();
      const key = Number(keyText);
      if (!sameInConstantTime(cursor.slice(dot + 1), macOf(`${scope}|${key}`))) throw invalid();
      return key;
    },
    // `<base64url of the key>.<MAC>`; the MAC covers the key as text, under a scope of its own.
    encodeText(scope, key) {
      return `${Buffer.from(key).toString('base64url')}.${macOf(`${scope}|text|${key}`)}`;
    },
    decodeText(scope, cursor) {
      const dot = cursor.indexOf('.');
      const key = Buffer.from(cursor.slice(0, Math.max(dot, 0)), 'base64url').toString();
      if (dot < 0 || cursor.length !== dot + 1 + MAC_LENGTH || !sameInConstantTime(cursor.slice(dot + 1), macOf(`${scope}|text|${key}`))) {
        throw AppError.badRequest('cursor', 'is not a valid cursor for this collection');
      }
      return key;
    },
  };
}

/** Whether two strings of the same length are equal, in a time that does not tell where they differ. */
function sameInConstantTime(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < b.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/**
 * A page query's `LIMIT limit + 1` (one extra row tells whether a next page exists), written into the SQL text
 * rather than bound as a parameter: SQLite plans a join ordered by an index using the value of its LIMIT, and
 * re-prepares a statement planned from a bound value every time that parameter is bound. A page size is one of at
 * most 100 values, so a literal only multiplies the statement texts by that. `limit` is a validated integer.
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

/**
 * `keysetPage` for a collection ordered by a text key that is unique within it (users found by name, by lower-cased
 * username): `fetch` answers `limit + 1` rows after the key, `keyOf` tells a row's key.
 */
export async function textKeysetPage<Row>(
  request: FastifyRequest,
  reply: FastifyReply,
  scope: string,
  { limit = 20, cursor }: PageRequest,
  fetch: (page: { limit: number; after?: string }) => Promise<Row[]>,
  keyOf: (row: Row) => string,
): Promise<Row[]> {
  const { cursors, config } = request.server;
  const after = cursor === undefined ? undefined : cursors.decodeText(scope, cursor);
  const rows = await fetch({ limit, after });
  if (rows.length <= limit) return rows;
  const items = rows.slice(0, limit);
  const next = withCursor(request.url, cursors.encodeText(scope, keyOf(items[items.length - 1] as Row)));
  reply.header('link', `<${config.publicUrl}${next}>; rel="next"`);
  return items;
}

/** A request target (path and query) of URL characters only: safe as it is inside `<…>` in a Link header. */
const URL_CHARACTERS = new RegExp(`^[${URL_CHARACTER_CLASS}/?]*$`);

/**
 * The request target (path and query, as sent) with its `cursor` parameter replaced by `cursor`, the other
 * parameters kept in their order. A target of URL characters only, which is what clients send, is rebuilt by
 * splitting on `&`, which keeps the parameters exactly as the client wrote them; anything else goes through the
 * URL parser, which percent-encodes it.
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
