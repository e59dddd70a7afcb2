import type { Kysely } from 'kysely';
import type { Database } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';
import { userShownTo, userColumns, type Viewer } from '../../shared/visibility.js';
import type { ListedUserRow, UserRelationRepository } from './user-relations.js';

/** Blocks by author (blocker): the rows behind /users/{id}/blocks. Pass a transaction's `db` to write. */
export function createBlocksRepository(db: Kysely<Database>): UserRelationRepository {
  const targets = (ownerId: number, viewer: Viewer) =>
    db
      .selectFrom('blocks')
      .innerJoin('users', 'users.id', 'blocks.blocked_id')
      .select(userColumns(viewer))
      .select('blocks.id as relation_id')
      .where('blocks.blocker_id', '=', ownerId)
      .where(userShownTo(viewer));
  return {
    list(ownerId, viewer, { limit, after }): Promise<ListedUserRow[]> {
      let query = targets(ownerId, viewer).orderBy('blocks.id', 'desc').limit(pageLimit(limit));
      if (after !== undefined) query = query.where('blocks.id', '<', after);
      return query.execute();
    },
    find(ownerId, targetId, viewer) {
      return targets(ownerId, viewer).where('blocks.blocked_id', '=', targetId).executeTakeFirst();
    },
    async insert(ownerId, targetId, now) {
      await db.insertInto('blocks').values({ blocker_id: ownerId, blocked_id: targetId, created_at: now }).execute();
      // Both sides are in a block now: their reads check it (Viewer.hasBlocks).
      await db.updateTable('users').set((eb) => ({ block_count: eb('block_count', '+', 1) })).where('id', 'in', [ownerId, targetId]).execute();
    },
    async remove(ownerId, targetId) {
      const result = await db.deleteFrom('blocks').where('blocker_id', '=', ownerId).where('blocked_id', '=', targetId).executeTakeFirst();
      if (result.numDeletedRows === 0n) return false;
      await db.updateTable('users').set((eb) => ({ block_count: eb('block_count', '-', 1) })).where('id', 'in', [ownerId, targetId]).execute();
      return true;
    },
  };
}
