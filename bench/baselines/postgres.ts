import Fastify from 'fastify';
import pg from 'pg';
import { POST_COLUMNS, createPostBody, port, postParams, postSchema, toPost, type CreatePostBody, type PostRow } from './shape.js';

/**
 * Baseline 3: bare Fastify + `pg` (a pool of the same size as corkboard's default, named prepared statements) on
 * a copy of the seeded database: a point read of a public post and a single-row insert, mapped to the same
 * representation as corkboard's (int8 as numbers, timestamps as ISO strings, as corkboard's pool does).
 */
const PORT = port();
const base = `http://localhost:${PORT}`;
const url = process.env.DATABASE_URL;
if (!url) throw new Error('DATABASE_URL must be set');

const INT8 = 20;
const TIMESTAMPTZ = 1184;
const parseDate = pg.types.getTypeParser(TIMESTAMPTZ) as (v: string) => Date;
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8) return (v: string) => Number(v);
    if (oid === TIMESTAMPTZ) return (v: string) => parseDate(v).toISOString();
    return pg.types.getTypeParser(oid, format);
  },
};
const pool = new pg.Pool({
  connectionString: url,
  max: Number(process.env.PG_POOL_MAX ?? 10),
  // Never close idle connections. With the harness's interleaved slices this server is idle ~20 s between its
  // read and insert slices, and pg's default (10 s) closed every connection in between: each slice then began by
  // connecting, preparing and warming new backends (PostgreSQL spent ~2× the CPU and ~3× the buffer lookups per
  // request that it spent on corkboard's same read, and this server ran at 51-59% busy). Corkboard, loaded by
  // eight scenarios in a row, never idles that long, so both now read over warm connections, as under steady load.
  idleTimeoutMillis: 0,
  types: types as pg.CustomTypesConfig,
  options: '-c TimeZone=UTC',
});

const app = Fastify({ logger: false });
app.get<{ Params: { post_id: string } }>(
  '/posts/:post_id',
  { schema: { params: postParams('post_id'), response: { 200: postSchema } } },
  async (request, reply) => {
    const { rows } = await pool.query<PostRow>({
      name: 'read-post',
      text: `SELECT ${POST_COLUMNS} FROM posts WHERE id = $1 AND visibility = 'public'`,
      values: [Number(request.params.post_id)],
    });
    const row = rows[0];
    if (!row) return reply.code(404).send({ status: 404 });
    return toPost(row, base);
  },
);
app.post<{ Params: { user_id: string }; Body: CreatePostBody }>(
  '/users/:user_id/posts',
  { schema: { params: postParams('user_id'), body: createPostBody, response: { 201: postSchema } } },
  async (request, reply) => {
    const { title, content, visibility = 'public' } = request.body;
    const now = new Date().toISOString();
    const { rows } = await pool.query<PostRow>({
      name: 'insert-post',
      text: `INSERT INTO posts (owner_id, title, content, visibility, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5) RETURNING ${POST_COLUMNS}`,
      values: [Number(request.params.user_id), title, content, visibility, now],
    });
    const row = rows[0] as PostRow;
    reply.code(201).header('location', `${base}/posts/${row.id}`);
    return toPost(row, base);
  },
);
await app.listen({ port: PORT, host: '127.0.0.1' });
process.on('SIGTERM', () => void app.close().then(() => pool.end()).then(() => process.exit(0)));
