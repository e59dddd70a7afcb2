import { viewerKind, type CompiledText, type Viewer } from '../shared/visibility.js';
import type { PlainStatement } from './store.js';

/**
 * Prepared statements: the few a repository sends as plain SQL instead of through Kysely, one text per dialect.
 *
 * Why, stated here once: building and compiling a Kysely query costs CPU on every call, and for a point read that
 * cost is larger than the database's answer. Where a benchmark target showed the precompiled text cutting the
 * instructions a request by well over the project's 10% bar (bench/README.md, "Figures behind choices in the code":
 * the rows "hot statements by hand" and "signed-in reads of one post as plain SQL"), the statement is compiled once
 * and kept. Today that is the read of one post and the token's caller beside it, and
 * GET /posts' page without a search (posts.repository.ts), the caller behind a bearer token (tokens.repository.ts),
 * the home-feed page (feed.repository.ts), a mentioning write's judgement and its notifications
 * (notifications.repository.ts), an Idempotency-Key's lookup and kept answer
 * (plugins/idempotency/idempotency.repository.ts), and a post search's windows (posts.repository.ts, `searchReader`:
 * compiled per shape of window by the store's own Kysely, since the search SQL differs by dialect).
 * Everything else stays in the builder. Re-measure with `npm run bench -- --instructions` before adding one, and
 * drop one whose gain falls under the bar.
 *
 * How: the repository holds its statement (a `PlainStatement` from `plain`, or a `Prepared` text compiled from the
 * builder), and runs it through the store, the one execution path for plain SQL: `Store.query`/`queryOne` for a read
 * outside a transaction, `Tx.query` inside one. A text that judges visibility is never written by hand: it is
 * compiled from the predicates of src/shared/visibility.ts once per kind of viewer (`perViewerKind`), with stand-in
 * values (`VIEWER`, `SLOT`) where the viewer's id and the run's values go; `bindParameters` puts the real ones in
 * their place on each run. The SQL each statement sends is pinned in the modules' `*.sqlite.sql`/`*.postgres.sql`
 * snapshots like any other.
 */

/** `text` with its `?` placeholders numbered for PostgreSQL (`$1`, `$2`, …), in order. */
export function numbered(text: string): string {
  let n = 0;
  return text.replace(/\?/g, () => `$${++n}`);
}

/** A statement written with `?` placeholders, in both dialects' forms. */
export const plain = (text: string): PlainStatement => ({ sqlite: text, postgres: numbered(text) });

/** A compiled text ready to run: both dialects' statements and the parameter template (`bindParameters` fills it). */
export interface Prepared {
  statement: PlainStatement;
  parameters: readonly unknown[];
}

/** A text compiled from the builder (`compileQuery`, src/shared/visibility.ts), prepared for both dialects. */
export const prepare = ({ text, parameters }: CompiledText): Prepared => ({ statement: plain(text), parameters });

/**
 * A statement built on first use once per kind of viewer (`viewerKind`: anonymous, admin, member with or without
 * blocks and mutes) and `variant` (a page size), then kept: a handful of texts per statement. `build` gets the
 * kind's template viewer, whose id is the `VIEWER` marker that `bindParameters` replaces on each run. `kindOf`
 * replaces `viewerKind` for a rule whose kinds differ (a notification's recipient: an admin's blocks still count).
 */
export function perViewerKind<V = Viewer, T = unknown>(
  build: (template: V, variant: number | undefined) => T,
  kindOf: (viewer: V) => { key: string; template: V } = viewerKind as unknown as (viewer: V) => { key: string; template: V },
): (viewer: V, variant?: number) => T {
  const built = new Map<string, T>();
  return (viewer, variant) => {
    const { key, template } = kindOf(viewer);
    const id = variant === undefined ? key : `${key} ${variant}`;
    let statement = built.get(id);
    if (statement === undefined) {
      statement = build(template, variant);
      built.set(id, statement);
    }
    return statement;
  };
}

/**
 * Statements kept by a key of the caller's making, for a statement with more shapes than kinds of viewer (a search
 * page's windows: sizes, bounds, page sizes). At most `max` are kept, so that no run of odd requests grows the
 * process without end: the one that would pass it empties the set (as SQLite's statement cache does), so the shapes
 * in use are kept again after such a run rather than the first `max` ever seen.
 */
export function keptUpTo<T>(max: number): (key: string, build: () => T) => T {
  const kept = new Map<string, T>();
  return (key, build) => {
    let statement = kept.get(key);
    if (statement === undefined) {
      statement = build();
      if (kept.size >= max) kept.clear();
      kept.set(key, statement);
    }
    return statement;
  };
}
