// Bounded reads of one actor for the HTTP API: its events a page at a time, its replay a page of steps at a
// time, and its current state (inspection.ts inspectActor), each starting from the nearest usable snapshot
// (snapshots.ts) and never holding the whole history. A fold that is still long (no usable snapshot: the machine
// changed in a release, or a store that keeps only the newest one) reads a page at a time and yields to the event
// loop every FOLD_CHUNK events, so the server's other requests (health among them) are answered while it runs.
import { ValidationError } from '../domain/errors.ts';
import { toMachineEvent, type ActorKind, type RecordedEvent } from '../domain/events.ts';
import {
  foldEvent,
  initialSnapshot,
  machines,
  stateName,
  step,
  type AnySnapshot,
  type Step,
} from '../machines/runtime.ts';
import { collect, type EventStorePort } from '../store/port.ts';
import { foldStream, type ReplayView } from './inspection.ts';
import { resolveActor } from './resolve-actor.ts';
import { decodeSnapshot } from './snapshots.ts';

export { FOLD_CHUNK } from './inspection.ts';

/** The most (and the default) events or steps one page holds, as `/api/events` allows. */
export const PAGE_LIMIT = 1000;

export interface EventsPage {
  id: string;
  kind: ActorKind;
  version: number;
  events: RecordedEvent[];
  /** The `after` that reads the next page; null when this page reaches the end of the range. */
  next: number | null;
}

export interface ReplayPage extends ReplayView {
  /** The snapshot version the state at `to` was folded from (0: from the first event). */
  from: number;
  /** The `after` that reads the next page of steps; null when the steps reach `to`. */
  next: number | null;
}

/** The versions of one page: `after`/`limit` within `from`/`to` (inclusive) and the stream's end. */
function pageRange(
  version: number,
  q: { from?: number; to?: number; after?: number; limit?: number },
): { first: number; last: number; end: number } {
  const end = Math.min(q.to ?? version, version);
  const first = Math.max(q.from ?? 1, (q.after ?? 0) + 1);
  const last = Math.min(end, first + (q.limit ?? PAGE_LIMIT) - 1);
  return { first, last, end };
}

/** `GET /api/actors/:id/events`: one page of an actor's events (at most `limit`), read by version. */
export async function readEventsPage(
  store: EventStorePort,
  id: string,
  q: { from?: number; to?: number; after?: number; limit?: number } = {},
): Promise<EventsPage> {
  const ref = await resolveActor(store, id);
  const version = await store.streamVersion(ref.stream);
  const { first, last, end } = pageRange(version, q);
  const events = first <= last ? await collect(store.readStream(ref.stream, { from: first, to: last })) : [];
  return { id: ref.id, kind: ref.kind, version, events, next: last >= first && last < end ? last : null };
}

/** One page of the whole log: the events after global position `after`, at most `limit` (the API, its event streams). */
export async function readLogPage(
  store: Pick<EventStorePort, 'readAll'>,
  after: number,
  limit: number,
): Promise<RecordedEvent[]> {
  return collect(store.readAll({ from: after + 1, limit }));
}

/** One stream's events `from`..`to` (inclusive), read whole: a page its caller bounded. */
export async function readStreamPage(
  store: Pick<EventStorePort, 'readStream'>,
  stream: string,
  range: { from: number; to: number },
): Promise<RecordedEvent[]> {
  return collect(store.readStream(stream, range));
}

/** The newest usable snapshot at or before `version` (0 and no snapshot: fold from the first event). */
async function startAt(
  store: EventStorePort,
  kind: ActorKind,
  stream: string,
  version: number,
): Promise<{ version: number; snapshot: AnySnapshot | undefined }> {
  const record = await store.snapshotAtOrBefore(stream, version);
  const snapshot = decodeSnapshot(machines[kind], record);
  return snapshot ? { version: record!.version, snapshot } : { version: 0, snapshot: undefined };
}

/** The actor's state at `to`: from the snapshot at or before it, folding only the events after it. */
async function stateAt(
  store: EventStorePort,
  kind: ActorKind,
  stream: string,
  to: number,
): Promise<{ from: number; snapshot: AnySnapshot }> {
  const machine = machines[kind];
  const start = await startAt(store, kind, stream, to);
  let snapshot = start.snapshot;
  await foldStream(
    store,
    stream,
    { from: start.version + 1, to },
    (e) => (snapshot = foldEvent(machine, snapshot, toMachineEvent(e))),
  );
  return { from: start.version, snapshot: snapshot ?? initialSnapshot(machine) };
}

/**
 * `GET /api/actors/:id/replay`: the state and context at `to` (default: the current version) and one page of the
 * steps up to it (those after `after`, at most `limit`), each fold starting from the nearest snapshot.
 */
export async function replayPage(
  store: EventStorePort,
  id: string,
  q: { to?: number; after?: number; limit?: number; steps?: boolean } = {},
): Promise<ReplayPage> {
  const ref = await resolveActor(store, id);
  const version = await store.streamVersion(ref.stream);
  if (q.to !== undefined && q.to > version) {
    throw new ValidationError('REPLAY_TO_INVALID', `${ref.id} has ${version} events; cannot replay to ${q.to}`, [], {
      id: ref.id,
      to: q.to,
    });
  }
  const to = q.to ?? version;
  const machine = machines[ref.kind];
  const steps: Step[] = [];
  const { first, last } = pageRange(to, { after: q.after ?? 0, limit: q.limit ?? PAGE_LIMIT });
  let at: { from: number; snapshot: AnySnapshot } | undefined;
  if (q.steps !== false && first <= last) {
    // The state before the page's first step, then each step of the page.
    const before = await stateAt(store, ref.kind, ref.stream, first - 1);
    let snapshot = before.snapshot;
    await foldStream(store, ref.stream, { from: first, to: last }, (e: RecordedEvent) => {
      const event = { ...toMachineEvent(e), version: e.version };
      const fromState = stateName(snapshot);
      const r = step(machine, snapshot, event);
      snapshot = r.snapshot;
      steps.push({
        version: e.version,
        event,
        from: fromState,
        to: stateName(snapshot),
        accepted: r.accepted,
        effects: r.effects,
        context: snapshot.context as Record<string, unknown>,
      });
    });
    if (last === to) at = { from: before.from, snapshot };
  }
  at ??= await stateAt(store, ref.kind, ref.stream, to);
  const next = q.steps !== false && last >= first && last < to ? last : null;
  return {
    id: ref.id,
    kind: ref.kind,
    to,
    version,
    state: stateName(at.snapshot),
    context: at.snapshot.context as Record<string, unknown>,
    steps,
    from: at.from,
    next,
  };
}
