/**
 * The one tokenizer of search (CONTRACT §11), run in TypeScript for documents and queries alike, so that SQLite
 * and PostgreSQL index and look up exactly the same words: each engine only splits the stored text at spaces
 * (FTS5's `ascii` tokenizer; a tsvector written lexeme by lexeme), and neither folds anything of its own.
 *
 * A word is a run of Unicode letters and digits (combining marks stay with the letter they modify); anything else
 * separates words. Words are lower-cased, precomposed Latin letters lose their diacritics (`Café` → `cafe`), and a
 * Greek final sigma is a sigma, so that a lower-cased query finds an upper-cased document. Nothing else is folded:
 * no stemming, no stop words.
 */

/** A word: a letter or digit, then letters, digits and the marks that combine with them. */
export const WORD = /[\p{L}\p{N}][\p{L}\p{N}\p{M}]*/gu;

/** Latin letters followed by combining marks, after canonical decomposition: the marks go. */
const LATIN_MARKS = /(\p{Script=Latin})\p{M}+/gu;

/**
 * Longest word kept, in code points. A query is at most 200 code points, so no query word is longer; a longer
 * document word is indexed by its first 200 code points (which keeps a PostgreSQL lexeme under its 2 KiB limit).
 */
export const MAX_WORD = 200;

/**
 * PostgreSQL keeps at most 256 positions of one lexeme in a tsvector. From its 257th occurrence on, a word is
 * indexed as this placeholder instead (on both engines alike), which no query word can equal: it is punctuation.
 * The word is still found (its first 256 occurrences are there), positions of the other words do not move, and a
 * phrase through such a late occurrence is missed on both engines alike rather than on one only.
 */
export const LATE_OCCURRENCE = '\u00b7';
export const MAX_OCCURRENCES = 256;

/** `text` as search compares it: diacritics of Latin letters removed, lower-cased (see the module comment). */
export function fold(text: string): string {
  return text.normalize('NFD').replace(LATIN_MARKS, '$1').normalize('NFC').toLowerCase().replace(/ς/g, 'σ');
}

/** The words of already folded text, each cut to `MAX_WORD` code points. */
export function wordsOfFolded(folded: string): string[] {
  const words = folded.match(WORD) ?? [];
  return words.map((word) => (word.length > MAX_WORD && [...word].length > MAX_WORD ? [...word].slice(0, MAX_WORD).join('') : word));
}

/** The words of `text` in order (see the module comment). */
export function wordsOf(text: string): string[] {
  return wordsOfFolded(fold(text));
}

/**
 * What the post index holds for a post: the words of its title then its content, in order (a phrase may run from
 * the end of the title into the content, as one text). Occurrences beyond `MAX_OCCURRENCES` of a word become
 * `LATE_OCCURRENCE`.
 */
export function postIndexWords(title: string, content: string): string[] {
  const words = [...wordsOf(title), ...wordsOf(content)];
  const seen = new Map<string, number>();
  return words.map((word) => {
    const n = (seen.get(word) ?? 0) + 1;
    seen.set(word, n);
    return n > MAX_OCCURRENCES ? LATE_OCCURRENCE : word;
  });
}

/**
 * The words a user is found by (GET /users?q=): the parts of the username split at `_`, then the words of the
 * display name, each once.
 */
export function userWords(username: string, displayName: string): string[] {
  // `_` is not a letter or digit, so the username splits at it like any text.
  return [...new Set([...wordsOf(username), ...wordsOf(displayName)])];
}

/**
 * The same words as `users.search_words` holds them: space-separated with a leading space, so that "a word starts
 * with w" is `LIKE '% w%'` (the filter of a user search; the `user_words` index drives it, see users.repository.ts).
 */
export function userSearchWords(username: string, displayName: string): string {
  return userWords(username, displayName)
    .map((word) => ` ${word}`)
    .join('');
}
