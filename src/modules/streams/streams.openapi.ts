/**
 * How the OpenAPI document describes the live streams (CONTRACT §7): the two list operations that also answer
 * `Accept: text/event-stream` get that media type on their 200, the `Last-Event-ID` header parameter, and the
 * refusals a stream may meet. Applied by the document transform (src/plugins/openapi-transform.ts); the route
 * schemas keep describing the JSON answer, which is what Fastify serializes.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const isObject = (value: unknown): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value);

const STREAMS: Record<string, string> = {
  listPosts: 'every post the caller may see (anonymous: public posts)',
  getFeed: 'the feed: posts by the users user_id follows that user_id may see',
  listNotifications: "the user's notifications (CONTRACT §10)",
};

const EVENT_STREAM_SCHEMA: JsonObject = {
  type: 'string',
  description:
    'Server-sent events (text/event-stream). First a `retry:` line, then events, each with an `id:` line: ' +
    '`post.created` and `post.updated` (`data:` the post exactly as GET /posts/{post_id} shows it to this ' +
    'subscriber; an edit of the post, not a reply or recommend moving its counters), `post.deleted` (`data: {"id": <post id>}`; also sent when an update hides a post this subscriber ' +
    'could see), and `reset` (`data: {}`: the Last-Event-ID is no longer kept; refetch the collection). ' +
    'A `: keep-alive` comment when STREAM_HEARTBEAT_SECONDS pass without an event.',
  examples: [
    'retry: 2000\n\nid: 42\nevent: post.created\ndata: {"id":7,"title":"Hello",…}\n\nid: 43\nevent: post.deleted\ndata: {"id":7}\n\n',
  ],
};

/** The notification stream's events (src/modules/notifications/notifications.stream.ts). */
const NOTIFICATION_EVENT_STREAM_SCHEMA: JsonObject = {
  type: 'string',
  description:
    'Server-sent events (text/event-stream). First a `retry:` line, then events, each with an `id:` line: ' +
    '`notification.created` (`data:` the notification as GET /users/{user_id}/notifications/{notification_id} shows ' +
    'it, sent only while it exists and its post is visible to the user; `types` applies), `notification.deleted` ' +
    '(`data: {"id": <notification id>}`), and `reset` (`data: {}`: the Last-Event-ID is no longer kept; refetch). ' +
    'A `: keep-alive` comment when STREAM_HEARTBEAT_SECONDS pass without an event.',
  examples: ['retry: 2000\n\nid: 42\nevent: notification.created\ndata: {"id":7,"type":"follow",…}\n\nid: 43\nevent: notification.deleted\ndata: {"id":7}\n\n'],
};

const LAST_EVENT_ID: JsonObject = {
  name: 'Last-Event-ID',
  in: 'header',
  required: false,
  description:
    'With `Accept: text/event-stream`: resume after this event id (the last `id:` received). The events after it ' +
    'that the subscriber may see are replayed in order, then the stream goes on live. Malformed: 400.',
  schema: { type: 'string', pattern: '^(0|[1-9][0-9]{0,14})$' },
};

/** Adds the event-stream description to `op` when it is one of the streaming operations. */
export function documentEventStream(op: JsonObject): void {
  const what = typeof op.operationId === 'string' ? STREAMS[op.operationId] : undefined;
  if (what === undefined || !isObject(op.responses)) return;
  const ok = op.responses['200'];
  if (!isObject(ok)) return;
  const content = isObject(ok.content) ? ok.content : {};
  content['text/event-stream'] = { schema: op.operationId === 'listNotifications' ? NOTIFICATION_EVENT_STREAM_SCHEMA : EVENT_STREAM_SCHEMA };
  ok.content = content;
  ok.headers = { ...(isObject(ok.headers) ? ok.headers : {}), 'X-Accel-Buffering': { $ref: '#/components/headers/X-Accel-Buffering' } };
  ok.description = `${String(ok.description)}; with \`Accept: text/event-stream\`, a live stream of ${what}`;
  op.parameters = [...(Array.isArray(op.parameters) ? op.parameters : []), LAST_EVENT_ID];
  const streamNote =
    `\n\nWith \`Accept: text/event-stream\` the answer is a live stream of ${what} (server-sent events, ` +
    '`Cache-Control: no-store`). At most STREAM_MAX_PER_USER streams per user (more: 429) and STREAM_MAX per ' +
    'server (more: 503 with Retry-After). A stream whose token is revoked or expires is closed.';
  op.description = `${typeof op.description === 'string' ? op.description : ''}${streamNote}`;
  const problem = (description: string, retryAfter: boolean): JsonObject => ({
    description,
    headers: {
      'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' },
      ...(retryAfter ? { 'Retry-After': { $ref: '#/components/headers/Retry-After' } } : {}),
    },
    content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
  });
  op.responses['429'] ??= problem('Too many event streams open for this user; see Retry-After', true);
  op.responses['503'] ??= problem('Too many event streams open on this server, or the database is unavailable; see Retry-After', true);
}
