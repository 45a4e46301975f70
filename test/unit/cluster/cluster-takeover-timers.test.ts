// A takeover re-arms the persisted restart timer of an instance waiting in crashed.backoff, also when the store
// fails the takeover's own record: node a's history (crash, restart scheduled) is on a store; node b's host takes
// the instance over through the cluster listener (src/supervisor/cluster/takeover.ts) while appends fail, and its restart
// still comes due on b's simulated clock.
import { describe, expect, it } from 'vitest';
import { ActorHost, type AllEffectHandlers } from '../../../src/supervisor/host/actor-host.ts';
import { createBus } from '../../../src/supervisor/host/bus.ts';
import { clusterListener } from '../../../src/supervisor/cluster/takeover.ts';
import { RestartTimers } from '../../../src/supervisor/host/timers.ts';
import { RunlogError } from '../../../src/domain/errors.ts';
import type { InstanceSpec } from '../../../src/machines/instance.machine.ts';
import { machines } from '../../../src/machines/runtime.ts';
import type { Reconnecting } from '../../../src/store/capabilities.ts';
import { MemoryEventStore } from '../../../src/store/memory/event-store.ts';
import type { EventStorePort, StreamAppend, StreamAppendOutcome } from '../../../src/store/port.ts';
import { SimulatedClock } from '../../support/clock.ts';

const spec = {
  instanceId: 'i1',
  appId: 'com.example.hello',
  appDir: '/apps/hello',
  sandbox: 'container',
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart: { policy: 'on-failure', maxRestarts: 3, backoffMs: 5000, maxBackoffMs: 5000, resetAfterMs: 60_000 },
} as InstanceSpec;

/**
 * The in-memory port; while `down`, appends fail (STORE_UNAVAILABLE), and with `waits` the host can wait for it (the
 * store is Reconnecting).
 */
function flakyStore(waits: boolean) {
  const inner = new MemoryEventStore();
  let down = false;
  let waiters: (() => void)[] = [];
  const store: EventStorePort = Object.assign(Object.create(inner) as MemoryEventStore, {
    appendMany: async (requests: readonly StreamAppend[]): Promise<StreamAppendOutcome[]> => {
      await new Promise((r) => setTimeout(r, 1));
      if (down) throw new RunlogError('STORE_UNAVAILABLE', 'PostgreSQL is not answering');
      return inner.appendMany(requests);
    },
  });
  const reconnecting: Reconnecting | null = waits
    ? {
        whenAvailable: (): Promise<boolean> =>
          down ? new Promise<boolean>((r) => waiters.push(() => r(true))) : Promise.resolve(true),
      }
    : null;
  return {
    store,
    reconnecting,
    down: () => void (down = true),
    up() {
      down = false;
      for (const w of waiters.splice(0)) w();
      waiters = [];
    },
  };
}

/** Effects that do nothing but the restart timers' (no sandbox is started by this test). */
const onlyTimers = (timers: RestartTimers): AllEffectHandlers =>
  ({
    instance: new Proxy(timers.handlers() as Record<string, unknown>, {
      get: (t, k: string) => t[k] ?? (() => undefined),
    }),
    execution: new Proxy({}, { get: () => () => undefined }),
  }) as unknown as AllEffectHandlers;

async function takenOverWhileDown(waits: boolean) {
  const clock = new SimulatedClock();
  const s = flakyStore(waits);
  const now = () => new Date(clock.nowMs()).toISOString();
  // Node a: the instance ran, crashed, and its restart was scheduled 5 s on; then a died.
  const a = new ActorHost({
    store: s.store,
    reconnecting: s.reconnecting,
    bus: createBus(),
    machines,
    effects: null,
    now,
  });
  await a.create('instance', 'i1', { type: 'instance.requested', data: { spec } });
  for (const e of [
    { type: 'instance.spawned', data: { pid: 10, host: '172.17.0.2', port: 4100 } },
    { type: 'instance.healthy', data: { identity: 'match' } },
    { type: 'instance.running', data: {} },
    { type: 'instance.crashed', data: { reason: 'exit', exitCode: 1 } },
    {
      type: 'instance.restart-scheduled',
      data: { attempt: 1, delayMs: 5000, dueAt: new Date(clock.nowMs() + 5000).toISOString() },
    },
  ] as const)
    await a.dispatch('instance', 'i1', e as never);
  a.close();

  // Node b takes it over while the store fails appends.
  const ref: { host?: ActorHost } = {};
  const timers = new RestartTimers(() => ref.host!, clock);
  const host = (ref.host = new ActorHost({
    store: s.store,
    reconnecting: s.reconnecting,
    bus: createBus(),
    machines,
    effects: onlyTimers(timers),
    now,
  }));
  const logs: string[] = [];
  let tookOver!: () => void;
  const done = new Promise<void>((r) => (tookOver = r));
  const listener = clusterListener(() => host, 'b', {
    letGo: () => undefined,
    nowMs: () => clock.nowMs(),
    relinquish: async () => undefined,
    rearm: (actor) => void timers.rearm(actor),
    tookOver: () => tookOver(),
    log: (m) => logs.push(m),
  });
  clock.advance(3000);
  s.down();
  listener.taken([{ stream: 'instance-i1', token: 2, previous: 'a' }]);
  return { clock, s, host, timers, logs, done };
}

const types = (host: ActorHost) => host.get('instance', 'i1')!;

describe('a takeover of an instance waiting in crashed.backoff', () => {
  it('whose record fails (the store refuses appends): the persisted timer is armed anyway and restart-due fires when due', async () => {
    const t = await takenOverWhileDown(false);
    await t.done;
    expect(t.logs.join('\n')).toMatch(/taking over instance-i1 from a: PostgreSQL is not answering/);
    expect(t.timers.pendingCount()).toBe(1);
    t.s.up();
    t.clock.advance(2000);
    await t.host.idle();
    expect(types(t.host).snapshot.value).toBe('spawning');
    t.timers.close();
    t.host.close();
  });

  it('a firing whose append fails is tried again while the instance still waits for it', async () => {
    const t = await takenOverWhileDown(false);
    await t.done;
    t.clock.advance(2000); // due, with the store still down: restart-due is not recorded
    await new Promise((r) => setTimeout(r, 20));
    expect(types(t.host).snapshot.value).toEqual({ crashed: 'backoff' });
    expect(t.timers.pendingCount()).toBe(1);
    t.s.up();
    t.clock.advance(1000);
    await t.host.idle();
    expect(types(t.host).snapshot.value).toBe('spawning');
    t.timers.close();
    t.host.close();
  });

  it('while the store is briefly unreachable: the record waits for it, and the timer fires when due', async () => {
    const t = await takenOverWhileDown(true);
    await new Promise((r) => setTimeout(r, 20));
    t.s.up();
    await t.done;
    expect(t.timers.pendingCount()).toBe(1);
    t.clock.advance(2000);
    await t.host.idle();
    expect(types(t.host).snapshot.value).toBe('spawning');
    t.timers.close();
    t.host.close();
  });
});
