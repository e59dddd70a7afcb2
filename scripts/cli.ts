#!/usr/bin/env node
/**
 * Operator commands, using the same configuration (DATABASE_URL, PASSWORD_HASH_MEMORY_KIB, …) as the server:
 *   corkboard migrate                     bring the database schema up to date
 *   corkboard create-admin <username>     create an admin (password from ADMIN_PASSWORD or the first line of stdin),
 *                                         or promote an existing user of that name to admin
 */
import { createInterface } from 'node:readline';
import { ConfigError, loadConfig } from '../src/config.js';
import { openStore } from '../src/db/open.js';
import { ensureAdmin } from '../src/modules/users/users.service.js';

const USAGE = 'usage: corkboard migrate | corkboard create-admin <username>  (password: ADMIN_PASSWORD or stdin)';

async function readPassword(): Promise<string | undefined> {
  if (process.env.ADMIN_PASSWORD) return process.env.ADMIN_PASSWORD;
  if (process.stdin.isTTY) process.stderr.write('password: ');
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    lines.close();
    return line;
  }
  return undefined;
}

async function main(argv: string[]): Promise<number> {
  const [command, username] = argv;
  // The admin bootstrap variables belong to the server; this command takes the name as an argument.
  const config = loadConfig({ ...process.env, ADMIN_USERNAME: undefined, ADMIN_PASSWORD: undefined });
  const store = openStore(config.databaseUrl, {
    poolMax: 2,
    directUrl: config.databaseDirectUrl,
    preparedStatements: config.pgPreparedStatements,
    statementTimeoutMs: config.dbStatementTimeoutMs,
  });
  try {
    if (command === 'migrate') {
      const applied = await store.migrate();
      process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'the schema is up to date\n');
      return 0;
    }
    if (command === 'create-admin' && username) {
      if (!/^[A-Za-z0-9_]{3,32}$/.test(username)) {
        process.stderr.write('username must be 3 to 32 letters, digits or underscores\n');
        return 2;
      }
      await store.migrate();
      const exists = await store.db.selectFrom('users').select('id').where('username_key', '=', username.toLowerCase()).executeTakeFirst();
      const password = exists ? undefined : await readPassword();
      if (!exists && (!password || password.length < 8 || password.length > 256)) {
        process.stderr.write('a password of 8 to 256 characters is needed (ADMIN_PASSWORD or stdin)\n');
        return 2;
      }
      const outcome = await ensureAdmin(store, username, password, config.passwordHashMemoryKib);
      process.stdout.write(`${username}: ${outcome}\n`);
      return 0;
    }
    process.stderr.write(`${USAGE}\n`);
    return 2;
  } finally {
    await store.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`corkboard: ${error instanceof ConfigError ? `invalid configuration: ${error.message}` : String(error)}\n`);
    process.exit(error instanceof ConfigError ? 2 : 1);
  },
);
