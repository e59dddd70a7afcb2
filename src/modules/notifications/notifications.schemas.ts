import { Type, type Static } from 'typebox';
import { Id, IdParam, LinksSchema, PageQuerySchema, Text, Timestamp } from '../../shared/schemas.js';

export const NOTIFICATION_TYPES = ['follow', 'reply', 'recommend', 'mention'] as const;

export const NotificationSchema = Type.Object(
  {
    id: Id,
    type: Type.Union([Type.Literal('follow'), Type.Literal('reply'), Type.Literal('recommend'), Type.Literal('mention')], {
      description: '`follow` (someone follows you), `reply` (to your post), `recommend` (your post), `mention` (`@you` in a post or reply)',
    }),
    actorId: Type.Integer({ minimum: 1, description: 'The user whose action it is' }),
    postId: Type.Optional(Type.Integer({ minimum: 1, description: 'The post it is about (reply, recommend, mention)' })),
    replyId: Type.Optional(Type.Integer({ minimum: 1, description: 'The reply it is about (reply, mention in a reply)' })),
    createdAt: Timestamp,
    links: Type.Array(LinksSchema.items, { description: 'self, actor, and post and reply where they apply' }),
  },
  { title: 'Notification' },
);
export type Notification = Static<typeof NotificationSchema>;

export const NotificationMarkerSchema = Type.Object(
  {
    lastReadId: Type.Integer({ minimum: 0, description: 'The id of the newest notification read; 0 at first' }),
    unreadCount: Type.Integer({ minimum: 0, maximum: 1000, description: 'Visible notifications newer than lastReadId, exact up to 1000, then 1000' }),
  },
  { title: 'NotificationMarker' },
);

export const ReplaceNotificationMarkerBodySchema = Type.Object(
  {
    lastReadId: Type.Integer({
      minimum: 0,
      maximum: Number.MAX_SAFE_INTEGER,
      description: 'The id of the newest notification read. A value below the current one leaves the marker where it is.',
    }),
    unreadCount: Type.Optional(Type.Unknown({ description: 'Read-only; ignored' })),
  },
  { additionalProperties: false, title: 'NotificationMarkerReplacement' },
);

export const NotificationParamsSchema = Type.Object({
  user_id: IdParam('The recipient'),
  notification_id: IdParam('The notification id'),
});

export const ListNotificationsQuerySchema = Type.Object({
  ...PageQuerySchema.properties,
  types: Type.Optional(
    Text(0, 200, 'Comma-separated types to keep (`follow`, `reply`, `recommend`, `mention`); an unknown type is a 400'),
  ),
});
