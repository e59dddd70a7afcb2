import { describe, expect, it } from 'vitest';
import { whenReady } from './eventually.js';

describe('whenReady', () => {
  it('goes on at once with a plain value: the answer is a plain value too', () => {
    expect(whenReady(2, (n) => n * 10)).toBe(20);
  });

  it('goes on once a promise settles, and answers a promise', async () => {
    const answer = whenReady(Promise.resolve(2), (n) => n * 10);
    expect(answer).toBeInstanceOf(Promise);
    expect(await answer).toBe(20);
  });

  it('passes an error on the way it came: thrown at once, or as a rejection', async () => {
    const fail = (): number => {
      throw new Error('no');
    };
    expect(() => whenReady(1, fail)).toThrow('no');
    await expect(whenReady(Promise.resolve(1), fail)).rejects.toThrow('no');
    await expect(whenReady(Promise.reject(new Error('earlier')), (n: number) => n)).rejects.toThrow('earlier');
  });

  it('flattens a next step that itself answers a promise', async () => {
    expect(await whenReady(1, (n) => Promise.resolve(n + 1))).toBe(2);
  });
});
