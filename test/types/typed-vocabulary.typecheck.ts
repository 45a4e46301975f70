// Type-level tests, checked by `npm run typecheck` (tsc includes test/): every `@ts-expect-error` below must
// stay an error. If a change made one of these compile (a handler map that may miss a handler, an event type
// the compiler no longer checks), the directive becomes unused and the typecheck fails.
import { setup } from 'xstate';
import type { ActorHost, EffectHandlers } from '../../src/supervisor/host/actor-host.ts';
import type { InstanceEvent } from '../../src/domain/events.ts';
import { effectActions } from '../../src/machines/effects.ts';
import type { ExecutionEffects } from '../../src/machines/execution.machine.ts';
import type { InstanceContext, InstanceEffects } from '../../src/machines/instance.machine.ts';

declare const full: EffectHandlers<'instance'>;
declare const host: ActorHost;

// A complete map compiles.
export const complete: EffectHandlers<'instance'> = { ...full };

// A deleted handler does not.
const { spawn: _spawn, ...withoutSpawn } = full;
// @ts-expect-error — spawn is missing
export const missing: EffectHandlers<'instance'> = withoutSpawn;

// A misspelled one does not either.
// @ts-expect-error — spwan is not an effect of the instance machine
export const misspelled: EffectHandlers<'instance'> = { ...full, spwan: full.spawn };

// A handler reading a param its effect does not carry.
export const wrongParam: EffectHandlers<'instance'>['spawn'] = (p) => {
  // @ts-expect-error — spawn's params are { spec, attempt }
  void p.containerId;
};

// The execution map is exhaustive too: one handler per ExecutionEffects key.
// @ts-expect-error — every handler is missing
export const emptyExecution: EffectHandlers<'execution'> = {} satisfies Partial<
  Record<keyof ExecutionEffects, unknown>
>;

// An event type the machine does not know, or data of the wrong shape, is refused at the dispatch.
export async function dispatches(): Promise<void> {
  await host.dispatch('instance', 'i1', { type: 'instance.running', data: { hooks: ['onStart'] } });
  // @ts-expect-error — a renamed event type
  await host.dispatch('instance', 'i1', { type: 'instance.runing', data: {} });
  // @ts-expect-error — identity is 'match' | 'legacy'
  await host.dispatch('instance', 'i1', { type: 'instance.healthy', data: { identity: 'maybe' } });
  // @ts-expect-error — an execution event sent to an instance
  await host.dispatch('instance', 'i1', { type: 'execution.started', data: { containerId: 'c' } });
}

// Inside a machine, an effect's params are checked against the map.
export const machine = setup({
  types: {} as { context: InstanceContext; events: InstanceEvent },
  actions: effectActions<InstanceEffects>({
    spawn: true,
    callLifecycle: true,
    stopSandbox: true,
    forceKill: true,
    scheduleRestart: true,
    cancelRestart: true,
    reattach: true,
    armRestart: true,
    releasePort: true,
    provisionTools: true,
    announce: true,
  }),
}).createMachine({
  context: {} as InstanceContext,
  // @ts-expect-error — cancelRestart takes { instanceId }, not { id }
  entry: { type: 'cancelRestart', params: () => ({ id: 'i1' }) },
});

// effectActions must list every effect of the map.
// @ts-expect-error — announce is not listed
export const unlisted = effectActions<ExecutionEffects>({
  resolve: true,
  materialize: true,
  createSandbox: true,
  invoke: true,
  collect: true,
  killSandbox: true,
  cleanup: true,
});
