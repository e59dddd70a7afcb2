import type { FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { PUBLIC_URL, buildTestApp, call, write, type Response } from '../../../test/helpers/build-test-app.js';
import { signUp, type TestUser } from '../../../test/helpers/factories.js';
import { nextPath } from '../../../test/helpers/api.js';
import { buildWorld, insertPost } from '../../../test/helpers/posts.js';
import { backend, sqlitePlan } from '../../../test/helpers/database.js';
import { createReportsRepository } from './reports.repository.js';
import { findReportableSubject } from './reports.service.js';

const PROBLEM = 'application/problem+json; charset=utf-8';
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

interface ReportJson {
  id: number;
  reporterId: number;
  subject: { type: string; id: number };
  reason: string;
  comment: string;
  status: string;
  resolution: string;
  createdAt: string;
  updatedAt: string;
  links: { rel: string; href: string; method: string }[];
}

/** A reply written straight into the database (the replies routes are not under test here). */
async function insertReply(app: FastifyInstance, postId: number, authorId: number): Promise<number> {
  const now = new Date().toISOString();
  const row = await write(app, (db) =>
    db.insertInto('replies').values({ post_id: postId, author_id: authorId, content: 'A reply', created_at: now, updated_at: now }).returning('id').executeTakeFirstOrThrow(),
  );
  await write(app, (db) => db.updateTable('posts').set((eb) => ({ reply_count: eb('reply_count', '+', 1) })).where('id', '=', postId).execute());
  return row.id;
}

/** A world with a reply by the follower under each post, and by the owner under the public one. */
async function buildReportWorld(app: FastifyInstance) {
  const w = await buildWorld(app);
  const replies = {
    public: await insertReply(app, w.posts.public, w.follower.id),
    followers: await insertReply(app, w.posts.followers, w.follower.id),
    private: await insertReply(app, w.posts.private, w.owner.id),
    ownersOnPublic: await insertReply(app, w.posts.public, w.owner.id),
  };
  return { ...w, replies };
}

const report = (app: FastifyInstance, user: TestUser | undefined, body: unknown, headers?: Record<string, string>) =>
  call(app, 'POST', '/reports', { token: user?.token, body, headers });

async function filed(app: FastifyInstance, user: TestUser, body: unknown): Promise<ReportJson> {
  const res = await report(app, user, body);
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

const reportRows = (app: FastifyInstance) => app.db.selectFrom('reports').selectAll().orderBy('id').execute();
const fields = (res: Response) => (res.json().errors as { field: string }[]).map((e) => e.field);
/** What a client sees of a problem, but the path it asked about. */
const problemOf = (res: Response) => {
  const { instance: _instance, ...rest } = res.json();
  return { status: res.statusCode, ...rest };
};

describe('POST /reports', () => {
  it('files an open report: 201, Location, the representation, the row, and the ETag a GET of it shows', async () => {
    const app = await buildTestApp();
    const w = await buildReportWorld(app);
    const res = await report(app, w.stranger, { subject: { type: 'post', id: w.posts.public }, reason: 'spam', comment: 'Buy now ads' });
    expect(res.statusCode).toBe(201);
    const body = res.json<ReportJson>();
    expect(res.headers.location).toBe(`${PUBLIC_URL}/reports/${body.id}`);
    expect(body).toEqual({
      id: expect.any(Number),
      reporterId: w.stranger.id,
      subject: { type: 'post', id: w.posts.public },
      reason: 'spam',
      comment: 'Buy now ads',
      status: 'open',
      resolution: '',
      createdAt: expect.stringMatching(ISO),
      updatedAt: body.createdAt,
      links: [
        { rel: 'self', href: `${PUBLIC_URL}/reports/${body.id}`, method: 'GET' },
        { rel: 'reporter', href: `${PUBLIC_URL}/users/${w.stranger.id}`, method: 'GET' },
        { rel: 'subject', href: `${PUBLIC_URL}/posts/${w.posts.public}`, method: 'GET' },
      ],
    });
    expect(await reportRows(app)).toEqual([
      {
        id: body.id,
        reporter_id: w.stranger.id,
        subject_type: 'post',
        subject_id: w.posts.public,
        subject_post_id: null,
        reason: 'spam',
        comment: 'Buy now ads',
        status: 'open',
        resolution: '',
        created_at: body.createdAt,
        updated_at: body.createdAt,
      },
    ]);
    const self = await call(app, 'GET', `/reports/${body.id}`, { token: w.stranger.token });
    expect(self.statusCode).toBe(200);
    expect(self.json()).toEqual(body);
    expect(self.headers.etag).toBe(res.headers.etag);
    // The links lead where they say.
    for (const link of body.links) expect((await call(app, 'GET', link.href.slice(PUBLIC_URL.length), { token: w.stranger.token })).statusCode).toBe(200);
  });

  it('files a reply with its post in the subject link, and a user with the profile link; an omitted comment is ""', async () => {
    const app = await buildTestApp();
    const w = await buildReportWorld(app);
    const reply = await filed(app, w.stranger, { subject: { type: 'reply', id: w.replies.public }, reason: 'abuse' });
    expect(reply).toMatchObject({ subject: { type: 'reply', id: w.replies.public }, comment: '', status: 'open', resolution: '' });
    expect(reply.links[2]).toEqual({ rel: 'subject', href: `${PUBLIC_URL}/posts/${w.posts.public}/replies/${w.replies.public}`, method: 'GET' });
    const user = await filed(app, w.stranger, { subject: { type: 'user', id: w.owner.id }, reason: 'other', comment: 'x'.repeat(1000) });
    expect(user.links[2]).toEqual({ rel: 'subject', href: `${PUBLIC_URL}/users/${w.owner.id}`, method: 'GET' });
    expect(user.comment).toHaveLength(1000);
    const rows = await reportRows(app);
    expect(rows.map((r) => [r.subject_type, r.subject_id, r.subject_post_id, r.comment.length])).toEqual([
      ['reply', w.replies.public, w.posts.public, 0],
      ['user', w.owner.id, null, 1000],
    ]);
    // The reply link resolves to the reply.
    const target = await call(app, 'GET', reply.links[2]!.href.slice(PUBLIC_URL.length));
    expect(target.statusCode).toBe(200);
    expect(target.json().id).toBe(w.replies.public);
  });

  it.each([
    ['no token', { token: 'none' }, 401, undefined],
    ['a garbage token', { token: 'garbage' }, 401, undefined],
    ['no token and a malformed body (400 comes first)', { token: 'none', body: { reason: 'spam' } }, 400, 'subject'],
    ['no subject', { body: { reason: 'spam' } }, 400, 'subject'],
    ['a subject that is a number', { body: { subject: 7, reason: 'spam' } }, 400, 'subject'],
    ['an unknown subject type', { body: { subject: { type: 'board', id: 1 }, reason: 'spam' } }, 400, 'subject.type'],
    ['a subject without an id', { body: { subject: { type: 'post' }, reason: 'spam' } }, 400, 'subject.id'],
    ['a subject id of 0', { body: { subject: { type: 'post', id: 0 }, reason: 'spam' } }, 400, 'subject.id'],
    ['a negative subject id', { body: { subject: { type: 'post', id: -1 }, reason: 'spam' } }, 400, 'subject.id'],
    ['a fractional subject id', { body: { subject: { type: 'post', id: 1.5 }, reason: 'spam' } }, 400, 'subject.id'],
    ['a subject id as a string', { body: { subject: { type: 'post', id: '1' }, reason: 'spam' } }, 400, 'subject.id'],
    ['a subject id beyond 2^53', { body: { subject: { type: 'post', id: 1e20 }, reason: 'spam' } }, 400, 'subject.id'],
    ['a post id inside a reply subject', { body: { subject: { type: 'reply', id: 1, postId: 1 }, reason: 'spam' } }, 400, 'subject.postId'],
    ['no reason', { body: { subject: { type: 'post', id: 1 } } }, 400, 'reason'],
    ['an unknown reason', { body: { subject: { type: 'post', id: 1 }, reason: 'boring' } }, 400, 'reason'],
    ['a comment over 1000 characters', { body: { subject: { type: 'post', id: 1 }, reason: 'spam', comment: 'x'.repeat(1001) } }, 400, 'comment'],
    ['a huge comment', { body: { subject: { type: 'post', id: 1 }, reason: 'spam', comment: 'x'.repeat(200_000) } }, 400, 'comment'],
    ['U+0000 in the comment', { body: { subject: { type: 'post', id: 1 }, reason: 'spam', comment: 'a\u0000b' } }, 400, 'comment'],
    ['a numeric comment', { body: { subject: { type: 'post', id: 1 }, reason: 'spam', comment: 5 } }, 400, 'comment'],
    ['a status set by the reporter', { body: { subject: { type: 'post', id: 1 }, reason: 'spam', status: 'resolved' } }, 400, 'status'],
    ['a reporterId', { body: { subject: { type: 'post', id: 1 }, reason: 'spam', reporterId: 1 } }, 400, 'reporterId'],
    ['a JSON array', { body: [] }, 400, 'body'],
  ])('answers %s', async (_case, change: { token?: string; body?: unknown }, status, field) => {
    const app = await buildTestApp();
    const w = await buildReportWorld(app);
    const token = change.token === 'none' ? undefined : (change.token ?? w.stranger.token);
    const res = await call(app, 'POST', '/reports', { token, body: 'body' in change ? change.body : { subject: { type: 'post', id: w.posts.public }, reason: 'spam' } });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (status === 401) expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    if (field) expect(fields(res)).toContain(field);
    expect(await reportRows(app)).toEqual([]);
  });

  it('answers a subject the reporter may not see exactly as one that does not exist: 400 naming subject.id', async () => {
    const app = await buildTestApp();
    const w = await buildReportWorld(app);
    const missing = {
      post: await report(app, w.stranger, { subject: { type: 'post', id: 424242 }, reason: 'spam' }),
      reply: await report(app, w.stranger, { subject: { type: 'reply', id: 424242 }, reason: 'spam' }),
      user: await report(app, w.stranger, { subject: { type: 'user', id: 424242 }, reason: 'spam' }),
    };
    for (const res of Object.values(missing)) {
      expect(res.statusCode).toBe(400);
      expect(fields(res)).toEqual(['subject.id']);
    }
    const hidden: [string, TestUser, 'post' | 'reply', number][] = [
      ['a private post, by a follower', w.follower, 'post', w.posts.private],
      ['a private post, by a stranger', w.stranger, 'post', w.posts.private],
      ['a followers-only post, by a non-follower', w.stranger, 'post', w.posts.followers],
      ['a reply under a private post', w.stranger, 'reply', w.replies.private],
      ['a reply under a followers-only post, by a non-follower', w.stranger, 'reply', w.replies.followers],
    ];
    for (const [what, who, type, id] of hidden) {
      const res = await report(app, who, { subject: { type, id }, reason: 'illegal', comment: 'hidden' });
      expect(problemOf(res), what).toEqual(problemOf(missing[type]));
    }
    expect(await reportRows(app)).toEqual([]);
  });

  it('files what the reporter may see: a followers-only post by a follower, anything by an admin', async () => {
    const app = await buildTestApp();
    const w = await buildReportWorld(app);
    const other = await signUp(app);
    const privateOfOther = await insertPost(app, other.id, { visibility: 'private' });
    await filed(app, w.follower, { subject: { type: 'post', id: w.posts.followers }, reason: 'spam' });
    await filed(app, w.admin, { subject: { type: 'post', id: privateOfOther }, reason: 'illegal' });
    await filed(app, w.admin, { subject: { type: 'reply', id: w.replies.private }, reason: 'abuse' });
    expect((await reportRows(app)).map((r) => [r.reporter_id, r.subject_type, r.subject_id])).toEqual([
      [w.follower.id, 'post', w.posts.followers],
      [w.admin.id, 'post', privateOfOther],
      [w.admin.id, 'reply', w.replies.private],
    ]);
  });

  it('refuses reporting oneself, one’s own post and one’s own reply: 400 naming subject.id', async () => {
    const app = await buildTestApp();
    const w = await buildReportWorld(app);
    for (const subject of [
      { type: 'user', id: w.owner.id },
      { type: 'post', id: w.posts.private },
      { type: 'reply', id: w.replies.ownersOnPublic },
    ]) {
      const res = await report(app, w.owner, { subject, reason: 'other' });
      expect(res.statusCode, subject.type).toBe(400);
      expect(fields(res)).toEqual(['subject.id']);
    }
    const admin = await report(app, w.admin, { subject: { type: 'user', id: w.admin.id }, reason: 'other' });
    expect(admin.statusCode).toBe(400);
    expect(await reportRows(app)).toEqual([]);
  });

  it('keeps one open report per reporter and subject: a second is 409 naming subject; after a resolution, a new one is filed', async () => {
    const app = await buildTestApp();
    const w = await buildReportWorld(app);
    const first = await filed(app, w.stranger, { subject: { type: 'post', id: w.posts.public }, reason: 'spam' });
    const again = await report(app, w.stranger, { subject: { type: 'post', id: w.posts.public }, reason: 'abuse', comment: 'other words' });
    expect(again.statusCode).toBe(409);
    expect(again.headers['content-type']).toBe(PROBLEM);
    expect(fields(again)).toEqual(['subject']);
    // Another reporter, or another subject, makes another report.
    await filed(app, w.follower, { subject: { type: 'post', id: w.posts.public }, reason: 'spam' });
    await filed(app, w.stranger, { subject: { type: 'user', id: w.owner.id }, reason: 'spam' });
    expect((await reportRows(app)).length).toBe(3);
    const resolved = await call(app, 'PUT', `/reports/${first.id}`, { token: w.admin.token, body: { status: 'resolved', resolution: 'Removed' } });
    expect(resolved.statusCode).toBe(200);
    const later = await filed(app, w.stranger, { subject: { type: 'post', id: w.posts.public }, reason: 'spam' });
    expect(later.id).toBeGreaterThan(first.id);
    const rows = (await reportRows(app)).filter((r) => r.reporter_id === w.stranger.id && r.subject_type === 'post');
    expect(rows.map((r) => [r.id, r.status])).toEqual([
      [first.id, 'resolved'],
      [later.id, 'open'],
    ]);
  });

  it('lets the database decide between racing duplicates: exactly one 201, the others 409', async () => {
    const app = await buildTestApp();
    const w = await buildReportWorld(app);
    const body = { subject: { type: 'reply', id: w.replies.public }, reason: 'spam' };
    const results = await Promise.all(Array.from({ length: 8 }, () => report(app, w.stranger, body)));
    expect(results.map((r) => r.statusCode).sort()).toEqual([201, 409, 409, 409, 409, 409, 409, 409]);
    expect((await reportRows(app)).length).toBe(1);
  });

  it('replays a create sent again with the same Idempotency-Key, and files nothing more', async () => {
    const app = await buildTestApp();
    const w = await buildReportWorld(app);
    const key = { 'idempotency-key': '"report-1"' };
    const body = { subject: { type: 'user', id: w.owner.id }, reason: 'abuse', comment: 'Rude' };
    const first = await report(app, w.stranger, body, key);
    expect(first.statusCode).toBe(201);
    const second = await report(app, w.stranger, { comment: 'Rude', reason: 'abuse', subject: { id: w.owner.id, type: 'user' } }, key);
    expect(second.statusCode).toBe(201);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.body).toBe(first.body);
    expect(second.headers.location).toBe(first.headers.location);
    expect(second.headers.etag).toBe(first.headers.etag);
    const other = await report(app, w.stranger, { ...body, comment: 'Very rude' }, key);
    expect(other.statusCode).toBe(422);
    expect((await reportRows(app)).length).toBe(1);
  });
});

describe('a report outlives its subject and its reporter', () => {
  it('stays when the post, the reply, the reported user and the reporter are deleted; the links then answer 404', async () => {
    const app = await buildTestApp();
    const w = await buildReportWorld(app);
    const other = await signUp(app);
    const onPost = await filed(app, w.stranger, { subject: { type: 'post', id: w.posts.public }, reason: 'spam' });
    const onReply = await filed(app, w.stranger, { subject: { type: 'reply', id: w.replies.public }, reason: 'abuse' });
    const onUser = await filed(app, w.stranger, { subject: { type: 'user', id: other.id }, reason: 'other' });
    const before = await reportRows(app);

    expect((await call(app, 'DELETE', `/posts/${w.posts.public}`, { token: w.owner.token })).statusCode).toBe(200);
    expect((await call(app, 'DELETE', `/users/${other.id}`, { token: other.token })).statusCode).toBe(200);
    expect((await call(app, 'DELETE', `/users/${w.stranger.id}`, { token: w.stranger.token })).statusCode).toBe(200);
    expect(await reportRows(app)).toEqual(before);

    for (const filedReport of [onPost, onReply, onUser]) {
      const res = await call(app, 'GET', `/reports/${filedReport.id}`, { token: w.admin.token });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual(filedReport);
      const [, reporter, subject] = res.json<ReportJson>().links;
      expect((await call(app, 'GET', reporter!.href.slice(PUBLIC_URL.length), { token: w.admin.token })).statusCode).toBe(404);
      expect((await call(app, 'GET', subject!.href.slice(PUBLIC_URL.length), { token: w.admin.token })).statusCode).toBe(404);
    }
  });

  it('does not stop DELETE /users (every user): the reports stay', async () => {
    const app = await buildTestApp();
    const w = await buildReportWorld(app);
    await filed(app, w.stranger, { subject: { type: 'post', id: w.posts.public }, reason: 'spam' });
    await filed(app, w.follower, { subject: { type: 'reply', id: w.replies.ownersOnPublic }, reason: 'abuse' });
    const before = await reportRows(app);
    const res = await call(app, 'DELETE', '/users', { token: w.admin.token });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ deleted: 4 });
    expect(await app.db.selectFrom('users').select('id').execute()).toEqual([]);
    expect(await reportRows(app)).toEqual(before);
  });
});

describe('GET /reports/{report_id}', () => {
  it('shows a report to its reporter and to admins, with an ETag; another member gets the 404 of a missing report', async () => {
    const app = await buildTestApp();
    const w = await buildReportWorld(app);
    const filedReport = await filed(app, w.stranger, { subject: { type: 'post', id: w.posts.public }, reason: 'spam', comment: 'secret words' });
    const mine = await call(app, 'GET', `/reports/${filedReport.id}`, { token: w.stranger.token });
    const admins = await call(app, 'GET', `/reports/${filedReport.id}`, { token: w.admin.token });
    expect(mine.statusCode).toBe(200);
    expect(admins.statusCode).toBe(200);
    expect(admins.body).toBe(mine.body);
    expect(mine.headers.etag).toMatch(/^"[^"]+"$/);
    expect(mine.headers['cache-control']).toBe('private, no-cache');
    const notModified = await call(app, 'GET', `/reports/${filedReport.id}`, { token: w.stranger.token, headers: { 'if-none-match': String(mine.headers.etag) } });
    expect(notModified.statusCode).toBe(304);

    const missing = await call(app, 'GET', '/reports/424242', { token: w.follower.token });
    expect(missing.statusCode).toBe(404);
    for (const who of [w.follower, w.owner]) {
      const res = await call(app, 'GET', `/reports/${filedReport.id}`, { token: who.token });
      expect(problemOf(res)).toEqual(problemOf(missing));
      expect(res.body).not.toContain('secret words');
    }
  });

  it.each([
    ['no token', undefined, '1', 401],
    ['a garbage token', 'garbage', '1', 401],
    ['a malformed id', 'member', 'abc', 400],
    ['a fractional id', 'member', '1.5', 400],
    ['a negative id', 'member', '-3', 400],
    ['a zero-padded id', 'member', '007', 400],
    ['an id beyond 64 bits', 'member', '9223372036854775808', 400],
    ['the largest 64-bit id', 'member', '9223372036854775807', 404],
  ])('answers %s', async (_case, who, id, status) => {
    const app = await buildTestApp();
    const member = await signUp(app);
    const token = who === 'member' ? member.token : who;
    const res = await call(app, 'GET', `/reports/${id}`, { token });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (status === 400) expect(fields(res)).toEqual(['report_id']);
  });
});

describe('GET /reports', () => {
  it('lists every report to admins, newest first, filtered by status, paged with Link rel=next', async () => {
    const app = await buildTestApp();
    const w = await buildReportWorld(app);
    const ids: number[] = [];
    for (const [who, subject] of [
      [w.stranger, { type: 'post', id: w.posts.public }],
      [w.follower, { type: 'post', id: w.posts.public }],
      [w.stranger, { type: 'user', id: w.owner.id }],
      [w.follower, { type: 'reply', id: w.replies.ownersOnPublic }],
      [w.owner, { type: 'user', id: w.stranger.id }],
    ] as const) {
      ids.push((await filed(app, who, { subject, reason: 'other' })).id);
    }
    await call(app, 'PUT', `/reports/${ids[1]}`, { token: w.admin.token, body: { status: 'resolved', resolution: 'done' } });
    await call(app, 'PUT', `/reports/${ids[3]}`, { token: w.admin.token, body: { status: 'dismissed', resolution: '' } });

    const all = await call(app, 'GET', '/reports', { token: w.admin.token });
    expect(all.statusCode).toBe(200);
    expect(all.json<ReportJson[]>().map((r) => r.id)).toEqual([...ids].reverse());
    expect(all.headers.link).toBeUndefined();
    expect(all.headers.etag).toBeDefined();
    const one = await call(app, 'GET', `/reports/${ids[0]}`, { token: w.admin.token });
    expect(all.json<ReportJson[]>().at(-1)).toEqual(one.json());

    const byStatus = async (status: string) =>
      (await call(app, 'GET', `/reports?status=${status}`, { token: w.admin.token })).json<ReportJson[]>().map((r) => r.id);
    expect(await byStatus('open')).toEqual([ids[4], ids[2], ids[0]]);
    expect(await byStatus('resolved')).toEqual([ids[1]]);
    expect(await byStatus('dismissed')).toEqual([ids[3]]);

    // Pages of two, following `next` to the end, a report filed meanwhile included only if newer pages are read.
    const seen: number[] = [];
    let path: string | undefined = '/reports?limit=2';
    let pages = 0;
    while (path) {
      const page = await call(app, 'GET', path, { token: w.admin.token });
      expect(page.statusCode).toBe(200);
      seen.push(...page.json<ReportJson[]>().map((r) => r.id));
      if (pages++ === 0) await filed(app, w.admin, { subject: { type: 'user', id: w.follower.id }, reason: 'spam' });
      path = nextPath(page.headers.link);
    }
    expect(seen).toEqual([...ids].reverse());
    const open = await call(app, 'GET', '/reports?status=open&limit=1', { token: w.admin.token });
    const cursor = new URL(`http://x${nextPath(open.headers.link)}`).searchParams.get('cursor');
    expect(nextPath(open.headers.link)).toMatch(/^\/reports\?status=open&limit=1&cursor=/);
    // A cursor of one filter is not one of another's.
    const crossed = await call(app, 'GET', `/reports?status=resolved&cursor=${cursor}`, { token: w.admin.token });
    expect(crossed.statusCode).toBe(400);
    expect(fields(crossed)).toEqual(['cursor']);
  });

  it.each([
    ['no token', 'none', '/reports', 401, undefined],
    ['a member', 'member', '/reports', 403, undefined],
    ['the reporter of every report', 'reporter', '/reports', 403, undefined],
    ['an unknown status', 'admin', '/reports?status=closed', 400, 'status'],
    ['an empty status', 'admin', '/reports?status=', 400, 'status'],
    ['an unknown parameter', 'admin', '/reports?reporterId=1', 400, 'reporterId'],
    ['a limit of 0', 'admin', '/reports?limit=0', 400, 'limit'],
    ['a limit of 101', 'admin', '/reports?limit=101', 400, 'limit'],
    ['a tampered cursor', 'admin', '/reports?cursor=5.AAAAAAAAAAAAAAAA', 400, 'cursor'],
  ])('answers %s', async (_case, who, path, status, field) => {
    const app = await buildTestApp();
    const w = await buildReportWorld(app);
    const filedReport = await filed(app, w.stranger, { subject: { type: 'post', id: w.posts.public }, reason: 'spam', comment: 'secret words' });
    const token = { none: undefined, member: w.follower.token, reporter: w.stranger.token, admin: w.admin.token }[who];
    const res = await call(app, 'GET', path, { token });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    expect(res.body).not.toContain('secret words');
    if (field) expect(fields(res)).toEqual([field]);
    expect(filedReport.id).toBeGreaterThan(0);
  });
});

describe('PUT /reports/{report_id}', () => {
  async function setUp(app: FastifyInstance) {
    const w = await buildReportWorld(app);
    const filedReport = await filed(app, w.stranger, { subject: { type: 'post', id: w.posts.public }, reason: 'spam', comment: 'ads' });
    return { w, filedReport };
  }
  const put = (app: FastifyInstance, id: number | string, token: string | undefined, body: unknown, headers?: Record<string, string>) =>
    call(app, 'PUT', `/reports/${id}`, { token, body, headers });

  it('lets an admin resolve it: 200, the new representation, its ETag (the one GET then shows), the row', async () => {
    const app = await buildTestApp();
    const { w, filedReport } = await setUp(app);
    const res = await put(app, filedReport.id, w.admin.token, { status: 'resolved', resolution: 'Post removed' });
    expect(res.statusCode).toBe(200);
    const body = res.json<ReportJson>();
    expect(body).toEqual({ ...filedReport, status: 'resolved', resolution: 'Post removed', updatedAt: expect.stringMatching(ISO) });
    expect(body.updatedAt > filedReport.updatedAt).toBe(true);
    const read = await call(app, 'GET', `/reports/${filedReport.id}`, { token: w.admin.token });
    expect(read.json()).toEqual(body);
    expect(res.headers.etag).toBe(read.headers.etag);
    // The reporter sees the outcome.
    expect((await call(app, 'GET', `/reports/${filedReport.id}`, { token: w.stranger.token })).json()).toEqual(body);
    const [row] = await reportRows(app);
    expect(row).toMatchObject({ status: 'resolved', resolution: 'Post removed', reason: 'spam', comment: 'ads', updated_at: body.updatedAt });
  });

  it('takes back the whole representation an admin read, read-only fields ignored; a different id is 400', async () => {
    const app = await buildTestApp();
    const { w, filedReport } = await setUp(app);
    const echoed = { ...filedReport, status: 'dismissed', resolution: 'Not spam', reason: 'illegal', comment: 'changed', reporterId: 1, subject: { type: 'user', id: 1 } };
    const res = await put(app, filedReport.id, w.admin.token, echoed);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ status: 'dismissed', resolution: 'Not spam', reason: 'spam', comment: 'ads', reporterId: w.stranger.id, subject: filedReport.subject });
    const wrongId = await put(app, filedReport.id, w.admin.token, { ...echoed, id: filedReport.id + 1 });
    expect(wrongId.statusCode).toBe(400);
    expect(fields(wrongId)).toEqual(['id']);
  });

  it.each([
    ['no token', 'none', {}, 401, undefined],
    ['the reporter, who is no admin', 'reporter', {}, 403, undefined],
    ['another member', 'member', {}, 404, undefined],
    ['an admin, on a report that does not exist', 'admin', { id: '424242' }, 404, undefined],
    ['no status', 'admin', { body: { resolution: '' } }, 400, 'status'],
    ['no resolution', 'admin', { body: { status: 'resolved' } }, 400, 'resolution'],
    ['an unknown status', 'admin', { body: { status: 'closed', resolution: '' } }, 400, 'status'],
    ['a resolution over 1000 characters', 'admin', { body: { status: 'resolved', resolution: 'x'.repeat(1001) } }, 400, 'resolution'],
    ['U+0000 in the resolution', 'admin', { body: { status: 'resolved', resolution: '\u0000' } }, 400, 'resolution'],
    ['an unknown field', 'admin', { body: { status: 'resolved', resolution: '', severity: 3 } }, 400, 'severity'],
    ['a malformed id', 'admin', { id: '01' }, 400, 'report_id'],
    ['a malformed If-Match', 'admin', { headers: { 'if-match': 'stale' } }, 400, 'If-Match'],
  ])('answers %s, and changes nothing', async (_case, who, change: { id?: string; body?: unknown; headers?: Record<string, string> }, status, field) => {
    const app = await buildTestApp();
    const { w, filedReport } = await setUp(app);
    const token = { none: undefined, reporter: w.stranger.token, member: w.follower.token, admin: w.admin.token }[who];
    const res = await put(app, change.id ?? filedReport.id, token, change.body ?? { status: 'resolved', resolution: 'done' }, change.headers);
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toBe(PROBLEM);
    if (field) expect(fields(res)).toEqual([field]);
    if (status === 404 && who === 'member') {
      const missing = await put(app, 424242, token, { status: 'resolved', resolution: 'done' });
      expect(problemOf(res)).toEqual(problemOf(missing));
    }
    expect(await reportRows(app)).toMatchObject([{ status: 'open', resolution: '', updated_at: filedReport.updatedAt }]);
  });

  it('with If-Match: a stale tag is 412 and changes nothing; the current tag succeeds; the reporter is 403 before 412', async () => {
    const app = await buildTestApp();
    const { w, filedReport } = await setUp(app);
    const read = await call(app, 'GET', `/reports/${filedReport.id}`, { token: w.admin.token });
    const tag = String(read.headers.etag);
    // The report changes meanwhile (another admin dismisses it, then reopens it): the tag read before is stale.
    expect((await put(app, filedReport.id, w.admin.token, { status: 'dismissed', resolution: '' })).statusCode).toBe(200);
    expect((await put(app, filedReport.id, w.admin.token, { status: 'open', resolution: '' })).statusCode).toBe(200);
    const stale = await put(app, filedReport.id, w.admin.token, { status: 'resolved', resolution: 'late' }, { 'if-match': tag });
    expect(stale.statusCode).toBe(412);
    expect(stale.headers['content-type']).toBe(PROBLEM);
    expect(await reportRows(app)).toMatchObject([{ status: 'open', resolution: '' }]);
    expect((await put(app, filedReport.id, w.stranger.token, { status: 'resolved', resolution: '' }, { 'if-match': tag })).statusCode).toBe(403);

    const current = await call(app, 'GET', `/reports/${filedReport.id}`, { token: w.admin.token });
    const ok = await put(app, filedReport.id, w.admin.token, { status: 'resolved', resolution: 'now' }, { 'if-match': String(current.headers.etag) });
    expect(ok.statusCode).toBe(200);
    expect(ok.headers.etag).not.toBe(current.headers.etag);
    expect((await put(app, filedReport.id, w.admin.token, { status: 'resolved', resolution: 'x' }, { 'if-match': '*' })).statusCode).toBe(200);
  });

  it('of two PUTs with the same If-Match sent at once, exactly one succeeds', async () => {
    const app = await buildTestApp();
    const { w, filedReport } = await setUp(app);
    const tag = String((await call(app, 'GET', `/reports/${filedReport.id}`, { token: w.admin.token })).headers.etag);
    const results = await Promise.all(
      ['resolved', 'dismissed', 'resolved', 'dismissed'].map((status, i) => put(app, filedReport.id, w.admin.token, { status, resolution: `r${i}` }, { 'if-match': tag })),
    );
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 412, 412, 412]);
    const winner = results.find((r) => r.statusCode === 200)!.json<ReportJson>();
    expect(await reportRows(app)).toMatchObject([{ status: winner.status, resolution: winner.resolution }]);
  });

  it('refuses reopening a report while the reporter has another open one of the same subject: 409 naming status', async () => {
    const app = await buildTestApp();
    const { w, filedReport } = await setUp(app);
    expect((await put(app, filedReport.id, w.admin.token, { status: 'resolved', resolution: 'first' })).statusCode).toBe(200);
    const second = await filed(app, w.stranger, { subject: filedReport.subject, reason: 'abuse' });
    const reopen = await put(app, filedReport.id, w.admin.token, { status: 'open', resolution: '' });
    expect(reopen.statusCode).toBe(409);
    expect(reopen.headers['content-type']).toBe(PROBLEM);
    expect(fields(reopen)).toEqual(['status']);
    expect((await reportRows(app)).map((r) => [r.id, r.status, r.resolution])).toEqual([
      [filedReport.id, 'resolved', 'first'],
      [second.id, 'open', ''],
    ]);
    // Moving between closed states, or reopening once the other is closed, is fine.
    expect((await put(app, filedReport.id, w.admin.token, { status: 'dismissed', resolution: 'then' })).statusCode).toBe(200);
    expect((await put(app, second.id, w.admin.token, { status: 'dismissed', resolution: '' })).statusCode).toBe(200);
    expect((await put(app, filedReport.id, w.admin.token, { status: 'open', resolution: '' })).statusCode).toBe(200);
    // An open report PUT as open again is no clash with itself.
    expect((await put(app, filedReport.id, w.admin.token, { status: 'open', resolution: 'looking' })).statusCode).toBe(200);
  });
});

describe('findReportableSubject', () => {
  it('finds a reply only under a post the reporter may see, with that post; whoever may not see it finds nothing', async () => {
    const app = await buildTestApp();
    const w = await buildReportWorld(app);
    const stranger = { id: w.stranger.id, role: 'member' as const };
    const follower = { id: w.follower.id, role: 'member' as const };
    expect(await findReportableSubject(app.db, { type: 'reply', id: w.replies.followers }, follower)).toEqual({
      type: 'reply',
      id: w.replies.followers,
      postId: w.posts.followers,
      ownerId: w.follower.id,
    });
    expect(await findReportableSubject(app.db, { type: 'reply', id: w.replies.followers }, stranger)).toBeUndefined();
    expect(await findReportableSubject(app.db, { type: 'post', id: w.posts.private }, follower)).toBeUndefined();
    expect(await findReportableSubject(app.db, { type: 'user', id: w.owner.id }, stranger)).toEqual({ type: 'user', id: w.owner.id, postId: null, ownerId: w.owner.id });
    expect(await findReportableSubject(app.db, { type: 'user', id: 424242 }, stranger)).toBeUndefined();
  });
});

describe.runIf(backend === 'sqlite')('the query plan of a page of reports (SQLite)', () => {
  it.each([
    ['every report', { limit: 20, after: 500 }, 'USING INTEGER PRIMARY KEY (rowid<?)'],
    ['the open ones', { status: 'open' as const, limit: 20, after: 500 }, 'USING INDEX reports_status_id (status=? AND id<?)'],
  ])('%s: one index range, newest first, no sort', async (_case, page, expected) => {
    const app = await buildTestApp();
    const details = await sqlitePlan(app.db, createReportsRepository(app.db).listQuery(page));
    expect(details.find((d) => d.startsWith('SEARCH reports '))).toBe(`SEARCH reports ${expected}`);
    expect(details.join('\n')).not.toMatch(/TEMP B-TREE|SCAN reports/);
  });
});
