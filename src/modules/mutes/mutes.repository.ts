import type { Kysely } from 'kysely';
import type { Database } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';
import { userShownTo, userColumns, type Viewer } from '../../shared/visibility.js';
import type { ListedUserRow, UserRelationRepository } from '../blocks/user-relations.js';

/** Mutes by author (muter): the rows behind /users/{id}/mutes. Pass a transaction's `db` to write. */
export function createMutesRepository(db: Kysely<Database>): UserRelationRepository {
  const targets = (ownerId: number, viewer: Viewer) =>
    db
      .selectFrom('mutes')
      .innerJoin('users', 'users.id', 'mutes.muted_id')
      .select(userColumns(viewer))
      .select('mutes.id as relation_id')
      .where('mutes.muter_id', '=', ownerId)
      .where(userShownTo(viewer));
  return {
    list(ownerId, viewer, { limit, after }): Promise<ListedUserRow[]> {
      let query = targets(ownerId, viewer).orderBy('mutes.id', 'desc').limit(pageLimit(limit));
      if (after !== undefined) query = query.where('mutes.id', '<', after);
      return query.execute();
    },
    find(ownerId, targetId, viewer) {
      return targets(ownerId, viewer).where('mutes.muted_id', '=', targetId).executeTakeFirst();
    },
    async insert(ownerId, targetId, now) {
      await db.insertInto('mutes').values({ muter_id: ownerId, muted_id: targetId, created_at: now }).execute();
      // Only the muter's listings change (Viewer.hasMutes); the muted user is not told, and reads as before.
      await db.updateTable('users').set((eb) => ({ mute_count: eb('mute_count', '+', 1) })).where('id', '=', ownerId).execute();
    },
    async remove(ownerId, targetId) {
      const result = await db.deleteFrom('mutes').where('muter_id', '=', ownerId).where('muted_id', '=', targetId).executeTakeFirst();
      if (result.numDeletedRows === 0n) return false;
      await db.updateTable('users').set((eb) => ({ mute_count: eb('mute_count', '-', 1) })).where('id', '=', ownerId).execute();
      return true;
    },
  };
}
