import type { FastifyInstance } from 'fastify';
import { ensureAdmin } from '../../src/modules/users/users.service.js';
import { call } from './build-test-app.js';

export interface TestUser {
  id: number;
  username: string;
  password: string;
  token: string;
}

let counter = 0;
export const uniqueName = (prefix = 'user') => `${prefix}_${process.pid}_${++counter}`.slice(0, 32);

/** Signs a user up over the API and signs them in. */
export async function signUp(
  app: FastifyInstance,
  fields: { username?: string; password?: string; displayName?: string; bio?: string } = {},
): Promise<TestUser> {
  const username = fields.username ?? uniqueName();
  const password = fields.password ?? 'correct horse battery';
  const created = await call(app, 'POST', '/users', { body: { ...fields, username, password } });
  if (created.statusCode !== 201) throw new Error(`sign-up failed: ${created.statusCode} ${created.body}`);
  return { id: created.json().id, username, password, token: await signIn(app, username, password) };
}

export async function signIn(app: FastifyInstance, username: string, password: string): Promise<string> {
  const res = await call(app, 'POST', '/tokens', { body: { username, password } });
  if (res.statusCode !== 201) throw new Error(`sign-in failed: ${res.statusCode} ${res.body}`);
  return res.json().token;
}

/** An admin, made the way an operator does (the bootstrap path), then signed in over the API. */
export async function createAdmin(app: FastifyInstance): Promise<TestUser> {
  const username = uniqueName('admin');
  const password = 'admin password 1';
  await ensureAdmin(app.store, username, password, app.config.passwordHashMemoryKib, { promote: false });
  const token = await signIn(app, username, password);
  const row = await app.db.selectFrom('users').select('id').where('username', '=', username).executeTakeFirstOrThrow();
  return { id: row.id, username, password, token };
}
