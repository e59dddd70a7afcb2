import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { runCli } from '../helpers/cli-process.js';

/** `corkboard help`, as an operator runs the built command: usage on stdout, exit 0, and no database touched. */
describe('corkboard help', () => {
  const withDatabase = () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'corkboard-help-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    return { file: path.join(dir, 'never.db'), env: { DATABASE_URL: `sqlite:${path.join(dir, 'never.db')}` } };
  };

  it.each([[['--help']], [['-h']], [['help']], [['backup', '--help']], [['seed', '--demo', '--help']]])('%j prints the usage on stdout and exits 0', async (args) => {
    const { file, env } = withDatabase();
    const result = await runCli(args, env);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^usage: corkboard migrate\n/);
    for (const command of ['create-admin <username>', 'seed --demo', 'backup <file>', 'restore <file>', 'DATABASE_URL']) {
      expect(result.stdout).toContain(command);
    }
    expect(result.stderr).toBe('');
    expect(fs.existsSync(file)).toBe(false);
  });

  it.each([[['frobnicate']], [[]], [['--version']], [['backup', '--verbose', 'x.db']]])('still refuses %j with the usage on stderr and 2', async (args) => {
    const { file, env } = withDatabase();
    const result = await runCli(args, env);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('usage: corkboard migrate');
    expect(result.stdout).toBe('');
    expect(fs.existsSync(file)).toBe(false);
  });
});
