import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';
import { PUBLIC_URL, call } from './build-test-app.js';
import type { TestUser } from './factories.js';

/** A post as the API represents it. */
export interface PostJson {
  id: number;
  title: string;
  content: string;
  visibility: string;
  ownerId: number;
  replyCount: number;
  recommendCount: number;
  createdAt: string;
  updatedAt: string;
  links: { rel: string; href: string; method: string }[];
}

/** Publishes through the API (the content is derived from the title); throws unless it is a 201. */
export async function publish(app: FastifyInstance, user: TestUser, title: string, visibility = 'public'): Promise<PostJson> {
  const res = await call(app, 'POST', `/users/${user.id}/posts`, {
    token: user.token,
    body: { title, content: `${title} content`, visibility },
  });
  if (res.statusCode !== 201) throw new Error(`publish failed: ${res.statusCode} ${res.body}`);
  return res.json();
}

/** `follower` follows `followee` through the API; throws unless it is a 201. */
export async function follow(app: FastifyInstance, follower: TestUser, followee: TestUser): Promise<void> {
  const res = await call(app, 'POST', `/users/${followee.id}/followers`, { token: follower.token, body: { id: follower.id } });
  if (res.statusCode !== 201) throw new Error(`follow failed: ${res.statusCode} ${res.body}`);
}

/** `follower` stops following `followee` through the API; throws unless it is a 200. */
export async function unfollow(app: FastifyInstance, follower: TestUser, followee: TestUser): Promise<void> {
  const res = await call(app, 'DELETE', `/users/${followee.id}/followers/${follower.id}`, { token: follower.token });
  if (res.statusCode !== 200) throw new Error(`unfollow failed: ${res.statusCode} ${res.body}`);
}

/**
 * The target of a `Link: <…>; rel="next"` header as a path for inject (PUBLIC_URL stripped), after checking it is
 * absolute on PUBLIC_URL; undefined when there is no header (the last page).
 */
export function nextPath(link: unknown): string | undefined {
  if (link === undefined) return undefined;
  const match = /^<([^>]+)>; rel="next"$/.exec(String(link));
  expect(match?.[1]).toMatch(new RegExp(`^${PUBLIC_URL}/`));
  return match![1]!.slice(PUBLIC_URL.length);
}

/**
 * Checks that a collection listed in id order (`newest first` or `oldest first`) carries `createdAt` in that order
 * too: ties are allowed (the clock's millisecond), a later id with an earlier createdAt is not.
 */
export function expectCreatedAtInIdOrder(items: readonly { id: number; createdAt: string }[], order: 'newest first' | 'oldest first'): void {
  const listed = items.map(({ id, createdAt }) => ({ id, createdAt }));
  const sign = order === 'newest first' ? -1 : 1;
  const byTime = [...listed].sort((a, b) => sign * (a.createdAt === b.createdAt ? a.id - b.id : a.createdAt < b.createdAt ? -1 : 1));
  expect(listed).toEqual(byTime);
}
