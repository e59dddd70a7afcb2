import type { Link } from './schemas.js';

/**
 * Hypermedia links, built from the configured public base URL and never from the request's Host header
 * (a client could otherwise make the service hand out links to a host of its choosing).
 */
export interface Links {
  /** An absolute URL for a path of this service. */
  url(path: string): string;
  user(id: number): Link[];
  post(post: { id: number; ownerId: number }): Link[];
  reply(reply: { id: number; postId: number; authorId: number }): Link[];
}

export function createLinks(publicUrl: string): Links {
  const url = (path: string) => publicUrl + path;
  const get = (rel: string, path: string): Link => ({ rel, href: url(path), method: 'GET' });
  return {
    url,
    user: (id) => [
      get('self', `/users/${id}`),
      get('followers', `/users/${id}/followers`),
      get('following', `/users/${id}/following`),
      get('posts', `/users/${id}/posts`),
    ],
    post: ({ id, ownerId }) => [
      get('self', `/posts/${id}`),
      get('replies', `/posts/${id}/replies`),
      get('recommends', `/posts/${id}/recommends`),
      get('owner', `/users/${ownerId}`),
    ],
    reply: ({ id, postId, authorId }) => [
      get('self', `/posts/${postId}/replies/${id}`),
      get('post', `/posts/${postId}`),
      get('owner', `/users/${authorId}`),
    ],
  };
}
