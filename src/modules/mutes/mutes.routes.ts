import { userRelationRoutes } from '../blocks/user-relations.js';
import { createMutesRepository } from './mutes.repository.js';

/**
 * /users/{user_id}/mutes (CONTRACT §9): the same shapes, statuses and privacy as blocks. A mute changes only what
 * the muter is shown in listings (rule 4 of shared/visibility.ts); the muted user is not told, and follows stay.
 */
export default userRelationRoutes({
  path: 'mutes',
  noun: 'mute',
  target: 'muted_id',
  operation: 'Mute',
  effect:
    'The muted user’s posts and replies are left out of the muter’s GET /posts, feed, replies lists, search and ' +
    'streams. Reads by id, GET /users/{id}/posts, recommends lists and counters are not filtered; follows stay; ' +
    'the muted user is not told.',
  repository: createMutesRepository,
});
