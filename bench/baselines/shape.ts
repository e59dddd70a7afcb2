/**
 * What the baselines share with corkboard's post routes: the same path parameter rule, a response schema of the
 * same shape (so Fastify's serializer does the same work) and the same four links. Plain JSON Schema: the
 * baselines are bare Fastify, without corkboard's plugins, type provider or validator setup.
 */

export const ID_PATTERN = '^(0|[1-9][0-9]{0,18})$';

export const postParams = (name: string) => ({
  type: 'object',
  properties: { [name]: { type: 'string', pattern: ID_PATTERN } },
  required: [name],
});

export const postSchema = {
  type: 'object',
  properties: {
    id: { type: 'integer' },
    title: { type: 'string' },
    content: { type: 'string' },
    visibility: { type: 'string' },
    ownerId: { type: 'integer' },
    replyCount: { type: 'integer' },
    recommendCount: { type: 'integer' },
    createdAt: { type: 'string' },
    updatedAt: { type: 'string' },
    links: {
      type: 'array',
      items: {
        type: 'object',
        properties: { rel: { type: 'string' }, href: { type: 'string' }, method: { type: 'string' } },
      },
    },
  },
} as const;

export const createPostBody = {
  type: 'object',
  properties: {
    title: { type: 'string', minLength: 1, maxLength: 200 },
    content: { type: 'string', minLength: 1, maxLength: 10000 },
    visibility: { type: 'string', enum: ['public', 'followers', 'private'] },
  },
  required: ['title', 'content'],
  additionalProperties: false,
} as const;

export interface PostRow {
  id: number;
  owner_id: number;
  title: string;
  content: string;
  visibility: string;
  reply_count: number;
  recommend_count: number;
  created_at: string;
  updated_at: string;
}

export interface CreatePostBody {
  title: string;
  content: string;
  visibility?: 'public' | 'followers' | 'private';
}

export const POST_COLUMNS = 'id, owner_id, title, content, visibility, reply_count, recommend_count, created_at, updated_at';

export function toPost(row: PostRow, base: string) {
  return {
    id: row.id,
    title: row.title,
    content: row.content,
    visibility: row.visibility,
    ownerId: row.owner_id,
    replyCount: row.reply_count,
    recommendCount: row.recommend_count,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    links: [
      { rel: 'self', href: `${base}/posts/${row.id}`, method: 'GET' },
      { rel: 'replies', href: `${base}/posts/${row.id}/replies`, method: 'GET' },
      { rel: 'recommends', href: `${base}/posts/${row.id}/recommends`, method: 'GET' },
      { rel: 'owner', href: `${base}/users/${row.owner_id}`, method: 'GET' },
    ],
  };
}

/** Port from the environment (the harness picks a free one). */
export function port(): number {
  const value = Number(process.env.PORT);
  if (!Number.isInteger(value) || value <= 0) throw new Error('PORT must be set');
  return value;
}
