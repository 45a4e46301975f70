// A queued execution whose claim found the store unreachable (PostgreSQL restarting) stays queued and is claimed
// again once it answers: dropping it left it to no node once every node had tried during the outage, and its
// caller waited until PLACEMENT_TIMEOUT (test/int/cluster/cluster-pg-restart.test.ts found it with real supervisors).
import { describe, expect, it } from 'vitest';
import {
  ExecutionQueue,
  EXECUTION_QUEUE,
  EXECUTION_QUEUED,
  type QueuedExecution,
} from '../../../src/supervisor/executions/execution-queue.ts';
import { RunlogError } from '../../../src/domain/errors.ts';
import type { ExecutionQueueDeps } from '../../../src/supervisor/executions/execution-queue.ts';

function queueWith(
  q: QueuedExecution,
  claim: (q: QueuedExecution) => Promise<unknown>,
  streamVersion: () => Promise<number> = async () => 0,
) {
  const event = {
    seq: 1,
    stream: EXECUTION_QUEUE,
    version: 1,
    type: EXECUTION_QUEUED,
    schema: 1,
    data: { ...q },
    meta: {},
    at: new Date().toISOString(),
  };
  const store = {
    readRecent: async (stream: string) => (stream === EXECUTION_QUEUE ? [event] : []),
    subscribe: () => ({ position: 1, close: async () => undefined }),
    lastSeq: async () => 1,
    streamVersion,
  } as unknown as ExecutionQueueDeps['store'];
  return queueOn(store, claim);
}

/** Node a's queue on `store`, with room for two, and what it logged. */
function queueOn(store: ExecutionQueueDeps['store'], claim: (q: QueuedExecution) => Promise<unknown>) {
  const logged: string[] = [];
  const queue = new ExecutionQueue({
    store,
    node: 'a',
    limit: 2,
    headStartMs: 0,
    nowMs: () => Date.now(),
    running: () => 0,
    appendFact: async () => undefined,
    claim,
    log: (m) => logged.push(m),
  });
  return { queue, logged };
}

const queued = (): QueuedExecution => ({
  executionId: 'exec_1',
  request: { timeoutMs: 1000 },
  from: 'a',
  node: null,
  headStart: false,
  claimBy: new Date(Date.now() + 60_000).toISOString(),
});

describe('the execution queue while the store is unreachable', () => {
  it('keeps an entry whose claim failed with STORE_UNAVAILABLE and claims it again', async () => {
    const calls: string[] = [];
    let claimed!: () => void;
    const done = new Promise<void>((r) => (claimed = r));
    const { queue } = queueWith(queued(), async (q) => {
      calls.push(q.executionId);
      if (calls.length === 1) throw new RunlogError('STORE_UNAVAILABLE', 'PostgreSQL is not answering');
      claimed();
    });
    await queue.start();
    await done;
    await queue.stop();
    expect(calls).toEqual(['exec_1', 'exec_1']);
  });

  it('keeps an entry whose stream could not be looked at when it arrived, and claims it once the store answers', async () => {
    // The chaos run found it: the queue's handler threw STORE_UNAVAILABLE, which stopped the node's subscription to
    // the queue for good, and an execution pinned to that node was never claimed.
    let looks = 0;
    let claimed!: () => void;
    const done = new Promise<void>((r) => (claimed = r));
    const { queue } = queueWith(
      queued(),
      async () => claimed(),
      async () => {
        looks += 1;
        if (looks === 1) throw new RunlogError('STORE_UNAVAILABLE', 'PostgreSQL is not answering');
        return 0;
      },
    );
    await queue.start();
    await done;
    await queue.stop();
    expect(looks).toBeGreaterThanOrEqual(2);
  });

  it('follows the log again from the event its subscription stopped at, and says so', async () => {
    const follows: { from: number; onError?: (err: unknown) => void }[] = [];
    const store = {
      readRecent: async () => [],
      lastSeq: async () => 10,
      streamVersion: async () => 0,
      subscribe: (o: { from: number; onError?: (err: unknown) => void }) => {
        follows.push(o);
        return { position: 12, close: async () => undefined };
      },
    } as unknown as ExecutionQueueDeps['store'];
    const { queue, logged } = queueOn(store, async () => undefined);
    await queue.start();
    expect(follows.map((f) => f.from)).toEqual([11]);
    follows[0]!.onError!(new Error('a handler failed'));
    for (let i = 0; i < 300 && follows.length < 2; i += 1) await new Promise((r) => setTimeout(r, 10));
    await queue.stop();
    expect(follows.map((f) => f.from)).toEqual([11, 13]);
    expect(logged.join('\n')).toContain('following the log stopped at 13 (a handler failed)');
  });

  it('drops an entry another node claimed first (ACTOR_EXISTS) and does not try it again', async () => {
    const calls: string[] = [];
    const { queue, logged } = queueWith(queued(), async (q) => {
      calls.push(q.executionId);
      throw new RunlogError('ACTOR_EXISTS', 'execution exec_1 already exists');
    });
    await queue.start();
    await new Promise((r) => setTimeout(r, 1500));
    await queue.stop();
    expect(calls).toEqual(['exec_1']);
    expect(logged).toEqual([]);
  });
});
