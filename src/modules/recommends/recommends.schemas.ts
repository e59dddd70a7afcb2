import { Type } from 'typebox';
import { Id, IdParam } from '../../shared/schemas.js';

export const PostRecommendsParamsSchema = Type.Object({ post_id: IdParam('The post id') });
export const RecommendParamsSchema = Type.Object({
  post_id: IdParam('The post id'),
  user_id: IdParam('The id of the user who recommended the post'),
});

/** A recommend is created by naming the recommending user, who must be the caller. */
export const CreateRecommendBodySchema = Type.Object(
  { id: { ...Id, description: 'The recommending user: the caller' } },
  { additionalProperties: false, title: 'NewRecommend' },
);
