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

export type PostChangeListener = (change: PostChange) => void;

/**
 * Where writes report changes to posts. A service calls `record` inside its transaction; listeners hear of the
 * change only after that transaction commits (through the transaction's after-commit hook), and never of one that
 * rolled back. `record` is a place for work inside the transaction too (e.g. writing a durable event row).
 */
export class PostChanges {
  private readonly listeners = new Set<PostChangeListener>();
  private readonly recorders: ((tx: Tx, change: PostChange) => Promise<void>)[] = [];

  /** Hears every committed change; answers a function that stops listening. */
  subscribe(listener: PostChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Adds work done inside the writing transaction for every change (runs before the commit, in order). */
  addRecorder(recorder: (tx: Tx, change: PostChange) => Promise<void>): void {
    this.recorders.push(recorder);
  }

  async record(tx: Tx, change: PostChange): Promise<void> {
    for (const recorder of this.recorders) await recorder(tx, change);
    tx.afterCommit(() => {
      for (const listener of this.listeners) listener(change);
    });
  }
}
