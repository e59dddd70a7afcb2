import { createHash, randomBytes } from 'node:crypto';

/** Bearer tokens are 256 random bits with a recognisable prefix (so secret scanners can spot leaked ones). */
export function newTokenSecret(): string {
  return `cb_${randomBytes(32).toString('base64url')}`;
}

/** Only this hash is stored: a leaked database does not leak usable tokens. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}
