import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing from the application. The tokenizer below is a copy of
// src/modules/search/search.text.ts as of this migration, so the index it builds for existing rows is the one the
// service writes for new ones.
//
// Search (CONTRACT §11). Words are folded and split in TypeScript, so both engines index the same words:
// - posts: SQLite, a contentless FTS5 table `post_search` (rowid = post id, `ascii` tokenizer: splits at the
//   spaces between the stored words and nowhere else) with a trigger that removes a deleted post's entry, cascades
//   included; PostgreSQL, `post_search (post_id, words tsvector)` under a GIN index, removed by the foreign key's
//   cascade.
// - users: `users.search_words`, the words of the username (split at `_`) and of the display name, each after a
//   space, which GET /users?q= filters with `LIKE '% word%'` while walking the username index.

const WORD = /[\p{L}\p{N}][\p{L}\p{N}\p{M}]*/gu;
const MAX_WORD = 200;
const MAX_OCCURRENCES = 256;
const LATE_OCCURRENCE = '\u00b7';
const BATCH = 1000;

function wordsOf(text: string): string[] {
  const folded = text.normalize('NFD').replace(/(\p{Script=Latin})\p{M}+/gu, '$1').normalize('NFC').toLowerCase().replace(/ς/g, 'σ');
  return (folded.match(WORD) ?? []).map((w) => (w.length > MAX_WORD && [...w].length > MAX_WORD ? [...w].slice(0, MAX_WORD).join('') : w));
}

function postWords(title: string, content: string): string[] {
  const seen = new Map<string, number>();
  return [...wordsOf(title), ...wordsOf(content)].map((word) => {
    const n = (seen.get(word) ?? 0) + 1;
    seen.set(word, n);
    return n > MAX_OCCURRENCES ? LATE_OCCURRENCE : word;
  });
}

function tsvectorText(words: string[]): string {
  const positions = new Map<string, number[]>();
  words.forEach((word, i) => {
    const list = positions.get(word);
    if (list) list.push(i + 1);
    else positions.set(word, [i + 1]);
  });
  return [...positions].map(([word, list]) => `'${word.replace(/\\/g, '\\\\').replace(/'/g, "''")}':${list.join(',')}`).join(' ');
}

export async function up(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;

  await db.schema.alterTable('users').addColumn('search_words', 'text', (c) => c.notNull().defaultTo('')).execute();
  for (let after = 0; ; ) {
    const users = await db.selectFrom('users').select(['id', 'username', 'display_name']).where('id', '>', after).orderBy('id').limit(BATCH).execute();
    for (const user of users) {
      const words = [...wordsOf(user.username), ...wordsOf(user.display_name)].map((w) => ` ${w}`).join('');
      await db.updateTable('users').set({ search_words: words }).where('id', '=', user.id).execute();
    }
    if (users.length < BATCH) break;
    after = Number(users[users.length - 1]!.id);
  }

  if (pg) {
    await sql`create table post_search (post_id bigint primary key references posts (id) on delete cascade, words tsvector not null)`.execute(db);
  } else {
    await sql`create virtual table post_search using fts5 (words, content = '', contentless_delete = 1, tokenize = 'ascii')`.execute(db);
    await sql`create trigger post_search_gone after delete on posts begin delete from post_search where rowid = old.id; end`.execute(db);
  }
  for (let after = 0; ; ) {
    const posts = await db.selectFrom('posts').select(['id', 'title', 'content']).where('id', '>', after).orderBy('id').limit(BATCH).execute();
    for (const post of posts) {
      const words = postWords(post.title, post.content);
      if (pg) await sql`insert into post_search (post_id, words) values (${post.id}, ${tsvectorText(words)}::tsvector)`.execute(db);
      else await sql`insert into post_search (rowid, words) values (cast(${post.id} as integer), ${words.join(' ')})`.execute(db);
    }
    if (posts.length < BATCH) break;
    after = Number(posts[posts.length - 1]!.id);
  }
  // Built after the rows are in: one pass instead of an update per row.
  if (pg) await sql`create index post_search_words on post_search using gin (words)`.execute(db);
  // Users found by name are listed in code-point order of username_key on both engines; whatever the database's
  // default collation, this index serves that order on PostgreSQL (SQLite's unique index already does).
  if (pg) await sql`create index users_username_key_c on users (username_key collate "C")`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  const pg = db.getExecutor().adapter instanceof PostgresAdapter;
  if (pg) await sql`drop index users_username_key_c`.execute(db);
  else await sql`drop trigger post_search_gone`.execute(db);
  await sql`drop table post_search`.execute(db);
  await db.schema.alterTable('users').dropColumn('search_words').execute();
}
