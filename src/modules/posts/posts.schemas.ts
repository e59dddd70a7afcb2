import { Type, type Static } from 'typebox';
import { Id, IdParam, LinksSchema, NonBlankText, ReadOnlyEcho, Text, Timestamp } from '../../shared/schemas.js';

const VISIBILITY_HELP =
  '`public`: everyone; `followers`: the owner, their followers and admins; `private`: the owner and admins';
const Visibility = (options: { default?: string } = {}) =>
  Type.Enum(['public', 'followers', 'private'], { description: VISIBILITY_HELP, ...options });
export const VisibilitySchema = Visibility();

const Title = NonBlankText(1, 200, '1–200 characters, not blank');
const Content = Text(1, 10000, '1–10000 characters');

export const PostSchema = Type.Object(
  {
    id: Id,
    title: Type.String(),
    content: Type.String(),
    visibility: VisibilitySchema,
    ownerId: Id,
    replyCount: Type.Integer({ minimum: 0 }),
    recommendCount: Type.Integer({ minimum: 0 }),
    createdAt: Timestamp,
    updatedAt: Timestamp,
    links: Type.Array(LinksSchema.items, { description: 'self, replies, recommends, owner' }),
  },
  { title: 'Post' },
);
export type Post = Static<typeof PostSchema>;

export const PostParamsSchema = Type.Object({ post_id: IdParam('The post id') });

export const CreatePostBodySchema = Type.Object(
  {
    title: Title,
    content: Content,
    visibility: Type.Optional(Visibility({ default: 'public' })),
  },
  { additionalProperties: false, title: 'NewPost' },
);

/** PUT replaces the whole representation: every writable field is required (not a patch). */
export const ReplacePostBodySchema = Type.Object(
  {
    title: Title,
    content: Content,
    visibility: VisibilitySchema,
    ...ReadOnlyEcho,
    ownerId: Type.Optional(Type.Unknown({ description: 'Read-only; ignored' })),
    replyCount: Type.Optional(Type.Unknown({ description: 'Read-only; ignored' })),
    recommendCount: Type.Optional(Type.Unknown({ description: 'Read-only; ignored' })),
  },
  { additionalProperties: false, title: 'PostReplacement' },
);
