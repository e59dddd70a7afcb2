import type { Locator, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { browserTestsRun, OTHER_HOSTNAME, useServerAndBrowser } from '../helpers/browser.js';
import { E2E_PUBLIC_URL } from '../helpers/server-process.js';

/**
 * GET /docs in a real browser (Debian's headless Chromium driven by playwright-core, which never downloads a
 * browser of its own): a person opens Swagger UI, signs up, signs in, authorizes with the token, creates a post
 * and lists posts, all through "Try it out". Run from both loopback names and from another name (a LAN host's or a
 * proxy's, mapped to 127.0.0.1 inside the browser), because the page's CSP lets it call only the origin it was
 * loaded from (an absolute `servers` URL would work from one name at most), and because over plain http a browser
 * treats only loopback names as secure (a CSP with `upgrade-insecure-requests` left the page blank elsewhere).
 */

// Bounded waits: Swagger UI's bundle is large and the machine is shared, but nothing here should take long.
const STEP_MS = 15_000;
const PASSWORD = 'correct horse battery';

/** Expands an operation, presses "Try it out", fills its parameters and JSON body, executes it, returns the answer shown. */
async function tryItOut(
  page: Page,
  operation: string,
  input: { params?: Record<string, string>; body?: unknown } = {},
): Promise<{ status: number; body: string; requestUrl: string }> {
  const op = page.locator(`#${operation}`);
  await op.locator('.opblock-summary-control').click();
  await op.locator('button.try-out__btn').click();
  for (const [name, value] of Object.entries(input.params ?? {})) {
    await op.locator(`tr[data-param-name="${name}"] input`).fill(value);
  }
  if (input.body !== undefined) await op.locator('textarea.body-param__text').fill(JSON.stringify(input.body));
  await op.locator('button.execute').click();
  const row = op.locator('.live-responses-table tr.response');
  await row.waitFor({ timeout: STEP_MS });
  // A call the browser refused (CSP, CORS, network) shows no status code, only Swagger UI's "Failed to fetch"
  // explanation: it is returned as the body so a failing assertion says what went wrong.
  const shownBody = row.locator('.response-col_description pre.microlight');
  const answer = {
    status: Number(await text(row.locator('.response-col_status'))),
    body: await text((await shownBody.count()) > 0 ? shownBody.first() : row.locator('.response-col_description')),
    requestUrl: await text(op.locator('.request-url pre')),
  };
  // Collapse it again so the next operation's controls are not pushed around by this one's answer.
  await op.locator('.opblock-summary-control').click();
  return answer;
}

const text = async (locator: Locator) => (await locator.innerText({ timeout: STEP_MS })).trim();

/** "Authorize": the bearer token into the bearerAuth scheme (the dialog also offers /metrics' metricsToken), then close the dialog. */
async function authorize(page: Page, token: string): Promise<void> {
  await page.locator('.auth-wrapper button.authorize').click();
  const dialog = page.locator('.dialog-ux .modal-ux');
  await dialog.waitFor({ timeout: STEP_MS });
  const scheme = dialog.locator('.auth-container', { has: page.locator('h4', { hasText: /^bearerAuth/ }) });
  await scheme.locator('input').first().fill(token);
  await scheme.locator('.auth-btn-wrapper button.authorize').click();
  // Authorized: the scheme now offers "Logout".
  await scheme.locator('.auth-btn-wrapper button', { hasText: 'Logout' }).waitFor({ timeout: STEP_MS });
  await scheme.locator('button.btn-done').click();
  await dialog.waitFor({ state: 'detached', timeout: STEP_MS });
}

describe.runIf(browserTestsRun('test/browser/docs.test.ts'))('/docs in a browser: "Try it out" end to end', () => {
  const run = useServerAndBrowser();

  it.each(['localhost', '127.0.0.1', OTHER_HOSTNAME])(
    'from http://%s:PORT/docs: sign up, sign in, authorize, create a post, list posts',
    async (host) => {
      const origin = `http://${host}:${run.server.port}`;
      const context = await run.browser.newContext();
      context.setDefaultTimeout(STEP_MS);
      const page = await context.newPage();
      const blocked: string[] = [];
      page.on('requestfailed', (request) => blocked.push(`${request.url()}: ${request.failure()?.errorText ?? ''}`));
      // A CSP violation (an asset, a style, a call the policy refuses) is reported on the console.
      page.on('console', (message) => {
        if (message.type() === 'error') blocked.push(`console: ${message.text()}`);
      });
      try {
        const docs = await page.goto(`${origin}/docs`, { timeout: 30_000 });
        // Strict, and nothing in it sends the browser elsewhere (no upgrade to https, no other origin).
        const csp = (await docs?.allHeaders())?.['content-security-policy'] ?? '';
        expect(csp).toMatch(/(^|; )default-src 'self'(;|$)/);
        expect(csp).toMatch(/(^|; )object-src 'none'(;|$)/);
        expect(csp).not.toMatch(/upgrade-insecure-requests|https:|unsafe-inline|unsafe-eval/);
        await page.locator('#operations-users-createUser').waitFor({ timeout: 30_000 });

        const username = `docs_${host.replace(/\W/g, '_')}`;
        const signUp = await tryItOut(page, 'operations-users-createUser', { body: { username, password: PASSWORD } });
        expect(signUp.status, signUp.body).toBe(201);
        // The call went to the page's own origin; the links in the answer stay on PUBLIC_URL.
        expect(signUp.requestUrl).toBe(`${origin}/users`);
        const user = JSON.parse(signUp.body) as { id: number; username: string; links: { rel: string; href: string }[] };
        expect(user.username).toBe(username);
        expect(user.links).toContainEqual(expect.objectContaining({ rel: 'self', href: `${E2E_PUBLIC_URL}/users/${user.id}` }));

        const signIn = await tryItOut(page, 'operations-tokens-createToken', { body: { username, password: PASSWORD } });
        expect(signIn.status, signIn.body).toBe(201);
        const { token, userId } = JSON.parse(signIn.body) as { token: string; userId: number };
        expect(userId).toBe(user.id);

        await authorize(page, token);

        const title = `Hello from ${host}`;
        const created = await tryItOut(page, 'operations-posts-createPost', {
          params: { user_id: String(user.id) },
          body: { title, content: 'Written in Swagger UI.' },
        });
        expect(created.requestUrl).toBe(`${origin}/users/${user.id}/posts`);
        expect(created.status, created.body).toBe(201);
        const post = JSON.parse(created.body) as { id: number; title: string; ownerId: number };
        expect(post).toMatchObject({ title, ownerId: user.id });

        const listed = await tryItOut(page, 'operations-posts-listPosts');
        expect(listed.status, listed.body).toBe(200);
        expect(listed.requestUrl).toBe(`${origin}/posts?limit=20`);
        const posts = JSON.parse(listed.body) as { id: number; title: string }[];
        expect(posts).toContainEqual(expect.objectContaining({ id: post.id, title, ownerId: user.id }));
        expect(blocked).toEqual([]);
      } finally {
        await context.close();
      }
    },
    120_000,
  );
});
