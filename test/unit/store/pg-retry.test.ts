// The PostgreSQL store's retry policy (postgres/retry.ts): a serialization failure, a deadlock PostgreSQL broke and a
// lock wait cut off by lock_timeout are run again, a bounded number of times with growing pauses; anything else
// fails at once; after the last try the caller's "give up" error is what is thrown.
import { describe, expect, it } from 'vitest';
import { isRetryable, withRetries } from '../../../src/store/postgres/retry.ts';

const pgError = (code: string, message = `pg ${code}`) => Object.assign(new Error(message), { code });

describe('retrying transient PostgreSQL failures', () => {
  it('a deadlock, a serialization failure and a lock timeout are retried until the attempt succeeds', async () => {
    const thrown = [pgError('40P01'), pgError('40001'), pgError('55P03')];
    const pauses: number[] = [];
    let calls = 0;
    const out = await withRetries(
      async () => {
        calls += 1;
        const e = thrown.shift();
        if (e) throw e;
        return 'committed';
      },
      () => new Error('gave up'),
      { sleep: async (ms) => void pauses.push(ms), random: () => 0.5, baseDelayMs: 10, maxDelayMs: 25 },
    );
    expect(out).toBe('committed');
    expect(calls).toBe(4);
    expect(pauses).toEqual([10, 20, 25]);
  });

  it('after the last try the give-up error is thrown, naming the last failure and the tries', async () => {
    let calls = 0;
    const err = await withRetries(
      async () => {
        calls += 1;
        throw pgError('40P01', 'deadlock detected');
      },
      (last, tries) => new Error(`unavailable: ${(last as Error).message} after ${tries}`),
      { attempts: 3, sleep: async () => undefined },
    ).catch((e: Error) => e);
    expect(calls).toBe(3);
    expect((err as Error).message).toBe('unavailable: deadlock detected after 3');
  });

  it('any other failure is thrown at once, untouched', async () => {
    let calls = 0;
    const unique = pgError('23505');
    await expect(
      withRetries(
        async () => {
          calls += 1;
          throw unique;
        },
        () => new Error('gave up'),
        { sleep: async () => undefined },
      ),
    ).rejects.toBe(unique);
    expect(calls).toBe(1);
    expect([
      isRetryable(pgError('40001')),
      isRetryable(pgError('40P01')),
      isRetryable(pgError('55P03')),
      isRetryable(new Error('x')),
      isRetryable(null),
    ]).toEqual([true, true, true, false, false]);
  });
});
