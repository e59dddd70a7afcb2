import type { PlainStatement, Store } from './store.js';
import type { PostRow, Role } from './types.js';

/**
 * The hottest statements as plain SQL, one text per dialect, run by the store on the driver itself (`Store.query`).
 * Building, compiling and running a Kysely query costs more than SQLite takes to answer a point read, so only a
 * statement that a benchmark shows is worth it belongs here (bench/README.md, "The rebuilt data layer");
 * everything else stays in the builder. The texts select exactly POST_COLUMNS (src/shared/visibility.ts), so rows are alike either way.
 */
const POST_COLUMNS_SQL = 'id, owner_id, title, content, visibility, reply_count, recommend_count, created_at, updated_at';

const PUBLIC_POST_BY_ID: PlainStatement = {
  sqlite: `select ${POST_COLUMNS_SQL} from posts where id = ? and visibility = 'public'`,
  postgres: `select ${POST_COLUMNS_SQL} from posts where id = $1 and visibility = 'public'`,
};

/** The post with this id if it is public: what an anonymous reader may see (`findVisiblePost` without a viewer). */
export async function findPublicPost(store: Store, id: number): Promise<PostRow | undefined> {
  const rows = await store.query<PostRow>(PUBLIC_POST_BY_ID, [id]);
  return rows[0];
}

const CALLER_BY_TOKEN_HASH: PlainStatement = {
  sqlite:
    'select tokens.id as "tokenId", users.id as id, users.role as role from tokens ' +
    'inner join users on users.id = tokens.user_id and users.password_version = tokens.password_version ' +
    'where tokens.token_hash = ? and tokens.expires_at > ?',
  postgres:
    'select tokens.id as "tokenId", users.id as id, users.role as role from tokens ' +
    'inner join users on users.id = tokens.user_id and users.password_version = tokens.password_version ' +
    'where tokens.token_hash = $1 and tokens.expires_at > $2',
};

/**
 * The caller behind a bearer token's hash, on every signed-in request: the token exists, has not expired (`now`,
 * an ISO timestamp), and was minted with the user's current password version. The same statement as
 * `findCaller` in tokens.repository.ts, as plain SQL.
 */
export async function findCallerByTokenHash(
  store: Store,
  tokenHash: string,
  now: string,
): Promise<{ tokenId: number; id: number; role: Role } | undefined> {
  const rows = await store.query<{ tokenId: number; id: number; role: Role }>(CALLER_BY_TOKEN_HASH, [tokenHash, now]);
  return rows[0];
}
