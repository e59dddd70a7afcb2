import { Type, type Static } from 'typebox';
import { Id, IdParam, LinksSchema, ReadOnlyEcho, Text, Timestamp } from '../../shared/schemas.js';

const Content = Text(1, 2000, '1–2000 characters');

export const ReplySchema = Type.Object(
  {
    id: Id,
    postId: Type.Integer({ minimum: 1, description: 'The post replied to' }),
    authorId: Type.Integer({ minimum: 1, description: 'The user who wrote the reply' }),
    content: Type.String(),
    createdAt: Timestamp,
    updatedAt: Timestamp,
    links: Type.Array(LinksSchema.items, { description: 'self, post, owner' }),
  },
  { title: 'Reply' },
);
export type Reply = Static<typeof ReplySchema>;

export const PostRepliesParamsSchema = Type.Object({ post_id: IdParam('The post id') });
export const ReplyParamsSchema = Type.Object({ post_id: IdParam('The post id'), reply_id: IdParam('The reply id') });

export const CreateReplyBodySchema = Type.Object({ content: Content }, { additionalProperties: false, title: 'NewReply' });

/** PUT replaces the reply's one writable field; what a client read may be sent back and is ignored. */
export const ReplaceReplyBodySchema = Type.Object(
  {
    content: Content,
    ...ReadOnlyEcho,
    postId: Type.Optional(Type.Unknown({ description: 'Read-only; ignored' })),
    authorId: Type.Optional(Type.Unknown({ description: 'Read-only; ignored' })),
  },
  { additionalProperties: false, title: 'ReplyReplacement' },
);
