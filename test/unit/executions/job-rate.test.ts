// The per-repo rate of job records (jobs.perRepoPerMinute): a token bucket per repo on an injected clock.

import { describe, expect, it } from 'vitest';
import { JobRate } from '../../../src/domain/at-run/job-rate.ts';

const ALICE = 'did:plc:alice00000000000000000000';
const BOB = 'did:plc:bob0000000000000000000000';

function clock(start = 1_000_000): { now: () => number; advance: (ms: number) => void; set: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => (t += ms), set: (ms) => (t = ms) };
}

describe('JobRate', () => {
  it('allows a burst of perRepoPerMinute jobs from one repo, then refuses with JOB_RATE_LIMITED', () => {
    const c = clock();
    const rate = new JobRate({ perRepoPerMinute: 3 }, c.now);
    expect([1, 2, 3].map(() => rate.take(ALICE))).toEqual([
      { allow: true, remaining: 2 },
      { allow: true, remaining: 1 },
      { allow: true, remaining: 0 },
    ]);
    const refused = rate.take(ALICE);
    expect(refused).toEqual({
      allow: false,
      code: 'JOB_RATE_LIMITED',
      retryAfterMs: 20_000,
      message: `repo ${ALICE} submitted more than 3 jobs in a minute (this runner's jobs.perRepoPerMinute); retry in 20000 ms`,
    });
  });

  it('keeps one bucket per repo: one repo over its rate does not slow another', () => {
    const rate = new JobRate({ perRepoPerMinute: 1 }, clock().now);
    expect(rate.take(ALICE).allow).toBe(true);
    expect(rate.take(ALICE).allow).toBe(false);
    expect(rate.take(BOB).allow).toBe(true);
  });

  it('refills evenly over the minute, never above the burst', () => {
    const c = clock();
    const rate = new JobRate({ perRepoPerMinute: 60 }, c.now);
    for (let i = 0; i < 60; i++) expect(rate.take(ALICE).allow).toBe(true);
    expect(rate.take(ALICE)).toMatchObject({ allow: false, retryAfterMs: 1000 });
    c.advance(999);
    expect(rate.take(ALICE)).toMatchObject({ allow: false, retryAfterMs: 1 });
    c.advance(1);
    expect(rate.take(ALICE)).toEqual({ allow: true, remaining: 0 });
    c.advance(10 * 60_000);
    expect(rate.take(ALICE)).toEqual({ allow: true, remaining: 59 });
  });

  it('a refused job takes no token: a repo that keeps trying gets in as soon as one has refilled', () => {
    const c = clock();
    const rate = new JobRate({ perRepoPerMinute: 2 }, c.now);
    rate.take(ALICE);
    rate.take(ALICE);
    for (let i = 0; i < 100; i++) {
      c.advance(100);
      expect(rate.take(ALICE).allow).toBe(false);
    }
    c.advance(20_000); // 30 s in all: one token back
    expect(rate.take(ALICE).allow).toBe(true);
  });

  it('a clock that steps back refills nothing', () => {
    const c = clock(5_000_000);
    const rate = new JobRate({ perRepoPerMinute: 1 }, c.now);
    expect(rate.take(ALICE).allow).toBe(true);
    c.set(1_000);
    expect(rate.take(ALICE).allow).toBe(false);
    c.set(5_000_000 + 60_000);
    expect(rate.take(ALICE).allow).toBe(true);
  });

  it('forgets repos whose bucket has refilled, so many quiet repos do not grow the map without bound', () => {
    const c = clock();
    const rate = new JobRate({ perRepoPerMinute: 10 }, c.now);
    for (let i = 0; i < 1000; i++) rate.take(`did:plc:quiet${i}`);
    expect(rate.tracked).toBe(1000);
    c.advance(60_000);
    for (let i = 0; i < 1100; i++) rate.take(`did:plc:busy${i}`);
    // The sweep at 1025 dropped the refilled quiet ones; the busy ones stay tracked.
    expect(rate.tracked).toBe(1100);
    expect(rate.take('did:plc:quiet1')).toEqual({ allow: true, remaining: 9 });
  });
});
