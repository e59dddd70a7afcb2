import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { browserTestsRun, useServerAndBrowser } from '../helpers/browser.js';
import { request, type ServerProcess } from '../helpers/server-process.js';

/**
 * The moderation page (GET /admin) in a real browser, driven as an admin works it: a member's report arrives, the
 * admin opens it, suspends the author (whose sign-in is then refused), lifts the suspension, meets a conflicting
 * change, and resolves the report. The API's state is checked after each step. Also: a member is told the page is
 * not for them, axe-core finds no serious or critical accessibility problem, and the page fits a 360 px screen.
 */

const STEP_MS = 15_000;
const ADMIN = { username: 'root_admin', password: 'a long admin password' };
const PASSWORD = 'member password 1';
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

async function signUp(server: ServerProcess, username: string) {
  expect((await request(server.url, 'POST', '/users', { body: { username, password: PASSWORD } })).status).toBe(201);
  const token = await request(server.url, 'POST', '/tokens', { body: { username, password: PASSWORD } });
  return token.json<{ id: number; token: string; userId: number }>();
}

/** The serious and critical problems axe-core finds on the page as it is now. */
async function accessibilityProblems(page: Page): Promise<string[]> {
  // Evaluated through the DevTools protocol, which the page's CSP (script-src 'self') does not govern.
  await page.evaluate(AXE);
  const found = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: { id: string; impact: string; help: string; nodes: unknown[] }[] }> } }).axe;
    const result = await axe.run();
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length }));
  });
  return found.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.impact}, ${v.nodes} nodes): ${v.help}`);
}

describe.runIf(browserTestsRun('test/browser/admin.test.ts'))('/admin in a browser: the moderation flow end to end', () => {
  const run = useServerAndBrowser({ ADMIN_USERNAME: ADMIN.username, ADMIN_PASSWORD: ADMIN.password });

  it('a member is told the page is for admins; an admin works a report through suspension, lifting, a conflict and resolution', async () => {
    const { server, browser } = run;
    const author = await signUp(server, 'mallory');
    const reporter = await signUp(server, 'ann');
    const post = (
      await request(server.url, 'POST', `/users/${author.userId}/posts`, { token: author.token, body: { title: 'Cheap pills', content: 'Buy now at example.org' } })
    ).json<{ id: number }>();
    const filed = await request(server.url, 'POST', '/reports', {
      token: reporter.token,
      body: { subject: { type: 'post', id: post.id }, reason: 'spam', comment: 'Advertising' },
    });
    expect(filed.status).toBe(201);
    const reportId = filed.json<{ id: number }>().id;
    const admin = (await request(server.url, 'POST', '/tokens', { body: ADMIN })).json<{ token: string }>();
    const reportNow = async () => (await request(server.url, 'GET', `/reports/${reportId}`, { token: admin.token })).json<{ status: string; resolution: string }>();

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(STEP_MS);
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('requestfailed', (r) => problems.push(`${r.url()}: ${r.failure()?.errorText ?? ''}`));
    page.on('console', (m) => {
      // Chromium logs every 4xx a fetch gets; the page reads some on purpose (a user's suspension: 404 when none).
      if (m.type() === 'error' && !/^Failed to load resource: the server responded with a status of 4\d\d/.test(m.text())) problems.push(m.text());
    });
    try {
      const answer = await page.goto(`${server.url}/admin`);
      expect(answer?.status()).toBe(200);
      expect(answer?.headers()['content-security-policy']).toContain("script-src 'self'");
      expect(answer?.headers()['content-security-policy']).not.toContain('upgrade-insecure-requests');
      expect(await accessibilityProblems(page)).toEqual([]);

      // A member signs in: told the page is for admins, shown nothing of the queue; signing out revokes the token.
      await page.getByLabel('Username').fill('ann');
      await page.getByLabel('Password').fill(PASSWORD);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'For admins only' }).waitFor();
      expect(await page.locator('#admin-view').isVisible()).toBe(false);
      const memberToken = String(await page.evaluate("JSON.parse(sessionStorage.getItem('corkboard-admin-session') ?? 'null')?.token"));
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('heading', { name: 'Sign in' }).waitFor();
      expect((await request(server.url, 'GET', '/reports/1', { token: memberToken })).status).toBe(401);

      // The admin signs in; the open queue shows the report, which the admin opens.
      await page.getByLabel('Username').fill(ADMIN.username);
      await page.getByLabel('Password').fill(ADMIN.password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('button', { name: `Open report ${reportId}` }).click();
      const card = page.locator(`li[data-report="${reportId}"]`);
      await card.getByText('Buy now at example.org').waitFor();
      await card.getByText('By ann').waitFor();
      await card.getByText('post by mallory').waitFor();
      expect(await accessibilityProblems(page)).toEqual([]);

      // Suspend the author: the API refuses the author's sign-in with 403 …/suspended.
      await card.getByLabel('Suspension reason').fill('Spam, reported by ann');
      await card.getByRole('button', { name: 'Suspend the author' }).click();
      await card.getByText('Suspend the author: done.').waitFor();
      await card.getByText('suspended', { exact: true }).waitFor();
      const refused = await request(server.url, 'POST', '/tokens', { body: { username: 'mallory', password: PASSWORD } });
      expect(refused.status).toBe(403);
      expect(refused.json<{ type: string }>().type).toMatch(/\/suspended$/);

      // Lift it: the author signs in again.
      await card.getByRole('button', { name: 'Lift the suspension' }).click();
      await card.getByText('Lift the suspension: done.').waitFor();
      expect((await request(server.url, 'POST', '/tokens', { body: { username: 'mallory', password: PASSWORD } })).status).toBe(201);
      expect((await request(server.url, 'GET', `/users/${author.userId}/suspension`, { token: admin.token })).status).toBe(404);

      // Another admin changes the report meanwhile: the page's If-Match no longer matches, and it says so.
      expect((await request(server.url, 'PUT', `/reports/${reportId}`, { token: admin.token, body: { status: 'open', resolution: 'Looking into it' } })).status).toBe(200);
      await card.getByLabel('Resolution').fill('Warned the author');
      await card.getByRole('button', { name: 'Resolve' }).click();
      await card.getByText('changed by someone else meanwhile').waitFor();
      expect(await reportNow()).toMatchObject({ status: 'open', resolution: 'Looking into it' });

      // Resolve, reloaded: the report leaves the open queue without a reload of the page.
      await card.getByLabel('Resolution').fill('Warned the author');
      await card.getByRole('button', { name: 'Resolve' }).click();
      await card.waitFor({ state: 'detached' });
      expect(await reportNow()).toMatchObject({ status: 'resolved', resolution: 'Warned the author' });
      await page.getByLabel('Status').selectOption('resolved');
      await page.locator(`li[data-report="${reportId}"]`).getByText(`Report ${reportId}: spam (resolved)`).waitFor();
      if (process.env.ADMIN_SCREENSHOT) {
        await page.getByRole('button', { name: `Open report ${reportId}` }).click();
        await page.locator(`li[data-report="${reportId}"]`).getByText('Buy now at example.org').waitFor();
        await page.screenshot({ path: process.env.ADMIN_SCREENSHOT, fullPage: true });
      }

      // People: find the author, suspend and lift from there.
      await page.getByRole('button', { name: 'People' }).click();
      await page.getByLabel('Find users by name').fill('mallory');
      await page.getByRole('button', { name: 'Find' }).click();
      const person = page.locator(`li[data-user="${author.userId}"]`);
      await person.getByLabel('Suspension reason').fill('Second warning');
      await person.getByRole('button', { name: 'Suspend' }).click();
      await person.getByText('Suspended: Second warning').waitFor();
      expect((await request(server.url, 'GET', `/users/${author.userId}/suspension`, { token: admin.token })).json()).toMatchObject({ reason: 'Second warning' });
      await person.getByRole('button', { name: 'Lift the suspension' }).click();
      await person.getByRole('button', { name: 'Suspend' }).waitFor();
      expect((await request(server.url, 'GET', `/users/${author.userId}/suspension`, { token: admin.token })).status).toBe(404);
      expect(await accessibilityProblems(page)).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  }, 180_000);

  it('fits a 360 px screen without sideways scrolling', async () => {
    const context = await run.browser.newContext({ viewport: { width: 360, height: 740 } });
    const page = await context.newPage();
    try {
      await page.goto(`${run.server.url}/admin`);
      await page.getByLabel('Username').fill(ADMIN.username);
      await page.getByLabel('Password').fill(ADMIN.password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Reports' }).waitFor();
      expect(Number(await page.evaluate('document.documentElement.scrollWidth'))).toBeLessThanOrEqual(360);
    } finally {
      await context.close();
    }
  }, 60_000);
});
