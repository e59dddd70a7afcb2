import { Type } from 'typebox';
import { IdParam, ReadOnlyEcho } from '../../shared/schemas.js';

export const FollowerParamsSchema = Type.Object({
  user_id: IdParam('The user who is followed'),
  follower_id: IdParam('The user who follows'),
});

const ignored = Type.Optional(Type.Unknown({ description: 'Read-only; ignored' }));

/**
 * The follower to register: `{ "id": follower_id }`. A client may also send back a whole user representation it
 * read (GET /users/{id}); every field but `id` is then ignored.
 */
export const FollowBodySchema = Type.Object(
  {
    id: Type.Integer({
      minimum: 1,
      maximum: Number.MAX_SAFE_INTEGER,
      description: 'The id of the user who follows; must be the caller unless the caller is an admin',
      examples: [2],
    }),
    username: ignored,
    displayName: ignored,
    bio: ignored,
    role: ignored,
    followerCount: ignored,
    followingCount: ignored,
    postCount: ignored,
    createdAt: ReadOnlyEcho.createdAt,
    updatedAt: ReadOnlyEcho.updatedAt,
    links: ReadOnlyEcho.links,
  },
  { additionalProperties: false, title: 'NewFollower' },
);
