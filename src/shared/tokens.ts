import { hash, randomBytes } from 'node:crypto';

/** Bearer tokens are 256 random bits with a recognisable prefix (so secret scanners can spot leaked ones). */
export function newTokenSecret(): string {
  return `cb_${randomBytes(32).toString('base64url')}`;
}

/**
 * Only this hash is stored: a leaked database does not leak usable tokens. Every signed-in request hashes its token:
 * the one-shot `hash` skips the Hash object that `createHash` builds (the same digest).
 */
export function hashToken(token: string): string {
  return hash('sha256', token, 'base64url');
}
