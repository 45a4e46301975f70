// execute() and the actor host against hostile input, with the execution's effects faked (no PDS, no Docker):
// a bad request fails alone with a typed error before anything is appended, an event that cannot be encoded
// never takes another caller's events with it, and nothing stays behind (actors, listeners, timers).
import { describe, expect, it } from 'vitest';
import type { EffectHandlers } from '../../../src/supervisor/host/actor-host.ts';
import type { KindNewEvent } from '../../../src/domain/events.ts';
import type { Materialized, Resolved } from '../../../src/domain/execution-events.ts';
import { partial } from '../../support/partial.ts';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import type { RunlogError } from '../../../src/domain/errors.ts';
import { tempDir } from '../../support/tmp.ts';
import { codeOf } from '../../support/errors.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const URI = 'at://did:plc:aaaaaaaaaaaaaaaaaaaaaaaa/dev.mainasara.at-run.beta.v2.code/greet';

/** Effects that walk an execution to `succeeded` (its output echoes the input) without any real part. */
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

const open = (home = tempDir()) =>
  createRunlog({
    home,
    effects: { execution: fakeExecution },
    reconcile: false,
    engineWatch: false,
    watchApps: false,
    log: () => undefined,
  });

function deep(levels: number): unknown {
  const top: unknown[] = [];
  let cur = top;
  for (let i = 1; i < levels; i++) cur.push((cur = []));
  return top;
}

const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
const listeners = (rl: Runlog) =>
  ((runlogInternals(rl).bus as unknown as { events: Record<string, unknown[]> }).events['actor:transition'] ?? [])
    .length;

describe('execute() at the boundary', () => {
  it('deep, BigInt, circular, function and oversized inputs are refused with typed errors before anything is appended', async () => {
    const rl = await open();
    const cyclic: Record<string, unknown> = {};
    cyclic.me = cyclic;
    const before = await runlogInternals(rl).store.lastSeq();
    expect(await codeOf(rl.execute({ uri: URI, handler: 'greet', input: deep(5000) }))).toBe('INPUT_INVALID');
    expect(await codeOf(rl.execute({ uri: URI, handler: 'greet', input: { n: 12345678901234567890n } }))).toBe(
      'INPUT_INVALID',
    );
    expect(await codeOf(rl.execute({ uri: URI, handler: 'greet', input: cyclic }))).toBe('INPUT_INVALID');
    expect(await codeOf(rl.execute({ uri: URI, handler: 'greet', input: () => 1 }))).toBe('INPUT_INVALID');
    expect(await codeOf(rl.execute({ uri: URI, handler: 'greet', input: 'x'.repeat(rl.policy.input.maxBytes) }))).toBe(
      'INPUT_TOO_LARGE',
    );
    expect(await codeOf(rl.execute({ uri: URI, handler: 'greet', timeoutMs: 10n as unknown as number }))).toBe(
      'TIMEOUT_INVALID',
    );
    expect(await runlogInternals(rl).store.lastSeq()).toBe(before);
    expect(await rl.list({ all: true })).toEqual([]);
    await rl.close();
  });

  it('an honest execution submitted in the same tick as a flood of bad ones succeeds', async () => {
    const rl = await open();
    const bad = Array.from({ length: 50 }, (_, i) =>
      rl.execute({ uri: URI, handler: 'greet', input: i % 2 ? deep(5000) : { big: BigInt(i) } }),
    );
    const honest = rl.execute({ uri: URI, handler: 'greet', input: { name: 'Ada' } });
    const more = Array.from({ length: 50 }, () => rl.execute({ uri: URI, handler: 'greet', input: deep(5000) }));
    const settled = await Promise.allSettled([...bad, ...more]);
    expect(settled.every((s) => s.status === 'rejected' && (s.reason as RunlogError).code === 'INPUT_INVALID')).toBe(
      true,
    );
    const out = await honest;
    expect(out).toMatchObject({ status: 'succeeded', output: { echoed: { name: 'Ada' } } });
    expect(await rl.list({ all: true })).toHaveLength(1);
    await rl.close();
  });

  it('a create that fails (the host is closing) leaves no actor, no listener and no timer behind', async () => {
    const rl = await open();
    const t0 = timers();
    const l0 = listeners(rl);
    runlogInternals(rl).host.close();
    expect(await codeOf(rl.execute({ uri: URI, handler: 'greet', input: {} }))).toBe('HOST_CLOSED');
    expect(runlogInternals(rl).host.size).toBe(0);
    expect(listeners(rl)).toBe(l0);
    expect(timers()).toBe(t0);
    await rl.close();
  });
});

describe('actor host: group commit isolation and memory', () => {
  it('an event JSON cannot encode fails its own create only; the others decided in the same tick are committed', async () => {
    const rl = await createRunlog({ home: tempDir(), supervise: false, readOnly: false });
    const cyclic: Record<string, unknown> = {};
    cyclic.me = cyclic;
    const request = (id: string, input: unknown): KindNewEvent<'execution'> => ({
      type: 'execution.requested',
      data: { request: { executionId: id, uri: URI, handler: 'greet', input, callerDid: null, timeoutMs: 1000 } },
    });
    const batches: number[] = [];
    const appendMany = runlogInternals(rl).store.appendMany.bind(runlogInternals(rl).store);
    runlogInternals(rl).store.appendMany = (requests) => {
      batches.push(requests.length);
      return appendMany(requests);
    };
    const results = await Promise.allSettled([
      runlogInternals(rl).host.create('execution', 'e1', request('e1', { ok: 1 })),
      runlogInternals(rl).host.create('execution', 'e2', request('e2', { big: 1n })),
      runlogInternals(rl).host.create('execution', 'e3', request('e3', deep(20_000))),
      runlogInternals(rl).host.create('execution', 'e4', request('e4', cyclic)),
      runlogInternals(rl).host.create('execution', 'e5', request('e5', { ok: 5 })),
    ]);
    expect(batches).toEqual([5]); // one tick, one transaction
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'rejected', 'fulfilled']);
    for (const r of results.slice(1, 4)) expect((r as PromiseRejectedResult).reason.code).toBe('EVENT_NOT_ENCODABLE');
    expect((await rl.events('e1')).map((e) => e.type)).toEqual(['execution.requested']);
    expect((await rl.events('e5')).map((e) => e.type)).toEqual(['execution.requested']);
    expect(await runlogInternals(rl).store.streamVersion('execution-e2')).toBe(0);
    // The failed creates are gone from memory; the id is free again.
    expect(runlogInternals(rl).host.size).toBe(2);
    await runlogInternals(rl).host.create('execution', 'e2', request('e2', { fixed: true }));
    expect(await runlogInternals(rl).store.streamVersion('execution-e2')).toBe(1);
    await rl.close();
  });

  it('ended actors leave memory and are read from the log when asked', async () => {
    const rl = await open();
    const outs = [];
    for (let i = 0; i < 20; i++)
      outs.push(await rl.execute({ uri: URI, handler: 'greet', input: { i, pad: 'x'.repeat(10_000) } }));
    expect(outs.every((o) => o.status === 'succeeded')).toBe(true);
    expect(runlogInternals(rl).host.size).toBe(0);
    expect(runlogInternals(rl).host.live()).toEqual([]);
    expect(runlogInternals(rl).host.get('execution', outs[7]!.executionId)).toBeUndefined(); // not in memory: get() answers from it
    const again = (await runlogInternals(rl).host.fetch('execution', outs[7]!.executionId))!;
    expect(again.snapshot.value).toBe('succeeded');
    expect(runlogInternals(rl).host.size).toBe(0); // asking did not bring it back into memory
    expect((await rl.inspect(outs[7]!.executionId)).context).toMatchObject({
      result: { output: { echoed: { i: 7 } } },
    });
    await rl.close();
  });
});
