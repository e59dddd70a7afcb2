import { afterEach, describe, expect, it, vi } from 'vitest';
import { nowIso } from './clock.js';

describe('nowIso', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('answers what new Date().toISOString() answers, for every millisecond of a second and across seconds', () => {
    vi.useFakeTimers();
    const start = Date.UTC(2026, 10, 22, 23, 59, 58, 0);
    for (let ms = start; ms < start + 3_000; ms += 1) {
      vi.setSystemTime(ms);
      expect(nowIso()).toBe(new Date(ms).toISOString());
    }
  });

  it('follows the clock when it goes back', () => {
    vi.useFakeTimers();
    vi.setSystemTime(Date.UTC(2026, 0, 1, 0, 0, 1, 5));
    expect(nowIso()).toBe('2026-01-01T00:00:01.005Z');
    vi.setSystemTime(Date.UTC(2025, 11, 31, 23, 59, 59, 999));
    expect(nowIso()).toBe('2025-12-31T23:59:59.999Z');
  });

  it('reads the real clock', () => {
    const before = Date.now();
    const now = Date.parse(nowIso());
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(Date.now());
  });
});
