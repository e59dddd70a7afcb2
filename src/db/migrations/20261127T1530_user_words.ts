import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application. The tokenizer below is a copy of
// src/modules/search/search.text.ts as of this migration, so the rows it writes for existing users are the ones the
// service writes for new ones.
//
// GET /users?q= (CONTRACT §11) walked the username index filtering `users.search_words` with LIKE, which reads every
// user for a name few users have. `user_words` holds every prefix (1 to 20 code points) of each word of a user's
// username (split at `_`) and display name, once, with the user's username_key: the users with a word starting
// with `w` are `word = w`, one range of the primary key (word, username_key) already in username order, read
// without reading the users. The foreign key's cascade removes a deleted user's rows; `user_words_user` serves that
// cascade and the rewrite of a user's rows on a profile change. PostgreSQL compares both texts in code-point order
// ("C"), as SQLite does.

const WORD = /[\p{L}\p{N}][\p{L}\p{N}\p{M}]*/gu;
const MAX_WORD = 200;
const PREFIX_MAX = 20;
const BATCH = 1000;

function prefixes(words: string[]): string[] {
  const found = new Set<string>();
  for (const word of words) {
    const codePoints = [...word];
    for (let n = 1; n <= Math.min(codePoints.length, PREFIX_MAX); n++) found.add(codePoints.slice(0, n).join(''));
  }
  return [...found];
}

function wordsOf(text: string): string[] {
  const folded = text.normalize('NFD').replace(/(\p{Script=Latin})\p{M}+/gu, '$1').normalize('NFC').toLowerCase().replace(/ς/g, 'σ');
  return (folded.match(WORD) ?? []).map((w) => (w.length > MAX_WORD && [...w].length > MAX_WORD ? [...w].slice(0, MAX_WORD).join('') : w));
}

export async function up(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  if (pg) {
    await sql`create table user_words (
      word text collate "C" not null,
      username_key text collate "C" not null,
      user_id bigint not null references users (id) on delete cascade,
      primary key (word, username_key) include (user_id))`.execute(db);
  } else {
    await sql`create table user_words (
      word text not null,
      username_key text not null,
      user_id integer not null references users (id) on delete cascade,
      primary key (word, username_key)) without rowid`.execute(db);
  }
  for (let after = 0; ; ) {
    const users = await db.selectFrom('users').select(['id', 'username', 'username_key', 'display_name']).where('id', '>', after).orderBy('id').limit(BATCH).execute();
    const rows = users.flatMap((user) =>
      prefixes([...wordsOf(user.username), ...wordsOf(user.display_name)]).map((word) => ({ word, username_key: user.username_key, user_id: user.id })),
    );
    // A few hundred rows a statement: SQLite takes at most 32,766 parameters.
    for (let i = 0; i < rows.length; i += 500) await db.insertInto('user_words').values(rows.slice(i, i + 500)).execute();
    if (users.length < BATCH) break;
    after = Number(users[users.length - 1]!.id);
  }
  await db.schema.createIndex('user_words_user').on('user_words').column('user_id').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('user_words').execute();
}
