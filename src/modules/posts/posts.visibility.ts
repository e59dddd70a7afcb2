import { sql, type Expression, type ExpressionBuilder, type SqlBool } from 'kysely';
import type { Database } from '../../db/types.js';
import type { Caller } from '../../plugins/auth.js';

/**
 * Who sees a post (CONTRACT §3): `public` everyone; `followers` the owner, the owner's followers and admins;
 * `private` the owner and admins. This predicate is the only statement of that rule: every query that returns
 * posts, or anything hanging off a post (replies, recommends), filters through it, so a post the caller may not
 * see is missing everywhere (a 404, never a 403).
 */
export function visibleTo(caller: Caller | undefined) {
  return (eb: ExpressionBuilder<Database, 'posts'>): Expression<SqlBool> => {
    if (!caller) return eb('posts.visibility', '=', 'public');
    if (caller.role === 'admin') return sql<SqlBool>`1 = 1`;
    return eb.or([
      eb('posts.visibility', '=', 'public'),
      eb('posts.owner_id', '=', caller.id),
      eb.and([
        eb('posts.visibility', '=', 'followers'),
        eb.exists(
          eb
            .selectFrom('follows')
            .select('follows.follower_id')
            .whereRef('follows.followee_id', '=', 'posts.owner_id')
            .where('follows.follower_id', '=', caller.id),
        ),
      ]),
    ]);
  };
}
