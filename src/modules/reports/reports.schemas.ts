import { Type, type Static } from 'typebox';
import { Id, IdParam, LinksSchema, PageQuerySchema, ReadOnlyEcho, Text, Timestamp } from '../../shared/schemas.js';

const SUBJECT_TYPES = ['post', 'reply', 'user'] as const;
const REASONS = ['spam', 'abuse', 'illegal', 'other'] as const;
const STATUSES = ['open', 'resolved', 'dismissed'] as const;

const SubjectType = Type.Enum([...SUBJECT_TYPES], { description: 'What is reported' });
const Reason = Type.Enum([...REASONS], { description: 'Why it is reported' });
const Status = Type.Enum([...STATUSES], { description: '`open` until an admin resolves or dismisses it' });
const Comment = Text(0, 1000, 'The reporter’s words, 0–1000 characters');
const Resolution = Text(0, 1000, 'What the admins did or why they did nothing, 0–1000 characters');

export const ReportSubjectSchema = Type.Object(
  {
    type: SubjectType,
    id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'The id of the post, reply or user', examples: [1] }),
  },
  { additionalProperties: false, title: 'ReportSubject' },
);

export const ReportSchema = Type.Object(
  {
    id: Id,
    reporterId: Type.Integer({ minimum: 1, description: 'The user who reported it (kept when that user is deleted)' }),
    subject: ReportSubjectSchema,
    reason: Reason,
    comment: Type.String(),
    status: Status,
    resolution: Type.String({ description: 'Set by admins; `""` until then' }),
    createdAt: Timestamp,
    updatedAt: Timestamp,
    links: Type.Array(LinksSchema.items, {
      description: 'self, reporter (`/users/{reporterId}`), subject (the post, `/posts/{postId}/replies/{id}` or the user); a link to what was deleted since answers 404',
    }),
  },
  { title: 'Report' },
);
export type Report = Static<typeof ReportSchema>;

export const ReportParamsSchema = Type.Object({ report_id: IdParam('The report id') });

export const CreateReportBodySchema = Type.Object(
  {
    subject: ReportSubjectSchema,
    reason: Reason,
    comment: Type.Optional(Comment),
  },
  { additionalProperties: false, title: 'NewReport' },
);

const ignored = Type.Optional(Type.Unknown({ description: 'Read-only; ignored' }));

/**
 * PUT replaces what admins write, status and resolution (not a patch: both are required). The rest of a report is
 * the reporter's and read-only here: an admin UI may send back what it read, and it is ignored.
 */
export const ReplaceReportBodySchema = Type.Object(
  {
    status: Status,
    resolution: Resolution,
    ...ReadOnlyEcho,
    reporterId: ignored,
    subject: ignored,
    reason: ignored,
    comment: ignored,
  },
  { additionalProperties: false, title: 'ReportReplacement' },
);

export const ListReportsQuerySchema = Type.Object({
  status: Type.Optional(Type.Enum([...STATUSES], { description: 'Only reports in this status' })),
  ...PageQuerySchema.properties,
});
