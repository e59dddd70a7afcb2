import fastJson from 'fast-json-stringify';
import type { Kysely } from 'kysely';
import type { Counter } from 'prom-client';
import type { Database, PostRow, Visibility } from '../../db/types.js';
import type { Links } from '../../shared/links.js';
import { toPost } from '../../shared/representations.js';
import { countsPerViewer, seesPost } from '../../shared/visibility.js';
import { PostSchema } from '../posts/posts.schemas.js';
import { eventId, type createEventsRepository, type OwnerRelations, type Position, type StreamEvent } from './events.js';
import { REPLAY_PAUSE_BYTES, type Subscriber, type Subscribers } from './registry.js';

/** The stream log's reads (events.ts), one object shared by the pump, the catch-ups and the delivery. */
export type EventLog = ReturnType<typeof createEventsRepository>;

/**
 * Hands one event to the subscribers the pump or a catch-up gives it: who sees it (the rule of
 * shared/visibility.ts, fed with the lookups it needs, made once per event for all of them), and what they get.
 */
export class Delivery {
  /** The serializer Fastify compiles for GET /posts/{id}'s answer: the same fields in the same order. */
  private readonly serialize: (post: unknown) => string = fastJson(PostSchema as object);
  /** Follower lists of deleted accounts (DeletedAccount), by the id of the event that holds each; a few. */
  private readonly followerLists = new Map<number, ReadonlySet<number>>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly events: EventLog,
    private readonly links: Links,
    private readonly subscribers: Subscribers,
    private readonly sent: Counter,
    /** Starts the catch-up of a live subscriber the client has fallen behind (catch-up.ts). */
    private readonly catchUp: (sub: Subscriber, countedFrom: Position) => Promise<void>,
  ) {}

  /**
   * Sends one event to each of `subs`, judged and rendered from the post as it is now (`row`; undefined: deleted),
   * never from what the event recorded, and moves their cursors past it (CONTRACT §7). A post the subscriber may
   * see now goes as it is now, under the event's name; one gone or hidden from it goes as `post.deleted`, only to a
   * subscriber that could see the version the event made or replaced (so a stranger never learns of a private post
   * by its id), and a deletion to one that could see it as it was deleted.
   */
  async deliver(event: StreamEvent, row: PostRow | undefined, subs: Subscriber[]): Promise<void> {
    if (subs.length === 0) return;
    const ownerId = event.ownerId;
    const byFollowers = row?.visibility === 'followers' || event.visibility === 'followers' || event.previousVisibility === 'followers';
    const needFollow = new Set<number>();
    for (const sub of subs) {
      const v = sub.viewer;
      if (!v || v.id === ownerId) continue;
      if (sub.kind === 'feed' || (v.role !== 'admin' && byFollowers)) needFollow.add(v.id);
    }
    const follows = needFollow.size > 0 ? await this.followersAmong(event, [...needFollow]) : new Set<number>();
    // Blocks, mutes and the owner's suspension (CONTRACT §9), for every signed-in viewer but the owner: one read.
    const viewers = new Set<number>();
    for (const sub of subs) if (sub.viewer && sub.viewer.id !== ownerId) viewers.add(sub.viewer.id);
    const relations = await this.events.ownerRelations(ownerId, [...viewers]);

    // The counters each subscriber may see (CONTRACT §9: as GET /posts/{id} shows them to it); nearly always the
    // stored ones for all, and no read.
    const signedIn = subs.flatMap((sub) => (sub.viewer ? [sub.viewer] : []));
    const counted = row && event.kind !== 'deleted' && signedIn.length > 0 ? await countsPerViewer(this.db, row, signedIn) : undefined;
    const bodies = new Map<PostRow, string>();
    const bodyOf = (post: PostRow) => bodies.get(post) ?? bodies.set(post, `data: ${this.serialize(toPost(post, this.links))}\n\n`).get(post)!;

    const deleted = `event: post.deleted\ndata: {"id":${event.postId}}\n\n`;
    for (const sub of subs) {
      if (sub.closed || sub.cursor >= event.position) continue;
      if (sub.live && this.subscribers.backlog(sub) > REPLAY_PAUSE_BYTES) {
        // The client has not taken what it was given: writing on would outrun it. It catches up from the log at
        // its own pace (this event included) and is live again once it has.
        sub.behind = sizeOf(row);
        void this.catchUp(sub, sub.cursor);
        continue;
      }
      sub.cursor = event.position;
      const sees = (visibility: Visibility | null) => visibility !== null && canSee(sub, ownerId, visibility, follows, relations);
      let frame: string | undefined;
      if (event.kind === 'deleted') {
        if (sees(event.visibility)) frame = deleted;
      } else if (row && sees(row.visibility)) {
        const viewer = sub.viewer;
        const own = viewer && counted?.get(viewer.role === 'admin' ? 'admin' : viewer.id);
        frame = `event: post.${event.kind}\n${bodyOf(own ?? row)}`;
      } else if (sees(event.visibility) || sees(event.previousVisibility)) {
        frame = deleted;
      }
      if (frame === undefined) continue;
      this.subscribers.write(sub, `id: ${eventId(event)}\n${frame}`);
      this.sent.inc();
    }
  }

  /**
   * Which of `candidates` follow the event's owner: now, or for a post deleted with its owner's account, as they
   * did before that deletion (recorded with the event: the follows went with the account).
   */
  private async followersAmong(event: StreamEvent, candidates: number[]): Promise<ReadonlySet<number>> {
    let recorded: ReadonlySet<number> | undefined;
    if (event.followers) recorded = new Set(event.followers);
    else if (event.followersIn !== undefined) {
      recorded = this.followerLists.get(event.followersIn);
      if (!recorded) {
        // Purged already (kept an hour, like the events pointing at it): nobody is known to have followed.
        recorded = new Set((await this.events.byId(event.followersIn))?.followers);
        if (this.followerLists.size >= 16) this.followerLists.delete(this.followerLists.keys().next().value!);
        this.followerLists.set(event.followersIn, recorded);
      }
    }
    if (!recorded) return this.events.followersAmong(event.ownerId, candidates);
    return new Set(candidates.filter((id) => recorded.has(id)));
  }
}

/**
 * Whether the subscriber sees a post of `ownerId` with `visibility`: the rule of shared/visibility.ts (`seesPost`)
 * for a listing, as GET /posts lists posts to its caller. A feed stream: only posts by users the feed's owner
 * follows, judged for the owner, as GET /users/{id}/feed lists them. Only the feed's own condition is here; the
 * rest is the lookups handed to `seesPost`.
 */
function canSee(sub: Subscriber, ownerId: number, visibility: Visibility, follows: ReadonlySet<number>, relations: OwnerRelations): boolean {
  const v = sub.viewer;
  if (sub.kind === 'feed' && (!v || v.id === ownerId || !follows.has(v.id))) return false;
  const rel = {
    follows: v !== undefined && follows.has(v.id),
    blocked: v !== undefined && relations.blocked.has(v.id),
    mutes: v !== undefined && relations.muting.has(v.id),
    ownerSuspended: relations.ownerSuspended,
  };
  return seesPost(v, { ownerId, visibility }, rel, true);
}

/** The later of two positions. */
export const later = (a: Position, b: Position): Position => (a >= b ? a : b);

/** The post ids of these events whose posts may still exist (a deletion's is gone). */
export const postsOf = (events: readonly StreamEvent[]): number[] => events.filter((e) => e.kind !== 'deleted').map((e) => e.postId);

/** About how many bytes a post takes on a stream (its two long fields and the rest): what a subscriber behind by it misses. */
export const sizeOf = (row: PostRow | undefined): number => (row ? row.title.length + row.content.length + 400 : 40);
