import type { Kysely } from 'kysely';
import type { Dialect } from '../../db/database.js';
import type { Database, PostRow, Visibility } from '../../db/types.js';
import { inTransaction, lockRow } from '../../db/transaction.js';
import { perDatabase, reusable } from '../../db/compiled.js';
import { createPostsRepository, POST_COLUMNS } from './posts.repository.js';
import { nowIso } from '../../shared/clock.js';

/**
 * Creates a post in one transaction: the owner's post_count and the post, which a trigger queues for the fan-out
 * worker (feed.fanout.ts; call `app.fanout.schedule()` after this resolves) to write into the home feed of every
 * follower. Feeds merge queued posts, so the post is in them at once. Undefined when the owner does not exist.
 */
export async function createPost(
  db: Kysely<Database>,
  ownerId: number,
  input: { title: string; content: string; visibility?: Visibility },
): Promise<PostRow | undefined> {
  const statements = createStatements(db);
  const createdAt = nowIso();
  return inTransaction(db, async (trx) => {
    const counted = await trx.executeQuery(statements.countPost([ownerId]));
    if (!counted.numAffectedRows) return undefined;
    const { rows } = await trx.executeQuery(
      statements.insertPost([ownerId, input.title, input.content, input.visibility ?? 'public', createdAt]),
    );
    return rows[0];
  });
}

// Stand-ins for the statements compiled ahead of time (see `reusable`): no real value is negative or looks like these.
const OWNER = -1;
const [TITLE, CONTENT, VISIBILITY, CREATED_AT] = ['<title>', '<content>', '<visibility>', '<created_at>'];

/**
 * Publishing is the hottest write: its two statements are built and compiled once per database (their SQL depends
 * only on the dialect), then run with new values inside each create's transaction.
 */
const createStatements = perDatabase((db: Kysely<Database>) => ({
  countPost: reusable(
    db
      .updateTable('users')
      .set((eb) => ({ post_count: eb('post_count', '+', 1) }))
      .where('id', '=', OWNER)
      .compile(),
    [OWNER],
  ),
  insertPost: reusable<PostRow>(
    db
      .insertInto('posts')
      .values({
        owner_id: OWNER,
        title: TITLE,
        content: CONTENT,
        visibility: VISIBILITY as Visibility,
        created_at: CREATED_AT,
        updated_at: CREATED_AT,
      })
      .returning(POST_COLUMNS)
      .compile(),
    [OWNER, TITLE, CONTENT, VISIBILITY, CREATED_AT],
  ),
}));

/**
 * Deletes a post in one transaction: the post row is locked first (so a concurrent reply or recommend that points
 * at it waits and then fails its foreign key instead of bumping a counter on a vanishing row), the cascade removes
 * its replies, recommends and feed entries, and the owner's post_count goes down by one. False when the post is
 * already gone.
 */
export async function deletePost(db: Kysely<Database>, dialect: Dialect, id: number): Promise<boolean> {
  return inTransaction(db, async (trx) => {
    if (!(await lockRow(trx, dialect, 'posts', id))) return false;
    const posts = createPostsRepository(trx);
    const ownerId = await posts.remove(id);
    if (ownerId === undefined) return false;
    await posts.addToPostCount(ownerId, -1);
    return true;
  });
}
