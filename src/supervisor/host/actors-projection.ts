// The `actors` projection (what `ps` lists) as a projection registered with the event-store port: each actor's
// row is folded from its stream's events through its machine, inside the append's transaction, by the store —
// not written by the host through methods on the port. A supervisor on PostgreSQL registers it (runlog.ts); on
// SQLite the host still writes SqliteEventStore's `actors` table in the append's transaction.
import { randomBytes } from 'node:crypto';
import { createActor, type AnyStateMachine } from 'xstate';
import { parseStreamName, type RecordedEvent } from '../../domain/events.ts';
import { foldEvent, machines, stateName, type AnySnapshot } from '../../machines/runtime.ts';
import { actorStatus, summarize } from '../../machines/summary.ts';
import type { ActorRow, EventStorePort, Projection } from '../../store/port.ts';

export const ACTORS_PROJECTION = 'actors';

/** The stored document: the row `ps` shows, plus the machine snapshot the next event folds into. */
export interface ActorDocument extends ActorRow {
  /** XState's persisted snapshot (JSON). */
  snapshot: unknown;
  /** Which evolve produced this document (see the memo below). */
  rev: string;
}

const MEMO_LIMIT = 10_000;

function restore(machine: AnyStateMachine, persisted: unknown): AnySnapshot {
  // createActor restores a persisted snapshot without starting anything.
  return createActor(machine, { snapshot: persisted as never }).getSnapshot() as AnySnapshot;
}

/**
 * One per store. Restoring a persisted snapshot costs more than the fold itself, so the projection remembers the
 * live snapshot it produced for each stream, keyed by a revision token stored in the document: the memo is used
 * only when the stored document is exactly the one this process produced (an append by another process, or one
 * that rolled back, never matches), so the result is always what restoring would give.
 */
export function actorsProjection(): Projection<ActorDocument> {
  const memo = new Map<string, { rev: string; snapshot: AnySnapshot }>();
  const tag = randomBytes(6).toString('hex');
  let counter = 0;
  return {
    name: ACTORS_PROJECTION,
    documentId: (e: RecordedEvent) => (parseStreamName(e.stream) ? e.stream : null),
    evolve(doc, e) {
      const ref = parseStreamName(e.stream)!;
      const machine = machines[ref.kind];
      let snapshot: AnySnapshot | undefined;
      if (doc) {
        const m = memo.get(e.stream);
        snapshot = m && m.rev === doc.rev ? m.snapshot : restore(machine, doc.snapshot);
      }
      const next = foldEvent(machine, snapshot, e);
      const rev = `${tag}-${(counter += 1)}`;
      const status = actorStatus(next);
      memo.delete(e.stream);
      if (status === 'active') {
        memo.set(e.stream, { rev, snapshot: next });
        if (memo.size > MEMO_LIMIT) memo.delete(memo.keys().next().value!);
      }
      return {
        id: ref.id,
        kind: ref.kind,
        stream: e.stream,
        state: stateName(next),
        status,
        version: e.version,
        createdAt: doc?.createdAt ?? e.at,
        updatedAt: e.at,
        summary: summarize(ref.kind, next),
        snapshot: machine.getPersistedSnapshot(next),
        rev,
      };
    },
  };
}

const toRow = ({ snapshot: _s, rev: _r, ...row }: ActorDocument): ActorRow => row;

/** What `ps` lists, from the projection: live actors (or all), oldest first. */
export async function listActorRows(
  store: EventStorePort,
  filter: { kind?: string; all?: boolean } = {},
): Promise<ActorRow[]> {
  const docs = await store.projection<ActorDocument>(ACTORS_PROJECTION).list();
  return docs
    .map((d) => toRow(d.doc))
    .filter((r) => (!filter.kind || r.kind === filter.kind) && (filter.all || r.status === 'active'))
    .sort((a, b) =>
      a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0,
    );
}

/** One actor's row by id (instance and execution ids never collide). */
export async function getActorRow(store: EventStorePort, id: string): Promise<ActorRow | undefined> {
  const reader = store.projection<ActorDocument>(ACTORS_PROJECTION);
  for (const kind of ['instance', 'execution']) {
    const d = await reader.get(`${kind}-${id}`);
    if (d) return toRow(d);
  }
  return undefined;
}
