import type { Kysely } from 'kysely';
import type { BoardRow, Database } from '../../db/types.js';

export function createBoardsRepository(db: Kysely<Database>) {
  return {
    findById(id: number): Promise<BoardRow | undefined> {
      return db.selectFrom('boards').selectAll().where('id', '=', id).executeTakeFirst();
    },

    /**
     * `count` boards from offset `offset`, newest (highest id) first, and how many boards there are. The total is
     * read by the same statement as the rows, so on PostgreSQL both come from one snapshot; only a page past the
     * end, which has no row to carry it, costs a second query.
     */
    async window(offset: number, count: number): Promise<{ rows: BoardRow[]; total: number }> {
      const totalOf = async () => {
        const r = await db.selectFrom('boards').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow();
        return Number(r.n);
      };
      if (count === 0) return { rows: [], total: await totalOf() };
      const rows = await db
        .selectFrom('boards')
        .selectAll('boards')
        .select((eb) => eb.selectFrom('boards as b').select((e) => e.fn.countAll().as('n')).as('total'))
        .orderBy('boards.id', 'desc')
        .limit(count)
        .offset(offset)
        .execute();
      const first = rows[0];
      if (!first) return { rows: [], total: await totalOf() };
      return {
        rows: rows.map(({ total: _total, ...row }) => row),
        total: Number(first.total),
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
