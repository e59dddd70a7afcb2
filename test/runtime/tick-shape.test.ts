import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it, onTestFinished } from 'vitest';

/**
 * src/shared/tick-shape.ts keeps nextTick's tick-object literal on V8's fast path. What decides that is the state
 * of the literal's feedback slots, which V8 itself prints with `%DebugPrint` (--allow-natives-syntax). Each case
 * runs in a fresh Node process: tick, collect all garbage while no tick object is alive (as start-up does), tick
 * again, and print the feedback of process.nextTick. The module is the built one (`npm test` builds first).
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MODULE = pathToFileURL(path.join(ROOT, 'dist/src/shared/tick-shape.js')).href;

function literalSlots(keepShape: boolean): { states: string[]; activeHooks: number | undefined } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'corkboard-tick-'));
  onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
  const script = path.join(dir, 'probe.mjs');
  fs.writeFileSync(
    script,
    [
      keepShape ? `await import(${JSON.stringify(MODULE)});` : '',
      'const tick = () => new Promise((resolve) => process.nextTick(resolve));',
      'for (let i = 0; i < 200; i++) await tick();',
      'for (let i = 0; i < 3; i++) { globalThis.gc(); await new Promise((resolve) => setImmediate(resolve)); }',
      'for (let i = 0; i < 200; i++) await tick();',
      "const { getHookArrays } = (await import('node:module')).createRequire(import.meta.url)('internal/async_hooks');",
      "console.log('active hooks:', typeof getHookArrays === 'function' ? getHookArrays()[0].length : 'unknown');",
      '%DebugPrint(process.nextTick);',
    ].join('\n'),
  );
  // V8 prints through C stdio on the same descriptor that Node makes non-blocking when it is a pipe, so a slow
  // reader loses part of the print: write it to a regular file instead.
  const outFile = path.join(dir, 'out.txt');
  const fd = fs.openSync(outFile, 'w');
  try {
    execFileSync(process.execPath, ['--allow-natives-syntax', '--expose-gc', '--expose-internals', script], { stdio: ['ignore', fd, 'pipe'] });
  } finally {
    fs.closeSync(fd);
  }
  const out = fs.readFileSync(outFile, 'utf8');
  const states = [...out.matchAll(/DefineKeyedOwnPropertyInLiteral (\w+)/g)].map((m) => m[1] as string);
  const hooks = /active hooks: (\d+)/.exec(out)?.[1];
  return { states, activeHooks: hooks === undefined ? undefined : Number(hooks) };
}

// Independent of the storage backend: run it in one project only.
describe.skipIf(process.env.TEST_BACKEND === 'postgres')('nextTick tick-object shape', () => {
  it('without a kept tick object, a collection between ticks leaves the literal megamorphic (the problem on this Node)', ({ skip }) => {
    const { states } = literalSlots(false);
    if (states.length === 0) skip('this Node builds tick objects without computed-key literals');
    if (!states.includes('MEGAMORPHIC')) skip(`this Node keeps the literal's feedback across collections (${states.join(', ')})`);
    expect(states).toContain('MEGAMORPHIC');
  });

  it('with the kept tick object, every definition slot of the literal stays monomorphic and no async hook is left', ({ skip }) => {
    const { states, activeHooks } = literalSlots(true);
    if (states.length === 0) skip('this Node builds tick objects without computed-key literals');
    expect(states).toEqual(states.map(() => 'MONOMORPHIC'));
    expect(states.length).toBeGreaterThanOrEqual(4);
    if (activeHooks !== undefined) expect(activeHooks).toBe(0);
  });
});
