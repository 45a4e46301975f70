// Answers that match the log, without a cluster: when a caller's wait is over (settle-rules.ts), a wait that
// follows the log answers what another node settled (settle-waits.ts), a pinned execution's node watch
// (pinned-wait.ts), and the queue's withdrawals (execution-queue.ts) against an in-memory log. The cluster itself
// is test/int/cluster/cluster-log-answers.test.ts.
import { describe, expect, it } from 'vitest';
import { createBus } from '../../../src/supervisor/host/bus.ts';
import {
  awaitQueued,
  ExecutionQueue,
  EXECUTION_QUEUE,
  EXECUTION_QUEUED,
  EXECUTION_WITHDRAWN,
  withdrawnBefore,
  type QueuedExecution,
} from '../../../src/supervisor/executions/execution-queue.ts';
import { guardPinned, pinnedVerdict, unlessWaiting } from '../../../src/supervisor/cluster/pinned-wait.ts';
import { byState, executionEnded, instanceStopped, spawnSettled } from '../../../src/supervisor/host/settle-rules.ts';
import { SettleWaits } from '../../../src/supervisor/host/settle-waits.ts';
import { RunlogError } from '../../../src/domain/errors.ts';
import { collect } from '../../../src/store/port.ts';
import { fakeLog } from './fake-log.ts';

const view = (state: string, crash?: string) => ({
  state,
  context: { lastCrash: crash ? { reason: crash, message: 'x' } : null },
});

describe('when a wait is over (settle-rules)', () => {
  it(
    'a spawn is answered once it runs or failed for a reason of its own, ' +
      'not while the runner restarts an instance it lost, fenced or recovered',
    () => {
      for (const s of ['new', 'spawning', 'healthy', 'adopted']) expect(spawnSettled(view(s)), s).toBe(false);
      expect(spawnSettled(view('crashed.backoff', 'node-lost'))).toBe(false);
      expect(spawnSettled(view('crashed.backoff', 'self-fenced'))).toBe(false);
      // Picked up from the log after a store outage (its claim's reply was lost): the interrupted spawn restarts.
      expect(spawnSettled(view('crashed.backoff', 'supervisor-restart'))).toBe(false);
      expect(spawnSettled(view('crashed.down', 'supervisor-restart'))).toBe(true);
      expect(spawnSettled(view('crashed.down', 'self-fenced'))).toBe(true); // no restart: the log says it was stopped
      expect(spawnSettled(view('crashed.backoff', 'lifecycle-failed'))).toBe(true);
      expect(spawnSettled(view('running'))).toBe(true);
      expect(spawnSettled(view('crashed.backoff', 'exit'))).toBe(true);
      expect(spawnSettled(view('crashed.down', 'node-lost'))).toBe(true); // no restart: the log says its node was lost
      expect(spawnSettled(view('lost'))).toBe(true);
    },
  );
  it('a stop is over once stopped, lost or down; an execution once it has its outcome', () => {
    expect(['stopped', 'lost', 'crashed.down', 'stopping', 'running'].map(instanceStopped)).toEqual([
      true,
      true,
      true,
      false,
      false,
    ]);
    expect(['succeeded', 'failed', 'running'].map((s) => byState(executionEnded)(view(s)))).toEqual([
      true,
      true,
      false,
    ]);
  });
});

const requested = {
  request: { executionId: 'e1', uri: 'at://x/y/z', handler: 'h', input: null, timeoutMs: 1000 },
  deadline: null,
};

describe('a wait that follows the log (settle-waits)', () => {
  it("is answered by an outcome another node appended, which this node's bus never heard", async () => {
    const log = fakeLog();
    const waits = new SettleWaits({ bus: createBus(), store: log.store, followLog: true });
    let sent!: () => void;
    const requestIn = new Promise<void>((r) => (sent = r));
    const p = waits.waitFor('execution', 'e1', byState(executionEnded), 60_000, async () => {
      log.put('execution-e1', 'execution.requested', requested);
      sent();
    });
    await requestIn;
    log.put('execution-e1', 'execution.failed', { reason: 'runtime', code: 'X', message: 'from another node' });
    const v = await p;
    expect(v).toMatchObject({ id: 'e1', state: 'failed' });
    expect(log.subscribers()).toBe(0); // the wait let go of the log
  });

  it(
    'at its deadline reads the log again: settled there is an answer, ' +
      "not TIMEOUT; not settled is TIMEOUT with the log's state",
    async () => {
      const log = fakeLog();
      const waits = new SettleWaits({ bus: createBus(), store: log.store, followLog: false });
      const p = waits.waitFor(
        'execution',
        'e1',
        byState(executionEnded),
        30,
        async () => void log.put('execution-e1', 'execution.requested', requested),
      );
      log.put('execution-e1', 'execution.failed', { reason: 'runtime', code: 'X', message: 'unheard' }, false);
      await expect(p).resolves.toMatchObject({ state: 'failed' });
      const q = waits.waitFor(
        'execution',
        'e2',
        byState(executionEnded),
        30,
        async () =>
          void log.put('execution-e2', 'execution.requested', {
            ...requested,
            request: { ...requested.request, executionId: 'e2' },
          }),
      );
      await expect(q).rejects.toMatchObject({ code: 'TIMEOUT', message: expect.stringContaining('(state resolving)') });
    },
  );
});

describe("a queued execution's wait (awaitQueued)", () => {
  it('at its deadline reads the log again: ended there is an answer, not TIMEOUT', async () => {
    const log = fakeLog();
    const ended = async () =>
      (await collect(log.store.readStream('execution-e1'))).some((e) => e.type === 'execution.failed');
    const p = awaitQueued(log.store, 'e1', ended, Date.now() + 60_000, 30, () => Date.now());
    log.put('execution-e1', 'execution.requested', requested, false);
    log.put('execution-e1', 'execution.failed', { reason: 'runtime', code: 'X', message: 'unheard' }, false);
    await expect(p).resolves.toBeUndefined();
    await expect(
      awaitQueued(
        log.store,
        'e2',
        async () => false,
        Date.now() + 60_000,
        30,
        () => Date.now(),
      ),
    ).rejects.toMatchObject({ code: 'TIMEOUT' });
  });

  it("reads the log's head again when it was cut off, and hears the execution end", async () => {
    const log = fakeLog();
    let heads = 0;
    const store = {
      ...log.store,
      lastSeq: async () => {
        heads += 1;
        if (heads === 1) throw new RunlogError('STORE_UNAVAILABLE', 'PostgreSQL is not answering');
        return log.store.lastSeq();
      },
    };
    const ended = async () =>
      (await collect(log.store.readStream('execution-e1'))).some((e) => e.type === 'execution.failed');
    const p = awaitQueued(store, 'e1', ended, Date.now() + 60_000, 60_000, () => Date.now());
    while (heads < 2) await new Promise((r) => setTimeout(r, 20));
    log.put('execution-e1', 'execution.requested', requested);
    log.put('execution-e1', 'execution.failed', { reason: 'runtime', code: 'X', message: 'heard' });
    await expect(p).resolves.toBeUndefined();
  });
});

describe("a pinned execution's node (pinned-wait)", () => {
  it("gives up at the first look that finds the node not live, or once the caller's wait has run out; a live look resets the wait", () => {
    expect(pinnedVerdict({ downSinceMs: null }, true, 1000, 0)).toEqual({
      state: { downSinceMs: null },
      giveUp: false,
    });
    expect(pinnedVerdict({ downSinceMs: null }, false, 1000, 0)).toEqual({
      state: { downSinceMs: 1000 },
      giveUp: true,
    });
    expect(pinnedVerdict({ downSinceMs: null }, false, 1000, 5000).giveUp).toBe(false);
    expect(pinnedVerdict({ downSinceMs: 1000 }, false, 5999, 5000).giveUp).toBe(false);
    expect(pinnedVerdict({ downSinceMs: 1000 }, false, 6000, 5000).giveUp).toBe(true);
    expect(pinnedVerdict({ downSinceMs: 1000 }, true, 6000, 5000)).toEqual({
      state: { downSinceMs: null },
      giveUp: false,
    });
  });

  it('answers NODE_UNAVAILABLE after withdrawing; a claim that came before the withdrawal wins (no answer from the watch)', async () => {
    const withdrawn: string[] = [];
    const guard = guardPinned({
      node: 'b',
      executionId: 'e1',
      waitMs: 0,
      nowMs: () => 0,
      live: async () => false,
      claimed: async () => false,
      withdraw: async () => void withdrawn.push('e1'),
      log: () => undefined,
      everyMs: 1,
    });
    await expect(guard.gaveUp).rejects.toMatchObject({
      code: 'NODE_UNAVAILABLE',
      details: { node: 'b', executionId: 'e1' },
    });
    expect(withdrawn).toEqual(['e1']);
    let claimed = false;
    const lost = guardPinned({
      node: 'b',
      executionId: 'e2',
      waitMs: 0,
      nowMs: () => 0,
      live: async () => false,
      claimed: async () => claimed,
      withdraw: async () => void (claimed = true),
      log: () => undefined,
      everyMs: 1,
    });
    const outcome = await Promise.race([
      lost.gaveUp.then(
        () => 'answered',
        () => 'answered',
      ),
      new Promise((r) => setTimeout(() => r('still waiting'), 50)),
    ]);
    expect(outcome).toBe('still waiting');
    lost.stop();
  });

  it('waits for a node that is not live as long as the caller asked, looking again meanwhile', async () => {
    let now = 0;
    let looks = 0;
    const guard = guardPinned({
      node: 'b',
      executionId: 'e1',
      waitMs: 5000,
      nowMs: () => now,
      live: async () => ((looks += 1), (now += 1000), false),
      claimed: async () => false,
      withdraw: async () => undefined,
      log: () => undefined,
      everyMs: 1,
    });
    await expect(guard.gaveUp).rejects.toMatchObject({
      code: 'NODE_UNAVAILABLE',
      message: expect.stringContaining('waited 5000 ms'),
    });
    expect(looks).toBe(6); // down first seen at 1000, given up at 6000
  });

  it('a node not live when the call is taken is NODE_UNAVAILABLE at once, unless the caller waits for it on a cluster', () => {
    const down = new RunlogError('NODE_UNAVAILABLE', 'node b is not live');
    expect(() => unlessWaiting(down, 'b', undefined, true)).toThrow(down);
    expect(() => unlessWaiting(down, 'b', 1000, false)).toThrow(down);
    expect(unlessWaiting(down, 'b', 1000, true)).toBe('b');
    const unknown = new RunlogError('NODE_UNKNOWN', 'no node named b');
    expect(() => unlessWaiting(unknown, 'b', 1000, true)).toThrow(unknown);
  });
});

const queued = (id: string, over: Partial<QueuedExecution> = {}): QueuedExecution => ({
  executionId: id,
  request: { executionId: id, timeoutMs: 1000 },
  from: 'a',
  node: 'b',
  headStart: false,
  claimBy: new Date(Date.now() + 60_000).toISOString(),
  ...over,
});

describe('withdrawn executions (execution-queue)', () => {
  const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));
  function nodeB(log: ReturnType<typeof fakeLog>, cancelled: string[]) {
    return new ExecutionQueue({
      store: log.store,
      node: 'b',
      limit: 5,
      headStartMs: 0,
      nowMs: () => Date.now(),
      running: () => 0,
      appendFact: async (stream, evs) => {
        for (const e of evs) log.put(stream, e.type, e.data);
      },
      claim: async (x) => ({ event: log.put(`execution-${x.executionId}`, 'execution.requested', { node: 'b' }) }),
      cancel: async (id) => void cancelled.push(id),
      log: () => undefined,
    });
  }

  it('a node that comes back does not claim what its caller withdrew', async () => {
    const log = fakeLog();
    const cancelled: string[] = [];
    log.put(EXECUTION_QUEUE, EXECUTION_QUEUED, { ...queued('gone') });
    log.put(EXECUTION_QUEUE, EXECUTION_QUEUED, { ...queued('kept') });
    const b = nodeB(log, cancelled);
    await b.withdraw({ executionId: 'gone', reason: 'node-unavailable', claimBy: queued('gone').claimBy });
    await b.start();
    await tick(20);
    expect(await log.store.streamVersion('execution-gone')).toBe(0);
    expect(await log.store.streamVersion('execution-kept')).toBe(1);
    await b.stop();
  });

  it('a claim that lands after the withdrawal in log order is cancelled before it runs; one before it is not', async () => {
    const log = fakeLog();
    const cancelled: string[] = [];
    const b = nodeB(log, cancelled);
    await b.start();
    // The withdrawal is in the log, but b has not read it when it claims (put without telling subscribers).
    log.put(
      EXECUTION_QUEUE,
      EXECUTION_WITHDRAWN,
      { executionId: 'raced', reason: 'node-unavailable', claimBy: queued('raced').claimBy },
      false,
    );
    log.put(EXECUTION_QUEUE, EXECUTION_QUEUED, { ...queued('raced') });
    await tick(20);
    expect(await log.store.streamVersion('execution-raced')).toBe(1);
    expect(cancelled).toEqual(['raced']);
    const q = log.put(EXECUTION_QUEUE, EXECUTION_QUEUED, { ...queued('first') });
    await tick(20);
    const claim = log.events.find((e) => e.stream === 'execution-first')!;
    log.put(EXECUTION_QUEUE, EXECUTION_WITHDRAWN, {
      executionId: 'first',
      reason: 'node-unavailable',
      claimBy: queued('first').claimBy,
    });
    expect(claim.seq).toBeGreaterThan(q.seq);
    expect(withdrawnBefore(await log.store.readRecent(EXECUTION_QUEUE), 'first', claim.seq)).toBe(false);
    expect(cancelled).toEqual(['raced']);
    await b.stop();
  });
});
