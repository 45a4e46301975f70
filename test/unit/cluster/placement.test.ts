// Placement's rules without a cluster: which node a spawn goes to (chooseNode), what a SQLite log (one node)
// accepts as `node`, and the execution queue's claiming (limit, head start, pinned node, claim deadline) against
// an in-memory log. The cluster itself (hand-over between real supervisors on PostgreSQL, racing claims) is
// test/int/cluster/cluster-placement-pg.test.ts.
import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import type { EffectHandlers } from '../../../src/supervisor/host/actor-host.ts';
import {
  ExecutionQueue,
  EXECUTION_QUEUE,
  EXECUTION_QUEUED,
  type QueuedExecution,
} from '../../../src/supervisor/executions/execution-queue.ts';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import { FencedError } from '../../../src/domain/errors.ts';
import type { Materialized, Resolved } from '../../../src/domain/execution-events.ts';
import { chooseNode } from '../../../src/domain/placement.ts';
import { partial } from '../../support/partial.ts';
import { tempDir } from '../../support/tmp.ts';
import { fakeLog } from '../supervisor/fake-log.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

describe('chooseNode', () => {
  const nodes = [
    { node: 'a', live: true, instances: 3 },
    { node: 'b', live: true, instances: 1 },
    { node: 'c', live: false, instances: 0 },
    { node: 'd', live: true, instances: 1 },
  ];
  it('any: the live node with the fewest live instances (a dead one is never chosen); on a tie this node, then by name', () => {
    expect(chooseNode('any', nodes, 'a')).toBe('b');
    expect(chooseNode('any', nodes, 'd')).toBe('d');
    expect(
      chooseNode(
        'any',
        [
          { node: 'x', live: true, instances: 0 },
          { node: 'y', live: true, instances: 0 },
        ],
        'z',
      ),
    ).toBe('x');
  });
  it('a named node must be known and live', () => {
    expect(chooseNode('a', nodes, 'b')).toBe('a');
    expect(() => chooseNode('c', nodes, 'a')).toThrow(expect.objectContaining({ code: 'NODE_UNAVAILABLE' }));
    expect(() => chooseNode('zz', nodes, 'a')).toThrow(expect.objectContaining({ code: 'NODE_UNKNOWN' }));
    expect(() => chooseNode('any', [{ node: 'c', live: false, instances: 0 }], 'a')).toThrow(
      expect.objectContaining({ code: 'NODE_UNAVAILABLE' }),
    );
  });
});

const URI = 'at://did:plc:aaaaaaaaaaaaaaaaaaaaaaaa/dev.mainasara.at-run.beta.v2.code/greet';
const fakeExecution: Partial<EffectHandlers<'execution'>> = {
  resolve: async (p, ctx) => {
    await ctx.dispatch({
      type: 'execution.resolved',
      data: partial<Resolved>({ codeUri: p.request.uri, limits: partial<Resolved['limits']>({ timeoutMs: 1000 }) }),
    });
  },
  materialize: async (_p, ctx) => {
    await ctx.dispatch({
      type: 'execution.materialized',
      data: partial<Materialized>({ runtimeVolume: 'r', codeVolume: 'c' }),
    });
  },
  createSandbox: async (_p, ctx) => {
    await ctx.dispatch({ type: 'execution.started', data: { containerId: 'fake' } });
  },
  invoke: async (p, ctx) => {
    await ctx.dispatch({
      type: 'execution.succeeded',
      data: { output: { echoed: p.request.input }, outputHash: null },
    });
  },
  cleanup: () => undefined,
};

describe('node on a SQLite log (one node: this one)', () => {
  it(
    "spawn and execute take 'any' or this host's name; another name is NODE_UNKNOWN, " +
      'a malformed one NODE_INVALID, and nothing is appended',
    async () => {
      const rl = await createRunlog({
        home: tempDir(),
        effects: { execution: fakeExecution },
        reconcile: false,
        engineWatch: false,
        watchApps: false,
        log: () => undefined,
      });
      try {
        await expect(rl.spawnApp({ appDir: '/nonexistent', node: 'elsewhere' })).rejects.toMatchObject({
          code: 'NODE_UNKNOWN',
        });
        await expect(rl.spawnApp({ appDir: '/nonexistent', node: 'bad name!' })).rejects.toMatchObject({
          code: 'NODE_INVALID',
        });
        await expect(rl.execute({ uri: URI, handler: 'greet', input: 1, node: 'elsewhere' })).rejects.toMatchObject({
          code: 'NODE_UNKNOWN',
        });
        expect(await runlogInternals(rl).store.lastSeq()).toBe(0);
        // Accepted names go on to the local spawn (which then finds no app directory) and the local execution.
        await expect(rl.spawnApp({ appDir: '/nonexistent', node: 'any' })).rejects.toMatchObject({
          code: 'APP_DIR_MISSING',
        });
        await expect(rl.spawnApp({ appDir: '/nonexistent', node: hostname() })).rejects.toMatchObject({
          code: 'APP_DIR_MISSING',
        });
        expect((await rl.execute({ uri: URI, handler: 'greet', input: 2, node: 'any' })).output).toEqual({ echoed: 2 });
        expect((await rl.execute({ uri: URI, handler: 'greet', input: 3, node: hostname() })).output).toEqual({
          echoed: 3,
        });
      } finally {
        await rl.close();
      }
    },
  );
});

const queued = (id: string, over: Partial<QueuedExecution> = {}): QueuedExecution => ({
  executionId: id,
  request: { executionId: id, timeoutMs: 1000 },
  from: 'a',
  node: null,
  headStart: false,
  claimBy: new Date(Date.now() + 60_000).toISOString(),
  ...over,
});

describe('ExecutionQueue', () => {
  function node(log: ReturnType<typeof fakeLog>, name: string, limit: number, running: Set<string>) {
    const q = new ExecutionQueue({
      store: log.store,
      node: name,
      limit,
      headStartMs: 200,
      nowMs: () => Date.now(),
      running: () => running.size,
      appendFact: async (stream, evs) => {
        for (const e of evs) log.put(stream, e.type, e.data);
      },
      claim: async (x) => {
        // The first event's append is atomic with its check (expectedVersion 'no-stream'): read and put in one step.
        if (log.events.some((e) => e.stream === `execution-${x.executionId}`))
          throw new FencedError(`execution-${x.executionId}`, name);
        running.add(x.executionId);
        log.put(`execution-${x.executionId}`, 'execution.requested', { node: name });
      },
      log: () => undefined,
    });
    return q;
  }
  const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));

  it('claims up to its limit, more as its executions end; two nodes never start one execution twice', async () => {
    const log = fakeLog();
    const runA = new Set<string>();
    const runB = new Set<string>();
    const a = node(log, 'a', 2, runA);
    const b = node(log, 'b', 1, runB);
    await a.start();
    await b.start();
    for (let i = 0; i < 6; i++) log.put(EXECUTION_QUEUE, EXECUTION_QUEUED, { ...queued(`e${i}`) });
    await tick(20);
    expect(runA.size).toBe(2);
    expect(runB.size).toBe(1);
    const started = () => log.events.filter((e) => e.type === 'execution.requested').map((e) => e.stream);
    expect(started()).toHaveLength(3);
    // One of a's ends: it claims the next.
    runA.delete([...runA][0]!);
    a.pump();
    await tick(20);
    expect(started()).toHaveLength(4);
    runB.clear();
    b.pump();
    runA.clear();
    a.pump();
    await tick(20);
    expect(started()).toHaveLength(6);
    expect(new Set(started()).size).toBe(6);
    await a.stop();
    await b.stop();
  });

  it('the accepting node has a head start; a pinned execution goes only to its node; one past its claim deadline to nobody', async () => {
    const log = fakeLog();
    const runA = new Set<string>();
    const runB = new Set<string>();
    const a = node(log, 'a', 5, runA);
    const b = node(log, 'b', 5, runB);
    await b.start();
    log.put(EXECUTION_QUEUE, EXECUTION_QUEUED, { ...queued('head', { headStart: true }) });
    log.put(EXECUTION_QUEUE, EXECUTION_QUEUED, { ...queued('pinned', { node: 'a' }) });
    log.put(EXECUTION_QUEUE, EXECUTION_QUEUED, {
      ...queued('late', { claimBy: new Date(Date.now() - 1).toISOString() }),
    });
    await tick(50);
    expect(runB.size).toBe(0); // a's head start is not over, the pinned one is a's
    await tick(300);
    expect([...runB]).toEqual(['head']); // a did not take it in time
    await a.start();
    await tick(20);
    expect([...runA]).toEqual(['pinned']);
    expect(await log.store.streamVersion('execution-late')).toBe(0);
    await a.stop();
    await b.stop();
  });
});
