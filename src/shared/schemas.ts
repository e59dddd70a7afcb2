import { Type, type Static, type TSchema } from 'typebox';
import { AppError } from './errors.js';

/** Canonical decimal integer (no sign, no leading zero); the `int64` format adds the signed 64-bit range check. */
export const ID_PATTERN = '^(0|[1-9][0-9]{0,18})$';
/** Text a database can store on every engine: no U+0000 (PostgreSQL rejects it) and no unpaired surrogate. */
export const STORABLE_TEXT_PATTERN = '^[^\\u0000\\uD800-\\uDFFF]*$';
/** Storable text that is not blank (at least one non-whitespace character). */
export const NON_BLANK_TEXT_PATTERN = '^(?=[\\s\\S]*\\S)[^\\u0000\\uD800-\\uDFFF]*$';

/** A pagination cursor as the service writes it (`<key>.<MAC>`, base64url and digits); anything else is a 400. */
export const CURSOR_PATTERN = '^[A-Za-z0-9_.-]*$';

/** 3–32 letters, digits or underscores (CONTRACT §3). */
export const USERNAME_PATTERN = '^[A-Za-z0-9_]{3,32}$';

/** Friendly validation messages for the patterns above, so a client reads what is wrong, not a regex. */
export const PATTERN_MESSAGES: Record<string, string> = {
  [ID_PATTERN]: 'must be a decimal integer from 0 to 9223372036854775807',
  [STORABLE_TEXT_PATTERN]: 'must not contain U+0000 or unpaired surrogates',
  [USERNAME_PATTERN]: 'must be 3 to 32 letters, digits or underscores',
  [NON_BLANK_TEXT_PATTERN]: 'must not be blank, nor contain U+0000 or unpaired surrogates',
  [CURSOR_PATTERN]: 'is not a valid cursor for this collection',
};

/** A path identifier: a string because 64-bit values do not fit a JS number; see `toId`. */
export const IdParam = (description: string) =>
  Type.String({ pattern: ID_PATTERN, format: 'int64', description, examples: ['1'] });

/** A string of a bounded length whose characters match `pattern`. */
const boundedString =
  (pattern: string) =>
  (minLength: number, maxLength: number, description?: string) =>
    Type.String({ minLength, maxLength, pattern, ...(description ? { description } : {}) });

/**
 * Text of a bounded length that every storage engine can hold, stored (a reply's content) or looked up (a username
 * to sign in with). U+0000 is a 500 on PostgreSQL ("invalid byte sequence") but not on SQLite; rejecting it in the
 * schema answers 400 on both alike (CONTRACT §1). Whitespace counts: CONTRACT §3 asks for "not blank" of a post's
 * title only, so the other texts take any characters within their lengths.
 */
export const Text = boundedString(STORABLE_TEXT_PATTERN);

/** `Text` with at least one character that is not whitespace (a post's title). */
export const NonBlankText = boundedString(NON_BLANK_TEXT_PATTERN);

export const Id = Type.Integer({ minimum: 1, description: 'Assigned by the service' });
export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601, UTC' });

export const LinkSchema = Type.Object(
  {
    rel: Type.String({ description: 'Relation of the linked resource to this one' }),
    href: Type.String({ format: 'uri', description: 'Absolute URL of the related resource' }),
    method: Type.String({ description: 'HTTP method to use on href', examples: ['GET'] }),
  },
  { title: 'Link' },
);
export type Link = Static<typeof LinkSchema>;
export const LinksSchema = Type.Array(LinkSchema);

export const FieldErrorSchema = Type.Object({ field: Type.String(), message: Type.String() });

/** RFC 9457 problem details: the error body everywhere outside /boards. */
export const ProblemSchema = Type.Object(
  {
    type: Type.String({ description: 'URI identifying the problem type' }),
    title: Type.String({ description: 'Short summary of the problem type' }),
    status: Type.Integer({ description: 'The HTTP status code' }),
    detail: Type.String({ description: 'Explanation of this occurrence' }),
    instance: Type.String({ description: 'The request path' }),
    errors: Type.Optional(Type.Array(FieldErrorSchema, { description: 'One entry per invalid field' })),
    requestId: Type.Optional(Type.String({ description: 'Also in the server log; quote it when reporting a 5xx' })),
  },
  { title: 'Problem' },
);
export type Problem = Static<typeof ProblemSchema>;

/** The board interface's envelope (seed §2): `code` is the HTTP status as text. */
export const Envelope = <T extends TSchema>(data: T, title?: string) =>
  Type.Object(
    {
      code: Type.String({ description: 'The HTTP status code as text', examples: ['200'] }),
      message: Type.String({ description: '"OK" ("Created" for 201) on success, else an explanation', examples: ['OK'] }),
      data,
    },
    title ? { title } : {},
  );

export const EnvelopeErrorSchema = Type.Object(
  {
    code: Type.String({ description: 'The HTTP status code as text', examples: ['404'] }),
    message: Type.String({ description: 'What went wrong' }),
    data: Type.Null(),
    errors: Type.Optional(Type.Array(FieldErrorSchema)),
    requestId: Type.Optional(Type.String()),
  },
  { title: 'EnvelopeError' },
);

/**
 * Read-only fields a client may send back in a PUT body because it read them (CONTRACT §1): accepted and ignored.
 * (`id` is checked against the path by the route.)
 */
export const ReadOnlyEcho = {
  id: Type.Optional(Type.Integer({ description: 'Ignored if equal to the path id; a different id is a 400' })),
  createdAt: Type.Optional(Type.Unknown({ description: 'Read-only; ignored' })),
  updatedAt: Type.Optional(Type.Unknown({ description: 'Read-only; ignored' })),
  links: Type.Optional(Type.Unknown({ description: 'Read-only; ignored' })),
};

/** A DELETE's answer outside /boards: how many resources it removed. */
export const DeletedSchema = Type.Object({ deleted: Type.Integer({ minimum: 0 }) }, { title: 'Deleted' });

export const PageQuerySchema = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'Items per page' })),
  cursor: Type.Optional(
    Type.String({ maxLength: 512, pattern: CURSOR_PATTERN, description: 'Opaque; copy it from the `next` link of the previous page' }),
  ),
});

export const PAGE_HEADERS = Type.Object({
  link: Type.Optional(Type.String({ description: 'RFC 8288 `<url>; rel="next"` while more items follow' })),
});

/**
 * Converts a validated path id to the number the database holds. Ids are assigned sequentially from 1 and stay
 * below 2^53, so a well-formed id beyond that (or 0) matches nothing; it maps to 0, which no row has, so the normal
 * not-found path answers for it.
 */
export function toId(param: string): number {
  const n = Number(param);
  return Number.isSafeInteger(n) ? n : 0;
}

/**
 * A PUT body's `id` must name the resource of the path (CONTRACT §1: read-only fields are ignored, a different id
 * is a 400). Compared as the JSON number it is: beyond 2^53 `toId` answers 0 for the path, but the body's number
 * reads the same digits as the path, so such a request goes on to its 404 instead of a false mismatch.
 */
export function checkBodyId(bodyId: number | undefined, param: string): void {
  if (bodyId !== undefined && bodyId !== Number(param)) throw AppError.badRequest('id', 'must match the id in the path');
}

export const INT64_MAX = 9223372036854775807n;
const ID_REGEX = new RegExp(ID_PATTERN);
/** Runs on every path id: only a 19-digit value can exceed the range, so only then is a BigInt made. */
export function isInt64String(value: string): boolean {
  return ID_REGEX.test(value) && (value.length < 19 || BigInt(value) <= INT64_MAX);
}
