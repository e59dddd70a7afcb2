import { describe, expect, it } from 'vitest';
import type { LoadResult } from '../bench/lib/load.js';
import { addRatios, evaluate, summarise } from '../bench/lib/report.js';
import type { Scenario, TargetSpec } from '../bench/lib/scenarios.js';

// The benchmark's verdicts rest on these ratios, so how they are taken is tested like the service's own code.

const run = (rps: number, cpuUs: number, errors = 0): LoadResult => ({ requests: rps * 10, seconds: 10, rps, p50: 1, p99: 2, errors, cpuUs });

const scenario = (key: string, versus?: string): Scenario => ({
  key,
  title: key,
  target: 'corkboard',
  spec: { method: 'GET', path: '/' },
  expect: { status: 200 },
  ...(versus ? { versus } : {}),
});

const target: TargetSpec = { title: 'a ≥ 0.90 × b', scenario: 'a', baseline: 'b', min: 0.9 };

describe('benchmark ratios', () => {
  it('pairs the runs of one round before taking the median, so drift between rounds cancels', () => {
    // The machine halves its speed after round 1: every round gives a ÷ b = 0.95, but the median of a
    // (round 3) over the median of b (round 2) would pair two rounds and say 1.19.
    const b = summarise(scenario('b'), [run(2000, 50), run(1000, 100), run(1050, 95)], 100);
    const a = summarise(scenario('a', 'b'), [run(1900, 53), run(950, 105), run(1250, 80)], 100);
    addRatios([a, b]);
    const [result] = evaluate([a, b], [target]);

    expect(result?.roundRatios.map((r) => r.toFixed(2))).toEqual(['0.95', '0.95', '1.19']);
    expect(result?.ratio).toBeCloseTo(0.95, 5);
    expect(a.ratio).toBeCloseTo(0.95, 5);
    expect(result?.ratioOfMedians).toBeCloseTo(1250 / 1050, 5);
    // CPU per request: the baseline's over the scenario's, paired the same way.
    expect(result?.cpuRatio).toBeCloseTo(100 / 105, 5);
    expect(result?.pass).toBe(true);
  });

  it('misses a target when the paired median is below it, even if the ratio of medians is above', () => {
    const b = summarise(scenario('b'), [run(1000, 100), run(2000, 50), run(1500, 66)], 100);
    const a = summarise(scenario('a', 'b'), [run(1600, 62), run(1700, 58), run(1300, 76)], 100);
    const [result] = evaluate([a, b], [target]);

    expect(result?.ratioOfMedians).toBeCloseTo(1600 / 1500, 5);
    expect(result?.ratio).toBeCloseTo(1300 / 1500, 5);
    expect(result?.pass).toBe(false);
  });

  it('fails a target on any error, whatever the ratio', () => {
    const b = summarise(scenario('b'), [run(1000, 100), run(1000, 100), run(1000, 100, 1)], 100);
    const a = summarise(scenario('a', 'b'), [run(1000, 100), run(1000, 100), run(1000, 100)], 100);
    const [result] = evaluate([a, b], [target]);

    expect(result?.ratio).toBe(1);
    expect(result?.pass).toBe(false);
  });
});
