// The actor host on a store whose appends answer later (as PostgreSQL's do): rule 1 still holds (an event's
// effects start only once its append has resolved), appends decided while one is in flight go out in the next
// batch, a fenced append (FencedError: the lease is another supervisor's) makes the host let go of the actor without
// retrying, and a host that owns only some actors rehydrates only those.
import { describe, expect, it } from 'vitest';
import { ActorHost, type AllEffectHandlers } from '../../../src/supervisor/host/actor-host.ts';
import { createBus } from '../../../src/supervisor/host/bus.ts';
import { FencedError } from '../../../src/domain/errors.ts';
import type { InstanceSpec } from '../../../src/machines/instance.machine.ts';
import { machines } from '../../../src/machines/runtime.ts';
import { MemoryEventStore } from '../../../src/store/memory/event-store.ts';
import { collect, type EventStorePort, type StreamAppend, type StreamAppendOutcome } from '../../../src/store/port.ts';

/** The in-memory port behind an appendMany that answers after a delay; it records what is committed when. */
function laggingStore(delayMs: number, refuse: (r: StreamAppend) => boolean = () => false) {
  const inner = new MemoryEventStore();
  const committed: string[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const store: EventStorePort = Object.assign(Object.create(inner) as MemoryEventStore, {
    appendMany: async (requests: readonly StreamAppend[]): Promise<StreamAppendOutcome[]> => {
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await new Promise((r) => setTimeout(r, delayMs));
      inFlight -= 1;
      const fenced = requests.map(refuse);
      const outcomes = await inner.appendMany(requests.filter((_, i) => !fenced[i]));
      let k = 0;
      return requests.map((r, i): StreamAppendOutcome => {
        if (fenced[i]) return { ok: false, error: new FencedError(r.stream, 'here') };
        const o = outcomes[k++]!;
        if (o.ok) for (const e of o.result.events) committed.push(`${e.stream}@${e.version}`);
        return o;
      });
    },
  });
  return { store, inner, committed, maxInFlight: () => maxInFlight };
}

const spec = {
  instanceId: 'i1',
  appId: 'com.example.hello',
  appDir: '/apps/hello',
  sandbox: 'proot',
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart: { policy: 'never', maxRestarts: 0, backoffMs: 10, maxBackoffMs: 10, resetAfterMs: 1000 },
} as InstanceSpec;

/** The given handlers; every other effect does nothing (this test is about the store seam, not the effects). */
const only = (handlers: Record<string, (p: any, ctx: any) => unknown>): AllEffectHandlers =>
  ({
    instance: new Proxy(handlers, { get: (t, k: string) => t[k] ?? (() => undefined) }),
    execution: new Proxy({}, { get: () => () => undefined }),
  }) as unknown as AllEffectHandlers;

describe('actor host on an asynchronous store', () => {
  it("starts an event's effects only once its append resolved; several actors' events share batches", async () => {
    const s = laggingStore(20);
    const seen: string[] = [];
    const host = new ActorHost({
      store: s.store,
      reconnecting: null,
      bus: createBus(),
      machines,
      effects: only({
        spawn: async (_p, ctx) => {
          seen.push(
            `spawn ${ctx.actor.stream} after ${s.committed.filter((c) => c.startsWith(ctx.actor.stream)).join(',')}`,
          );
          await ctx.dispatch({ type: 'instance.spawned', data: { pid: 1, host: '127.0.0.1', port: 4100 } });
        },
      }),
    });
    await Promise.all(
      ['a', 'b', 'c'].map((id) =>
        host.create('instance', id, { type: 'instance.requested', data: { spec: { ...spec, instanceId: id } } }),
      ),
    );
    await host.idle();
    expect(seen.sort()).toEqual([
      'spawn instance-a after instance-a@1',
      'spawn instance-b after instance-b@1',
      'spawn instance-c after instance-c@1',
    ]);
    expect((await collect(s.inner.readStream('instance-a'))).map((e) => e.type)).toEqual([
      'instance.requested',
      'instance.spawned',
    ]);
    expect(s.maxInFlight()).toBe(1); // the three creates went out in one batch
  });

  it('a fenced append is not retried and the host lets go of the actor', async () => {
    let fence = false;
    const s = laggingStore(5, () => fence);
    const host = new ActorHost({ store: s.store, reconnecting: null, bus: createBus(), machines, effects: null });
    await host.create('instance', 'f', { type: 'instance.requested', data: { spec: { ...spec, instanceId: 'f' } } });
    expect(host.size).toBe(1);
    fence = true;
    await expect(host.dispatch('instance', 'f', { type: 'instance.stop-requested', data: {} })).rejects.toBeInstanceOf(
      FencedError,
    );
    expect(host.size).toBe(0);
    expect(await s.inner.streamVersion('instance-f')).toBe(1);
  });

  it('rehydrates only the actors it owns', async () => {
    const s = laggingStore(1);
    const writer = new ActorHost({ store: s.store, reconnecting: null, bus: createBus(), machines, effects: null });
    for (const id of ['mine', 'theirs'])
      await writer.create('instance', id, { type: 'instance.requested', data: { spec: { ...spec, instanceId: id } } });
    const host = new ActorHost({
      store: s.store,
      reconnecting: null,
      bus: createBus(),
      machines,
      effects: null,
      owns: (stream) => stream === 'instance-mine',
    });
    expect((await host.rehydrate()).map((a) => a.id)).toEqual(['mine']);
    expect(host.get('instance', 'theirs')).toBeUndefined(); // not held: get() answers from memory
    expect((await host.fetch('instance', 'theirs'))?.version).toBe(1); // read from the log when asked, never held
    expect(host.size).toBe(1);
  });
});
