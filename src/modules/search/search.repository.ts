import { writePostSearch } from '../../db/search-sql.js';
import type { Tx } from '../../db/store.js';
import { postIndexWords } from './search.text.js';

/**
 * Writes a post's search entry inside the transaction that writes the post (on SQLite at its COMMIT: search-sql.ts),
 * so that search shows the post as it is the moment the write commits. `replace`: the post has an entry already (an
 * edit). A deletion needs no call: the entry goes with the post's row (db/search-sql.ts), an account's deletion
 * included.
 */
export function indexPost(tx: Tx, post: { id: number; title: string; content: string }, replace: boolean): Promise<void> {
  return writePostSearch(tx, post.id, postIndexWords(post.title, post.content), replace);
}
