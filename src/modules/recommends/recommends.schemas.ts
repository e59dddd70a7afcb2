import { Type } from 'typebox';
import { Id, IdParam } from '../../shared/schemas.js';

export const PostRecommendsParamsSchema = Type.Object({ post_id: IdParam('The post id') });
export const RecommendParamsSchema = Type.Object({
  post_id: IdParam('The post id'),
  user_id: IdParam('The id of the user who recommended the post'),
});

/** A recommend is created by naming the recommending user, who must be the caller. */
export const CreateRecommendBodySchema = Type.Object(
  // Bounded like a follow's id: a number past 2^53 is no id JSON can carry exactly, so it is a 400, not a 403.
  { id: { ...Id, maximum: Number.MAX_SAFE_INTEGER, description: 'The recommending user: the caller' } },
  { additionalProperties: false, title: 'NewRecommend' },
);
