// The decision a materializer makes about another process's lock on a volume (materialize-lock.ts): wait for a holder
// that still works on it, take over from one that is gone. Pure: /proc's answer about the holder's pid is an input.
import { describe, expect, it } from 'vitest';
import {
  holderLabels,
  judgeLockHolder,
  parseHolder,
  processIdentity,
  processStart,
  type LockHolder,
} from '../../../src/adapters/docker/materialize-lock.ts';

const self = { pid: 100, pidStart: '5000', bootId: 'boot-a', pidNs: 'pid:[1]', token: 'mine' };
const holder = (over: Partial<LockHolder> = {}): LockHolder => ({
  pid: 200,
  pidStart: '6000',
  bootId: 'boot-a',
  pidNs: 'pid:[1]',
  token: 'theirs',
  at: 1_000_000,
  ...over,
});
const limits = { staleAfterMs: 60_000, maxHoldMs: 600_000 };
const judge = (h: LockHolder | null, holderStart: string | null | undefined, nowMs = 1_000_500) =>
  judgeLockHolder({ holder: h, self, holderStart, nowMs, ...limits });

describe('judgeLockHolder', () => {
  it('a holder seen running with the start time it recorded is alive: wait', () => {
    expect(judge(holder(), '6000').holder).toBe('alive');
  });

  it('a holder whose pid is not running is gone (kill -9 mid-copy)', () => {
    expect(judge(holder(), null)).toEqual({ holder: 'gone', why: 'pid 200 is not running' });
  });

  it('a holder whose pid now runs another process (pid reused) is gone', () => {
    expect(judge(holder(), '7777').holder).toBe('gone');
  });

  it('a running holder that kept the lock past maxHoldMs is gone (hung, or its release failed)', () => {
    expect(judge(holder(), '6000', 1_000_000 + 600_001).holder).toBe('gone');
    expect(judge(holder(), '6000', 1_000_000 + 600_000).holder).toBe('alive');
  });

  it("this materializer's own lock is left over (one copy per volume at a time in a materializer)", () => {
    expect(judge(holder({ token: 'mine' }), '6000').holder).toBe('gone');
  });

  it('a holder on another kernel or pid namespace is waited for up to staleAfterMs, whatever /proc says here', () => {
    for (const h of [holder({ bootId: 'boot-b' }), holder({ pidNs: 'pid:[2]' }), holder({ pidStart: null })]) {
      expect(judge(h, undefined, 1_000_000 + 60_000).holder).toBe('alive');
      expect(judge(h, undefined, 1_000_000 + 60_001).holder).toBe('gone');
    }
  });

  it('a lock whose labels do not name a holder is gone; a garbled time counts as expired', () => {
    expect(judge(null, undefined).holder).toBe('gone');
    expect(judge(holder({ bootId: 'boot-b', at: Number.NaN }), undefined).holder).toBe('gone');
  });
});

describe('the holder labels', () => {
  it('round-trip, and labels missing the pid or token name no holder', () => {
    const labels = holderLabels({ pid: 42, pidStart: '99', bootId: 'b', pidNs: 'pid:[9]' }, 'tok', 1234);
    expect(parseHolder(labels)).toEqual({
      pid: 42,
      pidStart: '99',
      bootId: 'b',
      pidNs: 'pid:[9]',
      token: 'tok',
      at: 1234,
    });
    expect(parseHolder({ ...labels, 'runlog.lock-pid': 'x' })).toBeNull();
    expect(parseHolder({ ...labels, 'runlog.lock-token': '' })).toBeNull();
    expect(parseHolder(holderLabels({ pid: 42, pidStart: null, bootId: null, pidNs: null }, 'tok', 1))).toMatchObject({
      pidStart: null,
      bootId: null,
      pidNs: null,
    });
  });

  it("this process's identity is what /proc says of its pid", async () => {
    const me = await processIdentity();
    expect(me.pid).toBe(process.pid);
    expect(me.pidStart).toMatch(/^\d+$/);
    expect(await processStart(process.pid)).toBe(me.pidStart);
    expect(await processStart(2 ** 31 - 1)).toBeNull();
  });
});
