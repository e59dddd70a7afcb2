import { AppError } from '../../shared/errors.js';
import { fold, MAX_WORD, wordsOfFolded } from './search.text.js';

/** Longest query, in code points, and most terms (phrase words and exclusions count): CONTRACT §11. */
export const MAX_QUERY_LENGTH = 200;
export const MAX_TERMS = 10;

/** One word of a query; `prefix`: it matches every word that starts with it (`word*`). */
export interface QueryWord {
  text: string;
  prefix: boolean;
}

/** A word, or a phrase (several words, adjacent and in this order), that a post must hold, or must not (`exclude`). */
export interface QueryTerm {
  words: QueryWord[];
  exclude: boolean;
}

/** A parsed post query: at least one term that is not an exclusion. */
export interface PostQuery {
  terms: QueryTerm[];
}

/** A word at this position of the folded query (search.text.ts's WORD, anchored). */
const WORD_HERE = /[\p{L}\p{N}][\p{L}\p{N}\p{M}]*/uy;

const tooLong = () => AppError.badRequest('q', `must be at most ${MAX_QUERY_LENGTH} characters`);
const tooManyTerms = () => AppError.badRequest('q', `must have at most ${MAX_TERMS} terms (phrase words and exclusions count)`);
const nothingToMatch = () => AppError.badRequest('q', 'must contain a word to search for (letters or digits) that is not excluded');

function checkLength(q: string): void {
  // Code points, not UTF-16 units; the length check comes before any work on the text.
  if (q.length > MAX_QUERY_LENGTH && [...q].length > MAX_QUERY_LENGTH) throw tooLong();
}

/**
 * Reads a post query (CONTRACT §11). Any text is a query; nothing is a syntax error:
 * - words are runs of letters and digits, folded as documents are (search.text.ts); anything else separates them;
 * - `"two words"` is a phrase (an unclosed quote runs to the end); inside it, `-` is a separator;
 * - `word*` matches words starting with `word`; after a word of one character the `*` is ignored;
 * - `-` at the start of a term (not inside a word, as in `foo-bar`) excludes the word or phrase that follows it.
 * Throws a 400 naming `q` when the query is too long, has too many terms, or has no term to match.
 */
export function parsePostQuery(q: string): PostQuery {
  checkLength(q);
  const s = fold(q);
  const terms: QueryTerm[] = [];
  let phrase: QueryTerm | undefined;
  let exclude = false;
  let afterWord = false;
  let count = 0;
  for (let i = 0; i < s.length; ) {
    WORD_HERE.lastIndex = i;
    const match = WORD_HERE.exec(s);
    if (match) {
      const codePoints = [...match[0]];
      const text = codePoints.length > MAX_WORD ? codePoints.slice(0, MAX_WORD).join('') : match[0];
      i += match[0].length;
      let prefix = false;
      if (s[i] === '*') {
        i++;
        prefix = codePoints.length >= 2;
      }
      if (++count > MAX_TERMS) throw tooManyTerms();
      const word = { text, prefix };
      if (phrase) phrase.words.push(word);
      else terms.push({ words: [word], exclude });
      exclude = false;
      afterWord = s[i - 1] !== '*';
      continue;
    }
    const c = s[i];
    if (c === '"') {
      if (phrase) {
        if (phrase.words.length > 0) terms.push(phrase);
        phrase = undefined;
      } else {
        phrase = { words: [], exclude };
      }
      exclude = false;
    } else {
      exclude = c === '-' && !phrase && !afterWord;
    }
    afterWord = false;
    i += (s.codePointAt(i) ?? 0) > 0xffff ? 2 : 1;
  }
  if (phrase && phrase.words.length > 0) terms.push(phrase);
  if (!terms.some((term) => !term.exclude)) throw nothingToMatch();
  return { terms };
}

/**
 * Reads a user query (GET /users?q=): its words, each of which must start a word of the user's username or display
 * name. Quotes, `*` and `-` mean nothing here: they separate words like any other character. 400 naming `q` as for
 * posts.
 */
export function parseUserQuery(q: string): string[] {
  checkLength(q);
  const words = wordsOfFolded(fold(q));
  if (words.length > MAX_TERMS) throw tooManyTerms();
  if (words.length === 0) throw nothingToMatch();
  return words;
}

/** The query in one canonical text (it scopes pagination cursors: a cursor belongs to one query). */
export function canonicalQuery(query: PostQuery): string {
  return query.terms
    .map((term) => `${term.exclude ? '-' : ''}"${term.words.map((w) => `${w.text}${w.prefix ? '*' : ''}`).join(' ')}"`)
    .join(' ');
}
