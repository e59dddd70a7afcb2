import { Type, type Static } from 'typebox';
import { Envelope, Id, IdParam, ReadOnlyEcho, Text, Timestamp } from '../../shared/schemas.js';

/** A board: one entry on the bulletin board (CONTRACT §3). It carries no links: the board interface has none. */
export const BoardSchema = Type.Object(
  {
    id: Id,
    title: Type.String(),
    content: Type.String(),
    authorId: Type.Integer({ description: 'The user who wrote it' }),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  },
  { title: 'Board' },
);
export type Board = Static<typeof BoardSchema>;

const Title = Text(1, 200, '1–200 characters');
const Content = Text(1, 20000, '1–20000 characters');

export const BoardParamsSchema = Type.Object({ board_id: IdParam('The board id') });

export const CreateBoardBodySchema = Type.Object(
  { title: Title, content: Content },
  { additionalProperties: false, title: 'NewBoard' },
);

/** PUT replaces the board: both writable fields are required; what a client read may be sent back and is ignored. */
export const ReplaceBoardBodySchema = Type.Object(
  {
    title: Title,
    content: Content,
    id: ReadOnlyEcho.id,
    authorId: Type.Optional(Type.Unknown({ description: 'Read-only; ignored' })),
    createdAt: ReadOnlyEcho.createdAt,
    updatedAt: ReadOnlyEcho.updatedAt,
  },
  { additionalProperties: false, title: 'BoardReplacement' },
);

/** Offsets are bounded by the largest integer a JSON number carries exactly; any larger offset would find nothing. */
const MAX_OFFSET = Number.MAX_SAFE_INTEGER;
export const DEFAULT_LIMIT = 20;

/**
 * The list window (seed §2 "Board search parameters"): the page is the offsets [start, min(end, start + limit))
 * of the boards, newest first. All three are decimal integers; other spellings ("1e1", "0x10") are rejected for
 * every query string by the validator (plugins/validation.ts).
 */
export const ListBoardsQuerySchema = Type.Object(
  {
    start: Type.Optional(
      Type.Integer({ minimum: 0, maximum: MAX_OFFSET, default: 0, description: 'Offset of the first item (newest is 0)' }),
    ),
    end: Type.Optional(
      Type.Integer({ minimum: 0, maximum: MAX_OFFSET, description: 'Offset one past the last item wanted; not less than start' }),
    ),
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 100, default: DEFAULT_LIMIT, description: 'Most items in the page' }),
    ),
  },
);

export const BoardPageSchema = Type.Object(
  {
    items: Type.Array(BoardSchema, { description: 'Newest first' }),
    total: Type.Integer({ minimum: 0, description: 'How many boards there are' }),
    start: Type.Integer({ minimum: 0, description: 'The offset of the first item, as applied' }),
    end: Type.Integer({ minimum: 0, description: 'start + the number of items: the start of the next page' }),
    limit: Type.Integer({ minimum: 1, maximum: 100, description: 'The limit, as applied' }),
  },
  { title: 'BoardPage' },
);

export const BoardPageEnvelope = Envelope(BoardPageSchema, 'BoardPageEnvelope');
export const BoardEnvelope = Envelope(BoardSchema, 'BoardEnvelope');
export const UpdatedEnvelope = Envelope(Type.Literal('updated'), 'BoardUpdatedEnvelope');
export const DeletedEnvelope = Envelope(Type.Literal('deleted'), 'BoardDeletedEnvelope');
