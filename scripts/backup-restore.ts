import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import SQLite from 'better-sqlite3';

/**
 * `corkboard backup <file>` and `corkboard restore <file>` for the SQLite backend. PostgreSQL has its own tools
 * (pg_dump / pg_restore), which these commands name instead of reimplementing.
 */

export interface CommandOutput {
  out(text: string): void;
  err(text: string): void;
}

/** Kysely's bookkeeping table: present in every database corkboard has migrated, absent from any other. */
const MIGRATION_TABLE = 'kysely_migration';

/** Pages per backup step: all of them, so the copy is one read transaction (see `backup`). */
const ALL_PAGES = 0x7fffffff;

export function sqlitePath(databaseUrl: string): string | undefined {
  if (!databaseUrl.startsWith('sqlite:')) return undefined;
  return databaseUrl.slice('sqlite:'.length);
}

export function pgDumpHint(file: string): string {
  return `pg_dump -Fc --dbname="$DATABASE_URL" --file=${shellQuote(file)}`;
}

export function pgRestoreHint(file: string): string {
  return `pg_restore --clean --if-exists --no-owner --dbname="$DATABASE_URL" ${shellQuote(file)}`;
}

function shellQuote(text: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

/** A name next to `file` (same directory, so same file system: rename is atomic) that nothing uses. */
function tempSibling(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
}

function removeIfPresent(file: string): void {
  fs.rmSync(file, { force: true });
}

/** fsync a file, then its directory, so a rename that follows (or precedes) is durable. */
function syncFile(file: string): void {
  const fd = fs.openSync(file, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

function syncDirectory(dir: string): void {
  let fd: number | undefined;
  try {
    fd = fs.openSync(dir, 'r');
    fs.fsyncSync(fd);
  } catch {
    // Some platforms (Windows) cannot open or fsync a directory; the rename itself is still atomic there.
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

function isMemory(file: string): boolean {
  return file === ':memory:' || file === '';
}

/**
 * Copies the live database with SQLite's online backup API over a connection of its own, while the server goes on
 * serving. The copy is made in one backup step: that step reads inside one read transaction, so the copy is the
 * database as of one instant (every write committed before it, none after) and, in WAL mode, writers are not
 * blocked meanwhile. Several small steps would let the copy restart each time the server writes, forever under
 * steady load. The copy goes to a temporary file that is renamed into place only once it is complete.
 */
export async function backup(databaseUrl: string, target: string, force: boolean, io: CommandOutput): Promise<number> {
  const source = sqlitePath(databaseUrl);
  if (source === undefined) {
    io.err(`corkboard backup copies SQLite databases only; DATABASE_URL is PostgreSQL. Use pg_dump:\n  ${pgDumpHint(target)}\n`);
    return 1;
  }
  if (isMemory(source)) {
    io.err('DATABASE_URL is an in-memory database: there is nothing on disk to back up\n');
    return 1;
  }
  if (!fs.existsSync(source)) {
    io.err(`no database at ${source} (DATABASE_URL): nothing to back up\n`);
    return 1;
  }
  const destination = path.resolve(target);
  if (destination === path.resolve(source)) {
    io.err('the backup file must not be the database itself\n');
    return 1;
  }
  if (fs.existsSync(destination) && !force) {
    io.err(`${target} exists already; choose another name or pass --force to overwrite it\n`);
    return 1;
  }
  if (!fs.existsSync(path.dirname(destination))) {
    io.err(`the directory ${path.dirname(destination)} does not exist\n`);
    return 1;
  }

  const temp = tempSibling(destination);
  // Not readonly: a read-only connection cannot take part in WAL recovery if it were needed, and the backup
  // never writes to the source anyway.
  const db = new SQLite(source, { fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    if (!hasMigrationTable(db)) {
      io.err(`${source} is not a corkboard database (no ${MIGRATION_TABLE} table)\n`);
      return 1;
    }
    const started = Date.now();
    const result = await db.backup(temp, { progress: () => ALL_PAGES });
    // The copy inherits WAL mode from the live database; in rollback mode it is one self-contained file, which
    // can be opened (read-only, copied, checked) without -wal and -shm files appearing next to it.
    selfContained(temp);
    syncFile(temp);
    fs.renameSync(temp, destination);
    syncDirectory(path.dirname(destination));
    io.out(`backed up ${source} to ${target} (${result.totalPages} pages, ${fs.statSync(destination).size} bytes, ${Date.now() - started} ms)\n`);
    return 0;
  } finally {
    db.close();
    removeIfPresent(temp);
  }
}

function selfContained(file: string): void {
  const db = new SQLite(file, { fileMustExist: true });
  try {
    db.pragma('journal_mode = DELETE');
  } finally {
    db.close();
  }
}

function hasMigrationTable(db: SQLite.Database): boolean {
  return db.prepare(`select 1 from sqlite_schema where type = 'table' and name = ?`).get(MIGRATION_TABLE) !== undefined;
}

/** Why `file` cannot be restored from, or undefined when it is a sound corkboard SQLite database. */
function checkRestorable(file: string): string | undefined {
  let header: Buffer;
  try {
    const fd = fs.openSync(file, 'r');
    try {
      header = Buffer.alloc(16);
      fs.readSync(fd, header, 0, 16, 0);
    } finally {
      fs.closeSync(fd);
    }
  } catch (error) {
    return `cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`;
  }
  if (header.toString('latin1') !== 'SQLite format 3\0') return `${file} is not a SQLite database`;
  let db: SQLite.Database | undefined;
  try {
    db = new SQLite(file, { readonly: true, fileMustExist: true });
    const rows = db.pragma('integrity_check') as { integrity_check: string }[];
    const problems = rows.map((r) => r.integrity_check).filter((r) => r !== 'ok');
    if (problems.length) return `${file} fails PRAGMA integrity_check: ${problems.slice(0, 3).join('; ')}`;
    if (!hasMigrationTable(db)) return `${file} is a SQLite database but not a corkboard one (no ${MIGRATION_TABLE} table)`;
    const migrations = db.prepare(`select count(*) as n from ${MIGRATION_TABLE}`).get() as { n: number };
    if (migrations.n === 0) return `${file} has never been migrated (its ${MIGRATION_TABLE} table is empty)`;
    return undefined;
  } catch (error) {
    return `${file} is not a usable SQLite database: ${error instanceof Error ? error.message : String(error)}`;
  } finally {
    db?.close();
  }
}

/**
 * Takes the target database for ourselves, or says why not. Switching a WAL database back to rollback mode needs
 * every other connection closed (SQLite answers SQLITE_BUSY otherwise), and an idle server still has its
 * connection open, so this notices a running server even when it is not writing; BEGIN EXCLUSIVE then holds the
 * file against any newcomer until the replacement is in place. The database is about to be replaced, so changing
 * its journal mode costs nothing.
 */
function lockTarget(file: string): { db: SQLite.Database } | { busy: string } | { notADatabase: true } {
  let db: SQLite.Database | undefined;
  try {
    db = new SQLite(file, { fileMustExist: true, timeout: 0 });
    const mode = db.pragma('journal_mode = DELETE', { simple: true }) as string;
    if (mode !== 'delete') {
      db.close();
      return { busy: `could not take ${file} for itself (journal mode stayed "${mode}"): is the server still running?` };
    }
    db.exec('BEGIN EXCLUSIVE');
    return { db };
  } catch (error) {
    db?.close();
    const code = (error as { code?: string }).code ?? '';
    if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT') return { notADatabase: true };
    if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
      return { busy: `${file} is in use by another process (${code}): stop the server before restoring` };
    }
    throw error;
  }
}

/**
 * Replaces the database at DATABASE_URL with a backup, for a stopped server. The backup is checked first
 * (SQLite header, PRAGMA integrity_check, corkboard's migration table), copied next to the target with the backup
 * API (which also folds in a -wal file lying next to the backup), and renamed over the target; stale -wal and -shm
 * files of the old database are removed, since SQLite would otherwise replay the old WAL onto the new file.
 */
export async function restore(databaseUrl: string, from: string, io: CommandOutput): Promise<number> {
  const target = sqlitePath(databaseUrl);
  if (target === undefined) {
    io.err(`corkboard restore replaces SQLite databases only; DATABASE_URL is PostgreSQL. Use pg_restore:\n  ${pgRestoreHint(from)}\n`);
    return 1;
  }
  if (isMemory(target)) {
    io.err('DATABASE_URL is an in-memory database: there is no file to restore into\n');
    return 1;
  }
  if (!fs.existsSync(from)) {
    io.err(`${from} does not exist\n`);
    return 1;
  }
  if (path.resolve(from) === path.resolve(target)) {
    io.err('the backup file is the database itself\n');
    return 1;
  }
  // Opening a WAL-mode file, even read-only, creates -wal and -shm files next to it: those we made are removed again.
  const sideFiles = ['-wal', '-shm'].map((suffix) => `${from}${suffix}`).filter((file) => !fs.existsSync(file));
  try {
    return await restoreChecked(target, from, io);
  } finally {
    for (const file of sideFiles) {
      if (fs.existsSync(file) && (file.endsWith('-shm') || fs.statSync(file).size === 0)) removeIfPresent(file);
    }
  }
}

async function restoreChecked(target: string, from: string, io: CommandOutput): Promise<number> {
  const problem = checkRestorable(from);
  if (problem) {
    io.err(`refusing to restore: ${problem}; ${target} is unchanged\n`);
    return 1;
  }
  const targetDir = path.dirname(path.resolve(target));
  if (!fs.existsSync(targetDir)) fs.mkdirSync(targetDir, { recursive: true });

  const temp = tempSibling(path.resolve(target));
  let lock: ReturnType<typeof lockTarget> | undefined;
  try {
    const source = new SQLite(from, { readonly: true, fileMustExist: true });
    try {
      await source.backup(temp, { progress: () => ALL_PAGES });
    } finally {
      source.close();
    }
    // The server sets WAL mode again when it opens the file.
    selfContained(temp);
    syncFile(temp);

    if (fs.existsSync(target)) {
      lock = lockTarget(target);
      if ('busy' in lock) {
        io.err(`refusing to restore: ${lock.busy}; ${target} is unchanged\n`);
        return 1;
      }
      if ('notADatabase' in lock) io.err(`note: ${target} was not a readable SQLite database; replacing it\n`);
    }
    removeIfPresent(`${target}-wal`);
    removeIfPresent(`${target}-shm`);
    removeIfPresent(`${target}-journal`);
    fs.renameSync(temp, target);
    syncDirectory(targetDir);
    io.out(`restored ${target} from ${from}; start the server again\n`);
    return 0;
  } finally {
    if (lock && 'db' in lock) {
      // Nothing was written through this connection: its transaction ends without a journal to clean up.
      lock.db.exec('ROLLBACK');
      lock.db.close();
    }
    removeIfPresent(temp);
  }
}
