import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it, onTestFinished } from 'vitest';
import { buildTestApp } from './helpers/build-test-app.js';
import { backend } from './helpers/database.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TSC = path.join(ROOT, 'node_modules/typescript/bin/tsc');

/** What an outside TypeScript project writes: the package by its name, the types checked by its own compiler. */
const CONSUMER = `import { createCorkboardClient, type Session, type User } from '@corkboard/client';

export async function run(baseUrl: string): Promise<{ user: User; sessions: Session[] }> {
  const anonymous = createCorkboardClient(baseUrl);
  const created = await anonymous.POST('/users', { body: { username: 'outsider', password: 'correct horse battery' } });
  if (!created.data) throw new Error(\`sign-up: \${created.response.status}\`);
  const signedIn = await anonymous.POST('/tokens', { body: { username: 'outsider', password: 'correct horse battery' } });
  if (!signedIn.data) throw new Error(\`sign-in: \${signedIn.response.status}\`);
  const api = createCorkboardClient(baseUrl, signedIn.data.token);
  const sessions = await api.GET('/users/{user_id}/tokens', { params: { path: { user_id: created.data.id } } });
  if (!sessions.data) throw new Error(\`sessions: \${sessions.response.status}\`);
  return { user: created.data, sessions: sessions.data };
}

export function misuse(): void {
  const api = createCorkboardClient('http://localhost:3000');
  // @ts-expect-error: the types are live, not any: a path that does not exist is refused
  void api.GET('/nowhere');
  // @ts-expect-error: and so is a body without its required fields
  void api.POST('/tokens', { body: { username: 'x' } });
}
`;

// README, "The typed client": client/ is a package an outside project installs from a tarball `npm pack` makes.
// Packed and built once, on one backend's run (the build writes client/dist); the server part needs no database
// of its own beyond the in-process app's.
describe('the client package (@corkboard/client)', () => {
  it.skipIf(backend !== 'sqlite')('packs, installs into an outside project, type-checks there and talks to the service', async () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'corkboard-client-'));
    onTestFinished(() => fs.rmSync(work, { recursive: true, force: true }));

    const pack = spawnSync('npm', ['pack', '--json', '--pack-destination', work], { cwd: path.join(ROOT, 'client'), encoding: 'utf8', timeout: 120_000 });
    expect(pack.status, pack.stderr).toBe(0);
    // npm may print the prepack script's lines before the JSON report.
    const [report] = JSON.parse(pack.stdout.slice(pack.stdout.search(/^\[/m))) as Array<{ filename: string; files: Array<{ path: string }> }>;
    expect(report!.files.map((f) => f.path).sort()).toEqual(['dist/index.d.ts', 'dist/index.js', 'dist/schema.d.ts', 'package.json']);

    // An outside project: its own package.json and tsconfig, the package unpacked where npm would install it, and
    // the package's one dependency (openapi-fetch) where npm would put it, taken from this repository's install.
    const consumer = path.join(work, 'consumer');
    const installed = path.join(consumer, 'node_modules/@corkboard/client');
    fs.mkdirSync(installed, { recursive: true });
    const untar = spawnSync('tar', ['-xzf', path.join(work, report!.filename), '-C', installed, '--strip-components=1'], { encoding: 'utf8' });
    expect(untar.status, untar.stderr).toBe(0);
    fs.symlinkSync(path.join(ROOT, 'node_modules/openapi-fetch'), path.join(consumer, 'node_modules/openapi-fetch'), 'dir');
    fs.writeFileSync(path.join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    fs.writeFileSync(
      path.join(consumer, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2023', 'DOM'], types: [], strict: true, skipLibCheck: true, outDir: 'out' },
        include: ['main.ts'],
      }),
    );
    fs.writeFileSync(path.join(consumer, 'main.ts'), CONSUMER);
    const tsc = spawnSync(process.execPath, [TSC, '-p', consumer], { encoding: 'utf8', timeout: 120_000 });
    expect(tsc.status, tsc.stdout + tsc.stderr).toBe(0);

    const app = await buildTestApp();
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as { port: number };
    const main = (await import(pathToFileURL(path.join(consumer, 'out/main.js')).href)) as {
      run(baseUrl: string): Promise<{ user: { id: number; username: string }; sessions: Array<{ id: number; userId: number }> }>;
    };
    const { user, sessions } = await main.run(`http://127.0.0.1:${port}`);
    expect(user.username).toBe('outsider');
    expect(sessions).toEqual([expect.objectContaining({ id: expect.any(Number), userId: user.id })]);
  }, 180_000);
});
