import { describe, expect, it } from 'vitest';
import { browserTestsRun, useServerAndBrowser } from '../helpers/browser.js';
import { request } from '../helpers/server-process.js';

/**
 * A live stream read in a real browser the way docs/API.md ("Live streams") shows it: with fetch and a stream reader (EventSource
 * cannot send an Authorization header), from the API's own origin and from another one (CORS).
 */

/** The reader in docs/API.md, run in the page: collects `count` events of a followers-only stream, then stops. */
const READER = `async ({ url, token, count }) => {
  const res = await fetch(url, { headers: { accept: 'text/event-stream', authorization: 'Bearer ' + token } });
  if (!res.ok) return { status: res.status, events: [] };
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  const events = [];
  let buffer = '';
  window.streamOpen = true;
  while (events.length < count) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf('\\n\\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const field = (name) => block.split('\\n').find((l) => l.startsWith(name + ': '))?.slice(name.length + 2);
      if (field('event')) events.push({ id: field('id'), event: field('event'), data: JSON.parse(field('data')) });
    }
  }
  await reader.cancel();
  return { status: res.status, contentType: res.headers.get('content-type'), events };
}`;

describe.runIf(browserTestsRun('test/browser/streams.test.ts'))('event streams in a browser (fetch reader)', () => {
  const run = useServerAndBrowser();

  it.each(['127.0.0.1', 'localhost'])('reads a signed-in stream with fetch from http://%s:PORT', async (host) => {
    const username = `browser_${host.replace(/\W/g, '_')}`;
    const password = 'browser password';
    const created = await request(run.server.url, 'POST', '/users', { body: { username, password } });
    const userId = created.json<{ id: number }>().id;
    const token = (await request(run.server.url, 'POST', '/tokens', { body: { username, password } })).json<{ token: string }>().token;

    const context = await run.browser.newContext();
    const page = await context.newPage();
    try {
      // The page's origin: the API itself for 127.0.0.1; for localhost the stream is read cross-origin.
      await page.goto(`http://${host}:${run.server.port}/health`);
      const reading = page.evaluate(`(${READER})(${JSON.stringify({ url: `${run.server.url}/posts`, token, count: 2 })})`) as Promise<{
        status: number;
        contentType: string;
        events: Array<{ id: string; event: string; data: { id: number; visibility: string } }>;
      }>;
      await page.waitForFunction('window.streamOpen === true', undefined, { timeout: 10_000 });
      await new Promise((r) => setTimeout(r, 200));
      const posts = [];
      for (const visibility of ['private', 'public']) {
        const res = await request(run.server.url, 'POST', `/users/${userId}/posts`, { token, body: { title: 't', content: 'c', visibility } });
        posts.push(res.json<{ id: number }>().id);
      }
      const result = await reading;
      expect(result.status).toBe(200);
      expect(result.contentType).toBe('text/event-stream');
      // The caller's own private post too: the stream shows what GET /posts/{id} shows this caller.
      expect(result.events.map((e) => [e.event, e.data.id])).toEqual(posts.map((id) => ['post.created', id]));
      // Ids are opaque (`<number>-<tag>`); their number increases.
      const seq = (id: string) => Number(id.split('-')[0]);
      expect(seq(result.events[1]!.id)).toBeGreaterThan(seq(result.events[0]!.id));
    } finally {
      await context.close();
    }
  }, 60_000);
});
