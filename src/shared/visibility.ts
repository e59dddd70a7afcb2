import { sql, type AliasedExpression, type Expression, type ExpressionBuilder, type Kysely, type SqlBool } from 'kysely';
import type { Database, PostRow, Role } from '../db/types.js';
import { AppError } from './errors.js';

/** Who is looking: a signed-in user (id and role), or undefined for an anonymous caller. */
export type Viewer = { id: number; role: Role } | undefined;

/** Every column of a post: the representation needs all of them. */
export const POST_COLUMNS = [
  'posts.id',
  'posts.owner_id',
  'posts.title',
  'posts.content',
  'posts.visibility',
  'posts.reply_count',
  'posts.recommend_count',
  'posts.created_at',
  'posts.updated_at',
] as const;

/** True when the viewer follows the current post's owner (a lookup correlated to the row, not "follows anyone"). */
const followsOwner = (eb: ExpressionBuilder<Database, 'posts'>, viewerId: number) =>
  eb.exists(
    eb.selectFrom('follows').select('follows.follower_id').whereRef('follows.followee_id', '=', 'posts.owner_id').where('follows.follower_id', '=', viewerId),
  );

/** True when the viewer follows the current user row. */
const followsUser = (eb: ExpressionBuilder<Database, 'users'>, viewerId: number) =>
  eb.exists(
    eb.selectFrom('follows').select('follows.follower_id').whereRef('follows.followee_id', '=', 'users.id').where('follows.follower_id', '=', viewerId),
  );

/**
 * Who sees a post (CONTRACT §3): `public` everyone; `followers` the owner, the owner's followers and admins;
 * `private` the owner and admins. This predicate is the only statement of that rule: every query that returns
 * posts, or anything hanging off a post (replies, recommends), filters through it, so a post the caller may not
 * see is missing everywhere (a 404, never a 403). The one query that cannot use it, the feed page (plain SQL in
 * src/db/hot-statements.ts), writes it out as text, and a test there holds that text to this predicate.
 */
export function visibleTo(viewer: Viewer) {
  return (eb: ExpressionBuilder<Database, 'posts'>): Expression<SqlBool> => {
    if (!viewer) return eb('posts.visibility', '=', 'public');
    if (viewer.role === 'admin') return sql<SqlBool>`1 = 1`;
    return eb.or([
      eb('posts.visibility', '=', 'public'),
      eb('posts.owner_id', '=', viewer.id),
      eb.and([eb('posts.visibility', '=', 'followers'), followsOwner(eb, viewer.id)]),
    ]);
  };
}

/**
 * A user's `postCount` as `viewer` may see it (CONTRACT §3): the posts `visibleTo` lets them see, from the
 * per-visibility counters on the user's row, so a counter never reveals that hidden posts exist.
 */
export function visiblePostCount(viewer: Viewer) {
  return (eb: ExpressionBuilder<Database, 'users'>): AliasedExpression<number, 'post_count'> => {
    if (!viewer) return eb.ref('users.public_post_count').as('post_count');
    if (viewer.role === 'admin') return eb.ref('users.post_count').as('post_count');
    return eb
      .case()
      .when('users.id', '=', viewer.id)
      .then(eb.ref('users.post_count'))
      .when(followsUser(eb, viewer.id))
      .then(eb(eb.ref('users.public_post_count'), '+', eb.ref('users.followers_post_count')))
      .else(eb.ref('users.public_post_count'))
      .end()
      .as('post_count');
  };
}

/** The post if it exists and `viewer` may see it. */
export function findVisiblePost(db: Kysely<Database>, id: number, viewer: Viewer): Promise<PostRow | undefined> {
  return db.selectFrom('posts').select(POST_COLUMNS).where('posts.id', '=', id).where(visibleTo(viewer)).executeTakeFirst();
}

/**
 * The post if `viewer` may see it, else the error `missing` makes (a 404 by default; DELETE routes answer 400, seed
 * §7): replies and recommends hang off a post, and whoever may not see the post finds neither it nor them.
 */
export async function requireVisiblePost(
  db: Kysely<Database>,
  id: number,
  viewer: Viewer,
  missing: () => AppError = () => AppError.notFound('post'),
): Promise<PostRow> {
  const post = await findVisiblePost(db, id, viewer);
  if (!post) throw missing();
  return post;
}

/** Every column of a user that reads return, but `post_count`, which depends on the viewer (`visiblePostCount`). */
export const USER_COLUMNS = [
  'users.id',
  'users.username',
  'users.display_name',
  'users.bio',
  'users.role',
  'users.follower_count',
  'users.following_count',
  'users.created_at',
  'users.updated_at',
] as const;

/** A user as reads return it: no password hash, and the post count the reader may see. */
export interface PublicUserRow {
  id: number;
  username: string;
  display_name: string;
  bio: string;
  role: Role;
  follower_count: number;
  following_count: number;
  post_count: number;
  created_at: string;
  updated_at: string;
}
