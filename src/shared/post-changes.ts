import type { Tx } from '../db/store.js';
import type { PostRow } from '../db/types.js';

/**
 * Posts deleted with their owner's account. Who may see a post is judged when its stream event is sent, but the
 * account's follows go in the same transaction: this carries who followed the owner before. One object for all of
 * the account's posts, made inside the deleting transaction: the event log lists the followers once and points the
 * account's other events at that event (`listedIn`, see streams/events.ts).
 */
export interface DeletedAccount {
  readonly followers: readonly number[];
  listedIn?: number;
}

/** A committed change to a post: what the fan-out worker and live streams react to. */
export type PostChange =
  | { kind: 'created'; post: PostRow }
  | { kind: 'updated'; post: PostRow; previous: PostRow }
  | { kind: 'deleted'; post: PostRow; account?: DeletedAccount };

/**
 * Who hears of post changes, and when. `inTransaction` runs inside the writing transaction, at the change, in the
 * order subscribed (e.g. writing a durable event row); `afterCommit` runs once that transaction has committed, and
 * never for one that rolled back (e.g. waking the fan-out worker).
 */
export interface PostChangeSubscriber {
  inTransaction?(tx: Tx, change: PostChange): Promise<void>;
  afterCommit?(change: PostChange): void;
}

/**
 * Where writes report changes to posts: one per store (`store.postChanges`), reached from a transaction as
 * `tx.recordPostChange(change)`, so every write that changes a post reports it and no service is handed a hub.
 */
export class PostChanges {
  private readonly subscribers: PostChangeSubscriber[] = [];

  /** Adds a subscriber; answers a function that removes it. */
  subscribe(subscriber: PostChangeSubscriber): () => void {
    this.subscribers.push(subscriber);
    return () => {
      const at = this.subscribers.indexOf(subscriber);
      if (at >= 0) this.subscribers.splice(at, 1);
    };
  }

  /** What `tx.recordPostChange` does: the in-transaction work now, the after-commit work on `tx.afterCommit`. */
  async record(tx: Tx, change: PostChange): Promise<void> {
    for (const subscriber of this.subscribers) await subscriber.inTransaction?.(tx, change);
    tx.afterCommit(() => {
      for (const subscriber of this.subscribers) subscriber.afterCommit?.(change);
    });
  }
}
