import type { Generated, Insertable, Selectable, Updateable } from 'kysely';

/**
 * Row types, kept by hand in step with the migrations (codegen against one dialect would not match the other).
 * Timestamps are ISO 8601 UTC strings on both engines (see pg-store.ts for PostgreSQL's parser).
 */
export interface Database {
  users: UsersTable;
  tokens: TokensTable;
  follows: FollowsTable;
  posts: PostsTable;
  replies: RepliesTable;
  recommends: RecommendsTable;
  boards: BoardsTable;
  feed_entries: FeedEntriesTable;
  fanout_queue: FanoutQueueTable;
  feed_backfill: FeedBackfillTable;
  settings: SettingsTable;
  counters: CountersTable;
  stream_events: StreamEventsTable;
  stream_position: StreamPositionTable;
  idempotency_keys: IdempotencyKeysTable;
  notifications: NotificationsTable;
  notification_markers: NotificationMarkersTable;
  notification_events: NotificationEventsTable;
  notification_position: StreamPositionTable;
  reports: ReportsTable;
  blocks: BlocksTable;
  mutes: MutesTable;
  suspensions: SuspensionsTable;
  post_search: PostSearchTable;
  user_words: UserWordsTable;
}

export type Role = 'member' | 'admin';
export type Visibility = 'public' | 'followers' | 'private';

export interface UsersTable {
  id: Generated<number>;
  username: string;
  /** Lower-cased username: the unique key that makes usernames unique case-insensitively on both engines. */
  username_key: string;
  display_name: string;
  bio: string;
  role: Role;
  password_hash: string;
  follower_count: Generated<number>;
  following_count: Generated<number>;
  /** Every post of the user (what the user themself and admins see). */
  post_count: Generated<number>;
  /** Their public posts (what everyone sees) and followers-only posts (added for their followers). */
  public_post_count: Generated<number>;
  followers_post_count: Generated<number>;
  /** Bumped by every password change; a token is valid only while it carries the current one. */
  password_version: Generated<number>;
  /** Blocks the user is in, on either side (CONTRACT §9): zero lets reads skip the block checks. */
  block_count: Generated<number>;
  /** Mutes by the user: zero lets listings skip the mute check. */
  mute_count: Generated<number>;
  /** The words GET /users?q= finds the user by, each after a space (src/modules/search/search.text.ts). */
  search_words: Generated<string>;
  created_at: string;
  updated_at: string;
}

export interface TokensTable {
  id: Generated<number>;
  user_id: number;
  /** SHA-256 of the bearer token; the token itself is never stored. */
  token_hash: string;
  /** The user's password_version when the token was minted. */
  password_version: Generated<number>;
  created_at: string;
  expires_at: string;
}

export interface FollowsTable {
  /** The user who follows. */
  follower_id: number;
  /** The user being followed. */
  followee_id: number;
  created_at: string;
}

export interface PostsTable {
  id: Generated<number>;
  owner_id: number;
  title: string;
  content: string;
  visibility: Visibility;
  reply_count: Generated<number>;
  recommend_count: Generated<number>;
  created_at: string;
  updated_at: string;
}

/**
 * The post search index (src/db/search-sql.ts), one entry per post holding the words of its title and content.
 * SQLite: an FTS5 table whose rowid is the post id (no `post_id` column: write it through search-sql.ts only).
 * PostgreSQL: a table of (post_id, words tsvector) under a GIN index.
 */
export interface PostSearchTable {
  post_id: number;
  words: string;
}

/**
 * One row per word a user is found by (search.text.ts `userWords`), with the user's `username_key`: GET /users?q=
 * reads the users whose words start with a query word as a range of the primary key, in username order, without
 * reading their rows (users.repository.ts `searchByName`).
 */
export interface UserWordsTable {
  word: string;
  username_key: string;
  user_id: number;
}

export interface RepliesTable {
  id: Generated<number>;
  post_id: number;
  author_id: number;
  content: string;
  created_at: string;
  updated_at: string;
}

export interface RecommendsTable {
  post_id: number;
  user_id: number;
  created_at: string;
}

export interface BoardsTable {
  id: Generated<number>;
  author_id: number;
  title: string;
  content: string;
  created_at: string;
  updated_at: string;
}

/** Fan-out of posts into the home feed of each follower of their owner, written by the fan-out worker. */
export interface FeedEntriesTable {
  user_id: number;
  post_id: number;
  /** The post's owner: lets an unfollow drop that owner's entries from the follower's feed. */
  owner_id: number;
}

/** Posts whose feed entries are not written yet (see feed.fanout.ts); feed reads merge them. */
export interface FanoutQueueTable {
  post_id: number;
  owner_id: number;
}

/** A follow whose followee's existing posts are not yet in the follower's feed entries (feed.fanout.ts). */
export interface FeedBackfillTable {
  user_id: number;
  owner_id: number;
}

/** The durable log of post events that live streams replay (see src/modules/streams/events.ts). */
export interface StreamEventsTable {
  /** PostgreSQL: from a sequence (unique, not in commit order); SQLite: from `stream_position` (commit order). */
  id: Generated<number>;
  /** PostgreSQL: the writing transaction's id (xid8, read as text); SQLite: 0. Events go out in (xid, id) order. */
  xid: Generated<string | number>;
  kind: 'created' | 'updated' | 'deleted';
  post_id: number;
  owner_id: number;
  visibility: Visibility;
  previous_visibility: Visibility | null;
  /** Random, part of the id a client sees (`<id>-<tag>`): an id handed out again after a restore differs by it. */
  tag: string;
  /** A post deleted with its owner's account: the owner's followers before (JSON array), on the account's first event. */
  followers: string | null;
  /** The account's other events: the id of the event that lists the followers. */
  followers_in: number | null;
  created_at: string;
}

/** One row: the last stream event id handed out, and that event's tag. */
export interface StreamPositionTable {
  id: number;
  last_id: number;
  tag: string;
}

/** Running totals kept by triggers (name 'boards': the number of boards), so that no request counts a table. */
export interface CountersTable {
  name: string;
  value: number;
}

/** Process-independent settings shared by every server on the database (e.g. the cursor signing key). */
export interface SettingsTable {
  key: string;
  value: string;
}

/**
 * Idempotency keys (CONTRACT §6.2): the answer of the first request with a key, written in the same transaction as
 * its create, kept until `expires_at`. `claim_token` is always null now: versions before 2026-11-26 wrote a claim
 * (`claim_token` set, `status` null) while the first request ran; such a row is run over like an expired one, and
 * the column stays so that a rolling upgrade can run both versions on one database.
 */
export interface IdempotencyKeysTable {
  id: Generated<number>;
  /** The caller's user id; 0 for a sign-up without a token. */
  caller_id: number;
  /** Method and path: `POST /users/7/posts`. */
  target: string;
  idempotency_key: string;
  /** Keyed hash of the request body's canonical JSON. */
  fingerprint: string;
  claim_token: string | null;
  started_at: string;
  expires_at: string;
  status: number | null;
  content_type: string | null;
  location: string | null;
  etag: string | null;
  body: string | null;
}

export type NotificationType = 'follow' | 'reply' | 'recommend' | 'mention';

/** Notifications (CONTRACT §10): who is told, who caused it, and the post and reply it is about, if any. */
export interface NotificationsTable {
  id: Generated<number>;
  recipient_id: number;
  actor_id: number;
  type: NotificationType;
  post_id: number | null;
  reply_id: number | null;
  created_at: string;
}

/** A user's notification read marker (no row: 0). */
export interface NotificationMarkersTable {
  user_id: number;
  last_read_id: number;
}

/** The log notification streams replay, written by triggers on `notifications` (see its migration). */
export interface NotificationEventsTable {
  /** PostgreSQL: from a sequence (unique, not in commit order); SQLite: gapless, from `notification_position`. */
  id: Generated<number>;
  /** PostgreSQL: the writing transaction's id (xid8, read as text); SQLite: 0. Events go out in (xid, id) order. */
  xid: Generated<string | number>;
  kind: 'created' | 'deleted';
  notification_id: number;
  recipient_id: number;
  /** Random, sent with the id (`<id>-<tag>`): what tells an id handed out again after a restore from the first. */
  tag: string;
  created_at: string;
}

export type NotificationRow = Selectable<NotificationsTable>;
export type ReportSubjectType = 'post' | 'reply' | 'user';
export type ReportReason = 'spam' | 'abuse' | 'illegal' | 'other';
export type ReportStatus = 'open' | 'resolved' | 'dismissed';

/**
 * Reports (CONTRACT §9). No foreign keys: a report stays when its subject or its reporter is deleted, and keeps
 * their ids. At most one open report per (reporter_id, subject_type, subject_id): a partial unique index.
 */
export interface ReportsTable {
  id: Generated<number>;
  reporter_id: number;
  subject_type: ReportSubjectType;
  subject_id: number;
  /** The post a reported reply was written under (its path includes it); null for a post or a user. */
  subject_post_id: number | null;
  reason: ReportReason;
  comment: string;
  status: ReportStatus;
  resolution: string;
  created_at: string;
  updated_at: string;
}

export type UserRow = Selectable<UsersTable>;
export type NewUserRow = Insertable<UsersTable>;
export type UserRowUpdate = Updateable<UsersTable>;
export type TokenRow = Selectable<TokensTable>;
export type PostRow = Selectable<PostsTable>;
export type NewPostRow = Insertable<PostsTable>;
export type PostRowUpdate = Updateable<PostsTable>;
export type ReplyRow = Selectable<RepliesTable>;
export type BoardRow = Selectable<BoardsTable>;
export type IdempotencyKeyRow = Selectable<IdempotencyKeysTable>;
export type ReportRow = Selectable<ReportsTable>;

/** A block (CONTRACT §9): either of the two stops seeing the other's posts, replies and recommends. */
export interface BlocksTable {
  id: Generated<number>;
  blocker_id: number;
  blocked_id: number;
  created_at: string;
}

/** A mute (CONTRACT §9): the muter's listings leave the muted user's posts and replies out. */
export interface MutesTable {
  id: Generated<number>;
  muter_id: number;
  muted_id: number;
  created_at: string;
}

/** A suspended account (CONTRACT §9): hidden from everyone but admins until the row goes. */
export interface SuspensionsTable {
  user_id: number;
  reason: string;
  created_at: string;
  updated_at: string;
}
export type SuspensionRow = Selectable<SuspensionsTable>;
