// The actor host while its store is briefly unreachable (PostgreSQL restarting: STORE_UNAVAILABLE). A request
// (create, a typed dispatch) whose append was cut off is looked up once the store answers (within a budget):
// committed, it is answered as done (a new actor's is left to the cluster to pick up: its lease is the node's);
// not committed, it fails with the typed error and changes nothing; no answer in time, the error says it may
// have committed and how to check. An observed fact (an
// effect's result, a process exit: dispatchObserved) is not lost: its append waits for the store, and one that
// was cut off after it had committed is found in the log and not appended twice — its effects then run.
import { describe, expect, it } from 'vitest';
import { ActorHost, type ActorHostOptions, type AllEffectHandlers } from '../../../src/supervisor/host/actor-host.ts';
import { createBus } from '../../../src/supervisor/host/bus.ts';
import { RunlogError } from '../../../src/domain/errors.ts';
import type { RecordedEvent } from '../../../src/domain/events.ts';
import type { InstanceSpec } from '../../../src/machines/instance.machine.ts';
import { machines } from '../../../src/machines/runtime.ts';
import type { Reconnecting } from '../../../src/store/capabilities.ts';
import { MemoryEventStore } from '../../../src/store/memory/event-store.ts';
import { collect, type EventStorePort, type StreamAppend, type StreamAppendOutcome } from '../../../src/store/port.ts';

const unavailable = () => new RunlogError('STORE_UNAVAILABLE', 'PostgreSQL is not answering');

/**
 * The in-memory port behind a store that can be "down": while down an append throws STORE_UNAVAILABLE, having
 * committed first when `commitThenCut` is set (the answer lost on the way back), and so does a read when
 * `readsCut` is set; whenAvailable (its Reconnecting) resolves when it is up again.
 */
function flakyStore() {
  const inner = new MemoryEventStore();
  let down = false;
  let commitThenCut = false;
  let readsCut = false;
  let waiters: (() => void)[] = [];
  let appendCalls = 0;
  let waits = 0;
  const store: EventStorePort = Object.assign(Object.create(inner) as MemoryEventStore, {
    appendMany: async (requests: readonly StreamAppend[]): Promise<StreamAppendOutcome[]> => {
      appendCalls += 1;
      await new Promise((r) => setTimeout(r, 1));
      if (down) {
        if (commitThenCut) await inner.appendMany(requests);
        throw unavailable();
      }
      return inner.appendMany(requests);
    },
    readStream: (stream: string, options?: { from?: number; to?: number }): AsyncIterable<RecordedEvent> => {
      if (readsCut) {
        readsCut = false; // one read cut off, as the store goes away once more
        return (async function* () {
          yield* [];
          throw unavailable();
        })();
      }
      return inner.readStream(stream, options);
    },
  });
  const reconnecting: Reconnecting = {
    whenAvailable: (withinMs = Number.POSITIVE_INFINITY): Promise<boolean> => {
      waits += 1;
      if (!down) return Promise.resolve(true);
      return new Promise<boolean>((r) => {
        waiters.push(() => r(true));
        if (Number.isFinite(withinMs)) setTimeout(() => r(false), withinMs);
      });
    },
  };
  return {
    store,
    reconnecting,
    inner,
    down(cut = false) {
      down = true;
      commitThenCut = cut;
    },
    /** The next read of a stream is cut off too. */
    cutNextRead() {
      readsCut = true;
    },
    up() {
      down = false;
      for (const w of waiters) w();
      waiters = [];
    },
    appendCalls: () => appendCalls,
    waits: () => waits,
  };
}

const spec = {
  instanceId: 'i1',
  appId: 'com.example.hello',
  appDir: '/apps/hello',
  sandbox: 'proot',
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart: { policy: 'on-failure', maxRestarts: 3, backoffMs: 10, maxBackoffMs: 10, resetAfterMs: 1000 },
} as InstanceSpec;

const only = (handlers: Record<string, (p: any, ctx: any) => unknown>): AllEffectHandlers =>
  ({
    instance: new Proxy(handlers, { get: (t, k: string) => t[k] ?? (() => undefined) }),
    execution: new Proxy({}, { get: () => () => undefined }),
  }) as unknown as AllEffectHandlers;

async function runningHost(
  s: ReturnType<typeof flakyStore>,
  effects: AllEffectHandlers | null = null,
  more: Partial<ActorHostOptions> = {},
): Promise<ActorHost> {
  const host = new ActorHost({
    store: s.store,
    reconnecting: s.reconnecting,
    bus: createBus(),
    machines,
    effects,
    ...more,
  });
  await host.create('instance', 'i1', { type: 'instance.requested', data: { spec } });
  for (const e of [
    { type: 'instance.spawned', data: { pid: 10, host: '127.0.0.1', port: 4100 } },
    { type: 'instance.healthy', data: { identity: 'match' } },
    { type: 'instance.running', data: {} },
  ] as const)
    await host.dispatch('instance', 'i1', e as never);
  return host;
}

const types = async (s: ReturnType<typeof flakyStore>) =>
  (await collect(s.inner.readStream('instance-i1'))).map((e) => e.type);

describe('actor host while the store is unreachable', () => {
  it('a request not committed is looked up once the store answers, fails with STORE_UNAVAILABLE and changes nothing', async () => {
    const s = flakyStore();
    const host = await runningHost(s);
    s.down();
    const create = host.create('instance', 'i2', {
      type: 'instance.requested',
      data: { spec: { ...spec, instanceId: 'i2' } },
    });
    const stop = host.dispatch('instance', 'i1', { type: 'instance.stop-requested', data: {} });
    await new Promise((r) => setTimeout(r, 20));
    expect(s.waits()).toBe(2); // each waits for the store to answer before it answers its caller
    s.up();
    await expect(create).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: expect.stringContaining('was not recorded'),
      details: { committed: false },
    });
    await expect(stop).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: expect.stringContaining('was not recorded'),
    });
    expect(host.holds('instance-i2')).toBe(false);
    expect(await s.inner.streamVersion('instance-i2')).toBe(0);
    expect(host.get('instance', 'i1')!.version).toBe(4);
    // The actor is where it was: a stop now is taken.
    await host.dispatch('instance', 'i1', { type: 'instance.stop-requested', data: {} });
    expect((await types(s)).at(-1)).toBe('instance.stop-requested');
  });

  it('a request whose store does not answer within the budget fails saying it may have committed, and how to check', async () => {
    const s = flakyStore();
    const host = await runningHost(s, null, { lookUpMs: 30 });
    s.down(true);
    const err = await host
      .dispatch('instance', 'i1', { type: 'instance.stop-requested', data: {} })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RunlogError);
    expect(err).toMatchObject({ code: 'STORE_UNAVAILABLE', details: { committed: 'unknown', stream: 'instance-i1' } });
    expect((err as Error).message).toContain('may have committed: `runlog events i1`');
    s.up();
  });

  it("a request cut off after it committed is answered as done, not appended twice, and the actor's effects run", async () => {
    const s = flakyStore();
    const ran: string[] = [];
    const host = await runningHost(s, only({ stopSandbox: () => void ran.push('stopSandbox') }));
    s.down(true);
    const stop = host.dispatch('instance', 'i1', { type: 'instance.stop-requested', data: {} });
    await new Promise((r) => setTimeout(r, 20));
    const calls = s.appendCalls();
    s.up();
    const r = await stop;
    await host.idle();
    expect(r).toMatchObject({ accepted: true, to: 'stopping', event: { type: 'instance.stop-requested', version: 5 } });
    expect(s.appendCalls()).toBe(calls);
    expect((await types(s)).slice(4)).toEqual(['instance.stop-requested']);
    expect(host.get('instance', 'i1')!.version).toBe(5);
    expect(ran).toEqual(['stopSandbox']);
  });

  it(
    "a new actor's first event found committed is answered as done and left to the cluster to pick up " +
      "(its lease is the node's, unknown to it)",
    async () => {
      const s = flakyStore();
      const orphaned: string[] = [];
      const ran: string[] = [];
      const host = await runningHost(
        s,
        only({ spawn: (p: { spec: InstanceSpec }) => void ran.push(`spawn ${p.spec.instanceId}`) }),
        { onOrphaned: (stream) => orphaned.push(stream) },
      );
      s.down(true);
      const create = host.create('instance', 'i2', {
        type: 'instance.requested',
        data: { spec: { ...spec, instanceId: 'i2' } },
      });
      await new Promise((r) => setTimeout(r, 20));
      s.up();
      expect(await create).toMatchObject({
        accepted: true,
        to: 'spawning',
        event: { type: 'instance.requested', version: 1 },
      });
      await host.idle();
      expect(orphaned).toEqual(['instance-i2']);
      expect(ran).toEqual(['spawn i1']); // i2's is not run here: the pick-up rehydrates it from the log, as start-up would
      expect(host.holds('instance-i2')).toBe(false);
      expect((await collect(s.inner.readStream('instance-i2'))).map((e) => e.type)).toEqual(['instance.requested']);
    },
  );

  it('an observed fact waits for the store and is recorded once; the events after it wait behind it', async () => {
    const s = flakyStore();
    const host = await runningHost(s);
    s.down();
    const crash = host.dispatchObserved('instance', 'i1', {
      type: 'instance.crashed',
      data: { reason: 'exit', exitCode: 1, signal: null, message: 'exited' },
    } as never);
    await new Promise((r) => setTimeout(r, 20));
    expect(s.waits()).toBe(1);
    const later = host.dispatchObserved('instance', 'i1', {
      type: 'instance.restart-due',
      data: { attempt: 1, dueAt: new Date().toISOString() },
    } as never);
    s.up();
    expect((await crash).event.type).toBe('instance.crashed');
    await later;
    expect((await types(s)).slice(4)).toEqual(['instance.crashed', 'instance.restart-due']);
  });

  it('an append cut off after it committed is found in the log, not appended twice, and its effects run', async () => {
    const s = flakyStore();
    const ran: string[] = [];
    const host = await runningHost(
      s,
      only({ scheduleRestart: (p: { attempt: number }) => void ran.push(`scheduleRestart ${p.attempt}`) }),
    );
    s.down(true);
    const crash = host.dispatchObserved('instance', 'i1', {
      type: 'instance.crashed',
      data: { reason: 'exit', exitCode: 1, signal: null, message: 'exited' },
    } as never);
    await new Promise((r) => setTimeout(r, 20));
    const calls = s.appendCalls();
    s.up();
    const r = await crash;
    await host.idle();
    expect(r.event).toMatchObject({ type: 'instance.crashed', version: 5 });
    expect(s.appendCalls()).toBe(calls); // not sent again
    expect((await types(s)).slice(4)).toEqual(['instance.crashed']);
    expect(host.get('instance', 'i1')!.version).toBe(5);
    expect(ran).toEqual(['scheduleRestart 1']);
  });

  it("an effect's result is an observed fact", async () => {
    const s = flakyStore();
    let spawned: Promise<unknown> | undefined;
    const host = new ActorHost({
      store: s.store,
      reconnecting: s.reconnecting,
      bus: createBus(),
      machines,
      effects: only({
        spawn: (_p: unknown, ctx: any) => {
          s.down();
          spawned = ctx.dispatch({ type: 'instance.spawned', data: { pid: 10, host: '127.0.0.1', port: 4100 } });
        },
      }),
    });
    await host.create('instance', 'i1', { type: 'instance.requested', data: { spec } });
    await new Promise((r) => setTimeout(r, 20));
    expect(s.waits()).toBe(1);
    s.up();
    await spawned;
    expect(await types(s)).toEqual(['instance.requested', 'instance.spawned']);
  });

  it('an observed fact whose read-back is cut off as well waits for the store again, and is still recorded once', async () => {
    const s = flakyStore();
    const host = await runningHost(s);
    s.down(true);
    const crash = host.dispatchObserved('instance', 'i1', {
      type: 'instance.crashed',
      data: { reason: 'exit', exitCode: 1, signal: null, message: 'exited' },
    } as never);
    await new Promise((r) => setTimeout(r, 20));
    const calls = s.appendCalls();
    s.cutNextRead();
    s.up();
    expect((await crash).event).toMatchObject({ type: 'instance.crashed', version: 5 });
    expect(s.appendCalls()).toBe(calls); // found in the log on the second read, not sent again
    expect(s.waits()).toBe(2);
    expect((await types(s)).slice(4)).toEqual(['instance.crashed']);
  });

  it('a file store (no Reconnecting) passes STORE_UNAVAILABLE on as it is', async () => {
    const s = flakyStore();
    const host = new ActorHost({ store: s.store, reconnecting: null, bus: createBus(), machines, effects: null });
    await host.create('instance', 'i1', { type: 'instance.requested', data: { spec } });
    s.down();
    await expect(
      host.dispatchObserved('instance', 'i1', {
        type: 'instance.crashed',
        data: { reason: 'exit', exitCode: 1, signal: null, message: 'exited' },
      } as never),
    ).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE', message: 'PostgreSQL is not answering' });
    expect(s.waits()).toBe(0);
  });
});
