import {
  DummyDriver,
  Kysely,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  sql,
  type AliasedExpression,
  type Expression,
  type ExpressionBuilder,
  type SqlBool,
} from 'kysely';
import type { Database, PostRow, Role, Visibility } from '../db/types.js';
import { AppError } from './errors.js';

/**
 * Who is looking: a signed-in user, or undefined for an anonymous caller. `hasBlocks` / `hasMutes` false say the
 * caller lookup found the user in no block (either side) / muting nobody, so the read skips those checks (the
 * cheap path most callers take); left out, they are checked. A viewer built without them is never shown too much.
 */
export type Viewer = { id: number; role: Role; hasBlocks?: boolean; hasMutes?: boolean } | undefined;

/** Every column of a post: the representation needs all of them. */
export const POST_COLUMNS = [
  'posts.id',
  'posts.owner_id',
  'posts.title',
  'posts.content',
  'posts.visibility',
  'posts.reply_count',
  'posts.recommend_count',
  'posts.created_at',
  'posts.updated_at',
] as const;

/*
 * WHO SEES WHAT (CONTRACT §3 and §9), stated once. Everything below renders these rules for one consumer: a Kysely
 * predicate for queries (`visibleTo`, `listedTo`, `replyShownTo`, `recommenderShownTo`, `userShownTo`), SQL text
 * compiled from those same predicates for the hot plain statements (`compiledPredicate`), an in-memory predicate
 * for stream events (`seesPost`), and the counters (`visiblePostCount`, `withVisibleCounts`). The table test
 * (visibility.test.ts) holds every consumer to one expectation table.
 *
 * 1. A post: `public` everyone; `followers` the owner, the owner's followers and admins; `private` the owner and
 *    admins.
 * 2. Content (posts, replies, recommends) of a suspended account is shown to admins only; so are its profile and
 *    its entries in user lists.
 * 3. While a block stands between the viewer and an author, either way, neither sees the other's posts, replies or
 *    recommends. Admins see everything regardless.
 * 4. Listings (GET /posts, feeds, replies lists, streams, search) leave out posts and replies of users the viewer
 *    mutes. Reads by id, a user's own posts listing, recommends lists and counters are not filtered by mutes.
 * 5. Counters count only what the viewer may see: postCount by rules 1 and 3; replyCount and recommendCount less
 *    the replies and recommends of the viewer's blocked parties. Those of suspended accounts are already taken out
 *    of the stored counters while the suspension stands (see suspensions.service.ts), as are their follows from
 *    followerCount and followingCount; admins, who see those rows, get them added back.
 * 6. Notifications (CONTRACT §10): a recipient hears of no actor whose account is suspended or with whom a block
 *    stands, either way (notifications from before the block included), whoever reads them (an admin reading a
 *    user's notifications sees what that user may). On top of that, none is made from a user the recipient mutes
 *    (notifications.service.ts), and none about a post the recipient may not see (rule 1 to 3, read and write).
 */

type AnyBuilder = ExpressionBuilder<Database, keyof Database>;
/** A column naming the user who wrote something (or the user a row stands for). */
export type UserRef =
  | 'posts.owner_id'
  | 'replies.author_id'
  | 'recommends.user_id'
  | 'users.id'
  | 'follows.followee_id'
  | 'follows.follower_id'
  | 'notifications.actor_id';

const TRUE = sql<SqlBool>`1 = 1`;

/** A user as a column of the row being judged, or by id (a write that knows both users, followers.repository.ts). */
type UserOf = UserRef | number;
const userValue = (user: UserOf) => (typeof user === 'number' ? user : sql.ref<number>(user));

const suspended = (eb: AnyBuilder, user: UserOf) =>
  eb.exists(eb.selectFrom('suspensions').select('suspensions.user_id').where('suspensions.user_id', '=', userValue(user)));

const notSuspended = (eb: AnyBuilder, user: UserRef) => eb.not(suspended(eb, user));

/** Whether `user`'s account is suspended (rule 2), for a write that must refuse it (a follow, CONTRACT §9). */
export function isSuspended(user: UserOf) {
  return (eb: AnyBuilder) => suspended(eb, user);
}

/** A block between the viewer and `user`, either way: each side one probe of an index (blocks_pair, blocks_target). */
const blocked = (eb: AnyBuilder, viewerId: number, user: UserRef) =>
  eb.or([
    eb.exists(eb.selectFrom('blocks').select('blocks.id').where('blocks.blocker_id', '=', viewerId).whereRef('blocks.blocked_id', '=', sql.ref(user))),
    eb.exists(eb.selectFrom('blocks').select('blocks.id').where('blocks.blocked_id', '=', viewerId).whereRef('blocks.blocker_id', '=', sql.ref(user))),
  ]);

/** Whether a block stands between `userId` and `user`, either way (a follow across it is refused, CONTRACT §9). */
export function blockBetween(userId: number, user: UserRef) {
  return (eb: AnyBuilder) => blocked(eb, userId, user);
}

/** A viewer's id: a number, or a column when one query judges many viewers (`mayBeTold`). */
type ViewerId = number | Expression<number>;

const notBlocked = (eb: AnyBuilder, viewerId: ViewerId, user: UserRef) =>
  eb.and([
    eb.not(eb.exists(eb.selectFrom('blocks').select('blocks.id').where('blocks.blocker_id', '=', viewerId).whereRef('blocks.blocked_id', '=', sql.ref(user)))),
    eb.not(eb.exists(eb.selectFrom('blocks').select('blocks.id').where('blocks.blocked_id', '=', viewerId).whereRef('blocks.blocker_id', '=', sql.ref(user)))),
  ]);

const muting = (eb: AnyBuilder, muterId: number, user: UserOf) =>
  eb.exists(eb.selectFrom('mutes').select('mutes.id').where('mutes.muter_id', '=', muterId).where('mutes.muted_id', '=', userValue(user)));

const notMuted = (eb: AnyBuilder, viewerId: number, user: UserRef) => eb.not(muting(eb, viewerId, user));

/** Whether `muterId` mutes `user` (rule 4; CONTRACT §10: a muted user's follow tells the followee nothing). */
export function mutes(muterId: number, user: UserOf) {
  return (eb: AnyBuilder) => muting(eb, muterId, user);
}

/**
 * Rules 2–4 for content whose author is `user`: whether the viewer may be shown it. `listing` adds the viewer's
 * mutes (rule 4). A signed-in viewer whose lookup found no blocks (no mutes) skips that check.
 */
function authorShown(eb: AnyBuilder, viewer: Viewer, user: UserRef, listing: boolean): Expression<SqlBool> {
  const conditions: Expression<SqlBool>[] = [];
  if (viewer?.role !== 'admin') conditions.push(notSuspended(eb, user));
  if (viewer && viewer.role !== 'admin' && viewer.hasBlocks !== false) conditions.push(notBlocked(eb, viewer.id, user));
  if (viewer && listing && viewer.hasMutes !== false) conditions.push(notMuted(eb, viewer.id, user));
  if (conditions.length === 0) return TRUE;
  return conditions.length === 1 ? conditions[0]! : eb.and(conditions);
}

/**
 * A visibility the rule names, written into the SQL as a literal rather than bound: PostgreSQL runs the texts as
 * named statements and keeps one generic plan only when it costs no more than a plan for each run's values; with
 * `visibility = $n` it must guess the share of posts that match, guesses far too few, and plans every request anew
 * (the feed's page took longer to plan than to run). A literal lets it read the share from its statistics.
 */
const visibility = (value: Visibility) => sql.lit<Visibility>(value);

/** Rule 1 over `posts`, correlated to the row's owner (a follow of that owner, not "follows anyone"). */
function postRule(eb: ExpressionBuilder<Database, 'posts'>, viewer: Viewer): Expression<SqlBool> | undefined {
  if (!viewer) return eb('posts.visibility', '=', visibility('public'));
  if (viewer.role === 'admin') return undefined;
  return memberPostRule(eb, viewer.id);
}

/** Rule 1 for a member (not an admin) whose id is `viewerId`. */
function memberPostRule(eb: ExpressionBuilder<Database, 'posts'>, viewerId: ViewerId): Expression<SqlBool> {
  return eb.or([
    eb('posts.visibility', '=', visibility('public')),
    eb('posts.owner_id', '=', viewerId),
    eb.and([
      eb('posts.visibility', '=', visibility('followers')),
      eb.exists(
        eb.selectFrom('follows').select('follows.follower_id').whereRef('follows.followee_id', '=', 'posts.owner_id').where('follows.follower_id', '=', viewerId),
      ),
    ]),
  ]);
}

function postPredicate(viewer: Viewer, listing: boolean) {
  return (eb: ExpressionBuilder<Database, 'posts'>): Expression<SqlBool> => {
    const rule = postRule(eb, viewer);
    const author = authorShown(eb as unknown as AnyBuilder, viewer, 'posts.owner_id', listing);
    if (!rule) return author;
    return author === TRUE ? rule : eb.and([rule, author]);
  };
}

/**
 * The posts `viewer` may see (rules 1–3): every query that returns posts, or anything hanging off a post (replies,
 * recommends), filters through it, so a post the caller may not see is missing everywhere (a 404, never a 403).
 */
export function visibleTo(viewer: Viewer) {
  return postPredicate(viewer, false);
}

/** `visibleTo` plus the viewer's mutes (rule 4): for GET /posts, feeds, streams and search. */
export function listedTo(viewer: Viewer) {
  return postPredicate(viewer, true);
}

/**
 * Mutes alone (rule 4) over any author column, for a listing that already applies `visibleTo` (search: add
 * `.where(notMutedBy(viewer, 'posts.owner_id'))`). No condition for an anonymous viewer or one who mutes nobody.
 */
export function notMutedBy(viewer: Viewer, user: UserRef = 'posts.owner_id') {
  return (eb: AnyBuilder): Expression<SqlBool> => (viewer && viewer.hasMutes !== false ? notMuted(eb, viewer.id, user) : TRUE);
}

/** The replies `viewer` may see on a post they may see (rules 2–3; `listing` adds rule 4). */
export function replyShownTo(viewer: Viewer, { listing }: { listing: boolean }) {
  return (eb: ExpressionBuilder<Database, 'replies'>): Expression<SqlBool> => authorShown(eb as unknown as AnyBuilder, viewer, 'replies.author_id', listing);
}

/** The recommends `viewer` may see on a post they may see (rules 2–3; recommends lists ignore mutes). */
export function recommenderShownTo(viewer: Viewer) {
  return (eb: ExpressionBuilder<Database, 'recommends'>): Expression<SqlBool> => authorShown(eb as unknown as AnyBuilder, viewer, 'recommends.user_id', false);
}

/** Profiles and entries in user lists (rule 2; blocks leave profiles readable). */
export function userShownTo(viewer: Viewer) {
  return accountShownTo(viewer, 'users.id');
}

/** Rule 2 over any column naming a user: whether that account exists for `viewer`. */
export function accountShownTo(viewer: Viewer, user: UserRef) {
  return (eb: AnyBuilder): Expression<SqlBool> => (viewer?.role === 'admin' ? TRUE : notSuspended(eb, user));
}

/** Rule 6 over a notification's actor, for its recipient (`hasBlocks` false, as on Viewer: no block to check). */
export function actorHeardBy(recipient: { id: number; hasBlocks?: boolean }) {
  return (eb: AnyBuilder): Expression<SqlBool> =>
    recipient.hasBlocks === false
      ? notSuspended(eb, 'notifications.actor_id')
      : eb.and([notSuspended(eb, 'notifications.actor_id'), notBlocked(eb, recipient.id, 'notifications.actor_id')]);
}

/**
 * Rules 1–3 and 6 for one post and many would-be recipients at once: over `users` rows joined with the post, whether
 * each user may see the post (admins see every post, `visibleTo`) and hears of `actorId` (no block either way, and
 * not muting them; admins included). A user's counters (`block_count`, `mute_count`) skip the probes for the many
 * who are in no block and mute nobody. Notifications (§10) judge all the users a post or reply mentions in one
 * statement with it.
 */
export function mayBeTold(actorId: number) {
  return (eb: ExpressionBuilder<Database, 'posts' | 'users'>): Expression<SqlBool> => {
    const any = eb as unknown as AnyBuilder;
    const user = sql.ref<number>('users.id');
    const sees = eb.or([
      eb('users.role', '=', 'admin'),
      eb.and([
        notSuspended(any, 'posts.owner_id'),
        memberPostRule(eb as unknown as ExpressionBuilder<Database, 'posts'>, user),
        eb.or([eb('users.block_count', '=', 0), notBlocked(any, user, 'posts.owner_id')]),
      ]),
    ]);
    const hears = eb.and([
      eb.or([eb('users.block_count', '=', 0), notBlocked(any, actorId, 'users.id')]),
      eb.or([
        eb('users.mute_count', '=', 0),
        eb.not(eb.exists(eb.selectFrom('mutes').select('mutes.id').whereRef('mutes.muter_id', '=', 'users.id').where('mutes.muted_id', '=', actorId))),
      ]),
    ]);
    return eb.and([hears, sees]);
  };
}

/** What a stream needs to know about one viewer and a post's owner to judge an event in memory. */
export interface Relations {
  /** The viewer follows the owner. */
  follows: boolean;
  /** A block stands between the two, either way. */
  blocked: boolean;
  /** The viewer mutes the owner. */
  mutes: boolean;
  /** The owner's account is suspended. */
  ownerSuspended: boolean;
}

/** Rules 1–4 for one post in memory, as `visibleTo` (`listedTo` with `listing`) judges it in a query. */
export function seesPost(viewer: Viewer, post: { ownerId: number; visibility: Visibility }, rel: Relations, listing: boolean): boolean {
  if (viewer && listing && rel.mutes) return false;
  if (viewer?.role === 'admin') return true;
  if (rel.ownerSuspended) return false;
  if (!viewer) return post.visibility === 'public';
  if (rel.blocked) return false;
  return post.visibility === 'public' || post.ownerId === viewer.id || (post.visibility === 'followers' && rel.follows);
}

/**
 * A user's `postCount` as `viewer` may see it (rules 1 and 3), from the per-visibility counters on the user's row, so
 * a counter never reveals that hidden posts exist: none across a block.
 */
export function visiblePostCount(viewer: Viewer) {
  return (eb: ExpressionBuilder<Database, 'users'>): AliasedExpression<number, 'post_count'> => {
    if (!viewer) return eb.ref('users.public_post_count').as('post_count');
    if (viewer.role === 'admin') return eb.ref('users.post_count').as('post_count');
    let count = eb.case().when('users.id', '=', viewer.id).then(eb.ref('users.post_count'));
    if (viewer.hasBlocks !== false) count = count.when(blocked(eb as unknown as AnyBuilder, viewer.id, 'users.id')).then(sql.lit(0));
    return count
      .when(eb.exists(eb.selectFrom('follows').select('follows.follower_id').whereRef('follows.followee_id', '=', 'users.id').where('follows.follower_id', '=', viewer.id)))
      .then(eb(eb.ref('users.public_post_count'), '+', eb.ref('users.followers_post_count')))
      .else(eb.ref('users.public_post_count'))
      .end()
      .as('post_count');
  };
}

/**
 * Whether a viewer's counters may differ from the stored ones (rule 5): a member who is in a block, or an admin (who
 * counts the rows of suspended accounts too). The hottest read asks this first and skips `withVisibleCounts` (an
 * await) for everyone else.
 */
export const countsDiffer = (viewer: Viewer): viewer is NonNullable<Viewer> =>
  !!viewer && (viewer.role === 'admin' || viewer.hasBlocks !== false);

/**
 * Rule 5 for posts already read. For a member in a block: each post's `reply_count` and `recommend_count` less the
 * replies and recommends of the users on the other side of the viewer's blocks (those of suspended accounts are
 * out of the stored counters already). For an admin: plus those of suspended accounts. Rows come back untouched
 * (and no query runs) for anyone else, which is nearly everyone; otherwise one read a counter for the whole page.
 */
export async function withVisibleCounts<Row extends PostRow>(db: Kysely<Database>, viewer: Viewer, rows: Row[]): Promise<Row[]> {
  if (!countsDiffer(viewer) || rows.length === 0) return rows;
  const admin = viewer.role === 'admin';
  // A member's adjustment only takes away: posts whose stored counters are zero (most pages) cost no read.
  const replied = rows.filter((row) => admin || row.reply_count > 0).map((row) => row.id);
  const recommended = rows.filter((row) => admin || row.recommend_count > 0).map((row) => row.id);
  const parties = (eb: AnyBuilder) =>
    eb
      .selectFrom('blocks')
      .select('blocks.blocked_id as user_id')
      .where('blocks.blocker_id', '=', viewer.id)
      .unionAll(eb.selectFrom('blocks').select('blocks.blocker_id as user_id').where('blocks.blocked_id', '=', viewer.id));
  // Whose rows the adjustment counts: suspended accounts for an admin, the blocked parties not suspended otherwise.
  const counted = (eb: AnyBuilder, author: 'replies.author_id' | 'recommends.user_id') =>
    admin
      ? eb(author, 'in', eb.selectFrom('suspensions').select('suspensions.user_id'))
      : eb.and([eb(author, 'in', parties(eb)), notSuspended(eb, author)]);
  const adjustReplies = replied.length === 0 ? [] : await db
    .selectFrom('replies')
    .select(['replies.post_id', (eb) => eb.fn.countAll<number>().as('n')])
    .where('replies.post_id', 'in', replied)
    .where((eb) => counted(eb as unknown as AnyBuilder, 'replies.author_id'))
    .groupBy('replies.post_id')
    .execute();
  const adjustRecommends = recommended.length === 0 ? [] : await db
    .selectFrom('recommends')
    .select(['recommends.post_id', (eb) => eb.fn.countAll<number>().as('n')])
    .where('recommends.post_id', 'in', recommended)
    .where((eb) => counted(eb as unknown as AnyBuilder, 'recommends.user_id'))
    .groupBy('recommends.post_id')
    .execute();
  if (adjustReplies.length === 0 && adjustRecommends.length === 0) return rows;
  const sign = admin ? 1 : -1;
  const replies = new Map(adjustReplies.map((row) => [Number(row.post_id), sign * Number(row.n)]));
  const recommends = new Map(adjustRecommends.map((row) => [Number(row.post_id), sign * Number(row.n)]));
  return rows.map((row) => ({
    ...row,
    reply_count: row.reply_count + (replies.get(row.id) ?? 0),
    recommend_count: row.recommend_count + (recommends.get(row.id) ?? 0),
  }));
}

/**
 * Rule 5 for one post shown to many viewers at once (a stream event): the post with the counters each viewer may see,
 * for the viewers whose counters differ from the stored ones, by viewer id (every admin sees the same counters: the
 * first admin's id stands for all of them, under `'admin'`); every viewer left out sees `row` as stored. The work is
 * bounded by the post, not the viewers: first the post's repliers and recommenders who are suspended or in a block
 * (none, and no read, for a post without replies or recommends and no admin watching; none for nearly every other
 * post), then, only if some are in a block, which viewers are on the other side of one of those blocks.
 */
export async function countsPerViewer(db: Kysely<Database>, row: PostRow, viewers: readonly NonNullable<Viewer>[]): Promise<Map<number | 'admin', PostRow>> {
  const shown = new Map<number | 'admin', PostRow>();
  const admin = viewers.find((viewer) => viewer.role === 'admin');
  if (!admin && row.reply_count === 0 && row.recommend_count === 0) return shown;
  const partyFlags = (eb: AnyBuilder, user: UserRef) => eb.or([eb('users.block_count', '>', 0), suspended(eb, user)]);
  const parties = await db
    .selectFrom('replies')
    .innerJoin('users', 'users.id', 'replies.author_id')
    .select((eb) => ['users.id', suspended(eb as unknown as AnyBuilder, 'users.id').as('suspended')])
    .where('replies.post_id', '=', row.id)
    .where((eb) => partyFlags(eb as unknown as AnyBuilder, 'users.id'))
    .unionAll(
      db
        .selectFrom('recommends')
        .innerJoin('users', 'users.id', 'recommends.user_id')
        .select((eb) => ['users.id', suspended(eb as unknown as AnyBuilder, 'users.id').as('suspended')])
        .where('recommends.post_id', '=', row.id)
        .where((eb) => partyFlags(eb as unknown as AnyBuilder, 'users.id')),
    )
    .execute();
  if (parties.length === 0) return shown;
  if (admin && parties.some((party) => party.suspended)) shown.set('admin', (await withVisibleCounts(db, admin, [row]))[0]!);
  const blocking = [...new Set(parties.filter((party) => !party.suspended).map((party) => Number(party.id)))];
  const members = [...new Set(viewers.filter((viewer) => viewer.role !== 'admin').map((viewer) => viewer.id))];
  const inBlock = new Set<number>();
  for (let i = 0; blocking.length > 0 && i < members.length; i += 500) {
    const chunk = members.slice(i, i + 500);
    const rows = await db
      .selectFrom('blocks')
      .select('blocks.blocked_id as user_id')
      .where('blocks.blocker_id', 'in', blocking)
      .where('blocks.blocked_id', 'in', chunk)
      .unionAll(db.selectFrom('blocks').select('blocks.blocker_id as user_id').where('blocks.blocked_id', 'in', blocking).where('blocks.blocker_id', 'in', chunk))
      .execute();
    for (const { user_id } of rows) inBlock.add(Number(user_id));
  }
  for (const id of inBlock) shown.set(id, (await withVisibleCounts(db, { id, role: 'member' }, [row]))[0]!);
  return shown;
}

/** The post if it exists and `viewer` may see it, with the counters they may see. */
export async function findVisiblePost(db: Kysely<Database>, id: number, viewer: Viewer): Promise<PostRow | undefined> {
  const row = await db.selectFrom('posts').select(POST_COLUMNS).where('posts.id', '=', id).where(visibleTo(viewer)).executeTakeFirst();
  return row && (await withVisibleCounts(db, viewer, [row]))[0];
}

/**
 * The post if `viewer` may see it, else the error `missing` makes (a 404 by default; DELETE routes answer 400, seed
 * §7): replies and recommends hang off a post, and whoever may not see the post finds neither it nor them.
 */
export async function requireVisiblePost(
  db: Kysely<Database>,
  id: number,
  viewer: Viewer,
  missing: () => AppError = () => AppError.notFound('post'),
): Promise<PostRow> {
  const post = await findVisiblePost(db, id, viewer);
  if (!post) throw missing();
  return post;
}

/**
 * For plain SQL (src/db/prepared.ts says when and why): a query built with the predicates above for a kind of viewer,
 * compiled once to text. The viewer's id is compiled as a marker value and bound again on each run, so the text
 * depends only on the viewer's kind (anonymous, admin, member with or without blocks and mutes), never on who.
 */
export interface CompiledText {
  /** SQLite's text (`?` placeholders); PostgreSQL's numbers the same placeholders in order. */
  text: string;
  /** The parameters in order; `VIEWER` and `SLOT` markers are filled at run time. */
  parameters: readonly unknown[];
}

/** The viewer id compiled into a template. */
export const VIEWER = -7_340_033;
/** A value a statement binds on each run (a post id, a cursor). */
export const SLOT = -7_340_037;

/** Compiles SQLite text without a connection (PostgreSQL's text is the same with numbered placeholders). */
const compiler = new Kysely<Database>({
  dialect: {
    createAdapter: () => new SqliteAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (db) => new SqliteIntrospector(db),
    createQueryCompiler: () => new SqliteQueryCompiler(),
  },
});

/** The template of a viewer's kind: the marker id, and whether blocks and mutes are checked. */
export function viewerKind(viewer: Viewer): { key: string; template: Viewer } {
  if (!viewer) return { key: 'anonymous', template: undefined };
  const hasBlocks = viewer.role !== 'admin' && viewer.hasBlocks !== false;
  const hasMutes = viewer.hasMutes !== false;
  return { key: `${viewer.role}:${hasBlocks ? 'b' : ''}${hasMutes ? 'm' : ''}`, template: { id: VIEWER, role: viewer.role, hasBlocks, hasMutes } };
}

/** A whole query compiled from the builder (see CompiledText). */
export function compileQuery(build: (db: Kysely<Database>) => { compile(): { sql: string; parameters: readonly unknown[] } }): CompiledText {
  const { sql: text, parameters } = build(compiler).compile();
  return { text, parameters };
}

/**
 * `visibleTo` (`listedTo` with `listing`) for a viewer's kind as a condition over `posts`, compiled from the same
 * predicate; undefined when it is no condition (an admin reading by id).
 */
export function compiledPredicate(template: Viewer, { listing }: { listing: boolean }): CompiledText | undefined {
  const predicate = listing ? listedTo(template) : visibleTo(template);
  const { text, parameters } = compileQuery((db) => db.selectFrom('posts').select('posts.id').where(predicate));
  const head = 'select "posts"."id" from "posts" where ';
  if (!text.startsWith(head)) throw new Error(`unexpected compiled predicate: ${text}`);
  const condition = text.slice(head.length);
  return condition === '1 = 1' ? undefined : { text: condition, parameters };
}

/** The parameters of a compiled text for one run: the viewer's id and the run's own values in place of the markers. */
export function bindParameters(parameters: readonly unknown[], viewerId: number | undefined, slots: readonly unknown[] = []): unknown[] {
  let slot = 0;
  return parameters.map((value) => (value === VIEWER ? viewerId : value === SLOT ? slots[slot++] : value));
}

/**
 * A compiled text with the viewer taken from a column of the statement instead of a parameter: for a statement that
 * finds the viewer itself (the caller of a token, in the same statement as the read). Each `?` bound to `VIEWER`
 * becomes `column`; the compiler writes every value as a parameter, so every `?` of the text is a placeholder.
 */
export function viewerFromColumn({ text, parameters }: CompiledText, column: string): CompiledText {
  const rest: unknown[] = [];
  let at = 0;
  const replaced = text.replace(/\?/g, () => {
    const value = parameters[at++];
    if (value === VIEWER) return column;
    rest.push(value);
    return '?';
  });
  if (at !== parameters.length) throw new Error(`placeholders and parameters differ in: ${text}`);
  return { text: replaced, parameters: rest };
}

/** Every column of a user that reads return, but `post_count`, which depends on the viewer (`visiblePostCount`). */
export const USER_COLUMNS = [
  'users.id',
  'users.username',
  'users.display_name',
  'users.bio',
  'users.role',
  'users.follower_count',
  'users.following_count',
  'users.created_at',
  'users.updated_at',
] as const;

/**
 * The columns of a user as `viewer` may see them (rule 5): `USER_COLUMNS` with the viewer's `post_count`. For an
 * admin, `follower_count` and `following_count` also count the follows of suspended accounts, which the stored
 * counters leave out while a suspension stands; the subquery walks the suspensions (few) and probes the follow's
 * key, so a user with many followers costs an admin no more than one with few.
 */
export function userColumns(viewer: Viewer) {
  return (eb: ExpressionBuilder<Database, 'users'>): UserSelection[] => {
    if (viewer?.role !== 'admin') return [...USER_COLUMNS, visiblePostCount(viewer)(eb)];
    const suspendedFollows = (counted: 'follows.follower_id' | 'follows.followee_id', key: 'follows.followee_id' | 'follows.follower_id') =>
      eb
        .selectFrom('follows')
        .select((sub) => sub.fn.countAll<number>().as('n'))
        .whereRef(key, '=', 'users.id')
        .where(counted, 'in', eb.selectFrom('suspensions').select('suspensions.user_id'));
    const columns: UserSelection[] = USER_COLUMNS.map((column) =>
      column === 'users.follower_count'
        ? eb(eb.ref(column), '+', suspendedFollows('follows.follower_id', 'follows.followee_id')).as('follower_count')
        : column === 'users.following_count'
          ? eb(eb.ref(column), '+', suspendedFollows('follows.followee_id', 'follows.follower_id')).as('following_count')
          : column,
    );
    return [...columns, visiblePostCount(viewer)(eb)];
  };
}
type UserSelection = (typeof USER_COLUMNS)[number] | AliasedExpression<number, 'follower_count' | 'following_count' | 'post_count'>;

/** A user as reads return it: no password hash, and the post count the reader may see. */
export interface PublicUserRow {
  id: number;
  username: string;
  display_name: string;
  bio: string;
  role: Role;
  follower_count: number;
  following_count: number;
  post_count: number;
  created_at: string;
  updated_at: string;
}
