import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLI = path.join(path.dirname(createRequire(import.meta.url).resolve('@redocly/cli/package.json')), 'bin/cli.js');

interface LintReport {
  totals: { errors: number; warnings: number; ignored: number };
  problems: Array<{ ruleId: string; severity: string; message: string; location: Array<{ pointer?: string }> }>;
}

// CONTRACT §5: the committed document lints clean under Redocly's recommended rules (redocly.yaml), with no
// finding ignored. Warnings fail too, so they cannot pile up.
describe('openapi.json under Redocly lint (recommended rules)', () => {
  it('has no errors and no warnings', () => {
    const run = spawnSync(process.execPath, [CLI, 'lint', 'openapi.json', '--format=json'], {
      cwd: ROOT,
      encoding: 'utf8',
      // Offline and quiet: no telemetry (also off in redocly.yaml), no update check.
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
      timeout: 60_000,
    });
    expect(run.error).toBeUndefined();
    const report = JSON.parse(run.stdout) as LintReport;
    const problems = report.problems.map((p) => `${p.severity} ${p.ruleId} ${p.location[0]?.pointer ?? ''}: ${p.message}`);
    expect(problems).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
    expect(run.status).toBe(0);
  }, 60_000);
});
