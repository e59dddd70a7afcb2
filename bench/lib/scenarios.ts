import type { RequestSpec } from './load.js';
import type { Tokens } from './seed.js';

export type Backend = 'sqlite' | 'postgres';
/** Which process a scenario loads: corkboard itself, the constant-route baseline, or the database baseline. */
export type Target = 'corkboard' | 'constant' | 'database';

export interface Scenario {
  key: string;
  title: string;
  target: Target;
  spec: RequestSpec;
  /** Status every answer must have; the sanity check also counts list items when `items` is set. */
  expect: { status: number; items?: number };
  /** Scenario whose median req/s is the denominator of this one's ratio column. */
  versus?: string;
}

export interface TargetSpec {
  title: string;
  /** ratio = median req/s of `scenario` / median req/s of `baseline` */
  scenario: string;
  baseline: string;
  min: number;
  /**
   * The two sides answer differently sized responses (a page of 20 posts against one post), so a ratio of
   * instruction counts says less than the ratio of times does (socket work per request does not grow with the
   * page): `--instructions` shows it without judging it.
   */
  unlikeResponses?: true;
}

export interface ScenarioContext {
  backend: Backend;
  posts: number;
  boards: number;
  feedUser: number;
  author: number;
  tokens: Tokens;
  /** Cursor of the deep page of GET /posts: near the oldest end, of the mean size (see run.ts). */
  deepCursor: string;
}

/**
 * The post that create-post sends: as long as the seeded posts are on average (title ~38 characters, content ~355,
 * see seed.ts), from the same vocabulary. The posts it creates are the newest, so they make up the first page of
 * GET /posts in every later scenario: a shorter post here made the first page cheaper to serialize than the deep
 * page (which shows seeded posts), and the deep-page ratio measured post length instead of depth.
 */
const BODY = JSON.stringify({
  title: 'Garden festival at the harbour square',
  content:
    'Volunteer workshop this weekend: bring bread, paint and a bicycle repair kit to the corner by the library. ' +
    'The music club plays a concert in the park in the evening, weather permitting, and the market opens early in ' +
    'the morning. Questions about tickets, lunch or the train from the station go to the notice board; an update ' +
    'follows after the meeting.',
  visibility: 'public',
});
const JSON_BODY = { 'content-type': 'application/json' };
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Every scenario of one backend run, in the order each round runs them (reads first, then writes). */
export function scenarios(ctx: ScenarioContext): Scenario[] {
  const db = ctx.backend === 'sqlite' ? 'better-sqlite3' : 'pg';
  const read = `baseline-${ctx.backend}-read`;
  const insert = `baseline-${ctx.backend}-insert`;
  const randomPost = { path: '/posts/{id}', idMax: ctx.posts };
  return [
    {
      key: 'baseline-constant',
      title: 'bare Fastify: GET /posts/{id}, constant body',
      target: 'constant',
      spec: { method: 'GET', ...randomPost },
      expect: { status: 200 },
    },
    {
      key: read,
      title: `bare Fastify + ${db}: GET /posts/{id} point read`,
      target: 'database',
      spec: { method: 'GET', ...randomPost },
      expect: { status: 200 },
      versus: 'baseline-constant',
    },
    {
      key: 'get-post',
      title: 'GET /posts/{id} (public post, anonymous)',
      target: 'corkboard',
      spec: { method: 'GET', ...randomPost },
      expect: { status: 200 },
      versus: read,
    },
    {
      key: 'get-post-auth',
      title: 'GET /posts/{id} with a bearer token',
      target: 'corkboard',
      spec: { method: 'GET', ...randomPost, headers: bearer(ctx.tokens.reader) },
      expect: { status: 200 },
      versus: 'get-post',
    },
    {
      key: 'list-posts-first',
      title: 'GET /posts, first page (20)',
      target: 'corkboard',
      spec: { method: 'GET', path: '/posts' },
      expect: { status: 200, items: 20 },
      versus: 'get-post',
    },
    {
      key: 'list-posts-deep',
      title: 'GET /posts, deep page (near the oldest end, of the mean size)',
      target: 'corkboard',
      spec: { method: 'GET', path: `/posts?cursor=${encodeURIComponent(ctx.deepCursor)}` },
      expect: { status: 200, items: 20 },
      versus: 'list-posts-first',
    },
    {
      key: 'feed',
      title: 'GET /users/{id}/feed, user following 1,000 users',
      target: 'corkboard',
      spec: { method: 'GET', path: `/users/${ctx.feedUser}/feed`, headers: bearer(ctx.tokens.feed) },
      expect: { status: 200, items: 20 },
      versus: 'get-post',
    },
    {
      key: 'boards-first',
      title: 'GET /boards/list?start=0&limit=20',
      target: 'corkboard',
      spec: { method: 'GET', path: '/boards/list?start=0&limit=20' },
      expect: { status: 200, items: 20 },
      versus: 'get-post',
    },
    {
      key: 'boards-deep',
      title: `GET /boards/list?start=${ctx.boards - 20}&limit=20 (last page)`,
      target: 'corkboard',
      spec: { method: 'GET', path: `/boards/list?start=${ctx.boards - 20}&limit=20` },
      expect: { status: 200, items: 20 },
      versus: 'boards-first',
    },
    {
      key: insert,
      title: `bare Fastify + ${db}: POST /users/{id}/posts insert`,
      target: 'database',
      spec: { method: 'POST', path: `/users/${ctx.author}/posts`, headers: JSON_BODY, body: BODY },
      expect: { status: 201 },
      versus: 'baseline-constant',
    },
    {
      key: 'create-post',
      title: 'POST /users/{id}/posts (author with 10 followers)',
      target: 'corkboard',
      spec: {
        method: 'POST',
        path: `/users/${ctx.author}/posts`,
        headers: { ...JSON_BODY, ...bearer(ctx.tokens.author) },
        body: BODY,
      },
      expect: { status: 201 },
      versus: insert,
    },
  ];
}

/** The issue's targets for a backend; each is a ratio of two scenarios' median req/s from the same run. */
export function targets(backend: Backend): TargetSpec[] {
  if (backend === 'postgres') {
    return [{ title: 'PostgreSQL GET /posts/{id} ≥ 0.85 × bare Fastify + pg point read', scenario: 'get-post', baseline: 'baseline-postgres-read', min: 0.85 }];
  }
  return [
    { title: 'GET /posts/{id} ≥ 0.50 × bare Fastify constant route', scenario: 'get-post', baseline: 'baseline-constant', min: 0.5 },
    { title: 'GET /posts/{id} ≥ 0.85 × bare Fastify + better-sqlite3 point read', scenario: 'get-post', baseline: 'baseline-sqlite-read', min: 0.85 },
    { title: 'POST /users/{id}/posts (10 followers) ≥ 0.50 × bare Fastify + better-sqlite3 insert', scenario: 'create-post', baseline: 'baseline-sqlite-insert', min: 0.5 },
    { title: 'GET /posts deep page ≥ 0.90 × first page', scenario: 'list-posts-deep', baseline: 'list-posts-first', min: 0.9 },
    { title: 'GET /posts first page ≥ 0.25 × GET /posts/{id}', scenario: 'list-posts-first', baseline: 'get-post', min: 0.25, unlikeResponses: true },
    { title: 'Feed (following 1,000 users) ≥ 0.20 × GET /posts/{id}', scenario: 'feed', baseline: 'get-post', min: 0.2, unlikeResponses: true },
  ];
}

/** The RSS ceiling of the server during every scenario (at 1M posts). */
export const RSS_LIMIT_MB = 200;
