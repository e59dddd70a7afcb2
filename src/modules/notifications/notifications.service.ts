import type { Kysely } from 'kysely';
import type { Tx } from '../../db/store.js';
import type { Database, NotificationType, PostRow, ReplyRow } from '../../db/types.js';
import { usernameKey } from '../users/users.repository.js';
import { createNotificationsRepository, findMayBeTold, insertNotifications } from './notifications.repository.js';

// Notifications are written inside the transaction of the write that causes them (CONTRACT §10): the services of
// follows, replies, recommends and posts call these with their `tx`, so a write that rolls back leaves none.
// Undoing a cause removes its notification: the foreign keys cascade them with a deleted reply or post; the
// functions below remove the rest (an account's deletion, an unfollow, a withdrawn recommend, an edit that drops a
// mention).
//
// Lock order. A notification's insert or delete locks no row that other writers share: on PostgreSQL its stream
// event (a trigger, see 20261127T1700_notification_event_xids.ts) takes its id from a sequence and records its
// transaction's xid, so notification writers for different users never wait on each other (issue 45; until then
// every one bumped the one row of `notification_position` and held it to the commit). What a notification write
// does lock is per row and follows the order every write keeps: the users' rows, then the post's (a reply's or
// recommend's foreign key takes a share lock on its post; there is none to users, see 20261127T1400), so a reply's
// delete locks its post before the cascade, and an account's deletion removes its notifications before its posts.
// On SQLite the single writer orders everything; its events still number from `notification_position`.

/** At most this many users are notified by one post's or reply's mentions: the first distinct names that name users. */
export const MAX_MENTIONS = 20;

/**
 * `@name` where neither the character before the `@` nor the one after the name can be part of a username
 * (`ann@example.com` mentions nobody): the name is the whole run of username characters after the `@`.
 */
const MENTION = /(?<![A-Za-z0-9_])@([A-Za-z0-9_]+)/g;

/** The distinct (lower-cased) names mentioned in `texts`, in order of first appearance; only lengths a username can have. */
export function mentionedNames(...texts: string[]): string[] {
  const names = new Set<string>();
  for (const text of texts) {
    for (const match of text.matchAll(MENTION)) {
      const name = match[1]!;
      if (name.length >= 3 && name.length <= 32) names.add(usernameKey(name));
    }
  }
  return [...names];
}

/** The ids of the users the first MAX_MENTIONS names that name users name, in that order: one statement for all the names. */
async function mentionedUsers(db: Kysely<Database>, names: readonly string[]): Promise<number[]> {
  if (names.length === 0) return [];
  const byName = await createNotificationsRepository(db).usersByKey(names);
  return names.flatMap((name) => byName.get(name) ?? []).slice(0, MAX_MENTIONS);
}

/**
 * Of the users named (by username key) or given (by id) in `who`, those who may be told about the post now, as
 * `actorId`'s doing (`mayBeTold`: they may see the post, no block stands between them and the actor, they do not
 * mute the actor), in the order of `who`. One statement for all of them, whatever their number.
 */
async function mayBeToldAmong(tx: Tx, postId: number, actorId: number, who: { names: readonly string[] } | { ids: readonly number[] }): Promise<number[]> {
  const order = 'names' in who ? who.names : who.ids;
  if (order.length === 0) return [];
  const rows = await findMayBeTold(tx, postId, actorId, who);
  const found = new Map(rows.map((row) => ['names' in who ? row.username_key : Number(row.id), Number(row.id)] as const));
  return order.flatMap((key) => found.get(key) ?? []);
}

/**
 * Brings the mention notifications of a post (`reply` undefined) or a reply in line with its text: the users it
 * mentions now (but its author, and `exclude`) who may be told and were not told yet are notified; those told
 * before whom it no longer mentions lose theirs. `fresh`: the text is new, nobody was told yet. `excludeKey`:
 * the username key of `exclude`, whose name then costs no statement (a reply naming the post's owner).
 *
 * A new text naming at most MAX_MENTIONS names is the common case and costs one read: every name that names a user
 * counts, so the names go straight into the one statement that judges who may be told (`mayBeToldAmong`). Past
 * that, or for an edit (which must know whom the text names now), the names are looked up first.
 */
async function syncMentions(
  tx: Tx,
  about: { postId: number; replyId?: number; authorId: number; texts: string[]; exclude?: number; excludeKey?: string; fresh: boolean },
): Promise<void> {
  const notifications = createNotificationsRepository(tx.db);
  const all = mentionedNames(...about.texts);
  if (about.fresh && all.length === 0) return;
  const skipped = (id: number) => id === about.authorId || id === about.exclude;
  let who: { names: string[] } | { ids: number[] };
  let already = new Set<number>();
  if (about.fresh && all.length <= MAX_MENTIONS) {
    const names = all.filter((name) => name !== about.excludeKey);
    if (names.length === 0) return;
    who = { names };
  } else {
    const ids = (await mentionedUsers(tx.db, all)).filter((id) => !skipped(id));
    if (!about.fresh) {
      const told = await notifications.mentioned(about.postId, about.replyId);
      const now = new Set(ids);
      await notifications.removeMentions(about.postId, about.replyId, told.filter((id) => !now.has(id)));
      already = new Set(told);
    }
    who = { ids: ids.filter((id) => !already.has(id)) };
  }
  const told = (await mayBeToldAmong(tx, about.postId, about.authorId, who)).filter((id) => !skipped(id) && !already.has(id));
  await insertNotifications(
    tx,
    told.map((id) => ({
      recipient_id: id,
      actor_id: about.authorId,
      type: 'mention' as const,
      post_id: about.postId,
      ...(about.replyId !== undefined ? { reply_id: about.replyId } : {}),
    })),
  );
}

/**
 * `followerId` followed `followeeId` (never oneself: the route refuses that). Rule 6 asks two things of these two,
 * both read by the follow under the users' locks: no block stands between them (or there would be no follow), and
 * `muted`, whether the followee mutes the follower (then they are not told).
 */
export async function notifyFollow(tx: Tx, followerId: number, followeeId: number, muted: boolean): Promise<void> {
  if (muted) return;
  await insertNotifications(tx, [{ recipient_id: followeeId, actor_id: followerId, type: 'follow' }]);
}

/** The follows ended: their `follow` notifications go, all in one statement. */
export async function unnotifyFollows(tx: Tx, follows: readonly { followeeId: number; followerId: number }[]): Promise<void> {
  await createNotificationsRepository(tx.db).removeFollows(follows.map((f) => ({ recipientId: f.followeeId, actorId: f.followerId })));
}

/** `userId` recommended the post: its owner is told, unless it is their own. */
export async function notifyRecommend(tx: Tx, userId: number, postId: number): Promise<void> {
  const owner = await createNotificationsRepository(tx.db).ownerOf(postId);
  if (!owner || owner.id === userId) return;
  if ((await mayBeToldAmong(tx, postId, userId, { ids: [owner.id] })).length === 0) return;
  await insertNotifications(tx, [{ recipient_id: owner.id, actor_id: userId, type: 'recommend', post_id: postId }]);
}

export async function unnotifyRecommend(tx: Tx, userId: number, postId: number): Promise<void> {
  const owner = await createNotificationsRepository(tx.db).ownerOf(postId);
  if (!owner) return;
  await createNotificationsRepository(tx.db).remove({ type: 'recommend', recipientId: owner.id, actorId: userId, postId });
}

/**
 * A new reply: the post's owner gets a `reply` (unless they wrote it), the users it mentions a `mention`; an owner
 * who is also mentioned gets the one `reply` only. Its deletion cascades both away.
 */
export async function notifyReply(tx: Tx, reply: ReplyRow): Promise<void> {
  const owner = await createNotificationsRepository(tx.db).ownerOf(reply.post_id);
  if (!owner) return;
  if (owner.id !== reply.author_id && (await mayBeToldAmong(tx, reply.post_id, reply.author_id, { ids: [owner.id] })).length > 0) {
    const row = { recipient_id: owner.id, actor_id: reply.author_id, type: 'reply' as NotificationType, post_id: reply.post_id, reply_id: reply.id };
    await insertNotifications(tx, [row]);
  }
  await syncMentions(tx, { postId: reply.post_id, replyId: reply.id, authorId: reply.author_id, texts: [reply.content], exclude: owner.id, excludeKey: owner.key, fresh: true });
}

/** A reply's content was replaced: mentions added notify, mentions dropped lose their notification. */
export async function replyEdited(tx: Tx, reply: ReplyRow): Promise<void> {
  const owner = await createNotificationsRepository(tx.db).ownerOf(reply.post_id);
  if (!owner) return;
  await syncMentions(tx, { postId: reply.post_id, replyId: reply.id, authorId: reply.author_id, texts: [reply.content], exclude: owner.id, fresh: false });
}

/** A post was created (`fresh`) or replaced: its title's and content's mentions, as for a reply. */
export async function postWritten(tx: Tx, post: PostRow, fresh: boolean): Promise<void> {
  await syncMentions(tx, { postId: post.id, authorId: post.owner_id, texts: [post.title, post.content], fresh });
}

/**
 * Everything an account's deletion takes from the notifications: those it received, those it caused, and those
 * about its posts (others' replies and mentions there; the posts' cascade would take these too, but after the post
 * stream's events, see the lock order above). There is no foreign key to users (see the migration): this is what
 * removes them. No `userId`: every account (DELETE /users).
 */
export async function removeAccountNotifications(tx: Tx, userId?: number): Promise<void> {
  await createNotificationsRepository(tx.db).removeAccount(userId);
}
