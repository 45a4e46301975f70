// Effects are data: a machine names what should happen and with which parameters; the actor host
// decides how (adapters) and turns the outcome into new events. Replay drops them.
//
// Each machine declares its effects as a map name → params type (InstanceEffects, ExecutionEffects). The map
// types the machine's `setup({ actions })` (a wrong param in the machine is a compile error) and the handler
// maps in src/supervisor (`EffectHandlers<K>`: one handler per effect, so a missing or misspelled one is too).
import type { ActorKind } from '../domain/events.ts';
import type { ExecutionEffects } from './execution.machine.ts';
import type { InstanceEffects } from './instance.machine.ts';

/** An effect as reported outside its machine's types (replay output, the inspector). */
export interface Effect {
  type: string;
  params: Record<string, unknown>;
}

/** Each actor kind's effects: effect name → params type. */
export interface EffectsByKind {
  instance: InstanceEffects;
  execution: ExecutionEffects;
}

/** One effect of a params map, as a discriminated union on `type`. */
export type EffectOf<P> = { [T in keyof P & string]: { type: T; params: P[T] } }[keyof P & string];

/** One effect a machine of this kind can emit. */
export type KindEffect<K extends ActorKind> = K extends ActorKind ? EffectOf<EffectsByKind[K]> : never;

/** XState built-ins that are bookkeeping, not effects. */
const INTERNAL = /^xstate\./;

export function toEffects(actions: readonly { type: string; params?: unknown }[]): Effect[] {
  const out: Effect[] = [];
  for (const a of actions) {
    if (INTERNAL.test(a.type)) continue;
    out.push({ type: a.type, params: (a.params ?? {}) as Record<string, unknown> });
  }
  return out;
}

/**
 * The machines' action implementations: effects never execute inside a machine. Given the machine's effect map,
 * it builds one inert action per effect, each typed with its params, for `setup({ actions })`; the `names`
 * object must list every effect of the map (the compiler checks it), so the machine and its map cannot drift.
 */
export function effectActions<P>(names: { [T in keyof P]: true }): {
  [T in keyof P]: (_args: unknown, _params: P[T]) => void;
} {
  const out = {} as { [T in keyof P]: (_args: unknown, _params: P[T]) => void };
  for (const name of Object.keys(names) as (keyof P)[]) out[name] = noEffect;
  return out;
}

export const noEffect = (_args: unknown, _params: unknown): void => {};
