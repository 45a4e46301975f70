// Self-fencing (src/actors/self-fence.ts): the pure decision, the fence's actions on a simulated clock, and the
// renewal signal it is fed (src/store/postgres/lease-renewals.ts).
import { describe, expect, it } from 'vitest';
import { fenceStep, SelfFence, selfFenceAfterMs, selfFenceCheckMs, SELF_FENCE_FRACTION } from '../../../src/actors/self-fence.ts';
import { onRenewals } from '../../../src/store/postgres/lease-renewals.ts';
import type { Leases } from '../../../src/store/postgres/pg-leases.ts';

const TTL = 2000;

describe('fenceStep', () => {
  it('fences once the last answered renewal is the fraction of the TTL old, and not a millisecond sooner', () => {
    const after = selfFenceAfterMs(TTL);
    expect(after).toBe(TTL * SELF_FENCE_FRACTION);
    expect(after).toBeLessThan(TTL);
    expect(fenceStep({ nowMs: 1000 + after - 1, renewedAtMs: 1000, ttlMs: TTL, fenced: false })).toBe('none');
    expect(fenceStep({ nowMs: 1000 + after, renewedAtMs: 1000, ttlMs: TTL, fenced: false })).toBe('fence');
    // Frozen far past the TTL: the first look after waking fences.
    expect(fenceStep({ nowMs: 1000 + 10 * TTL, renewedAtMs: 1000, ttlMs: TTL, fenced: false })).toBe('fence');
  });

  it('stays fenced while renewals are overdue, and lifts it once one sent since is answered', () => {
    expect(fenceStep({ nowMs: 5000, renewedAtMs: 1000, ttlMs: TTL, fenced: true })).toBe('none');
    expect(fenceStep({ nowMs: 5000, renewedAtMs: 4900, ttlMs: TTL, fenced: true })).toBe('unfence');
    expect(fenceStep({ nowMs: 5000, renewedAtMs: 4900, ttlMs: TTL, fenced: false })).toBe('none');
  });

  it('looks often enough that the fence lands well inside the margin the fraction leaves', () => {
    for (const ttl of [300, 2000, 6000, 15_000, 120_000]) {
      expect(selfFenceCheckMs(ttl)).toBeGreaterThan(0);
      expect(selfFenceAfterMs(ttl) + selfFenceCheckMs(ttl)).toBeLessThanOrEqual(ttl - ttl / 8);
    }
  });
});

function fenceOn(sandboxes: string[]) {
  let now = 0;
  const killed: string[] = [];
  const logs: string[] = [];
  let resumed = 0;
  const fence = new SelfFence(
    {
      ttlMs: TTL,
      nowMs: () => now,
      sandboxed: () => [...sandboxes],
      relinquish: async (id) => {
        killed.push(id);
        sandboxes.splice(sandboxes.indexOf(id), 1);
      },
      resumed: () => void (resumed += 1),
      log: (m) => logs.push(m),
    },
    0,
  );
  return { fence, killed, logs, resumed: () => resumed, at: (ms: number) => (now = ms) };
}

describe('SelfFence', () => {
  it("stops every instance sandbox of the node when renewals go unanswered, before the TTL, and only then", async () => {
    const f = fenceOn(['i1', 'i2']);
    f.at(1400);
    f.fence.renewed(700); // answered: renewals go on
    f.at(700 + selfFenceAfterMs(TTL) - 1);
    f.fence.check();
    expect(f.killed).toEqual([]);
    expect(f.fence.isFenced).toBe(false);
    f.at(700 + selfFenceAfterMs(TTL));
    f.fence.check();
    await Promise.resolve();
    expect(f.fence.isFenced).toBe(true);
    expect(f.killed.sort()).toEqual(['i1', 'i2']);
    expect(f.logs.join('\n')).toMatch(/self-fence: no lease renewal answered for 1500 ms/);
  });

  it('while fenced, a sandbox that appears (a spawn that ended meanwhile) is stopped at the next look', async () => {
    const sandboxes = ['i1'];
    const f = fenceOn(sandboxes);
    f.at(1600);
    f.fence.check();
    await Promise.resolve();
    expect(f.killed).toEqual(['i1']);
    sandboxes.push('i3');
    f.at(1800);
    f.fence.check();
    await Promise.resolve();
    expect(f.killed).toEqual(['i1', 'i3']);
  });

  it('a renewal answered again lifts the fence and asks for a reconcile, after the beat that renewed', async () => {
    const f = fenceOn(['i1']);
    f.at(3000);
    f.fence.check();
    expect(f.fence.isFenced).toBe(true);
    f.at(3100);
    f.fence.renewed(3050);
    expect(f.fence.isFenced).toBe(false);
    expect(f.resumed()).toBe(0); // not within the renewal's own turn: the beat reports lost leases first
    await new Promise((r) => setImmediate(r));
    expect(f.resumed()).toBe(1);
    // An answer to a renewal sent before the fence, older than the fraction, does not lift it.
    f.at(6000);
    f.fence.check();
    expect(f.fence.isFenced).toBe(true);
    f.fence.renewed(3060);
    expect(f.fence.isFenced).toBe(true);
  });
});

describe('onRenewals', () => {
  it('signals each renewal PostgreSQL answered with the time it was sent; a failed one signals nothing', async () => {
    let now = 100;
    let fail = false;
    const leases = {
      async renew(): Promise<string[]> {
        now += 400; // the answer takes a while: the signal is the sending time
        if (fail) throw new Error('connection terminated');
        return ['instance-x'];
      },
    } as unknown as Leases;
    const seen: number[] = [];
    const off = onRenewals(leases, () => now, (t) => seen.push(t));
    expect(await leases.renew()).toEqual(['instance-x']);
    expect(seen).toEqual([100]);
    fail = true;
    await expect(leases.renew()).rejects.toThrow('connection terminated');
    expect(seen).toEqual([100]);
    off();
    fail = false;
    await leases.renew();
    expect(seen).toEqual([100]);
  });
});
