import Fastify from 'fastify';
import SQLite from 'better-sqlite3';
import { POST_COLUMNS, createPostBody, port, postParams, postSchema, toPost, type CreatePostBody, type PostRow } from './shape.js';

/**
 * Baseline 2: bare Fastify + better-sqlite3 with prepared statements, on a copy of the seeded database (same
 * pragmas as corkboard). A point read of a public post and a single-row insert, each mapped to the same
 * representation as corkboard's: what the HTTP stack plus the storage engine cost, without corkboard's layers
 * (query builder, auth, hooks, fan-out, counters).
 */
const PORT = port();
const base = `http://localhost:${PORT}`;
const file = process.env.DATABASE_FILE;
if (!file) throw new Error('DATABASE_FILE must be set');

const db = new SQLite(file);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.pragma('foreign_keys = ON');
db.pragma('busy_timeout = 5000');
db.pragma('temp_store = MEMORY');
db.pragma('cache_size = -4096'); // PAGE_CACHE_KIB in src/db/sqlite-store.ts
const read = db.prepare<[number], PostRow>(`SELECT ${POST_COLUMNS} FROM posts WHERE id = ? AND visibility = 'public'`);
const insert = db.prepare<[number, string, string, string, string, string], PostRow>(
  `INSERT INTO posts (owner_id, title, content, visibility, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING ${POST_COLUMNS}`,
);

const app = Fastify({ logger: false });
app.get<{ Params: { post_id: string } }>(
  '/posts/:post_id',
  { schema: { params: postParams('post_id'), response: { 200: postSchema } } },
  async (request, reply) => {
    const row = read.get(Number(request.params.post_id));
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
    // .all(), not .get(): a RETURNING statement left unfinished by .get() keeps its write open, so the WAL can never
    // restart and grows without bound (every later read then pays for it). Kysely's driver uses .all() too.
    const row = insert.all(Number(request.params.user_id), title, content, visibility, now, now)[0] as PostRow;
    reply.code(201).header('location', `${base}/posts/${row.id}`);
    return toPost(row, base);
  },
);
await app.listen({ port: PORT, host: '127.0.0.1' });
process.on('SIGTERM', () => void app.close().then(() => (db.close(), process.exit(0))));
