// Given/when/then for pure machines (Emmett-style): given past events, when one more arrives,
// then expect a state, effects and context. No IO, no clock.
import { expect } from 'vitest';
import type { AnyStateMachine } from 'xstate';
import type { MachineEvent } from '../../src/domain/events.ts';
import { replay, stateName, step, type AnySnapshot } from '../../src/machines/runtime.ts';
import type { Effect } from '../../src/machines/effects.ts';

let clock = Date.parse('2026-01-01T00:00:00.000Z');
export const ev = (type: string, data: Record<string, unknown> = {}, at?: string): MachineEvent => {
  clock += 1000;
  return { type, data, at: at ?? new Date(clock).toISOString() };
};

export interface Then {
  state: string;
  effects: Effect[];
  accepted: boolean;
  snapshot: AnySnapshot;
  context: any;
}

export function given(machine: AnyStateMachine, events: MachineEvent[]) {
  const snapshot = replay(machine, events);
  return {
    snapshot,
    when(event: MachineEvent): Then {
      const r = step(machine, snapshot, event);
      return {
        state: stateName(r.snapshot),
        effects: r.effects,
        accepted: r.accepted,
        snapshot: r.snapshot,
        context: r.snapshot.context,
      };
    },
  };
}

export const effectTypes = (t: Then): string[] => t.effects.map((e) => e.type);

export function expectRejected(t: Then, stateBefore: string): void {
  expect(t.accepted).toBe(false);
  expect(t.state).toBe(stateBefore);
  expect(t.effects).toEqual([]);
}
