import type { Kysely } from 'kysely';
import type { BoardRow, Database } from '../../db/types.js';

export function createBoardsRepository(db: Kysely<Database>) {
  return {
    findById(id: number): Promise<BoardRow | undefined> {
      return db.selectFrom('boards').selectAll().where('id', '=', id).executeTakeFirst();
    },

    /**
     * `count` boards from offset `offset`, newest (highest id) first, and how many boards there are. The total is
     * the `boards` counter that triggers keep (see the 20261121T0900 migration), not a count of the table; it is
     * read in the same statement as the rows, so on PostgreSQL both come from one snapshot.
     */
    async window(offset: number, count: number): Promise<{ rows: BoardRow[]; total: number }> {
      const total = db.selectFrom('counters').select('value').where('name', '=', 'boards');
      if (count === 0) {
        const row = await total.executeTakeFirst();
        return { rows: [], total: Number(row?.value ?? 0) };
      }
      // The counter row drives the query (a left join), so it answers `total` even for a page past the end. The
      // page skips `offset` boards over their ids alone (a deferred join: see the boards_id migration) and reads
      // only the rows it returns.
      const rows = await db
        .selectFrom('counters')
        .leftJoin(
          (eb) =>
            eb
              .selectFrom('boards')
              .innerJoin(
                (ids) => ids.selectFrom('boards').select('id').orderBy('id', 'desc').limit(count).offset(offset).as('ids'),
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
      return {
        rows: rows.flatMap(({ total: _total, ...row }) => (row.id === null ? [] : [row as BoardRow])),
        total: Number(first?.total ?? 0),
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
