import { describe, expect, it } from 'vitest';
import { mapConcurrent } from '../../../src/domain/concurrency.ts';

describe('mapConcurrent', () => {
  it('keeps the items’ order and never has more than `limit` in flight', async () => {
    let inFlight = 0;
    let peak = 0;
    const out = await mapConcurrent([5, 1, 4, 2, 3, 0], 2, async (n, i) => {
      inFlight += 1;
      peak = Math.max(peak, inFlight);
      await new Promise((r) => setTimeout(r, n * 3));
      inFlight -= 1;
      return `${i}:${n}`;
    });
    expect(out).toEqual(['0:5', '1:1', '2:4', '3:2', '4:3', '5:0']);
    expect(peak).toBe(2);
  });

  it('rejects with the first failure, and refuses a limit below 1', async () => {
    await expect(
      mapConcurrent([1, 2, 3], 3, async (n) => (n === 2 ? Promise.reject(new Error('two')) : n)),
    ).rejects.toThrow('two');
    await expect(mapConcurrent([1], 0, async (n) => n)).rejects.toThrow(RangeError);
    expect(await mapConcurrent([], 4, async (n: number) => n)).toEqual([]);
  });
});
