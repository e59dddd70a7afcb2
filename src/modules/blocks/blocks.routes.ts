import { removeFollowsBetween } from '../followers/followers.service.js';
import { createBlocksRepository } from './blocks.repository.js';
import { userRelationRoutes } from './user-relations.js';

/**
 * /users/{user_id}/blocks (CONTRACT §9). A block works both ways: neither user sees the other's posts, replies or
 * recommends (the rule lives in shared/visibility.ts), neither may follow the other, and the follows between them
 * go, both ways, in the block's own transaction (counters and feed entries with them).
 */
export default userRelationRoutes({
  path: 'blocks',
  noun: 'block',
  target: 'blocked_id',
  operation: 'Block',
  effect:
    'While the block stands, neither user sees the other’s posts, replies or recommends anywhere (404 by id), ' +
    'counters leave them out, and neither may follow the other (403, problem type ending in /blocked). Blocking ' +
    'removes the follows between the two, both ways. Profiles stay readable. Admins see everything.',
  repository: createBlocksRepository,
  async created(tx, blockerId, blockedId) {
    await removeFollowsBetween(tx, blockerId, blockedId);
  },
});
