#!/usr/bin/env node
/**
 * Operator commands, using the same configuration (DATABASE_URL, PASSWORD_HASH_MEMORY_KIB, …) as the server:
 *   corkboard migrate                     bring the database schema up to date
 *   corkboard create-admin <username>     create an admin (password from ADMIN_PASSWORD or the first line of stdin),
 *                                         or promote an existing user of that name to admin
 *   corkboard seed --demo [--force]       fill the database with a small demo community, through the API
 *   corkboard backup <file> [--force]     online copy of the SQLite database while the server runs
 *   corkboard restore <file>              replace the SQLite database with a backup (server stopped)
 *   corkboard help | --help | -h          this list (also `corkboard <command> --help`)
 */
import { createInterface } from 'node:readline';
import { ConfigError, loadConfig } from '../src/config.js';
import { openStore } from '../src/db/open.js';
import { ensureAdmin } from '../src/modules/users/users.service.js';
import { backup, restore, type CommandOutput } from './backup-restore.js';

const USAGE = [
  'usage: corkboard migrate',
  '       corkboard create-admin <username>   (password: ADMIN_PASSWORD or stdin)',
  '       corkboard seed --demo [--force]',
  '       corkboard backup <file> [--force]',
  '       corkboard restore <file>',
  '       corkboard help',
].join('\n');

/** What `corkboard help` prints: the usage, what each command does, and where it takes its settings. */
const HELP = `${USAGE}

  migrate                bring the database schema up to date
  create-admin <name>    create an admin (password from ADMIN_PASSWORD or the first line of stdin),
                         or promote an existing user of that name to admin
  seed --demo [--force]  fill the database with a small demo community, through the API
  backup <file>          online copy of the SQLite database while the server runs (--force: overwrite <file>)
  restore <file>         replace the SQLite database with a backup (server stopped)

Settings come from the environment, as for the server: DATABASE_URL (default sqlite:data/corkboard.db),
PASSWORD_HASH_MEMORY_KIB, … (see the README).`;

/** `corkboard help`, `--help` or `-h`, also after a command (`corkboard backup --help`). */
const wantsHelp = (argv: string[]) => ['help', '--help', '-h'].includes(argv[0] ?? '') || argv.includes('--help');

const io: CommandOutput = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
};

/** seed, backup and restore: they open the database their own way (restore must not open it at all beforehand). */
async function fileCommand(command: string, args: string[]): Promise<number | undefined> {
  if (command !== 'seed' && command !== 'backup' && command !== 'restore') return undefined;
  const flags = new Set(args.filter((a) => a.startsWith('--')));
  const positional = args.filter((a) => !a.startsWith('--'));
  const known = command === 'seed' ? ['--demo', '--force'] : command === 'backup' ? ['--force'] : [];
  const unknown = [...flags].find((f) => !known.includes(f));
  if (unknown) {
    process.stderr.write(`corkboard ${command}: unknown option ${unknown}\n${USAGE}\n`);
    return 2;
  }
  const config = loadConfig({ ...process.env, ADMIN_USERNAME: undefined, ADMIN_PASSWORD: undefined });
  if (command === 'seed') {
    if (!flags.has('--demo') || positional.length) {
      process.stderr.write(`corkboard seed: only --demo data exists for now\n${USAGE}\n`);
      return 2;
    }
    // Loaded only here: it pulls in the whole application, which backup and restore do not need.
    const { seedDemo } = await import('./seed-demo.js');
    return seedDemo(config, { force: flags.has('--force') }, io);
  }
  const [file, extra] = positional;
  if (!file || extra !== undefined) {
    process.stderr.write(`corkboard ${command}: give exactly one file\n${USAGE}\n`);
    return 2;
  }
  return command === 'backup' ? backup(config.databaseUrl, file, flags.has('--force'), io) : restore(config.databaseUrl, file, io);
}

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
  if (wantsHelp(argv)) {
    // Asked for, so on stdout with success; a usage error prints the same usage on stderr with 2.
    process.stdout.write(`${HELP}\n`);
    return 0;
  }
  const [command, username] = argv;
  const handled = await fileCommand(command ?? '', argv.slice(1));
  if (handled !== undefined) return handled;
  if (command !== 'migrate' && !(command === 'create-admin' && username)) {
    // Before opening the database: a mistyped command must not create an empty database file.
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  // The admin bootstrap variables belong to the server; this command takes the name as an argument.
  const config = loadConfig({ ...process.env, ADMIN_USERNAME: undefined, ADMIN_PASSWORD: undefined });
  const store = openStore(config.databaseUrl, {
    poolMax: 2,
    directUrl: config.databaseDirectUrl,
    preparedStatements: config.pgPreparedStatements,
    statementTimeoutMs: config.dbStatementTimeoutMs,
    groupCommit: config.sqliteGroupCommit,
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
      const outcome = await ensureAdmin(store, username, password, config.passwordHashMemoryKib, { promote: true });
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
