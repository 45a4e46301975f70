// Snapshots are a cache of folds (issue 15): an actor's state and context at a version, so start-up and
// `inspect` fold only the events after it. The events stay the only truth: a snapshot that is missing, fails its
// checksum, or was made by another machine definition (its fingerprint differs: the machine changed in a
// release) is ignored and the actor is folded from its events. Deleting every snapshot changes no answer.
import { createHash } from 'node:crypto';
import type { AnyStateMachine } from 'xstate';
import type { ActorKind } from '../domain/events.ts';
import { isTerminal, persistSnapshot, restoreSnapshot, type AnySnapshot } from '../machines/runtime.ts';
import type { SnapshotRecord } from '../store/port.ts';

/** A snapshot is taken every this many events of an actor, and at its terminal state. */
export const SNAPSHOT_EVERY = 100;

/**
 * Bumped by hand when what a snapshot holds changes meaning without the machine definitions changing (a helper a
 * machine calls, the persisted format): every older snapshot is then ignored.
 */
const SNAPSHOT_FORMAT = 1;

/**
 * What a machine definition is, as text: its config and implementations, functions by their source (XState's
 * assign() and friends keep the user's function in properties, which are walked too). A change to a state, a
 * transition, a guard or an action's code changes it.
 */
function describe(value: unknown, seen: WeakSet<object>): unknown {
  if (typeof value === 'function') {
    const own: Record<string, unknown> = { fn: value.toString() };
    for (const k of Object.keys(value).sort()) own[k] = describe(Reflect.get(value, k), seen);
    return own;
  }
  if (value === null || typeof value !== 'object') return value;
  if (seen.has(value)) return '[cycle]';
  seen.add(value);
  if (Array.isArray(value)) return value.map((v) => describe(v, seen));
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(value).sort()) out[k] = describe((value as Record<string, unknown>)[k], seen);
  return out;
}

const fingerprints = new WeakMap<AnyStateMachine, string>();

/** The machine definition's fingerprint: a snapshot is used only by the definition that made it. */
export function machineFingerprint(machine: AnyStateMachine): string {
  let f = fingerprints.get(machine);
  if (!f) {
    const text = JSON.stringify(
      describe(
        { format: SNAPSHOT_FORMAT, id: machine.id, config: machine.config, implementations: machine.implementations },
        new WeakSet(),
      ),
    );
    f = createHash('sha256').update(text).digest('hex').slice(0, 32);
    fingerprints.set(machine, f);
  }
  return f;
}

function checksum(stream: string, version: number, fingerprint: string, createdAt: string, state: string): string {
  return createHash('sha256')
    .update(JSON.stringify([stream, version, fingerprint, createdAt]))
    .update('\n')
    .update(state)
    .digest('hex');
}

/** Whether an actor's snapshot is due after the event that brought it to `version`. */
export function snapshotDue(snapshot: AnySnapshot, version: number): boolean {
  return version % SNAPSHOT_EVERY === 0 || isTerminal(snapshot);
}

export function encodeSnapshot(
  machine: AnyStateMachine,
  stream: string,
  version: number,
  createdAt: string,
  snapshot: AnySnapshot,
): SnapshotRecord {
  return sealSnapshot({
    stream,
    version,
    fingerprint: machineFingerprint(machine),
    createdAt,
    state: snapshotState(machine, snapshot),
  });
}

/** The JSON text a snapshot stores for a machine snapshot (what verify compares a fold with). */
export function snapshotState(machine: AnyStateMachine, snapshot: AnySnapshot): string {
  return JSON.stringify(persistSnapshot(machine, snapshot));
}

/** A record with its checksum. */
export function sealSnapshot(r: Omit<SnapshotRecord, 'checksum'>): SnapshotRecord {
  return { ...r, checksum: checksum(r.stream, r.version, r.fingerprint, r.createdAt, r.state) };
}

/** Why a stored snapshot cannot be used (null: it can). */
export function snapshotProblem(
  machine: AnyStateMachine,
  record: SnapshotRecord,
): { code: 'SNAPSHOT_STALE' | 'SNAPSHOT_CHECKSUM'; reason: string } | null {
  if (record.checksum !== checksum(record.stream, record.version, record.fingerprint, record.createdAt, record.state)) {
    return { code: 'SNAPSHOT_CHECKSUM', reason: 'its bytes do not match its checksum' };
  }
  const current = machineFingerprint(machine);
  if (record.fingerprint !== current)
    return {
      code: 'SNAPSHOT_STALE',
      reason: `it was made by another machine definition (${record.fingerprint.slice(0, 12)}…, now ${current.slice(0, 12)}…)`,
    };
  return null;
}

/** The state a usable snapshot holds, or null (ignored: the caller folds from the events). */
export function decodeSnapshot(machine: AnyStateMachine, record: SnapshotRecord | undefined): AnySnapshot | null {
  if (!record || snapshotProblem(machine, record)) return null;
  try {
    return restoreSnapshot(machine, JSON.parse(record.state));
  } catch {
    return null; // a state the machine cannot restore is no better than a missing one
  }
}

/** The stream's actor kind, when it is an actor's stream. */
export function kindOf(stream: string, machines: Record<ActorKind, AnyStateMachine>): ActorKind | null {
  const kind = stream.slice(0, stream.indexOf('-')) as ActorKind;
  return machines[kind] ? kind : null;
}
