import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import { request } from '../helpers/server-process.js';
import { openSse } from '../helpers/sse.js';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');
const haproxy = ['/usr/sbin/haproxy', '/usr/bin/haproxy'].some((file) => fs.existsSync(file));

async function admin(text: string): Promise<void> {
  const url = new URL(process.env.TEST_DATABASE_URL ?? '');
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

/**
 * The reference deployment (deploy/): `deploy/start.sh up` starts HAProxy in front of two corkboard processes on
 * PostgreSQL through PgBouncer, with Redis, and the walk-through runs through HAProxy as a client would. Where
 * HAProxy is missing it is skipped, except in CI (CI=1), where .ci/run installs it and a skip would hide a failure.
 */
describe.skipIf(backend !== 'postgres' || (!haproxy && !process.env.CI))('the reference deployment (deploy/start.sh)', () => {
  const database = `corkboard_deploy_${randomBytes(5).toString('hex')}`;
  let url: string;
  let state: string;

  beforeAll(async () => {
    await admin(`create database ${database}`);
    const direct = new URL(process.env.TEST_DATABASE_URL ?? '');
    direct.pathname = `/${database}`;
    const { stdout, stderr } = await run(path.join(ROOT, 'deploy/start.sh'), ['up', '--processes', '2'], {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        DATABASE_DIRECT_URL: direct.toString(),
        REDIS_KEY_PREFIX: `corkboard-test-deploy-${randomBytes(4).toString('hex')}:`,
        PASSWORD_HASH_MEMORY_KIB: '64',
        STREAM_HEARTBEAT_SECONDS: '2',
      },
      timeout: 120_000,
    });
    url = stdout.trim();
    state = /state in (\S+)/.exec(stderr)?.[1] ?? '';
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  }, 150_000);

  afterAll(async () => {
    if (state) await run(path.join(ROOT, 'deploy/start.sh'), ['down', state], { timeout: 60_000 });
    await admin(`drop database if exists ${database} with (force)`);
  }, 90_000);

  it('serves the walk-through through HAProxy, spread over both processes', async () => {
    const password = 'deployment password';
    expect((await request(url, 'POST', '/users', { body: { username: 'ada', password } })).status).toBe(201);
    expect((await request(url, 'POST', '/users', { body: { username: 'bob', password } })).status).toBe(201);
    const ada = (await request(url, 'POST', '/tokens', { body: { username: 'ada', password } })).json<{ token: string; userId: number }>();
    const bob = (await request(url, 'POST', '/tokens', { body: { username: 'bob', password } })).json<{ token: string; userId: number }>();
    const post = await request(url, 'POST', `/users/${ada.userId}/posts`, { token: ada.token, body: { title: 'Hello', content: 'First post' } });
    expect(post.status).toBe(201);
    // Links name the public URL (HAProxy's), not a process's own port.
    expect(post.headers.get('location')).toBe(`${url}/posts/${post.json<{ id: number }>().id}`);
    expect((await request(url, 'POST', `/users/${ada.userId}/followers`, { token: bob.token, body: { id: bob.userId } })).status).toBe(201);
    const feed = await request(url, 'GET', `/users/${bob.userId}/feed`, { token: bob.token });
    expect(feed.json<{ title: string }[]>().map((p) => p.title)).toEqual(['Hello']);
    // A token minted through one process works on the other: ten reads land on both.
    const servedBy = new Set<string>();
    for (let i = 0; i < 10; i++) {
      const me = await request(url, 'GET', `/users/${bob.userId}/feed`, { token: bob.token });
      expect(me.status).toBe(200);
      servedBy.add(me.headers.get('x-served-by') ?? '');
    }
    expect([...servedBy].sort()).toEqual(['corkboard-1', 'corkboard-2']);
  });

  it('a live stream whose process is stopped (SIGTERM) resumes on the other one with nothing missed', async () => {
    const password = 'deployment password';
    const ada = (await request(url, 'POST', '/tokens', { body: { username: 'ada', password } })).json<{ token: string; userId: number }>();
    const first = await openSse(url, '/posts');
    expect(first.status).toBe(200);
    const servedBy = String(first.headers['x-served-by']);
    const created = await request(url, 'POST', `/users/${ada.userId}/posts`, { token: ada.token, body: { title: 'Before', content: 'live' } });
    const before = await first.next((e) => e.event === 'post.created' && JSON.parse(e.data).id === created.json<{ id: number }>().id);

    // Stop the stream's process as systemd would; it ends its streams cleanly and exits.
    const index = servedBy.replace('corkboard-', '');
    const pid = Number(fs.readFileSync(path.join(state, `corkboard-${index}.pid`), 'utf8'));
    process.kill(pid, 'SIGTERM');
    await first.ended(15_000);
    // Written while the client is away, through whichever process HAProxy picks (the other one).
    const missed = await request(url, 'POST', `/users/${ada.userId}/posts`, { token: ada.token, body: { title: 'Meanwhile', content: 'away' } });
    expect(missed.status).toBe(201);

    const resumed = await openSse(url, '/posts', { lastEventId: before.id });
    try {
      expect(resumed.status, resumed.body).toBe(200);
      expect(resumed.headers['x-served-by']).not.toBe(servedBy);
      const event = await resumed.next((e) => e.event === 'post.created', 10_000);
      expect(JSON.parse(event.data)).toMatchObject({ id: missed.json<{ id: number }>().id, title: 'Meanwhile' });
      expect(resumed.events.filter((e) => e.event === 'reset')).toEqual([]);
    } finally {
      resumed.close();
    }
  });
});
