import Fastify from 'fastify';
import { port, postParams, postSchema, toPost } from './shape.js';

/**
 * Baseline 1: bare Fastify, one route of the same shape as GET /posts/{post_id} (validated path parameter,
 * response schema) answering a constant post. What the HTTP stack alone serves per core.
 */
const PORT = port();
const base = `http://localhost:${PORT}`;
const body = toPost(
  {
    id: 123456,
    owner_id: 4242,
    title: 'A constant post',
    content: 'The same body for every request, about as long as a typical post in the seeded data set. '.repeat(3),
    visibility: 'public',
    reply_count: 0,
    recommend_count: 0,
    created_at: '2026-02-01T00:00:00.000Z',
    updated_at: '2026-02-01T00:00:00.000Z',
  },
  base,
);

const app = Fastify({ logger: false });
app.get('/posts/:post_id', { schema: { params: postParams('post_id'), response: { 200: postSchema } } }, async () => body);
await app.listen({ port: PORT, host: '127.0.0.1' });
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
