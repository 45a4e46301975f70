// Self-fencing (src/supervisor/cluster/self-fence.ts): the pure decision, the fence's actions on a simulated clock, the
// renewal reports it is fed (Leases' RenewalListener, src/store/postgres/leases.ts) and which renewal failures
// prove the server down (src/store/postgres/lease-renewals.ts).
import { describe, expect, it } from 'vitest';
import {
  fenceStep,
  RenewalRelay,
  SelfFence,
  selfFenceAfterMs,
  selfFenceCheckMs,
  SELF_FENCE_FRACTION,
} from '../../../src/supervisor/cluster/self-fence.ts';
import { provesServerDown, serverUnavailable } from '../../../src/store/postgres/lease-renewals.ts';
import { StoreUnavailableError, type PgEventStore } from '../../../src/store/postgres/event-store.ts';
import { Leases } from '../../../src/store/postgres/leases.ts';

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

  it(
    'counts a renewal that found the server down as safe time: ' +
      'the fence falls the fraction after the later of that and the last answer',
    () => {
      const after = selfFenceAfterMs(TTL);
      // Answered at 1000, the server refused at 1700: no fence until 1700 + the fraction.
      expect(fenceStep({ nowMs: 1000 + after, renewedAtMs: 1000, downAtMs: 1700, ttlMs: TTL, fenced: false })).toBe(
        'none',
      );
      expect(fenceStep({ nowMs: 1700 + after - 1, renewedAtMs: 1000, downAtMs: 1700, ttlMs: TTL, fenced: false })).toBe(
        'none',
      );
      expect(fenceStep({ nowMs: 1700 + after, renewedAtMs: 1000, downAtMs: 1700, ttlMs: TTL, fenced: false })).toBe(
        'fence',
      );
    },
  );

  it('a proof of the server down older than the last answered renewal changes nothing', () => {
    const after = selfFenceAfterMs(TTL);
    expect(fenceStep({ nowMs: 1000 + after - 1, renewedAtMs: 1000, downAtMs: 900, ttlMs: TTL, fenced: false })).toBe(
      'none',
    );
    expect(fenceStep({ nowMs: 1000 + after, renewedAtMs: 1000, downAtMs: 900, ttlMs: TTL, fenced: false })).toBe(
      'fence',
    );
  });

  it('a proof of the server down never lifts a fence: only an answered renewal does', () => {
    expect(fenceStep({ nowMs: 5000, renewedAtMs: 1000, downAtMs: 4990, ttlMs: TTL, fenced: true })).toBe('none');
    expect(fenceStep({ nowMs: 5000, renewedAtMs: 4900, downAtMs: 4990, ttlMs: TTL, fenced: true })).toBe('unfence');
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
  it('stops every instance sandbox of the node when renewals go unanswered, before the TTL, and only then', async () => {
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

const pgError = (code: string, message: string) => Object.assign(new Error(message), { code, severity: 'FATAL' });
const wrapped = (err: unknown) =>
  new StoreUnavailableError('postgres://db (schema runlog)', String((err as Error).message), { cause: err });

describe('provesServerDown', () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

  it('a refused connection proves the server down (alone, wrapped, or among the addresses tried)', () => {
    expect(provesServerDown(refused)).toBe(true);
    expect(provesServerDown(wrapped(refused))).toBe(true);
    expect(
      provesServerDown(
        new AggregateError([Object.assign(new Error('connect ENETUNREACH ::1'), { code: 'ENETUNREACH' }), refused]),
      ),
    ).toBe(true);
    expect(serverUnavailable(wrapped(refused))).toBe(true);
  });

  it("the server's 57P01, 57P02, 57P03 and a session it closed prove nothing for the leases, but are tried again soon", () => {
    // 57P01 also ends one session of a server that runs on; 57P02 and a closed session also come from one backend's
    // crash (recovered in place: the postmaster's start time stays); 57P03 comes during a smart shutdown that
    // still serves others, or after the postmaster's start.
    for (const err of [
      pgError('57P01', 'terminating connection due to administrator command'),
      pgError('57P02', 'terminating connection because of crash of another server process'),
      pgError('57P03', 'the database system is shutting down'),
      pgError('57P03', 'the database system is starting up'),
      new Error('Connection terminated unexpectedly'),
    ]) {
      expect(provesServerDown(wrapped(err)), err.message).toBe(false);
      expect(serverUnavailable(wrapped(err)), err.message).toBe(true);
    }
  });

  it('timeouts, resets, unreachable hosts and SQL errors prove nothing and are not tried again (a cut network fences)', () => {
    for (const err of [
      ...['ETIMEDOUT', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE'].map((code) =>
        Object.assign(new Error(code), { code }),
      ),
      new Error('Connection terminated due to connection timeout'),
      new Error('Query read timeout'),
      pgError('55P03', 'canceling statement due to lock timeout'),
    ]) {
      expect(provesServerDown(wrapped(err)), err.message).toBe(false);
      expect(serverUnavailable(wrapped(err)), err.message).toBe(false);
    }
    expect(provesServerDown(undefined)).toBe(false);
  });
});

describe("the fence fed by Leases' renewal reports", () => {
  /** Leases on a fake store whose lease statement answers or fails as told, the clock moving 400 ms per statement. */
  function leasesOn(answer: () => unknown[]) {
    let now = 100;
    const pg = {
      leaseSql: async () => {
        now += 400; // the answer takes a while: the report carries the sending time
        return answer();
      },
    } as unknown as PgEventStore;
    const relay = new RenewalRelay();
    const leases = new Leases(pg, 'n', TTL, TTL, { renewals: relay, nowMs: () => now, downRetryMs: 1 });
    leases.held.set('instance-x', 7);
    return { leases, relay, now: () => now, set: (ms: number) => (now = ms) };
  }

  it('an answered renewal is reported with its sending time; a timeout is not, and the fence falls', async () => {
    let fail: Error | null = null;
    const l = leasesOn(() => {
      if (fail) throw fail;
      return [{ stream: 'instance-x' }];
    });
    const f = fenceOn(['i1']);
    l.relay.connect(f.fence);
    expect(await l.leases.renew()).toEqual([]);
    f.at(100 + selfFenceAfterMs(TTL) - 1);
    f.fence.check();
    expect(f.fence.isFenced).toBe(false);
    fail = Object.assign(new Error('Query read timeout'), { code: 'ETIMEDOUT' });
    await expect(l.leases.renew()).rejects.toThrow('timeout');
    f.at(100 + selfFenceAfterMs(TTL));
    f.fence.check();
    expect(f.fence.isFenced).toBe(true);
  });

  it(
    'a renewal the server refuses after the last answer is tried again soon, ' +
      'and moves the fence to the fraction after the last refusal',
    async () => {
      let refusals = 0;
      const l = leasesOn(() => {
        if (refusals > 0) {
          refusals -= 1;
          throw wrapped(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }));
        }
        return [{ stream: 'instance-x' }];
      });
      const f = fenceOn(['i1']);
      l.relay.connect(f.fence);
      await l.leases.renew(); // sent at 100, answered at 500
      refusals = 1_000;
      l.set(1000);
      // Sent at 1000 (refused), 1400 (refused): a beat (TTL/3) has passed, and it fails.
      await expect(l.leases.renew()).rejects.toThrow(/ECONNREFUSED/);
      expect(refusals).toBe(998);
      f.at(100 + selfFenceAfterMs(TTL));
      f.fence.check();
      expect(f.fence.isFenced).toBe(false);
      f.at(1400 + selfFenceAfterMs(TTL) - 1);
      f.fence.check();
      expect(f.fence.isFenced).toBe(false);
      f.at(1400 + selfFenceAfterMs(TTL));
      f.fence.check();
      await Promise.resolve();
      expect(f.fence.isFenced).toBe(true);
      expect(f.killed).toEqual(['i1']);
      expect(f.logs.join('\n')).toMatch(/PostgreSQL last seen down 1500 ms ago/);
    },
  );

  it('a renewal the server refuses is answered once it is back, within the same call', async () => {
    let refusals = 1;
    const l = leasesOn(() => {
      if (refusals-- > 0)
        throw wrapped(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }));
      return [{ stream: 'instance-x' }];
    });
    const f = fenceOn(['i1']);
    l.relay.connect(f.fence);
    l.set(0);
    expect(await l.leases.renew()).toEqual([]); // sent at 0 (refused), 400 (answered)
    expect(l.now()).toBe(800);
    f.at(400 + selfFenceAfterMs(TTL) - 1);
    f.fence.check();
    expect(f.fence.isFenced).toBe(false);
  });

  for (const [what, err] of [
    ['shut down (57P01)', pgError('57P01', 'terminating connection due to administrator command')],
    ['crashed (57P02)', pgError('57P02', 'terminating connection because of crash of another server process')],
    ['starting up (57P03)', pgError('57P03', 'the database system is starting up')],
    ['closing the session', new Error('Connection terminated unexpectedly')],
  ] as const) {
    it(`a renewal that finds the server ${what} is tried again, but the fence still falls the fraction after the last answer`, async () => {
      let down = false;
      const l = leasesOn(() => {
        if (down) throw wrapped(err);
        return [{ stream: 'instance-x' }];
      });
      const f = fenceOn(['i1']);
      l.relay.connect(f.fence);
      await l.leases.renew(); // sent at 100, answered
      down = true;
      l.set(1000);
      await expect(l.leases.renew()).rejects.toThrow();
      expect(l.now()).toBe(1800); // tried twice
      f.at(100 + selfFenceAfterMs(TTL));
      f.fence.check();
      expect(f.fence.isFenced).toBe(true);
    });
  }

  it('reports that arrive before the fence starts are handed to it when it does', () => {
    const relay = new RenewalRelay();
    relay.answered(300);
    relay.failed(900, Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }));
    relay.failed(1200, Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' }));
    const f = fenceOn(['i1']);
    relay.connect(f.fence);
    f.at(900 + selfFenceAfterMs(TTL) - 1);
    f.fence.check();
    expect(f.fence.isFenced).toBe(false);
    f.at(900 + selfFenceAfterMs(TTL));
    f.fence.check();
    expect(f.fence.isFenced).toBe(true);
    relay.connect(null);
    relay.answered(5000); // after the stop: kept for nobody, the fence hears nothing
    expect(f.fence.isFenced).toBe(true);
  });
});
