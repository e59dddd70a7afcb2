import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import { e2eDatabase, killLeftovers, request, startServer, type E2eDatabase, type ServerProcess } from '../helpers/server-process.js';

/** A span as the OTLP/HTTP JSON encoding carries it (ids in hex). */
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: { key: string; value: { stringValue?: string; intValue?: string | number } }[];
}
const SERVER = 2;
const CLIENT = 3;

/** A real OTLP/HTTP receiver: what a collector's /v1/traces would be sent, kept in memory. */
async function receiver() {
  const spans: OtlpSpan[] = [];
  const resources: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      if (req.url === '/v1/traces' && req.headers['content-type']?.startsWith('application/json')) {
        const parsed = JSON.parse(body) as {
          resourceSpans: { resource: { attributes: OtlpSpan['attributes'] }; scopeSpans: { spans: OtlpSpan[] }[] }[];
        };
        for (const resource of parsed.resourceSpans) {
          resources.push(JSON.stringify(resource.resource.attributes));
          for (const scope of resource.scopeSpans) spans.push(...scope.spans);
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, resources, close: () => server.close() };
}

const attribute = (span: OtlpSpan, key: string) => {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value?.stringValue ?? (value?.intValue === undefined ? undefined : Number(value.intValue));
};

async function eventually<T>(find: () => T | undefined, what: string): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const found = find();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`not received within 10 s: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('tracing with OpenTelemetry (OTEL_EXPORTER_OTLP_ENDPOINT set)', () => {
  let db: E2eDatabase;
  let otlp: Awaited<ReturnType<typeof receiver>>;
  let server: ServerProcess;

  beforeAll(async () => {
    otlp = await receiver();
    db = await e2eDatabase();
    server = await startServer({
      databaseUrl: db.url,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_SERVICE_NAME: 'corkboard-test', OTEL_BSP_SCHEDULE_DELAY: '100' },
    });
  });
  afterAll(async () => {
    await server?.stop();
    await killLeftovers();
    await db?.drop();
    otlp?.close();
  });

  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const callerSpan = '00f067aa0ba902b7';

  it('a request with a traceparent is a server span under the caller, with a span per statement under it', async () => {
    const password = 'tracing password';
    expect((await request(server.url, 'POST', '/users', { body: { username: 'tracer', password } })).status).toBe(201);
    const token = (await request(server.url, 'POST', '/tokens', { body: { username: 'tracer', password } })).json<{ token: string; userId: number }>();
    const created = await request(server.url, 'POST', `/users/${token.userId}/posts`, {
      token: token.token,
      body: { title: 'Traced', content: 'A post written under a trace' },
      headers: { traceparent: `00-${traceId}-${callerSpan}-01` },
    });
    expect(created.status).toBe(201);

    const span = await eventually(() => otlp.spans.find((s) => s.traceId === traceId && s.kind === SERVER), 'the server span');
    expect(span).toMatchObject({ parentSpanId: callerSpan, name: 'POST /users/:user_id/posts' });
    expect(attribute(span, 'http.route')).toBe('/users/:user_id/posts');
    expect(attribute(span, 'http.response.status_code')).toBe(201);
    expect(otlp.resources.some((r) => r.includes('corkboard-test'))).toBe(true);

    // The insert ran inside the request's transaction (on SQLite, in a group-commit batch): still under its span.
    const insert = await eventually(
      () => otlp.spans.find((s) => s.traceId === traceId && s.kind === CLIENT && /^insert into "posts"/i.test(String(attribute(s, 'db.query.text')))),
      'the insert statement span',
    );
    expect(insert.parentSpanId).toBe(span.spanId);
    expect(insert.name).toBe('INSERT');
    expect(attribute(insert, 'db.system.name')).toBe(backend === 'postgres' ? 'postgresql' : 'sqlite');
    // Parameters are never exported: the title does not appear in any statement's text.
    expect(otlp.spans.filter((s) => s.traceId === traceId).some((s) => JSON.stringify(s).includes('Traced'))).toBe(false);

    // The access log line carries the trace id.
    const line = await server.waitForLog((l) => l.msg === 'request completed' && (l.req as { url?: string } | undefined)?.url === `/users/${token.userId}/posts`);
    expect((line.req as { traceId?: string }).traceId).toBe(traceId);
  });

  it('concurrent writes (one SQLite group-commit batch) each have their statements under their own span', async () => {
    const password = 'tracing password';
    const token = (await request(server.url, 'POST', '/tokens', { body: { username: 'tracer', password } })).json<{ token: string; userId: number }>();
    const traces = ['a', 'b', 'c', 'd'].map((c) => c.repeat(32));
    const answers = await Promise.all(
      traces.map((trace) =>
        request(server.url, 'POST', `/users/${token.userId}/posts`, {
          token: token.token,
          body: { title: 'Concurrent', content: trace },
          headers: { traceparent: `00-${trace}-${callerSpan}-01` },
        }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual([201, 201, 201, 201]);
    for (const trace of traces) {
      const span = await eventually(() => otlp.spans.find((s) => s.traceId === trace && s.kind === SERVER), `the server span of ${trace}`);
      const insert = await eventually(
        () => otlp.spans.find((s) => s.kind === CLIENT && s.parentSpanId === span.spanId && /^insert into "posts"/i.test(String(attribute(s, 'db.query.text')))),
        `the insert under ${trace}`,
      );
      expect(insert.traceId).toBe(trace);
    }
  });

  it('a read by id has its plain-SQL statement under its span; a request without traceparent starts a trace', async () => {
    const list = (await request(server.url, 'GET', '/posts')).json<{ id: number }[]>();
    const read = await request(server.url, 'GET', `/posts/${list[0]!.id}`);
    expect(read.status).toBe(200);
    const span = await eventually(
      () => otlp.spans.find((s) => s.kind === SERVER && s.name === 'GET /posts/:post_id'),
      'the server span of GET /posts/{id}',
    );
    expect(span.parentSpanId ?? '').toBe('');
    expect(span.traceId).not.toBe(traceId);
    const statement = await eventually(
      () => otlp.spans.find((s) => s.parentSpanId === span.spanId && s.kind === CLIENT),
      'the statement span of GET /posts/{id}',
    );
    expect(statement.name).toBe('SELECT');
    expect(String(attribute(statement, 'db.query.text'))).toMatch(/from posts|from "posts"/i);
  });
});

describe('tracing off (no OTEL_* endpoint)', () => {
  let db: E2eDatabase;
  let server: ServerProcess;
  beforeAll(async () => {
    db = await e2eDatabase();
    server = await startServer({ databaseUrl: db.url });
  });
  afterAll(async () => {
    await server?.stop();
    await killLeftovers();
    await db?.drop();
  });

  it('logs no trace id, though the request carried a traceparent', async () => {
    const res = await request(server.url, 'GET', '/posts', { headers: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' } });
    expect(res.status).toBe(200);
    const line = await server.waitForLog((l) => l.msg === 'request completed' && (l.req as { url?: string } | undefined)?.url === '/posts');
    expect(line.req).not.toHaveProperty('traceId');
  });
});
