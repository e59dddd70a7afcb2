import { sql, type CompiledQuery, type Kysely } from 'kysely';
import { reusable } from '../../db/compiled.js';
import { readCompiled } from '../../db/database.js';
import { whenReady, type Eventually } from '../../shared/eventually.js';
import type { Database, PostRow, Visibility } from '../../db/types.js';
import type { Caller } from '../../plugins/auth.js';
import { visibleTo } from './posts.visibility.js';
import { pageLimit } from '../../shared/pagination.js';

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

const firstRow = <R>(rows: R[]): R | undefined => rows[0];

/** Stand-in values for a query compiled ahead of time; no id is negative, so they cannot clash with real values. */
const ID_STAND_IN = -1;
const CALLER_STAND_IN = -2;

export interface PageOptions {
  limit: number;
  /** The id after which the page starts (newest first: only smaller ids follow). */
  after?: number;
}

export type CallerKind = 'anonymous' | 'member' | 'admin';
export const callerKind = (caller: { role: Caller['role'] } | undefined): CallerKind =>
  caller === undefined ? 'anonymous' : caller.role === 'admin' ? 'admin' : 'member';

interface PageValues {
  after?: number;
  callerId: number;
}
const PAGE_VALUES: [number, (v: PageValues) => number][] = [
  [ID_STAND_IN, (v) => v.after ?? 0],
  [CALLER_STAND_IN, (v) => v.callerId],
];

/**
 * Page queries compiled once per shape (kind of caller × first page or page after a cursor × page size), then run
 * with new values as `reusable` does: building and compiling a page query with Kysely cost ~10% of a 20-post page
 * request. `build` must make the same query shape whatever the values; the caller's id (for kinds that have one)
 * and the cursor key travel as parameters, the page size is written into the SQL (see `pageLimit`).
 */
export function pageCompiler<R>(
  build: (kind: CallerKind, callerId: number, page: PageOptions) => { compile(): CompiledQuery<R> },
): (kind: CallerKind, callerId: number, page: PageOptions) => CompiledQuery<R> {
  const shapes = new Map<string, (values: PageValues) => CompiledQuery<R>>();
  return (kind, callerId, { limit, after }) => {
    const shape = `${kind}|${after === undefined ? 'first' : 'after'}|${limit}`;
    let run = shapes.get(shape);
    if (!run) {
      const standInPage = { limit, after: after === undefined ? undefined : ID_STAND_IN };
      const compiled = build(kind, CALLER_STAND_IN, standInPage).compile();
      const used = PAGE_VALUES.filter(([standIn]) => compiled.parameters.includes(standIn));
      const make = reusable(compiled, used.map(([standIn]) => standIn));
      run = (values) => make(used.map(([, pick]) => pick(values)));
      shapes.set(shape, run);
    }
    return run({ after, callerId });
  };
}

/**
 * Posts newest first. Every collection is keyset-paginated on the post id, descending, so a page is one index
 * range scan of `limit + 1` rows whatever its depth. The `*Query` builders are what the methods run; they are
 * exposed so that a test can EXPLAIN exactly the SQL a route executes.
 */
export function createPostsRepository(db: Kysely<Database>) {
  /**
   * GET /posts. Anonymous callers see public posts only, which the `(visibility, id)` index serves directly; a
   * signed-in caller walks the primary key backwards and filters each row through `visibleTo`, stopping after
   * `limit + 1` matches.
   *
   * For a member the predicate is an OR. Left bare, SQLite answers it with a MULTI-INDEX OR (one index per branch)
   * followed by a sort of every match below the cursor, so a page would cost as much as the whole table. Testing
   * the OR with `IS TRUE` (same truth table for a WHERE clause, standard SQL on both engines) turns it into a row
   * filter, and the ORDER BY is served by the primary key again. The EXPLAIN test in posts.test.ts pins this.
   */
  function listQuery(caller: Caller | undefined, { limit, after }: PageOptions) {
    let query = db.selectFrom('posts').select(POST_COLUMNS);
    query = caller ? query.where((eb) => eb(eb.parens(visibleTo(caller)(eb)), 'is', sql.lit(true))) : query.where(visibleTo(caller));
    if (after !== undefined) query = query.where('posts.id', '<', after);
    return query.orderBy('posts.id', 'desc').limit(pageLimit(limit));
  }

  /** GET /users/{id}/posts: one owner's posts over the `(owner_id, id)` index. */
  function listByOwnerQuery(ownerId: number, caller: Caller | undefined, { limit, after }: PageOptions) {
    let query = db.selectFrom('posts').select(POST_COLUMNS).where('posts.owner_id', '=', ownerId).where(visibleTo(caller));
    if (after !== undefined) query = query.where('posts.id', '<', after);
    return query.orderBy('posts.id', 'desc').limit(pageLimit(limit));
  }

  /** GET /posts/{id}: the post if the caller may see it. */
  function findVisibleQuery(id: number, caller: Caller | undefined) {
    return db.selectFrom('posts').select(POST_COLUMNS).where('posts.id', '=', id).where(visibleTo(caller));
  }

  // The hottest read is compiled once per kind of caller (see `reusable`): anonymous, member, admin.
  let findVisibleBy: Record<'anonymous' | 'member' | 'admin', (values: number[]) => CompiledQuery<PostRow>> | undefined;
  const compileFindVisible = () => ({
    anonymous: reusable(findVisibleQuery(ID_STAND_IN, undefined).compile(), [ID_STAND_IN]),
    member: reusable(findVisibleQuery(ID_STAND_IN, { id: CALLER_STAND_IN, role: 'member', tokenId: 0 }).compile(), [ID_STAND_IN, CALLER_STAND_IN]),
    admin: reusable(findVisibleQuery(ID_STAND_IN, { id: CALLER_STAND_IN, role: 'admin', tokenId: 0 }).compile(), [ID_STAND_IN]),
  });

  /** `findVisibleQuery(id, caller).compile()`, without building the query again. */
  function findVisibleCompiled(id: number, caller: Caller | undefined): CompiledQuery<PostRow> {
    findVisibleBy ??= compileFindVisible();
    if (!caller) return findVisibleBy.anonymous([id]);
    return caller.role === 'admin' ? findVisibleBy.admin([id]) : findVisibleBy.member([id, caller.id]);
  }

  const listCompiled = pageCompiler((kind, callerId, page) =>
    listQuery(kind === 'anonymous' ? undefined : { id: callerId, role: kind, tokenId: 0 }, page),
  );

  return {
    listQuery,
    listByOwnerQuery,
    findVisibleQuery,
    findVisibleCompiled,
    /** `listQuery(caller, page).compile()`, without building the query again. */
    listCompiled: (caller: Caller | undefined, page: PageOptions) => listCompiled(callerKind(caller), caller?.id ?? 0, page),

    /** The post if it exists and the caller may see it. */
    findVisible(id: number, caller: Caller | undefined): Eventually<PostRow | undefined> {
      return whenReady(readCompiled(db, findVisibleCompiled(id, caller)), firstRow);
    },

    async list(caller: Caller | undefined, page: PageOptions): Promise<PostRow[]> {
      return readCompiled(db, listCompiled(callerKind(caller), caller?.id ?? 0, page));
    },

    listByOwner(ownerId: number, caller: Caller | undefined, page: PageOptions): Promise<PostRow[]> {
      return listByOwnerQuery(ownerId, caller, page).execute();
    },

    /** Just enough of a post the caller may see to decide whether they may change it. */
    findVisibleOwner(id: number, caller: Caller | undefined): Promise<{ id: number; owner_id: number } | undefined> {
      return db
        .selectFrom('posts')
        .select(['posts.id', 'posts.owner_id'])
        .where('posts.id', '=', id)
        .where(visibleTo(caller))
        .executeTakeFirst();
    },

    update(
      id: number,
      values: { title: string; content: string; visibility: Visibility; updated_at: string },
    ): Promise<PostRow | undefined> {
      return db.updateTable('posts').set(values).where('id', '=', id).returning(POST_COLUMNS).executeTakeFirst();
    },

    /** Deletes the post (its replies, recommends and feed entries cascade); answers its owner, if it existed. */
    async remove(id: number): Promise<number | undefined> {
      const row = await db.deleteFrom('posts').where('id', '=', id).returning('owner_id').executeTakeFirst();
      return row?.owner_id;
    },

    /** Adds `delta` to a user's post_count atomically; false when the user does not exist. */
    async addToPostCount(userId: number, delta: 1 | -1): Promise<boolean> {
      const result = await db
        .updateTable('users')
        .set((eb) => ({ post_count: eb('post_count', '+', delta) }))
        .where('id', '=', userId)
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    },

  };
}

export type PostsRepository = ReturnType<typeof createPostsRepository>;
