import { describe, expect, it } from 'vitest';
import { generateDataset } from '../bench/lib/dataset.js';
import { followRequest, wrkScript, type LoadResult } from '../bench/lib/load.js';
import { npmStartCommand } from '../bench/lib/process.js';
import { addRatios, evaluate, mergeSlices, summarise } from '../bench/lib/report.js';
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

  it('merges the slices of a round by totals: req/s is all requests over all seconds, CPU and disk per request alike', () => {
    // A fast slice and a slow one: the mean of the two req/s would say 1,500; 20,000 requests in 20 s is 1,000.
    const fast = { requests: 16_000, seconds: 8, rps: 2000, p50: 1, p99: 4, errors: 0, cpuUs: 50, busy: 1, diskKb: 0 };
    const slow = { requests: 4_000, seconds: 12, rps: 333, p50: 3, p99: 9, errors: 2, cpuUs: 150, busy: 0.05, diskKb: 1 };
    const third = { requests: 0, seconds: 0, rps: 0, p50: 2, p99: 5, errors: 0, cpuUs: 0, busy: 0, diskKb: 0 };
    const merged = mergeSlices([fast, slow, third]);
    expect(merged.requests).toBe(20_000);
    expect(merged.seconds).toBe(20);
    expect(merged.rps).toBe(1000);
    expect(merged.errors).toBe(2);
    // 16,000 × 50 µs + 4,000 × 150 µs = 1.4 s of CPU: 70 µs a request, busy 1.4 s of 20 s.
    expect(merged.cpuUs).toBeCloseTo(70, 9);
    expect(merged.busy).toBeCloseTo(0.07, 9);
    expect(merged.diskKb).toBeCloseTo(0.2, 9);
    expect([merged.p50, merged.p99]).toEqual([2, 5]);
    expect(mergeSlices([fast])).toBe(fast);
  });
});

describe('the server command', () => {
  it('is read from package.json as npm start runs it, without the exec that hands npm its process', () => {
    // Both benchmark scripts start the server this way; a start script they cannot read stops every run.
    const [node, ...rest] = npmStartCommand();
    expect(node).toBe('node');
    expect(rest.at(-1)).toBe('dist/src/server.js');
    expect(rest.slice(0, -1).every((flag) => flag.startsWith('--'))).toBe(true);
  });
});

describe('the follow scenario and its target (issue 45)', () => {
  const sequence = { start: 1, followers: [{ id: 20, token: 'cb_a' }, { id: 21, token: 'cb_b' }, { id: 22, token: 'cb_c' }], followees: [100, 101] };

  it('names every pair of followers × followees once before any repeats, diagonally, each sent with its follower\'s token', () => {
    const requests = Array.from({ length: 6 }, (_, n) => followRequest(sequence, n));
    const pairs = requests.map((r) => `${r.path} ${r.body} ${r.headers.authorization}`);
    expect(new Set(pairs).size).toBe(6);
    // Pair 4 is follower 21 in the second round: followee (1 + 1) mod 2, not one followee a whole round long.
    expect(requests[4]).toEqual({
      path: '/users/100/followers',
      headers: { 'content-type': 'application/json', authorization: 'Bearer cb_b' },
      body: '{"id":21}',
    });
    expect(followRequest(sequence, 6)).toEqual(followRequest(sequence, 0));
    // wrk's script walks the same sequence from `start`.
    const lua = wrkScript({ method: 'POST', path: '/users/100/followers', follows: sequence });
    expect(lua).toContain('local start = 1');
    expect(lua).toContain("{ 21, [[cb_b]] }");
    expect(lua).toContain('(i + math.floor(k / #followers)) % #followees');
  });

  it('walks block pairs diagonally: each pair once, and requests in flight together name different users on both sides', () => {
    const blocks = { start: 1, followers: sequence.followers, followees: [100, 101, 102, 103], action: 'block' as const };
    const requests = Array.from({ length: 12 }, (_, n) => followRequest(blocks, n));
    const pairs = requests.map((r) => `${r.path} ${r.body}`);
    expect(new Set(pairs).size).toBe(12);
    expect(requests[4]).toEqual({
      path: '/users/21/blocks',
      headers: { 'content-type': 'application/json', authorization: 'Bearer cb_b' },
      body: '{"id":102}',
    });
    // Fewer requests in flight than blockers (2 of 3 here, 50 connections of 100 in the bench).
    for (let n = 0; n + 2 <= 12; n++) {
      const window = requests.slice(n, n + 2);
      expect(new Set(window.map((r) => r.path)).size).toBe(2);
      expect(new Set(window.map((r) => r.body)).size).toBe(2);
    }
    const lua = wrkScript({ method: 'POST', path: '/users/20/blocks', follows: blocks });
    expect(lua).toContain('"/blocks"');
    expect(lua).toContain('(i + math.floor(k / #followers)) % #followees');
  });

  it('judges a floor on req/s and p99 by the scenario alone', () => {
    const floor: TargetSpec = { title: 'f', scenario: 'f', baseline: 'f', min: 1000, absolute: { rps: 1000, p99Ms: 2 } };
    const fast = summarise(scenario('f'), [run(1200, 50), run(1100, 50), run(900, 50)], 100);
    expect(evaluate([fast], [floor])[0]).toMatchObject({ ratio: 1100, pass: true });
    const slowTail = summarise(scenario('f'), [{ ...run(1200, 50), p99: 60 }, { ...run(1200, 50), p99: 60 }, run(1200, 50)], 100);
    expect(evaluate([slowTail], [floor])[0]?.pass).toBe(false);
    const few = summarise(scenario('f'), [run(900, 50), run(950, 50), run(1200, 50)], 100);
    expect(evaluate([few], [floor])[0]?.pass).toBe(false);
  });

  it('gives the returning user ~1,000 follows, never of the author or of themself', () => {
    const options = { users: 3000, posts: 5000, boards: 10, followsPerUser: 5, feedFollows: 1000, authorFollowers: 10, manyAuthors: 20, signedIn: 100, seed: 7 };
    const data = generateDataset(options);
    const followed = (u: number) => Array.from(data.followees.subarray(data.followOffsets[u] as number, data.followOffsets[u + 1] as number));
    expect(followed(data.returning).length).toBeGreaterThanOrEqual(1000);
    expect(followed(data.returning)).not.toContain(data.author);
    expect(followed(data.returning)).not.toContain(data.returning);
  });
});
