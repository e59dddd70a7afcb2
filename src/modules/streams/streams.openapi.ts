/**
 * How the OpenAPI document describes the live streams (CONTRACT §7): the two list operations that also answer
 * `Accept: text/event-stream` get that media type on their 200, the `Last-Event-ID` header parameter, and the
 * refusals a stream may meet. Applied by the document transform (src/plugins/openapi-transform.ts); the route
 * schemas keep describing the JSON answer, which is what Fastify serializes.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const isObject = (value: unknown): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value);

/** What each streaming operation streams, and whether it may be opened without a token. */
const STREAMS: Record<string, { what: string; anonymous: boolean }> = {
  listPosts: { what: 'every post the caller may see (anonymous: public posts)', anonymous: true },
  getFeed: { what: 'the feed: posts by the users user_id follows that user_id may see', anonymous: false },
  listNotifications: { what: "the user's notifications (CONTRACT §10)", anonymous: false },
};

const EVENT_STREAM_SCHEMA: JsonObject = {
  type: 'string',
  description:
    'Server-sent events (text/event-stream). First a `retry:` line, then events, each with an `id:` line: ' +
    '`post.created` and `post.updated` (`data:` the post exactly as GET /posts/{post_id} shows it to this ' +
    'subscriber; an edit of the post, not a reply or recommend moving its counters), `post.deleted` (`data: {"id": <post id>}`; also sent when an update hides a post this subscriber ' +
    'could see), and `reset` (`data: {}`: the Last-Event-ID cannot be resumed from; refetch the collection). ' +
    'A `: keep-alive` comment when STREAM_HEARTBEAT_SECONDS pass without an event.',
  examples: [
    'retry: 2000\n\nid: 42-9f2c4a7be013\nevent: post.created\ndata: {"id":7,"title":"Hello",…}\n\nid: 43-07c1d8e2a4b6\nevent: post.deleted\ndata: {"id":7}\n\n',
  ],
};

/** The notification stream's events (src/modules/notifications/notifications.stream.ts). */
const NOTIFICATION_EVENT_STREAM_SCHEMA: JsonObject = {
  type: 'string',
  description:
    'Server-sent events (text/event-stream). First a `retry:` line, then events, each with an `id:` line: ' +
    '`notification.created` (`data:` the notification as GET /users/{user_id}/notifications/{notification_id} shows ' +
    'it, sent only while it exists and its post is visible to the user; `types` applies), `notification.deleted` ' +
    '(`data: {"id": <notification id>}`), and `reset` (`data: {}`: the Last-Event-ID cannot be resumed from; refetch). ' +
    'A `: keep-alive` comment when STREAM_HEARTBEAT_SECONDS pass without an event.',
  examples: [
    'retry: 2000\n\nid: 42-5d0e9a13c7f2\nevent: notification.created\ndata: {"id":7,"type":"follow",…}\n\nid: 43-b81f02c6e95a\nevent: notification.deleted\ndata: {"id":7}\n\n',
  ],
};

const LAST_EVENT_ID: JsonObject = {
  name: 'Last-Event-ID',
  in: 'header',
  required: false,
  description:
    'With `Accept: text/event-stream`: resume after this event id (the last `id:` received, e.g. `42-9f2c4a7be013`; ' +
    'ids are opaque: a number that increases, then a random tag). The events after it that the subscriber may see ' +
    'are replayed in order, each post as it is now (or `post.deleted` when it is gone or hidden from the ' +
    'subscriber), then the stream goes on live. An id no longer kept, never sent by this database (`0` included) ' +
    'or from before a restore of the database gets `event: reset` first. Malformed: 400.',
  schema: { type: 'string', pattern: '^(0|[1-9][0-9]{0,15})(-[0-9a-f]{12})?$' },
};

/** Adds the event-stream description to `op` when it is one of the streaming operations. */
export function documentEventStream(op: JsonObject): void {
  const stream = typeof op.operationId === 'string' ? STREAMS[op.operationId] : undefined;
  if (stream === undefined || !isObject(op.responses)) return;
  const { what, anonymous } = stream;
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
    '`Cache-Control: no-store`). ' +
    (anonymous
      ? 'At most STREAM_MAX_PER_USER streams per user, and as many opened without a token per client address (more: ' +
        '429 with Retry-After); at most STREAM_MAX per server (more: 503 with Retry-After), of which streams opened ' +
        'without a token may hold all but a tenth, kept for signed-in users (past that part: 503 with Retry-After). '
      : 'At most STREAM_MAX_PER_USER streams per user (more: 429 with Retry-After) and STREAM_MAX per server (more: ' +
        '503 with Retry-After). ') +
    'A stream whose token is revoked or expires is closed.';
  op.description = `${typeof op.description === 'string' ? op.description : ''}${streamNote}`;
  const problem = (description: string, retryAfter: boolean): JsonObject => ({
    description,
    headers: {
      'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' },
      ...(retryAfter ? { 'Retry-After': { $ref: '#/components/headers/Retry-After' } } : {}),
    },
    content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
  });
  // The route may declare these statuses already (rate limit, database unavailable): the stream's reasons are added.
  const responses = op.responses;
  const refusal = (status: string, reason: string) => {
    const declared = responses[status];
    if (isObject(declared)) declared.description = `${String(declared.description)}; with \`Accept: text/event-stream\`, also ${reason}`;
    else responses[status] = problem(`${reason[0]!.toUpperCase()}${reason.slice(1)}; see Retry-After`, true);
  };
  refusal('429', `too many streams open for this user${anonymous ? ' (without a token: from this client address)' : ''}`);
  refusal('503', `too many streams open on this server${anonymous ? ' (without a token: in the part of it they may hold)' : ''}`);
}
