import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli-process.js';
import { backend } from '../helpers/database.js';
import { killLeftovers, request, startServer } from '../helpers/server-process.js';

/**
 * `corkboard backup` and `corkboard restore`, run as the built command next to the built server. They work on
 * SQLite files; on PostgreSQL they refuse and name pg_dump / pg_restore instead.
 */

let dirs: string[] = [];

afterEach(async () => {
  await killLeftovers();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  dirs = [];
});

function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'corkboard-cli-'));
  dirs.push(dir);
  return dir;
}

/** The bytes of the database and whether it has -wal / -shm files: "untouched" means all of it is the same. */
function fingerprint(file: string): string {
  const sides = ['-wal', '-shm'].map((s) => (fs.existsSync(`${file}${s}`) ? createHash('sha256').update(fs.readFileSync(`${file}${s}`)).digest('hex') : 'none'));
  return [createHash('sha256').update(fs.readFileSync(file)).digest('hex'), ...sides].join(' ');
}

function postIds(file: string): Set<number> {
  const db = new SQLite(file, { readonly: true, fileMustExist: true });
  try {
    return new Set((db.prepare('select id from posts').all() as { id: number }[]).map((r) => r.id));
  } finally {
    db.close();
  }
}

function integrity(file: string): string {
  const db = new SQLite(file, { readonly: true, fileMustExist: true });
  try {
    return (db.pragma('integrity_check') as { integrity_check: string }[]).map((r) => r.integrity_check).join('; ');
  } finally {
    db.close();
  }
}

describe.runIf(backend === 'sqlite')('corkboard backup and restore (SQLite)', () => {
  it('backs up while the server takes writes, then restores that copy over the stopped server’s database', async () => {
    const dir = tempDir();
    const live = path.join(dir, 'corkboard.db');
    const url = `sqlite:${live}`;
    const backupFile = path.join(dir, 'backup.db');
    let server = await startServer({ databaseUrl: url });

    const signUp = await request(server.url, 'POST', '/users', { body: { username: 'writer', password: 'writer-password' } });
    expect(signUp.status).toBe(201);
    const userId = signUp.json<{ id: number }>().id;
    const token = (await request(server.url, 'POST', '/tokens', { body: { username: 'writer', password: 'writer-password' } })).json<{ token: string }>().token;

    // Writers that keep creating posts, noting when each create was acknowledged.
    const acknowledged: { id: number; at: number }[] = [];
    const failures: string[] = [];
    let writing = true;
    let sequence = 0;
    const writer = async () => {
      while (writing) {
        const n = ++sequence;
        const res = await request(server.url, 'POST', `/users/${userId}/posts`, { token, body: { title: `post ${n}`, content: `written under load, #${n}` } });
        if (res.status === 201) acknowledged.push({ id: res.json<{ id: number }>().id, at: performance.now() });
        else failures.push(`${res.status} ${res.text}`);
      }
    };
    const writers = Array.from({ length: 4 }, writer);
    while (acknowledged.length < 300 && failures.length === 0) await new Promise((r) => setTimeout(r, 20));

    const backup = await runCli(['backup', backupFile], { DATABASE_URL: url });
    const ackedAfterBackup = acknowledged.filter((a) => a.at > backup.endedAt).length;
    // Keep writing a little longer so the live database moves past the backup.
    while (acknowledged.filter((a) => a.at > backup.endedAt).length < ackedAfterBackup + 50 && failures.length === 0) {
      await new Promise((r) => setTimeout(r, 20));
    }
    writing = false;
    await Promise.all(writers);

    expect(failures).toEqual([]);
    expect(backup.code, backup.stderr).toBe(0);
    expect(backup.stdout).toContain('backed up');
    expect(integrity(backupFile)).toBe('ok');
    // Every create acknowledged before the backup began is in the copy.
    const before = acknowledged.filter((a) => a.at < backup.startedAt);
    expect(before.length).toBeGreaterThanOrEqual(300);
    const inBackup = postIds(backupFile);
    expect(before.filter((a) => !inBackup.has(a.id))).toEqual([]);
    // The copy is a single file: no -wal or -shm next to it (it can be moved and copied on its own).
    expect(fs.existsSync(`${backupFile}-wal`)).toBe(false);
    expect(fs.existsSync(`${backupFile}-shm`)).toBe(false);
    const later = acknowledged.filter((a) => a.at > backup.endedAt && !inBackup.has(a.id));
    expect(later.length).toBeGreaterThan(0);

    // A second backup to the same file needs --force, and leaves the first one alone without it.
    const kept = fingerprint(backupFile);
    const refused = await runCli(['backup', backupFile], { DATABASE_URL: url });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('--force');
    expect(fingerprint(backupFile)).toBe(kept);

    // Restoring over a running server is refused, and the server's data stays as it is.
    const busy = await runCli(['restore', backupFile], { DATABASE_URL: url });
    expect(busy.code).toBe(1);
    expect(busy.stderr).toMatch(/in use|still running/);
    expect((await request(server.url, 'GET', `/posts/${later[0]!.id}`)).status).toBe(200);

    // Killed rather than stopped: a crashed server leaves its -wal file behind, which must not be replayed onto the
    // restored database.
    await server.stop('SIGKILL');
    expect(fs.statSync(`${live}-wal`).size).toBeGreaterThan(0);
    const restored = await runCli(['restore', backupFile], { DATABASE_URL: url });
    expect(restored.code, restored.stderr).toBe(0);
    expect(restored.stdout).toContain('restored');
    expect(fs.existsSync(`${live}-wal`)).toBe(false);
    expect(fs.existsSync(`${live}-shm`)).toBe(false);
    expect(fingerprint(backupFile)).toBe(kept);

    server = await startServer({ databaseUrl: url });
    // What the backup holds is served again...
    for (const { id } of before.slice(-20)) {
      const res = await request(server.url, 'GET', `/posts/${id}`);
      expect(res.status).toBe(200);
      expect(res.json()).toMatchObject({ id, ownerId: userId });
    }
    const signIn = await request(server.url, 'POST', '/tokens', { body: { username: 'writer', password: 'writer-password' } });
    expect(signIn.status).toBe(201);
    // ...and what was written after it is gone: the old database (and its WAL) did not leak into the new one.
    for (const { id } of later.slice(0, 20)) expect((await request(server.url, 'GET', `/posts/${id}`)).status).toBe(404);
    const user = await request(server.url, 'GET', `/users/${userId}`);
    expect(user.json<{ postCount: number }>().postCount).toBe(inBackup.size);
    await server.stop();
  });

  it('refuses to restore from a file that is not a sound corkboard database, and leaves the target as it was', async () => {
    const dir = tempDir();
    const live = path.join(dir, 'corkboard.db');
    const url = `sqlite:${live}`;
    const server = await startServer({ databaseUrl: url });
    expect((await request(server.url, 'POST', '/users', { body: { username: 'keeper', password: 'keeper-password' } })).status).toBe(201);
    const good = path.join(dir, 'good.db');
    expect((await runCli(['backup', good], { DATABASE_URL: url })).code).toBe(0);
    await server.stop();
    const untouched = fingerprint(live);

    const text = path.join(dir, 'notes.txt');
    fs.writeFileSync(text, 'this is not a database\n'.repeat(200));

    // Same size and header as the good backup, but pages overwritten with garbage.
    const corrupt = path.join(dir, 'corrupt.db');
    const bytes = fs.readFileSync(good);
    const pageSize = bytes.readUInt16BE(16);
    for (let offset = pageSize; offset < bytes.length; offset += pageSize) bytes.fill(0x5a, offset + 8, offset + pageSize);
    fs.writeFileSync(corrupt, bytes);

    const truncated = path.join(dir, 'truncated.db');
    fs.writeFileSync(truncated, fs.readFileSync(good).subarray(0, Math.floor(bytes.length / 2)));

    // A sound SQLite database, but not one of corkboard's.
    const foreign = path.join(dir, 'foreign.db');
    const other = new SQLite(foreign);
    other.exec('create table notes (id integer primary key, body text); insert into notes (body) values (\'hello\')');
    other.close();

    for (const [file, why] of [
      [text, /not a SQLite database/],
      [corrupt, /integrity_check|not a usable SQLite database/],
      [truncated, /integrity_check|not a usable SQLite database/],
      [foreign, /not a corkboard one/],
      [path.join(dir, 'missing.db'), /does not exist/],
    ] as const) {
      const res = await runCli(['restore', file], { DATABASE_URL: url });
      expect(res.code, `${path.basename(file)}: ${res.stdout}`).not.toBe(0);
      expect(res.stderr).toMatch(why);
      expect(fingerprint(live)).toBe(untouched);
      expect(fs.readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    }

    // The good backup still restores, and the data is there.
    expect((await runCli(['restore', good], { DATABASE_URL: url })).code).toBe(0);
    const again = await startServer({ databaseUrl: url });
    expect((await request(again.url, 'GET', '/users?username=keeper')).json<unknown[]>()).toHaveLength(1);
    await again.stop();
  });
});

describe.runIf(backend === 'postgres')('corkboard backup and restore (PostgreSQL)', () => {
  it('refuse and name pg_dump and pg_restore instead', async () => {
    const url = process.env.TEST_DATABASE_URL!;
    const file = path.join(tempDir(), 'corkboard.dump');
    const backup = await runCli(['backup', file], { DATABASE_URL: url });
    expect(backup.code).toBe(1);
    expect(backup.stderr).toContain(`pg_dump -Fc --dbname="$DATABASE_URL" --file=${file}`);
    expect(fs.existsSync(file)).toBe(false);
    const restore = await runCli(['restore', file], { DATABASE_URL: url });
    expect(restore.code).toBe(1);
    expect(restore.stderr).toContain(`pg_restore --clean --if-exists --no-owner --dbname="$DATABASE_URL" ${file}`);
  });
});
