// Read-side queries over the log: list, inspect, events, replay. They need only the store port, so they work
// post-mortem with no supervisor running, on any store; every read of history is paged.
import { setImmediate as nextTurn } from 'node:timers/promises';
import { ReplayToInvalidError } from '../domain/errors.ts';
import { toMachineEvent, type ActorKind, type RecordedEvent } from '../domain/events.ts';
import {
  foldEvent,
  initialSnapshot,
  machines,
  replaySteps,
  stateName,
  type AnySnapshot,
  type Step,
} from '../machines/runtime.ts';
import { actorStatus, summarize } from '../machines/summary.ts';
import { collect, type ActorRow, type EventStorePort, type SnapshotRecord } from '../store/port.ts';
import { resolveActor } from './resolve-actor.ts';
import { decodeSnapshot, encodeSnapshot } from './snapshots.ts';

export interface ActorView {
  id: string;
  kind: ActorKind;
  stream: string;
  state: string;
  status: 'active' | 'terminal';
  version: number;
  createdAt: string;
  updatedAt: string;
  summary: Record<string, unknown>;
  context: Record<string, unknown>;
  /** The OpenTelemetry trace of this spawn or execution (recorded in its first event's meta), if one was traced. */
  traceId: string | null;
  /** Its events were moved to this archive (`runlog archive`): state and version are its tombstone's, context is not kept. */
  archived?: { file: string; at: string };
}

export interface ReplayView {
  id: string;
  kind: ActorKind;
  /** The version replayed up to (inclusive). */
  to: number;
  version: number;
  state: string;
  context: Record<string, unknown>;
  steps: Step[];
}

export { resolveActor };

/** Events folded between two turns of the event loop: a long fold leaves a server answering its other requests. */
export const FOLD_CHUNK = 500;

export async function listActors(
  store: EventStorePort,
  filter: { kind?: ActorKind; all?: boolean } = {},
): Promise<ActorRow[]> {
  return store.listActors(filter);
}

/**
 * Reads the stream's events in `range` (inclusive; `to` absent: to its end) a page at a time, handing each to
 * `each`, with a turn of the event loop after every FOLD_CHUNK events. Returns the last event read.
 */
export async function foldStream(
  store: EventStorePort,
  stream: string,
  range: { from: number; to?: number },
  each: (e: RecordedEvent) => void,
): Promise<RecordedEvent | undefined> {
  let last: RecordedEvent | undefined;
  let n = 0;
  if (range.to !== undefined && range.to < range.from) return undefined;
  for await (const e of store.readStream(stream, range)) {
    each(e);
    last = e;
    if (++n % FOLD_CHUNK === 0) await nextTurn();
  }
  return last;
}

/** The stream's event at `version` (undefined when it has none). */
export async function eventAt(
  store: EventStorePort,
  stream: string,
  version: number,
): Promise<RecordedEvent | undefined> {
  return (await collect(store.readStream(stream, { from: version, to: version })))[0];
}

/**
 * One actor's state and summary: folded from its newest usable snapshot (snapshots.ts), reading only the events
 * after it (without one, every event, a page at a time). An archived actor's tombstone when its events are gone.
 */
export async function inspectActor(store: EventStorePort, id: string): Promise<ActorView> {
  const ref = await resolveActor(store, id);
  const row = await store.getActor(ref.id);
  if (row?.archived && (await store.streamVersion(ref.stream)) === 0) {
    // A tombstone: what the log still says of an archived actor, and where its history went.
    return {
      id: row.id,
      kind: ref.kind,
      stream: row.stream,
      state: row.state,
      status: row.status,
      version: row.version,
      createdAt: row.createdAt,
      updatedAt: row.updatedAt,
      summary: row.summary,
      context: {},
      traceId: null,
      archived: row.archived,
    };
  }
  const machine = machines[ref.kind];
  const cached = await store.snapshotAtOrBefore(ref.stream);
  const from = cached ? decodeSnapshot(machine, cached) : null;
  let snapshot = from ?? undefined;
  let firstRead: RecordedEvent | undefined;
  const lastRead = await foldStream(store, ref.stream, { from: from ? cached!.version + 1 : 1 }, (e) => {
    firstRead ??= e;
    snapshot = foldEvent(machine, snapshot, toMachineEvent(e));
  });
  const first = from ? await eventAt(store, ref.stream, 1) : firstRead;
  const last = lastRead ?? (from ? await eventAt(store, ref.stream, cached!.version) : undefined);
  return actorViewOf(ref, snapshot ?? initialSnapshot(machine), first, last);
}

/** The view of an actor folded to `snapshot`, given its stream's first event and the last one folded. */
export function actorViewOf(
  ref: { id: string; kind: ActorKind; stream: string },
  snapshot: AnySnapshot,
  first: RecordedEvent | undefined,
  last: RecordedEvent | undefined,
): ActorView {
  return {
    id: ref.id,
    kind: ref.kind,
    stream: ref.stream,
    state: stateName(snapshot),
    status: actorStatus(snapshot),
    version: last?.version ?? 0,
    createdAt: first?.at ?? '',
    updatedAt: last?.at ?? '',
    summary: summarize(ref.kind, snapshot),
    context: snapshot.context as Record<string, unknown>,
    traceId: typeof first?.meta.traceId === 'string' ? first.meta.traceId : null,
  };
}

/** One actor's events, versions `from`..`to` inclusive (a range the caller bounds: it is returned whole). */
export async function actorEvents(
  store: EventStorePort,
  id: string,
  range: { from?: number; to?: number } = {},
): Promise<RecordedEvent[]> {
  const ref = await resolveActor(store, id);
  return collect(store.readStream(ref.stream, range));
}

/** Replays an event list (from the log or an exported file) through the kind's machine, with no side effects. */
export function replayEvents(kind: ActorKind, id: string, events: readonly RecordedEvent[], to?: number): ReplayView {
  const upto = to === undefined ? events : events.filter((e) => e.version <= to);
  if (to !== undefined && to > (events.at(-1)?.version ?? 0)) {
    // The caller's --to / ?to= is wrong (exit 2, HTTP 400), not the log: REPLAY (damaged) is for a history that cannot be folded.
    throw new ReplayToInvalidError(id, events.at(-1)?.version ?? 0, to);
  }
  const steps = replaySteps(
    machines[kind],
    upto.map((e) => ({ ...toMachineEvent(e), version: e.version })),
  );
  const last = steps.at(-1);
  return {
    id,
    kind,
    to: last?.version ?? 0,
    version: events.at(-1)?.version ?? 0,
    state: last?.to ?? 'new',
    context: last?.context ?? {},
    steps,
  };
}

/** One actor's history folded step by step through its machine, up to version `to` (the events after it are not read). */
export async function replayActor(store: EventStorePort, id: string, to?: number): Promise<ReplayView> {
  const ref = await resolveActor(store, id);
  const version = await store.streamVersion(ref.stream);
  if (to !== undefined && to > version) throw new ReplayToInvalidError(ref.id, version, to);
  const events = await collect(store.readStream(ref.stream, to !== undefined ? { to } : {}));
  return { ...replayEvents(ref.kind, ref.id, events), version };
}

/** Recomputes the whole `actors` projection from the log (`runlog rebuild`), folding it once in seq order. */
export async function rebuildProjection(store: EventStorePort): Promise<{ actors: number; events: number }> {
  const folded = await foldLog(store);
  const rows: ActorRow[] = [];
  for (const [stream, f] of folded.streams) {
    rows.push({
      id: stream.slice(f.kind.length + 1),
      kind: f.kind,
      stream,
      state: stateName(f.snapshot),
      status: actorStatus(f.snapshot),
      version: f.version,
      createdAt: f.createdAt,
      updatedAt: f.updatedAt,
      summary: summarize(f.kind, f.snapshot),
    });
  }
  rows.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0));
  await store.replaceActorRows(rows);
  return { actors: rows.length, events: folded.events };
}

export interface FoldedStream {
  kind: ActorKind;
  snapshot: AnySnapshot;
  version: number;
  createdAt: string;
  updatedAt: string;
}

/** Where `rebuildSnapshots` writes: a store that keeps snapshots apart from the port (SQLite's engine). */
export interface SnapshotReplacing {
  /** Replaces every kept snapshot (newest and older) with these, in one transaction; returns how many were written. */
  replaceSnapshots(records: readonly SnapshotRecord[]): number | Promise<number>;
}

/**
 * Recomputes every actor's snapshot from the log (`runlog rebuild --snapshots`): one fold, one snapshot per actor
 * at its current version, replacing all that were kept.
 */
export async function rebuildSnapshots(
  store: EventStorePort,
  target: SnapshotReplacing,
): Promise<{ snapshots: number; events: number }> {
  const folded = await foldLog(store);
  const records = [...folded.streams].map(([stream, f]) =>
    encodeSnapshot(machines[f.kind], stream, f.version, f.createdAt, f.snapshot),
  );
  return { snapshots: await target.replaceSnapshots(records), events: folded.events };
}

/**
 * Replays the whole log in one pass, read a page at a time: every stream's current snapshot, holding no event
 * longer than its fold. `visit` sees each stream's fold after each of its events (verify compares snapshots with it).
 */
export async function foldLog(
  store: EventStorePort,
  visit?: (stream: string, folded: FoldedStream) => void,
): Promise<{ streams: Map<string, FoldedStream>; events: number }> {
  const streams = new Map<string, FoldedStream>();
  let events = 0;
  // A recorded event is a machine event (type, at, data): it goes to the machine as it is.
  for await (const e of store.readAll()) {
    const cur = streams.get(e.stream);
    if (cur) {
      cur.snapshot = foldEvent(machines[cur.kind], cur.snapshot, e);
      cur.version = e.version;
      cur.updatedAt = e.at;
      visit?.(e.stream, cur);
    } else {
      // A stream's kind is its name's prefix; streams of no known kind are skipped.
      const kind = e.stream.slice(0, e.stream.indexOf('-')) as ActorKind;
      const machine = machines[kind];
      if (!machine) continue;
      const f: FoldedStream = {
        kind,
        snapshot: foldEvent(machine, undefined, e),
        version: e.version,
        createdAt: e.at,
        updatedAt: e.at,
      };
      streams.set(e.stream, f);
      visit?.(e.stream, f);
    }
    events += 1;
  }
  return { streams, events };
}
