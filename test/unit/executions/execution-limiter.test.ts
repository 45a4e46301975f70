// The bound on executions running at once on one supervisor (the operator policy's executions): on a simulated
// clock, so waiting out a deadline takes no real time.
import { describe, expect, it } from 'vitest';
import { ExecutionLimiter } from '../../../src/supervisor/executions/execution-limiter.ts';
import { DEFAULT_OPERATOR_POLICY, parseOperatorPolicy } from '../../../src/domain/at-run/operator-policy.ts';
import { SimulatedClock } from '../../support/clock.ts';

/** A task the test ends when it wants: its promise, and how to end it. */
function gate(): { promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

const flush = () => new Promise((r) => setImmediate(r));

describe('ExecutionLimiter', () => {
  it('never runs more than maxRunning at once; the rest start first come, first served as places free', async () => {
    const clock = new SimulatedClock();
    const limiter = new ExecutionLimiter({ maxRunning: 2, maxQueued: 10 }, clock);
    const gates = Array.from({ length: 5 }, gate);
    let now = 0;
    let most = 0;
    const started: number[] = [];
    const runs = gates.map((g, i) =>
      limiter.run(clock.nowMs() + 60_000, async () => {
        started.push(i);
        most = Math.max(most, ++now);
        await g.promise;
        now -= 1;
        return i;
      }),
    );
    await flush();
    expect(started).toEqual([0, 1]);
    expect([limiter.running, limiter.queued]).toEqual([2, 3]);
    gates[1]!.open();
    await flush();
    expect(started).toEqual([0, 1, 2]);
    for (const g of gates) g.open();
    expect(await Promise.all(runs)).toEqual([0, 1, 2, 3, 4]);
    expect(started).toEqual([0, 1, 2, 3, 4]);
    expect(most).toBe(2);
    expect([limiter.running, limiter.queued]).toEqual([0, 0]);
  });

  it('refuses one more than the line holds at once with EXECUTION_QUEUE_FULL, without running it', async () => {
    const clock = new SimulatedClock();
    const limiter = new ExecutionLimiter({ maxRunning: 1, maxQueued: 1 }, clock);
    const g = gate();
    const ran: string[] = [];
    const first = limiter.run(clock.nowMs() + 60_000, () => (ran.push('first'), g.promise));
    const second = limiter.run(clock.nowMs() + 60_000, async () => void ran.push('second'));
    await expect(limiter.run(clock.nowMs() + 60_000, async () => void ran.push('third'))).rejects.toMatchObject({
      code: 'EXECUTION_QUEUE_FULL',
      details: { maxRunning: 1, maxQueued: 1 },
    });
    g.open();
    await Promise.all([first, second]);
    expect(ran).toEqual(['first', 'second']);
  });

  it(
    'one whose deadline passes in line is refused with EXECUTION_QUEUE_TIMEOUT and never runs; ' +
      'the next in line gets its place',
    async () => {
      const clock = new SimulatedClock();
      const limiter = new ExecutionLimiter({ maxRunning: 1, maxQueued: 5 }, clock);
      const g = gate();
      const ran: string[] = [];
      const first = limiter.run(clock.nowMs() + 60_000, () => (ran.push('first'), g.promise));
      const hurried = limiter.run(clock.nowMs() + 3000, async () => void ran.push('hurried'));
      const patient = limiter.run(clock.nowMs() + 60_000, async (left) => void ran.push(`patient ${left}`));
      clock.advance(2999);
      await flush();
      expect(limiter.queued).toBe(2);
      clock.advance(1);
      await expect(hurried).rejects.toMatchObject({
        code: 'EXECUTION_QUEUE_TIMEOUT',
        details: { waitedMs: 3000, maxRunning: 1 },
      });
      expect(limiter.queued).toBe(1);
      clock.advance(7000);
      g.open();
      await Promise.all([first, patient]);
      // The wait counted against its deadline: 10 s of its 60 s were spent in line.
      expect(ran).toEqual(['first', 'patient 50000']);
      expect(clock.pending).toBe(0);
    },
  );

  it('a run that throws frees its place too', async () => {
    const limiter = new ExecutionLimiter({ maxRunning: 1, maxQueued: 0 }, new SimulatedClock());
    await expect(limiter.run(Date.now() + 1000, () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await limiter.run(Date.now() + 1000, async () => 'next')).toBe('next');
  });
});

describe('operator policy: executions', () => {
  it('defaults to 8 running and 256 waiting; takes other values and refuses bad ones, naming each', () => {
    expect(DEFAULT_OPERATOR_POLICY.executions).toEqual({ maxRunning: 8, maxQueued: 256 });
    expect(parseOperatorPolicy({ executions: { maxRunning: 2 } }).executions).toEqual({
      maxRunning: 2,
      maxQueued: 256,
    });
    expect(parseOperatorPolicy({ executions: { maxQueued: 0 } }).executions).toEqual({ maxRunning: 8, maxQueued: 0 });
    try {
      parseOperatorPolicy({ executions: { maxRunning: 0, maxQueued: -1, burst: 3 } });
      expect.unreachable();
    } catch (err) {
      expect((err as { code: string }).code).toBe('OPERATOR_POLICY_INVALID');
      expect((err as { issues: string[] }).issues).toEqual(
        expect.arrayContaining([
          expect.stringMatching(/executions\.burst/),
          expect.stringMatching(/executions\.maxRunning/),
          expect.stringMatching(/executions\.maxQueued/),
        ]),
      );
    }
  });
});
