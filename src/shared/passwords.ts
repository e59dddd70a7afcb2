import { randomBytes } from 'node:crypto';
import { hash, verify } from '@node-rs/argon2';

/**
 * Passwords are stored only as Argon2id hashes (OWASP's first choice), in the PHC string format, which carries its
 * own parameters: raising the cost later (PASSWORD_HASH_MEMORY_KIB) keeps old hashes verifiable.
 * The default, 19 MiB with 2 passes, is OWASP's recommended minimum; it takes far less time and memory per
 * sign-in than scrypt at OWASP's equivalent setting (bench/README.md, "Figures behind choices in the code").
 * @see https://cheatsheetseries.owasp.org/cheatsheets/Password_Storage_Cheat_Sheet.html
 */
const TIME_COST = 2;

export function hashPassword(password: string, memoryKib: number): Promise<string> {
  // The library's default algorithm is Argon2id (its `Algorithm` is a const enum, which isolated modules cannot
  // reference); the users test pins the `$argon2id$` prefix.
  return hash(password.normalize('NFC'), {
    memoryCost: memoryKib,
    timeCost: TIME_COST,
    parallelism: 1,
  });
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  try {
    return await verify(stored, password.normalize('NFC'));
  } catch {
    // A malformed stored hash verifies nothing.
    return false;
  }
}

/**
 * A hash of a random password at the configured cost: verified against when a username does not exist, so a
 * token request takes as long for an unknown user as for a wrong password (no username probing by timing).
 */
export function dummyHash(memoryKib: number): Promise<string> {
  return hashPassword(randomBytes(16).toString('hex'), memoryKib);
}
