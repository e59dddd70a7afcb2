import type { Migration } from 'kysely';
import * as initialSchema from './20261121T0800_initial_schema.js';
import * as boardCount from './20261121T0900_board_count.js';
import * as boardsOffsetIndex from './20261121T0930_boards_offset_index.js';
import * as fanoutQueue from './20261121T1100_fanout_queue.js';
import * as visibleCounts from './20261125T0100_visible_post_counts_and_password_version.js';
import * as idempotencyKeys from './20261125T0200_idempotency_keys.js';
import * as streamEvents from './20261125T0200_stream_events.js';
import * as tokensByUser from './20261127T0900_tokens_by_user.js';
import * as streamEventTags from './20261127T1000_stream_event_tags.js';
import * as safety from './20261127T1100_safety.js';
import * as reports from './20261127T1200_reports.js';
import * as search from './20261127T1300_search.js';
import * as notifications from './20261127T1400_notifications.js';
import * as feedBackfill from './20261127T1510_feed_backfill.js';
import * as userWords from './20261127T1530_user_words.js';
import * as postSearchMerge from './20261127T1531_post_search_merge.js';
import * as streamEventXids from './20261127T1600_stream_event_xids.js';
import * as notificationEventXids from './20261127T1700_notification_event_xids.js';
import * as notificationsRecipientCover from './20261127T1710_notifications_recipient_cover.js';

/**
 * A static map rather than a folder scan: it behaves the same under tsx, Vitest and the compiled dist/.
 * Names sort by their ISO timestamp prefix, which is the order Kysely runs them in.
 */
export const migrations: Record<string, Migration> = {
  '20261121T0800_initial_schema': initialSchema,
  '20261121T0900_board_count': boardCount,
  '20261121T0930_boards_offset_index': boardsOffsetIndex,
  '20261121T1100_fanout_queue': fanoutQueue,
  '20261125T0100_visible_post_counts_and_password_version': visibleCounts,
  '20261125T0200_idempotency_keys': idempotencyKeys,
  '20261125T0200_stream_events': streamEvents,
  '20261127T0900_tokens_by_user': tokensByUser,
  '20261127T1000_stream_event_tags': streamEventTags,
  '20261127T1100_safety': safety,
  '20261127T1200_reports': reports,
  '20261127T1300_search': search,
  '20261127T1400_notifications': notifications,
  '20261127T1510_feed_backfill': feedBackfill,
  '20261127T1530_user_words': userWords,
  '20261127T1531_post_search_merge': postSearchMerge,
  '20261127T1600_stream_event_xids': streamEventXids,
  '20261127T1700_notification_event_xids': notificationEventXids,
  '20261127T1710_notifications_recipient_cover': notificationsRecipientCover,
};
