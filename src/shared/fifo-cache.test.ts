import { describe, expect, it } from 'vitest';
import { fifoCache } from './fifo-cache.js';

describe('fifoCache', () => {
  it('makes each value once while it is held, and drops the oldest beyond its size', () => {
    const made: string[] = [];
    const upper = fifoCache((key) => {
      made.push(key);
      return key.toUpperCase();
    }, 2);
    expect([upper('a'), upper('b'), upper('a')]).toEqual(['A', 'B', 'A']);
    expect(made).toEqual(['a', 'b']);
    expect(upper('c')).toBe('C'); // holds b and c now: a was the oldest
    expect(upper('b')).toBe('B');
    expect(made).toEqual(['a', 'b', 'c']);
    expect(upper('a')).toBe('A');
    expect(made).toEqual(['a', 'b', 'c', 'a']);
  });
});
