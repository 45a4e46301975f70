// Replay: the state of an actor is the fold of its events through its machine. The same pure
// `transition` the live host uses; here the returned effects are only reported, never run.
import {
  createActor,
  initialTransition,
  transition,
  type AnyActorScope,
  type AnyStateMachine,
  type SnapshotFrom,
} from 'xstate';
import type { ActorKind, MachineEvent } from '../domain/events.ts';
import { toEffects, type Effect } from './effects.ts';
import { executionMachine } from './execution.machine.ts';
import { instanceMachine } from './instance.machine.ts';

export const machines: Record<ActorKind, AnyStateMachine> = {
  instance: instanceMachine,
  execution: executionMachine,
};

export type AnySnapshot = SnapshotFrom<AnyStateMachine>;

export interface Step {
  version: number;
  event: MachineEvent;
  from: string;
  to: string;
  /** false when the state could not accept the event (it was recorded as rejected, or is from a foreign log). */
  accepted: boolean;
  effects: Effect[];
  context: Record<string, unknown>;
}

/** A readable state name: "running", "crashed.backoff". */
export function stateName(snapshot: AnySnapshot): string {
  const flatten = (v: unknown): string =>
    typeof v === 'string'
      ? v
      : Object.entries(v as Record<string, unknown>)
          .map(([k, sub]) => `${k}.${flatten(sub)}`)
          .join(',');
  return flatten(snapshot.value);
}

export function initialSnapshot(machine: AnyStateMachine): AnySnapshot {
  return initialTransition(machine)[0];
}

/** One pure step. Events the state cannot take are reported as not accepted and change nothing. */
export function step(
  machine: AnyStateMachine,
  snapshot: AnySnapshot,
  event: MachineEvent,
): { snapshot: AnySnapshot; accepted: boolean; effects: Effect[] } {
  if (!snapshot.can(event)) return { snapshot, accepted: false, effects: [] };
  const [next, actions] = transition(machine, snapshot, event);
  return { snapshot: next, accepted: true, effects: toEffects(actions) };
}

/**
 * An inert actor scope, as XState's own `transition()` builds one per call. Building it means
 * constructing an Actor (which computes an initial snapshot), so a fold builds it once and reuses it:
 * replay drops actions, so a scope whose executor ignores them is all the pure step needs.
 */
const inertScopes = new WeakMap<AnyStateMachine, AnyActorScope>();
function inertScope(machine: AnyStateMachine): AnyActorScope {
  let scope = inertScopes.get(machine);
  if (!scope) {
    const self = createActor(machine);
    scope = {
      self,
      defer: () => {},
      id: '',
      logger: () => {},
      sessionId: '',
      stopChild: () => {},
      system: self.system,
      emit: () => {},
      actionExecutor: () => {},
    } as unknown as AnyActorScope; // why: XState's internal transition takes a scope; replay needs an inert one with only these members
    inertScopes.set(machine, scope);
  }
  return scope;
}

/**
 * Folds events into a snapshot with the machine's own pure transition function; effects are
 * dropped. Unhandled events leave the snapshot as it is (rejected events are stored under their own type).
 */
export function replay(machine: AnyStateMachine, events: Iterable<MachineEvent>, from?: AnySnapshot): AnySnapshot {
  const scope = inertScope(machine);
  let snapshot = from ?? initialFor(machine, scope);
  for (const e of events) snapshot = machine.transition(snapshot, e, scope);
  return snapshot;
}

/**
 * Folds one more event into a snapshot (undefined = the machine's initial snapshot). For replaying a whole
 * log in seq order without holding its events: memory stays O(streams), not O(events).
 */
export function foldEvent(
  machine: AnyStateMachine,
  snapshot: AnySnapshot | undefined,
  event: MachineEvent,
): AnySnapshot {
  const scope = inertScope(machine);
  return machine.transition(snapshot ?? initialFor(machine, scope), event, scope);
}

/** A snapshot as plain JSON-able data (for the snapshot cache, inspect/snapshots.ts). */
export function persistSnapshot(machine: AnyStateMachine, snapshot: AnySnapshot): unknown {
  return machine.getPersistedSnapshot(snapshot);
}

/** The snapshot persistSnapshot's data stands for, ready to fold more events into. */
export function restoreSnapshot(machine: AnyStateMachine, persisted: unknown): AnySnapshot {
  return machine.restoreSnapshot(persisted as AnySnapshot, inertScope(machine)) as AnySnapshot;
}

/** A machine's initial snapshot without input never changes: computed once per machine. */
const initials = new WeakMap<AnyStateMachine, AnySnapshot>();
function initialFor(machine: AnyStateMachine, scope: AnyActorScope): AnySnapshot {
  let s = initials.get(machine);
  if (!s) {
    s = machine.getInitialSnapshot(scope, undefined) as AnySnapshot;
    initials.set(machine, s);
  }
  return s;
}

/** Folds events and reports every transition (for `runlog replay --step` and the inspector's scrubber). */
export function replaySteps(machine: AnyStateMachine, events: Iterable<MachineEvent & { version?: number }>): Step[] {
  let snapshot = initialSnapshot(machine);
  const steps: Step[] = [];
  let i = 0;
  for (const e of events) {
    i += 1;
    const from = stateName(snapshot);
    const r = step(machine, snapshot, e);
    snapshot = r.snapshot;
    steps.push({
      version: e.version ?? i,
      event: e,
      from,
      to: stateName(snapshot),
      accepted: r.accepted,
      effects: r.effects,
      context: snapshot.context,
    });
  }
  return steps;
}

/** Terminal = nothing more will happen without a new request: no rehydration needed at start. */
export function isTerminal(snapshot: AnySnapshot): boolean {
  return snapshot.status === 'done' || stateName(snapshot) === 'crashed.down';
}
