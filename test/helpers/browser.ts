import fs from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import { e2eDatabase, killLeftovers, startServer, type E2eDatabase, type ServerProcess } from './server-process.js';

/**
 * Debian's headless Chromium, driven by playwright-core (which downloads no browser of its own). CHROMIUM_PATH
 * points elsewhere (another install, or a missing path to try the failure).
 */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** Resolved to 127.0.0.1 by the browser alone (no DNS, no /etc/hosts). */
export const OTHER_HOSTNAME = 'corkboard.test';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-quic',
  '--no-first-run',
  '--disable-sync',
  // A name that is neither localhost nor an address, as a LAN host or a proxy's name is (the docs test opens /docs
  // through it): Chromium treats only loopback names as secure over plain http.
  `--host-resolver-rules=MAP ${OTHER_HOSTNAME} 127.0.0.1`,
];
export const chromiumInstalled = fs.existsSync(CHROMIUM);
const MISSING = `Chromium is not installed at ${CHROMIUM}: run \`apt-get install -y chromium\` (.ci/run does it)`;

/** Whether a browser test file runs: with Chromium installed, or under CI, where a missing browser is a failure. */
export function browserTestsRun(file: string): boolean {
  if (!chromiumInstalled && !process.env.CI) console.warn(`[corkboard] SKIPPING ${file}: ${MISSING}`);
  return chromiumInstalled || Boolean(process.env.CI);
}

/**
 * The built server on a fresh database and a browser, for the file (beforeAll), torn down afterwards. `env`: more
 * settings for the server (an admin to bootstrap, say).
 */
export function useServerAndBrowser(env: Record<string, string> = {}): { readonly server: ServerProcess; readonly browser: Browser } {
  let db: E2eDatabase | undefined;
  let server: ServerProcess | undefined;
  let browser: Browser | undefined;
  beforeAll(async () => {
    // Under CI a missing browser is a failure, not a silent skip.
    if (!chromiumInstalled) throw new Error(MISSING);
    db = await e2eDatabase();
    [server, browser] = await Promise.all([
      startServer({ databaseUrl: db.url, env }),
      chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 30_000 }),
    ]);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await killLeftovers();
    await db?.drop();
  }, 60_000);
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the server and browser start in beforeAll: use them inside a test');
    return value;
  };
  return {
    get server() {
      return started(server);
    },
    get browser() {
      return started(browser);
    },
  };
}
