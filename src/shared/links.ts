import type { Link } from './schemas.js';

/**
 * The characters a URL may carry unencoded (RFC 3986: unreserved, sub-delims, `:`, `@` and `%` of an escape), as
 * the body of a regular-expression character class (the hyphen first, so it stays literal). Neither JSON nor a
 * Link header's `<…>` needs any of them escaped: the configured public URL and the request targets copied into
 * next-page links are held to them.
 */
export const URL_CHARACTER_CLASS = "-A-Za-z0-9._~!$&'()*+,;=:@%";

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
  const get = (rel: string, href: string): Link => ({ rel, href, method: 'GET' });
  // A resource's own URL is built once and its sub-resources' from it: a page of 20 posts converts each id to text
  // once instead of three times, and concatenates a third as much.
  const users = `${publicUrl}/users/`;
  const posts = `${publicUrl}/posts/`;
  return {
    url,
    user: (id) => {
      const self = users + id;
      return [get('self', self), get('followers', `${self}/followers`), get('following', `${self}/following`), get('posts', `${self}/posts`)];
    },
    post: ({ id, ownerId }) => {
      const self = posts + id;
      return [get('self', self), get('replies', `${self}/replies`), get('recommends', `${self}/recommends`), get('owner', users + ownerId)];
    },
    reply: ({ id, postId, authorId }) => {
      const post = posts + postId;
      return [get('self', `${post}/replies/${id}`), get('post', post), get('owner', users + authorId)];
    },
  };
}
