import { sql, type Kysely } from 'kysely';
import type { BoardRow, Database } from '../../db/types.js';

export function createBoardsRepository(db: Kysely<Database>) {
  /** The number of boards at this process's last list: only picks the cheaper end to count from (see window). */
  let lastTotal: number | undefined;
  return {
    findById(id: number): Promise<BoardRow | undefined> {
      return db.selectFrom('boards').selectAll().where('id', '=', id).executeTakeFirst();
    },

    /**
     * `count` boards from offset `offset`, newest (highest id) first, and how many boards there are. The total is
     * the `boards` counter that triggers keep (see the 20261121T0900 migration), not a count of the table; it is
     * read in the same statement as the rows, so on PostgreSQL both come from one snapshot.
     *
     * Skipping `offset` ids costs time in proportion to `offset`, so a page in the older half is found from the
     * other end: it is the window at `total - offset - count` in ascending order. That statement computes its skip from the counter
     * itself, so it is exact whatever the process believed the total to be; which statement runs is chosen from
     * the total this process last saw, which only decides speed.
     */
    async window(offset: number, count: number): Promise<{ rows: BoardRow[]; total: number }> {
      const total = db.selectFrom('counters').select('value').where('name', '=', 'boards');
      if (count === 0) {
        const row = await total.executeTakeFirst();
        return { rows: [], total: Number(row?.value ?? 0) };
      }
      const fromOldest = lastTotal !== undefined && 2 * offset + count > lastTotal;
      // In ascending order the page starts `total - offset - count` boards in (0 for a short last page) and holds
      // `total - offset` boards at most (none past the end). CASE keeps both non-negative: PostgreSQL rejects a
      // negative LIMIT and SQLite reads it as "no limit".
      const skip = sql<number>`case when ${total} - ${offset} - ${count} > 0 then ${total} - ${offset} - ${count} else 0 end`;
      const take = sql<number>`case when ${total} - ${offset} <= 0 then 0 when ${total} - ${offset} < ${count} then ${total} - ${offset} else ${count} end`;
      // The counter row drives the query (a left join), so it answers `total` even for a page past the end. The
      // page skips boards over their ids alone (a deferred join: see the boards_id migration) and reads only the
      // rows it returns.
      const rows = await db
        .selectFrom('counters')
        .leftJoin(
          (eb) =>
            eb
              .selectFrom('boards')
              .innerJoin(
                (ids) =>
                  fromOldest
                    ? // The outer constant limit tells the planner the page is small: with only the computed one,
                      // PostgreSQL expected 10,000 ids and hash-joined them against every board.
                      ids
                        .selectFrom((w) => w.selectFrom('boards').select('id').orderBy('id', 'asc').limit(take).offset(skip).as('w'))
                        .select('w.id')
                        .limit(count)
                        .as('ids')
                    : ids.selectFrom('boards').select('id').orderBy('id', 'desc').limit(count).offset(offset).as('ids'),
                (join) => join.onRef('ids.id', '=', 'boards.id'),
              )
              .selectAll('boards')
              .as('page'),
          (join) => join.onTrue(),
        )
        .select(['counters.value as total', 'page.id', 'page.author_id', 'page.title', 'page.content', 'page.created_at', 'page.updated_at'])
        .where('counters.name', '=', 'boards')
        .orderBy('page.id', 'desc')
        .execute();
      const first = rows[0];
      lastTotal = Number(first?.total ?? 0);
      return {
        rows: rows.flatMap(({ total: _total, ...row }) => (row.id === null ? [] : [row as BoardRow])),
        total: lastTotal,
      };
    },

    insert(values: { author_id: number; title: string; content: string; now: string }): Promise<BoardRow> {
      return db
        .insertInto('boards')
        .values({
          author_id: values.author_id,
          title: values.title,
          content: values.content,
          created_at: values.now,
          updated_at: values.now,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
    },

    /** Replaces the writable fields; false when the board no longer exists. */
    async update(id: number, values: { title: string; content: string; updated_at: string }): Promise<boolean> {
      const result = await db.updateTable('boards').set(values).where('id', '=', id).executeTakeFirst();
      return result.numUpdatedRows > 0n;
    },

    /** False when there was no such board. */
    async remove(id: number): Promise<boolean> {
      const result = await db.deleteFrom('boards').where('id', '=', id).executeTakeFirst();
      return result.numDeletedRows > 0n;
    },
  };
}

export type BoardsRepository = ReturnType<typeof createBoardsRepository>;
