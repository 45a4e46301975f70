// Read-side queries over the log: list, inspect, events, replay. They need only the SQLite file,
// so they work post-mortem with no supervisor running.
import { ReplayToInvalidError } from '../domain/errors.ts';
import { toMachineEvent, type ActorKind, type RecordedEvent, type ReplayEvent } from '../domain/events.ts';
import { foldEvent, machines, replay, replaySteps, stateName, type AnySnapshot, type Step } from '../machines/runtime.ts';
import { actorStatus, summarize } from '../machines/summary.ts';
import type { ActorRow, EventStore } from '../store/event-store.ts';
import type { SqliteEventStore } from '../store/sqlite/event-store.ts';
import { resolveActor, resolveReadableActor } from './resolve-actor.ts';
import { decodeSnapshot, encodeSnapshot } from './snapshots.ts';

/** What the read-side queries need: a SQLite log, or the PostgreSQL host store's copy. */
export type LogReader = Pick<EventStore, 'read' | 'readAll' | 'streamVersion' | 'listActors' | 'getActor' | 'latestSnapshot'>;

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

export { resolveActor, resolveReadableActor };

export function listActors(store: LogReader, filter: { kind?: ActorKind; all?: boolean } = {}): ActorRow[] {
  return store.listActors(filter);
}

export function inspectActor(store: LogReader, id: string): ActorView {
  const ref = resolveActor(store, id);
  const row = store.getActor(ref.id);
  if (row?.archived && store.streamVersion(ref.stream) === 0) {
    // A tombstone: what the log still says of an archived actor, and where its history went.
    return { id: row.id, kind: ref.kind, stream: row.stream, state: row.state, status: row.status, version: row.version, createdAt: row.createdAt, updatedAt: row.updatedAt, summary: row.summary, context: {}, traceId: null, archived: row.archived };
  }
  const machine = machines[ref.kind];
  // The newest usable snapshot and the events after it (snapshots.ts); without one, every event.
  const cached = store.latestSnapshot?.(ref.stream);
  const from = cached ? decodeSnapshot(machine, cached) : null;
  const tail = store.read(ref.stream, from ? { from: cached!.version + 1 } : {});
  const snapshot = replay(machine, tail.map(toMachineEvent), from ?? undefined);
  const first = from ? store.read(ref.stream, { from: 1, to: 1 })[0] : tail[0];
  const last = tail.at(-1) ?? (from ? store.read(ref.stream, { from: cached!.version, to: cached!.version })[0] : undefined);
  return actorViewOf(ref, snapshot, first, last);
}

/** The view of an actor folded to `snapshot`, given its stream's first event and the last one folded. */
export function actorViewOf(ref: { id: string; kind: ActorKind; stream: string }, snapshot: AnySnapshot, first: RecordedEvent | undefined, last: RecordedEvent | undefined): ActorView {
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

export function actorEvents(store: LogReader, id: string, range: { from?: number; to?: number } = {}): RecordedEvent[] {
  const ref = resolveActor(store, id);
  return store.read(ref.stream, range);
}

/** Replays an event list (from the log or an exported file) through the kind's machine, with no side effects. */
export function replayEvents(kind: ActorKind, id: string, events: readonly RecordedEvent[], to?: number): ReplayView {
  const upto = to === undefined ? events : events.filter((e) => e.version <= to);
  if (to !== undefined && to > (events.at(-1)?.version ?? 0)) {
    // The caller's --to / ?to= is wrong (exit 2, HTTP 400), not the log: REPLAY (damaged) is for a history that cannot be folded.
    throw new ReplayToInvalidError(id, events.at(-1)?.version ?? 0, to);
  }
  const steps = replaySteps(machines[kind], upto.map((e) => ({ ...toMachineEvent(e), version: e.version })));
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

export function replayActor(store: LogReader, id: string, to?: number): ReplayView {
  const ref = resolveActor(store, id);
  return replayEvents(ref.kind, ref.id, store.read(ref.stream), to);
}

/** Recomputes the whole `actors` projection from the log (`runlog rebuild`), folding it once in seq order. */
export function rebuildProjection(store: LogReader & Pick<EventStore, 'replaceProjection'> & { iterateReplay?: SqliteEventStore['iterateReplay'] }): { actors: number; events: number } {
  const folded = foldLog(store);
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
  store.replaceProjection(rows);
  return { actors: rows.length, events: folded.events };
}

export interface FoldedStream {
  kind: ActorKind;
  snapshot: AnySnapshot;
  version: number;
  createdAt: string;
  updatedAt: string;
}

/**
 * Recomputes every actor's snapshot from the log (`runlog rebuild --snapshots`): one fold, one snapshot per actor
 * at its current version, replacing all that were kept.
 */
export function rebuildSnapshots(store: SqliteEventStore): { snapshots: number; events: number } {
  const folded = foldLog(store);
  const records = [...folded.streams].map(([stream, f]) => encodeSnapshot(machines[f.kind], stream, f.version, f.createdAt, f.snapshot));
  return { snapshots: store.replaceSnapshots(records), events: folded.events };
}

/**
 * Replays the whole log in one pass: every stream's current snapshot, holding no event longer than its fold.
 * `visit` sees each stream's fold after each of its events (verify compares snapshots with it).
 */
export function foldLog(
  store: LogReader & { iterateReplay?: SqliteEventStore['iterateReplay'] },
  visit?: (stream: string, folded: FoldedStream) => void,
): { streams: Map<string, FoldedStream>; events: number } {
  const streams = new Map<string, FoldedStream>();
  let events = 0;
  // A replay event (and a recorded one) is a machine event (type, at, data): it goes to the machine as it is.
  const all: Iterable<ReplayEvent> = store.iterateReplay ? store.iterateReplay() : store.readAll();
  for (const e of all) {
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
      const f: FoldedStream = { kind, snapshot: foldEvent(machine, undefined, e), version: e.version, createdAt: e.at, updatedAt: e.at };
      streams.set(e.stream, f);
      visit?.(e.stream, f);
    }
    events += 1;
  }
  return { streams, events };
}
