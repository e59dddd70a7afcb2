import { createHmac } from 'node:crypto';

/** A key as CONTRACT §6.2 allows it: 1–255 visible ASCII characters (no space, nothing outside ASCII). */
const VISIBLE_ASCII = /^[\x21-\x7E]{1,255}$/;

/**
 * The key an `Idempotency-Key` field value carries, or undefined when the value is malformed. The draft defines
 * the field as a structured-field string (RFC 9651 §3.3.3: `"…"` with `\"` and `\\` as the only escapes, nothing
 * after the closing quote, no parameters); a bare value is accepted too, as many clients send one. `"abc"` and
 * `abc` are the same key. A value that opens with a quote is a structured-field string or nothing: a client that
 * meant one and got it wrong gets a 400 rather than a different key.
 */
export function parseIdempotencyKey(value: string): string | undefined {
  if (!value.startsWith('"')) return VISIBLE_ASCII.test(value) ? value : undefined;
  let key = '';
  for (let i = 1; i < value.length; i++) {
    const c = value[i];
    if (c === '"') return i === value.length - 1 && VISIBLE_ASCII.test(key) ? key : undefined;
    if (c === '\\') {
      const escaped = value[++i];
      if (escaped !== '"' && escaped !== '\\') return undefined;
      key += escaped;
    } else {
      key += c;
    }
  }
  return undefined;
}

/** Deeper than any body a create accepts: such a body fails validation, so its fingerprint is never used. */
const MAX_DEPTH = 16;

/** JSON with object keys sorted at every level and no whitespace: two bodies that parse alike write alike. */
export function canonicalJson(value: unknown, depth = 0): string {
  if (depth > MAX_DEPTH) return '"…"';
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item, depth + 1)).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const object = value as Record<string, unknown>;
    const members = Object.keys(object)
      .sort()
      .map((name) => `${JSON.stringify(name)}:${canonicalJson(object[name], depth + 1)}`);
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * The fingerprint of a request body: HMAC-SHA-256 of its canonical JSON. Keyed, not a bare SHA-256, because a
 * sign-up body holds a password: a plain hash kept in the table would let whoever reads that table test guesses
 * at SHA-256 speed, around the Argon2id hash that protects the password everywhere else.
 */
export function fingerprint(body: unknown, secret: Buffer): string {
  return createHmac('sha256', secret).update(canonicalJson(body)).digest('base64url');
}
