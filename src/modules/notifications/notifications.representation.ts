import type { NotificationRow } from '../../db/types.js';
import type { Links } from '../../shared/links.js';
import type { Notification } from './notifications.schemas.js';

/** A notification row as the API represents it (links: self, actor, and post and reply where they apply). */
export function toNotification(row: NotificationRow, links: Links): Notification {
  const get = (rel: string, path: string) => ({ rel, href: links.url(path), method: 'GET' });
  const result: Notification = {
    id: Number(row.id),
    type: row.type,
    actorId: Number(row.actor_id),
    createdAt: row.created_at,
    links: [get('self', `/users/${row.recipient_id}/notifications/${row.id}`), get('actor', `/users/${row.actor_id}`)],
  };
  if (row.post_id !== null) {
    result.postId = Number(row.post_id);
    result.links.push(get('post', `/posts/${row.post_id}`));
  }
  if (row.reply_id !== null) {
    result.replyId = Number(row.reply_id);
    result.links.push(get('reply', `/posts/${row.post_id}/replies/${row.reply_id}`));
  }
  return result;
}
