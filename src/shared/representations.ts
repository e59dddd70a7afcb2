import type { BoardRow, PostRow, ReplyRow } from '../db/types.js';
import type { Board } from '../modules/boards/boards.schemas.js';
import type { Post } from '../modules/posts/posts.schemas.js';
import type { Reply } from '../modules/replies/replies.schemas.js';
import type { User } from '../modules/users/users.schemas.js';
import type { Links } from './links.js';
import type { PublicUserRow } from './visibility.js';

// The one place each row becomes the API's representation (snake_case columns to camelCase fields, plus links).

export function toUser(row: PublicUserRow, links: Links): User {
  return {
    id: row.id,
    username: row.username,
    displayName: row.display_name,
    bio: row.bio,
    role: row.role,
    followerCount: row.follower_count,
    followingCount: row.following_count,
    postCount: row.post_count,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    links: links.user(row.id),
  };
}

export function toPost(row: PostRow, links: Links): Post {
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
    links: links.post({ id: row.id, ownerId: row.owner_id }),
  };
}

export function toReply(row: ReplyRow, links: Links): Reply {
  return {
    id: row.id,
    postId: row.post_id,
    authorId: row.author_id,
    content: row.content,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    links: links.reply({ id: row.id, postId: row.post_id, authorId: row.author_id }),
  };
}

export function toBoard(row: BoardRow): Board {
  return {
    id: row.id,
    title: row.title,
    content: row.content,
    authorId: row.author_id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
