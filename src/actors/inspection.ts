// Read-side queries over the log: list, inspect, events, replay. They need only the SQLite file,
// so they work post-mortem with no supervisor running.
import { ReplayError } from '../domain/errors.ts';
import { toMachineEvent, type ActorKind, type RecordedEvent, type ReplayEvent } from '../domain/events.ts';
import { foldEvent, machines, replay, replaySteps, stateName, type AnySnapshot, type Step } from '../machines/replay.ts';
import { actorStatus, summarize } from '../machines/summary.ts';
import type { ActorRow, EventStore } from '../store/event-store.ts';
import type { SqliteEventStore } from '../store/sqlite-event-store.ts';
import { resolveActor } from './resolve-actor.ts';

/** What the read-side queries need: a SQLite log, or the PostgreSQL host store's copy. */
export type LogReader = Pick<EventStore, 'read' | 'readAll' | 'streamVersion' | 'listActors' | 'getActor'>;

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

export function listActors(store: LogReader, filter: { kind?: ActorKind; all?: boolean } = {}): ActorRow[] {
  return store.listActors(filter);
}

export function inspectActor(store: LogReader, id: string): ActorView {
  const ref = resolveActor(store, id);
  const events = store.read(ref.stream);
  const snapshot = replay(machines[ref.kind], events.map(toMachineEvent));
  return {
    id: ref.id,
    kind: ref.kind,
    stream: ref.stream,
    state: stateName(snapshot),
    status: actorStatus(snapshot),
    version: events.at(-1)?.version ?? 0,
    createdAt: events[0]?.at ?? '',
    updatedAt: events.at(-1)?.at ?? '',
    summary: summarize(ref.kind, snapshot),
    context: snapshot.context as Record<string, unknown>,
    traceId: typeof events[0]?.meta.traceId === 'string' ? events[0].meta.traceId : null,
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
    throw new ReplayError(`${id} has ${events.at(-1)?.version ?? 0} events; cannot replay to ${to}`, { id, to });
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

/** Replays the whole log in one pass: every stream's current snapshot, holding no event longer than its fold. */
export function foldLog(store: LogReader & { iterateReplay?: SqliteEventStore['iterateReplay'] }): { streams: Map<string, FoldedStream>; events: number } {
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
    } else {
      // A stream's kind is its name's prefix; streams of no known kind are skipped.
      const kind = e.stream.slice(0, e.stream.indexOf('-')) as ActorKind;
      const machine = machines[kind];
      if (!machine) continue;
      streams.set(e.stream, { kind, snapshot: foldEvent(machine, undefined, e), version: e.version, createdAt: e.at, updatedAt: e.at });
    }
    events += 1;
  }
  return { streams, events };
}
