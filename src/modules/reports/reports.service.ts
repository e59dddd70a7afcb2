import type { Kysely } from 'kysely';
import { isUniqueViolation } from '../../db/errors.js';
import type { Store, Tx } from '../../db/store.js';
import type { Database, ReportReason, ReportRow, ReportStatus, ReportSubjectType } from '../../db/types.js';
import { updatedAfter, type Precondition } from '../../shared/conditional.js';
import { AppError } from '../../shared/errors.js';
import { findVisiblePost, type Viewer } from '../../shared/visibility.js';
import { createRepliesRepository } from '../replies/replies.repository.js';
import { createUsersRepository } from '../users/users.repository.js';
import { createReportsRepository } from './reports.repository.js';

/** A subject the reporter may see, with what a report of it keeps and checks. */
export interface ReportableSubject {
  type: ReportSubjectType;
  id: number;
  /** A reply's post (its path includes it); null otherwise. */
  postId: number | null;
  /** Who it belongs to: the user themself, the post's owner, the reply's author (nobody reports their own). */
  ownerId: number;
}

/**
 * The subject if it exists and `reporter` may see it, else undefined: the one place that says what a reporter may
 * report, through the shared rule of who sees what (src/shared/visibility.ts), so that whatever hides a post or a
 * user there (blocks, suspensions) hides it here too, and a hidden subject answers exactly as a missing one.
 * - a post: one `findVisiblePost` finds;
 * - a reply: the reply exists under a post `findVisiblePost` finds (looked up under that post, as GET
 *   /posts/{post_id}/replies/{reply_id} does);
 * - a user: the profile GET /users/{id} shows the reporter (profiles are public, so a user who blocks the reporter
 *   can still be reported; a suspended account, hidden from members, is hidden here through the same lookup).
 */
export async function findReportableSubject(
  db: Kysely<Database>,
  subject: { type: ReportSubjectType; id: number },
  reporter: NonNullable<Viewer>,
): Promise<ReportableSubject | undefined> {
  switch (subject.type) {
    case 'post': {
      const post = await findVisiblePost(db, subject.id, reporter);
      return post && { type: 'post', id: post.id, postId: null, ownerId: post.owner_id };
    }
    case 'reply': {
      // The post visible to the reporter, then the reply as the shared rule shows it (blocks, suspended authors).
      const postId = await createReportsRepository(db).postOfReply(subject.id);
      if (postId === undefined || !(await findVisiblePost(db, postId, reporter))) return undefined;
      const reply = await createRepliesRepository(db).findInPost(postId, subject.id, reporter);
      return reply && { type: 'reply', id: reply.id, postId: reply.post_id, ownerId: reply.author_id };
    }
    case 'user': {
      const user = await createUsersRepository(db).findById(subject.id, reporter);
      return user && { type: 'user', id: user.id, postId: null, ownerId: user.id };
    }
  }
}

/**
 * Files an open report inside the caller's transaction. The partial unique index `reports_one_open` decides between
 * two racing creates of the same reporter and subject: one inserts, the other is a 409 naming `subject`.
 */
export async function createReport(
  tx: Tx,
  input: { reporterId: number; subject: ReportableSubject; reason: ReportReason; comment: string },
): Promise<ReportRow> {
  try {
    return await createReportsRepository(tx.db).insert({
      reporter_id: input.reporterId,
      subject_type: input.subject.type,
      subject_id: input.subject.id,
      subject_post_id: input.subject.postId,
      reason: input.reason,
      comment: input.comment,
      created_at: new Date().toISOString(),
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw AppError.conflict('subject', 'already has an open report of yours');
    throw error;
  }
}

/**
 * Sets a report's status and resolution (an admin's PUT). Undefined when the report is gone. `ifMatch` (If-Match,
 * CONTRACT §6.1) runs with the row locked, so check and write are one step. Reopening a report while the same
 * reporter has another open report of the same subject violates `reports_one_open`: a 409 naming `status`.
 */
export async function replaceReport(
  store: Store,
  id: number,
  input: { status: ReportStatus; resolution: string },
  options: { ifMatch?: Precondition } = {},
): Promise<ReportRow | undefined> {
  try {
    return await store.transaction(async (tx) => {
      if ((await tx.lockRows('reports', [id])).length === 0) return undefined;
      await options.ifMatch?.(tx.db);
      const reports = createReportsRepository(tx.db);
      const previous = await reports.findById(id);
      if (!previous) return undefined;
      // Strictly later than the last write, so the representation (and its ETag) always changes: see Precondition.
      return reports.update(id, { ...input, updated_at: updatedAfter(previous.updated_at) });
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw AppError.conflict('status', 'another open report of this reporter names the same subject');
    throw error;
  }
}
