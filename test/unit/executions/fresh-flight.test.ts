import { describe, expect, it } from 'vitest';
import { FreshFlight } from '../../../src/supervisor/executions/fresh-flight.ts';

/** A read the test answers by hand, counting how many were started. */
function manualReads() {
  const pending: { resolve: (v: string) => void; reject: (e: unknown) => void }[] = [];
  const read = () => new Promise<string>((resolve, reject) => pending.push({ resolve, reject }));
  return { pending, read };
}

const flush = () => new Promise((r) => setImmediate(r));

class Timeout extends Error {}

describe('FreshFlight', () => {
  it('shares one read between callers submitted before it started', async () => {
    let now = 1000;
    const f = new FreshFlight<string>({ nowMs: () => now });
    const { pending, read } = manualReads();
    now = 1001; // the first caller's read starts after both callers' submissions (1000)
    const a = f.run('k', 1000, 5000, read);
    const b = f.run('k', 1000, 5000, read);
    await flush();
    expect(pending).toHaveLength(1);
    pending[0]!.resolve('v1');
    expect(await a).toBe('v1');
    expect(await b).toBe('v1');
    expect(f.started).toBe(1);
    expect(f.joined).toBe(1);
    expect(f.size).toBe(0); // nothing is kept once it settled
  });

  it('never joins a read that began before (or in the same millisecond as) the caller was submitted', async () => {
    let now = 1000;
    const f = new FreshFlight<string>({ nowMs: () => now });
    const { pending, read } = manualReads();
    const old = f.run('k', 999, 5000, read); // starts at 1000
    const sameMs = f.run('k', 1000, 5000, read);
    now = 1002;
    const later = f.run('k', 1001, 5000, read); // both reads began at 1000: reads on its own, from 1002
    const joiner = f.run('k', 1001, 5000, read);
    await flush();
    expect(pending).toHaveLength(3);
    pending[0]!.resolve('stale');
    pending[1]!.resolve('same-ms');
    pending[2]!.resolve('fresh');
    expect(await old).toBe('stale');
    expect(await sameMs).toBe('same-ms');
    expect(await later).toBe('fresh');
    expect(await joiner).toBe('fresh'); // joined the read started at 1002, after its submission
  });

  it('keeps reads of different keys apart', async () => {
    let now = 1000;
    const f = new FreshFlight<string>({ nowMs: () => now });
    const { pending, read } = manualReads();
    now = 1001;
    void f.run('a', 1000, 5000, read);
    void f.run('b', 1000, 5000, read);
    await flush();
    expect(pending).toHaveLength(2);
  });

  it('does not join a read whose deadline is later than the caller’s own', async () => {
    let now = 1000;
    const f = new FreshFlight<string>({ nowMs: () => now });
    const { pending, read } = manualReads();
    now = 1001;
    void f.run('k', 1000, 9000, read);
    void f.run('k', 1000, 5000, read); // would wait past its own deadline: reads on its own
    await flush();
    expect(pending).toHaveLength(2);
  });

  it('a joiner with time left reads again when the shared read ran out of its starter’s time; other failures are shared', async () => {
    let now = 1000;
    const f = new FreshFlight<string>({ nowMs: () => now, retryable: (e) => e instanceof Timeout });
    const { pending, read } = manualReads();
    now = 1001;
    const a = f.run('k', 1000, 4000, read);
    const b = f.run('k', 1000, 6000, read);
    await flush();
    pending[0]!.reject(new Timeout('starter out of time'));
    await expect(a).rejects.toBeInstanceOf(Timeout);
    await flush();
    expect(pending).toHaveLength(2);
    pending[1]!.resolve('mine');
    expect(await b).toBe('mine');

    const c = f.run('x', 1000, 4000, read);
    const d = f.run('x', 1000, 6000, read);
    await flush();
    pending[2]!.reject(new Error('RECORD_NOT_FOUND'));
    await expect(c).rejects.toThrow('RECORD_NOT_FOUND');
    await expect(d).rejects.toThrow('RECORD_NOT_FOUND');
    expect(pending).toHaveLength(3);
  });

  it('without a submission time a caller never joins', async () => {
    const f = new FreshFlight<string>({ nowMs: () => 1001 });
    const { pending, read } = manualReads();
    void f.run('k', 1000, 5000, read);
    void f.run('k', Number.NaN, 5000, read);
    await flush();
    expect(pending).toHaveLength(2);
  });
});
