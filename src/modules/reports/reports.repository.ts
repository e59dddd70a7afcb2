import type { Kysely } from 'kysely';
import type { Database, ReportReason, ReportRow, ReportStatus, ReportSubjectType } from '../../db/types.js';
import { pageLimit } from '../../shared/pagination.js';

/** Report rows. Pass a transaction's `db` to write; it never throws HTTP errors. */
export function createReportsRepository(db: Kysely<Database>) {
  /**
   * GET /reports: newest first, keyset over the primary key (or the `(status, id)` index with a status), so a page
   * costs `limit + 1` index entries whatever its depth.
   */
  function listQuery({ status, limit, after }: { status?: ReportStatus; limit: number; after?: number }) {
    let query = db.selectFrom('reports').selectAll();
    if (status !== undefined) query = query.where('status', '=', status);
    if (after !== undefined) query = query.where('id', '<', after);
    return query.orderBy('id', 'desc').limit(pageLimit(limit));
  }

  return {
    listQuery,

    list: (page: { status?: ReportStatus; limit: number; after?: number }): Promise<ReportRow[]> => listQuery(page).execute(),

    findById(id: number): Promise<ReportRow | undefined> {
      return db.selectFrom('reports').selectAll().where('id', '=', id).executeTakeFirst();
    },

    /** The post a reply was written under, if the reply exists (whether the reader may see it is the caller's to check). */
    async postOfReply(replyId: number): Promise<number | undefined> {
      const row = await db.selectFrom('replies').select('post_id').where('id', '=', replyId).executeTakeFirst();
      return row?.post_id;
    },

    /** Throws the unique violation of `reports_one_open` when the reporter has an open report of that subject. */
    insert(values: {
      reporter_id: number;
      subject_type: ReportSubjectType;
      subject_id: number;
      subject_post_id: number | null;
      reason: ReportReason;
      comment: string;
      created_at: string;
    }): Promise<ReportRow> {
      return db
        .insertInto('reports')
        .values({ ...values, status: 'open', resolution: '', updated_at: values.created_at })
        .returningAll()
        .executeTakeFirstOrThrow();
    },

    /** Undefined when the report is gone; throws the unique violation when reopening clashes with an open report. */
    update(id: number, values: { status: ReportStatus; resolution: string; updated_at: string }): Promise<ReportRow | undefined> {
      return db.updateTable('reports').set(values).where('id', '=', id).returningAll().executeTakeFirst();
    },
  };
}
