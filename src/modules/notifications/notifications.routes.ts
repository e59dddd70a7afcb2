import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { bearer, type Caller } from '../../plugins/auth.js';
import type { NotificationType } from '../../db/types.js';
import { AppError } from '../../shared/errors.js';
import { keysetPage } from '../../shared/pagination.js';
import { problems } from '../../shared/problems.js';
import { responses } from '../../plugins/route-docs.js';
import { PAGE_HEADERS, toId } from '../../shared/schemas.js';
import { findCallerByTokenHash } from '../tokens/tokens.repository.js';
import { checkLastEventId, negotiateStream } from '../streams/streams.plugin.js';
import { createUsersRepository } from '../users/users.repository.js';
import { UserParamsSchema } from '../users/users.schemas.js';
import { createNotificationsRepository, notificationsPage, type Recipient } from './notifications.repository.js';
import {
  ListNotificationsQuerySchema,
  NOTIFICATION_TYPES,
  NotificationMarkerSchema,
  NotificationParamsSchema,
  NotificationSchema,
  ReplaceNotificationMarkerBodySchema,
} from './notifications.schemas.js';
import { toNotification } from './notifications.representation.js';
import { NotificationStreams, openNotificationStream } from './notifications.stream.js';

/** `?types=reply,mention`: each a known type (400 naming `types` otherwise); undefined keeps every type. */
function parseTypes(raw: string | undefined): NotificationType[] | undefined {
  if (raw === undefined) return undefined;
  const known: readonly string[] = NOTIFICATION_TYPES;
  const types = raw.split(',');
  for (const type of types) {
    if (!known.includes(type)) throw AppError.badRequest('types', `must list types among ${NOTIFICATION_TYPES.join(', ')}, separated by commas`);
  }
  return [...new Set(types)] as NotificationType[];
}

/**
 * A user's notifications (CONTRACT §10), read by the user or an admin. What is listed is judged for the recipient,
 * also when an admin reads it (as the feed is), through `visibleNotifications` in the repository.
 */
const notificationsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const notifications = createNotificationsRepository(app.db);
  const users = createUsersRepository(app.db);
  const streams = new NotificationStreams(
    app.db,
    (work) => app.store.transaction((tx) => work(tx.db)),
    app.links,
    {
      heartbeatMs: app.config.streamHeartbeatSeconds * 1000,
      authRecheckMs: app.config.streamAuthRecheckSeconds * 1000,
      retentionSeconds: app.config.streamRetentionSeconds,
    },
    (hash) => findCallerByTokenHash(app.store, hash, new Date().toISOString()),
    app.log,
    app.metrics,
  );
  app.addHook('onReady', async () => streams.start());
  app.closing.addEventListener('abort', () => streams.closeAll(), { once: true });
  app.addHook('onClose', async () => streams.closeAll());

  /** The recipient named by the path, for a caller who may read their notifications: self or admin. */
  async function recipientFor(caller: Caller, userId: number, what: string): Promise<Recipient> {
    if (caller.id === userId) return { id: caller.id, role: caller.role, hasBlocks: caller.hasBlocks }; // a valid token proves its user exists
    const user = await users.findById(userId, caller);
    if (!user) throw AppError.notFound('user');
    if (caller.role !== 'admin') throw AppError.forbidden(`Only the user or an admin may read a user's ${what}`);
    return { id: Number(user.id), role: user.role };
  }

  app.get(
    '/users/:user_id/notifications',
    {
      preValidation: checkLastEventId,
      schema: {
        operationId: 'listNotifications',
        tags: ['notifications'],
        summary: "List a user's notifications",
        description:
          'Newest first, paginated with `limit` and `cursor`; `types` keeps only the listed types. The user themself ' +
          'or an admin; what is listed is what the user may see (a notification about a post hidden from them is left out).',
        security: bearer,
        params: UserParamsSchema,
        querystring: ListNotificationsQuerySchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'A page of notifications', headers: PAGE_HEADERS, ...Type.Array(NotificationSchema) },
          400: problems[400]('Malformed id, cursor, limit or types'),
          401: problems[401],
          403: problems[403],
          404: problems[404]('user'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      const userId = toId(request.params.user_id);
      const types = parseTypes(request.query.types);
      const recipient = await recipientFor(caller, userId, 'notifications');
      if (negotiateStream(request, reply)) {
        // A stream outlives the lookup that says whether the recipient is in a block: it always checks.
        const judged = { id: recipient.id, role: recipient.role };
        return openNotificationStream(app, streams, request, reply, { recipient: judged, caller, types });
      }
      const rows = await keysetPage(request, reply, `notifications|${userId}`, request.query, (page) => notificationsPage(app.store, recipient, { ...page, types }));
      return rows.map((row) => toNotification(row, app.links));
    },
  );

  const markerOf = async (recipient: Recipient) => {
    const lastReadId = await notifications.marker(recipient.id);
    return { lastReadId, unreadCount: await notifications.unreadCount(recipient, lastReadId) };
  };

  app.get(
    '/users/:user_id/notifications/marker',
    {
      schema: {
        operationId: 'getNotificationMarker',
        tags: ['notifications'],
        summary: "Read a user's notification marker",
        description: 'The last notification read and how many visible ones are newer (exact up to 1000). The user themself or an admin.',
        security: bearer,
        params: UserParamsSchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'The marker', ...NotificationMarkerSchema },
          401: problems[401],
          403: problems[403],
          404: problems[404]('user'),
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      return markerOf(await recipientFor(caller, toId(request.params.user_id), 'notification marker'));
    },
  );

  app.put(
    '/users/:user_id/notifications/marker',
    {
      schema: {
        operationId: 'replaceNotificationMarker',
        tags: ['notifications'],
        summary: 'Mark notifications read up to an id',
        description:
          'The user themself only. The marker only moves forward: a `lastReadId` below the current one leaves it ' +
          'as it is, and the answer is the current marker.',
        security: bearer,
        params: UserParamsSchema,
        body: ReplaceNotificationMarkerBodySchema,
        response: responses({ method: 'PUT', bearer: true }, {
          200: { description: 'The marker', ...NotificationMarkerSchema },
          401: problems[401],
          403: problems[403],
          404: problems[404]('user'),
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      const userId = toId(request.params.user_id);
      if (caller.id !== userId) {
        if (!(await users.exists(userId, caller))) throw AppError.notFound('user');
        throw AppError.forbidden('Only the user may move their notification marker');
      }
      await app.store.transaction(({ db }) => createNotificationsRepository(db).advanceMarker(userId, request.body.lastReadId));
      return markerOf(caller);
    },
  );

  app.get(
    '/users/:user_id/notifications/:notification_id',
    {
      schema: {
        operationId: 'getNotification',
        tags: ['notifications'],
        summary: 'Read one notification',
        description: 'The user themself or an admin. One about a post the user may no longer see is a 404 (until it is visible again).',
        security: bearer,
        params: NotificationParamsSchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'The notification', ...NotificationSchema },
          401: problems[401],
          403: problems[403],
          404: problems[404]('user or notification'),
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      const recipient = await recipientFor(caller, toId(request.params.user_id), 'notifications');
      const row = await notifications.findVisible(recipient, toId(request.params.notification_id));
      if (!row) throw AppError.notFound('notification');
      return toNotification(row, app.links);
    },
  );
};

export default notificationsRoutes;
