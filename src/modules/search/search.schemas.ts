import { Type } from 'typebox';
import { PageQuerySchema, STORABLE_TEXT_PATTERN } from '../../shared/schemas.js';
import { MAX_QUERY_LENGTH, MAX_TERMS } from './search.query.js';

const POST_QUERY_HELP =
  `Search (at most ${MAX_QUERY_LENGTH} characters and ${MAX_TERMS} terms): only the posts whose title and content hold ` +
  'every word, in any letter case and ignoring the diacritics of Latin letters (`cafe` finds `Café`); words are runs ' +
  'of letters and digits. `"two words"`: adjacent and in order; `pre*`: words starting with `pre` (two characters ' +
  'at least); `-word`: without that word. Newest first. A query with no word to find is a 400.';

const USER_QUERY_HELP =
  `Search (at most ${MAX_QUERY_LENGTH} characters and ${MAX_TERMS} words): only the users for whom every word starts ` +
  'a word of their username (split at `_`) or display name, in any letter case and ignoring the diacritics of Latin ' +
  'letters; then in lower-cased username order. A query with no word is a 400.';

/** `PageQuerySchema` plus `q`, for GET /posts and GET /users/{id}/posts. Like all text, no U+0000 (400, CONTRACT §1). */
export const SearchPostsQuerySchema = Type.Object({
  ...PageQuerySchema.properties,
  q: Type.Optional(Type.String({ maxLength: MAX_QUERY_LENGTH, pattern: STORABLE_TEXT_PATTERN, description: POST_QUERY_HELP })),
});

/** The `q` of GET /users. */
export const UserSearchParam = Type.Optional(Type.String({ maxLength: MAX_QUERY_LENGTH, pattern: STORABLE_TEXT_PATTERN, description: USER_QUERY_HELP }));
