// A subscription whose read is cut off because the store is unreachable (PostgreSQL restarting) reads again from
// the same position: a cluster node's followers (its execution queue above all) must outlive an outage. Any other
// failed read still stops it, and says so through onError.
import { describe, expect, it } from 'vitest';
import { RunlogError } from '../../../src/domain/errors.ts';
import type { RecordedEvent } from '../../../src/domain/events.ts';
import { pollingSubscription, Wakeups } from '../../../src/store/subscription.ts';

const event = (seq: number): RecordedEvent => ({
  seq,
  stream: 's',
  version: seq,
  type: 't',
  schema: 1,
  data: {},
  meta: {},
  at: new Date(0).toISOString(),
});

/** A log of `n` events whose reads fail with `error` the first `failures` times. */
function flakyLog(n: number, failures: number, error: () => Error) {
  const reads: number[] = [];
  let left = failures;
  const read = async (from: number, limit: number): Promise<RecordedEvent[]> => {
    reads.push(from);
    if (left > 0) {
      left -= 1;
      throw error();
    }
    const page: RecordedEvent[] = [];
    for (let seq = from; seq <= n && page.length < limit; seq += 1) page.push(event(seq));
    return page;
  };
  return { read, reads };
}

/** Follows `log` from position 1: what it delivered, and the error it stopped on (null: none). */
function follow(log: ReturnType<typeof flakyLog>) {
  const got: number[] = [];
  const seen: { failed: unknown } = { failed: null };
  const sub = pollingSubscription(
    log.read,
    new Wakeups(),
    { from: 1, pollMs: 5, onError: (err) => (seen.failed = err) },
    (e) => void got.push(e.seq),
  );
  return { got, seen, sub };
}

const until = async (done: () => boolean): Promise<void> => {
  for (let i = 0; i < 200 && !done(); i += 1) await new Promise((r) => setTimeout(r, 10));
};

describe('a subscription while the store is unreachable', () => {
  it('reads again from the same position after STORE_UNAVAILABLE, and delivers every event once', async () => {
    const log = flakyLog(3, 2, () => new RunlogError('STORE_UNAVAILABLE', 'PostgreSQL is not answering'));
    const { got, seen, sub } = follow(log);
    await until(() => got.length === 3);
    await sub.close();
    expect(got).toEqual([1, 2, 3]);
    expect(log.reads.slice(0, 3)).toEqual([1, 1, 1]);
    expect(seen.failed).toBeNull();
  });

  it('stops at any other failed read and reports it through onError', async () => {
    const log = flakyLog(3, 1, () => new RunlogError('STORE_INPUT', 'a bad read'));
    const { got, seen, sub } = follow(log);
    await until(() => seen.failed !== null);
    await sub.close();
    expect((seen.failed as RunlogError).code).toBe('STORE_INPUT');
    expect(got).toEqual([]);
    expect(log.reads).toEqual([1]);
  });

  it('closes while it waits to read again, and reads no more', async () => {
    const log = flakyLog(3, 1000, () => new RunlogError('STORE_UNAVAILABLE', 'PostgreSQL is not answering'));
    const { sub } = follow(log);
    await until(() => log.reads.length >= 2);
    await sub.close();
    const reads = log.reads.length;
    await new Promise((r) => setTimeout(r, 50));
    expect(log.reads.length).toBe(reads);
  });
});
