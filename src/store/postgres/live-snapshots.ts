// Live actors' newest snapshots in a PostgreSQL supervisor's store (host-store.ts; snapshots: inspect/snapshots.ts).
// The host rehydrates an actor from its snapshot and the events after it at every transition, so the newest one of
// each live actor is read at open and kept as this node appends them. Ended actors' are left in PostgreSQL (a read of
// one folds from its events, the same answer), as are the older ones a replay stepping back asks for.
import type { SnapshotRecord, StreamAppend, StreamAppendOutcome } from '../port.ts';
import type { PgEventStore } from './event-store.ts';

export class LiveSnapshots {
  private readonly snapshots = new Map<string, SnapshotRecord>();

  constructor(private readonly pg: PgEventStore) {}

  /** Reads the live actors' newest snapshots (at open). */
  async load(live: readonly string[]): Promise<void> {
    for (const r of await this.pg.latestSnapshots(live)) this.snapshots.set(r.stream, r);
  }

  /** Keeps the snapshot an append committed with its events; an actor that ended drops its own. */
  appended(r: StreamAppend, o: StreamAppendOutcome): void {
    if (o.ok && r.snapshot && r.snapshot.stream === r.stream && r.snapshot.version === o.result.version) {
      if (r.row?.status === 'terminal') this.snapshots.delete(r.stream);
      else this.snapshots.set(r.stream, r.snapshot);
    }
  }

  async atOrBefore(stream: string, version?: number): Promise<SnapshotRecord | undefined> {
    const r = this.snapshots.get(stream);
    if (!r || version === undefined || r.version <= version) return r;
    // An older one than the newest (a replay stepping back): the one it replaced, kept in PostgreSQL.
    return this.pg.snapshotAtOrBefore(stream, version);
  }
}
