import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { ReportRow } from '../../db/types.js';
import { bearer, isAdmin, type Caller } from '../../plugins/auth.js';
import { writeCreated } from '../../plugins/idempotency/index.js';
import { bodyTag, ifMatch, tagOf } from '../../shared/conditional.js';
import { AppError } from '../../shared/errors.js';
import type { Links } from '../../shared/links.js';
import { keysetPage } from '../../shared/pagination.js';
import { problems } from '../../shared/problems.js';
import { responses } from '../../plugins/route-docs.js';
import { PAGE_HEADERS, checkBodyId, toId, type Link } from '../../shared/schemas.js';
import { createReportsRepository } from './reports.repository.js';
import {
  CreateReportBodySchema,
  ListReportsQuerySchema,
  ReplaceReportBodySchema,
  ReportParamsSchema,
  ReportSchema,
  type Report,
} from './reports.schemas.js';
import { createReport, findReportableSubject, replaceReport } from './reports.service.js';

/** The path of what a report is about: a reply's includes its post. */
function subjectPath(row: ReportRow): string {
  switch (row.subject_type) {
    case 'post':
      return `/posts/${row.subject_id}`;
    case 'reply':
      return `/posts/${row.subject_post_id}/replies/${row.subject_id}`;
    case 'user':
      return `/users/${row.subject_id}`;
  }
}

export function toReport(row: ReportRow, links: Links): Report {
  const get = (rel: string, path: string): Link => ({ rel, href: links.url(path), method: 'GET' });
  return {
    id: row.id,
    reporterId: row.reporter_id,
    subject: { type: row.subject_type, id: row.subject_id },
    reason: row.reason,
    comment: row.comment,
    status: row.status,
    resolution: row.resolution,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    links: [get('self', `/reports/${row.id}`), get('reporter', `/users/${row.reporter_id}`), get('subject', subjectPath(row))],
  };
}

/** Its reporter and admins see a report; to anyone else it answers as one that does not exist (CONTRACT §2). */
const mayRead = (caller: Caller, row: ReportRow) => row.reporter_id === caller.id || isAdmin(caller);

const AUTH_FIRST = 'A malformed request is a 400 whoever sends it; a well-formed one without a valid token is a 401.';
const NOT_VISIBLE = 'A report the caller may not read (another member’s) answers as one that does not exist.';

/**
 * Reports (CONTRACT §9): members flag a post, a reply or a user; admins list them and resolve or dismiss them. A
 * report keeps the ids of its reporter and subject, and stays when either is deleted.
 */
const reportsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const reports = createReportsRepository(app.db);
  /** If-Match against the report as the caller's GET shows it, read with its row locked. */
  const reportPrecondition = (request: FastifyRequest, reply: FastifyReply, id: number) =>
    ifMatch(request, bodyTag(reply, ReportSchema), async (db) => {
      const row = await createReportsRepository(db).findById(id);
      return row && toReport(row, app.links);
    }, (report) => report.updatedAt);

  app.post(
    '/reports',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createReport',
        tags: ['reports'],
        summary: 'Report a post, a reply or a user',
        description:
          'Any signed-in user. The report starts `open` with an empty `resolution`; an omitted `comment` is `""`. A ' +
          'subject that does not exist, or that the caller may not see, is a 400 naming `subject.id` (the same answer ' +
          'for both); so is reporting oneself or one’s own post or reply. One open report per reporter and subject. ' +
          AUTH_FIRST,
        security: bearer,
        body: CreateReportBodySchema,
        response: responses({ method: 'POST', bearer: true, idempotent: true }, {
          201: { description: 'The new report; Location names it', headers: Type.Object({ location: Type.String() }), ...ReportSchema },
          400: problems[400]('Malformed request, or a subject that does not exist, that the caller may not see, or that is their own'),
          401: problems[401],
          409: problems[409]('The caller already has an open report of this subject'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      const { subject, reason, comment = '' } = request.body;
      const found = await findReportableSubject(app.db, subject, caller);
      if (!found) throw AppError.badRequest('subject.id', `names no ${subject.type} you may see`);
      if (found.ownerId === caller.id) {
        throw AppError.badRequest('subject.id', subject.type === 'user' ? 'is yourself: you may not report yourself' : `is your own ${subject.type}: you may not report it`);
      }
      return writeCreated(reply, async (tx) => {
        const row = await createReport(tx, { reporterId: caller.id, subject: found, reason, comment });
        return { location: app.links.url(`/reports/${row.id}`), body: toReport(row, app.links) };
      });
    },
  );

  app.get(
    '/reports',
    {
      schema: {
        operationId: 'listReports',
        tags: ['reports'],
        summary: 'List reports (admins)',
        description: 'Admins only. Newest first, paginated with `limit` and `cursor`; `status` keeps the reports in that status.',
        security: bearer,
        querystring: ListReportsQuerySchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'A page of reports', headers: PAGE_HEADERS, ...Type.Array(ReportSchema) },
          401: problems[401],
          403: problems[403],
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      if (!isAdmin(caller)) throw AppError.forbidden('Only admins may list reports');
      const { status } = request.query;
      // A cursor belongs to one filter: another status's cursor is a 400, not a page of the wrong list.
      const rows = await keysetPage(request, reply, `reports|${status ?? '*'}`, request.query, (page) => reports.list({ status, ...page }));
      return rows.map((row) => toReport(row, app.links));
    },
  );

  app.get(
    '/reports/:report_id',
    {
      schema: {
        operationId: 'getReport',
        tags: ['reports'],
        summary: 'Read a report',
        description: `Its reporter and admins. ${NOT_VISIBLE}`,
        security: bearer,
        params: ReportParamsSchema,
        response: responses({ method: 'GET', bearer: true }, {
          200: { description: 'The report', ...ReportSchema },
          401: problems[401],
          404: problems[404]('report'),
        }),
      },
    },
    async (request) => {
      const caller = await app.auth.required(request);
      const row = await reports.findById(toId(request.params.report_id));
      if (!row || !mayRead(caller, row)) throw AppError.notFound('report');
      return toReport(row, app.links);
    },
  );

  app.put(
    '/reports/:report_id',
    {
      // If-Match and If-None-Match, checked inside the write (ifMatch below): 412 when they fail.
      config: { preconditions: true },
      schema: {
        operationId: 'replaceReport',
        tags: ['reports'],
        summary: 'Resolve, dismiss or reopen a report (admins)',
        description:
          'Admins only: the complete `{ status, resolution }`, not a patch. The rest of a report read before may be ' +
          'sent back and is ignored, except that an `id` differing from the path is a 400. Its reporter, if not an ' +
          `admin, gets 403; ${NOT_VISIBLE.charAt(0).toLowerCase()}${NOT_VISIBLE.slice(1)} Reopening a report while the ` +
          `same reporter has another open report of the same subject is a 409. ${AUTH_FIRST}`,
        security: bearer,
        params: ReportParamsSchema,
        body: ReplaceReportBodySchema,
        response: responses({ method: 'PUT', bearer: true, preconditions: true }, {
          200: { description: 'The updated report', ...ReportSchema },
          401: problems[401],
          403: problems[403],
          404: problems[404]('report'),
          409: problems[409]('Reopening: the reporter has another open report of the same subject'),
        }),
      },
    },
    async (request, reply) => {
      const caller = await app.auth.required(request);
      const id = toId(request.params.report_id);
      checkBodyId(request.body.id, request.params.report_id);
      const current = await reports.findById(id);
      if (!current || !mayRead(caller, current)) throw AppError.notFound('report');
      if (!isAdmin(caller)) throw AppError.forbidden('Only admins may resolve or dismiss a report');
      const { status, resolution } = request.body;
      const row = await replaceReport(app.store, id, { status, resolution }, { ifMatch: reportPrecondition(request, reply, id) });
      if (!row) throw AppError.notFound('report');
      const report = toReport(row, app.links);
      reply.header('etag', tagOf(reply, ReportSchema, report));
      return report;
    },
  );
};

export default reportsRoutes;
