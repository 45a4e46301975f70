// The old synchronous store seam, going away: callers move to the one async port (port.ts) and the capabilities
// (capabilities.ts). SqliteEventStore still has this shape; PgHostStore (postgres/host-store.ts) implements the
// port instead. Do not add new uses.
import type { ClusterRecords } from '../domain/cluster-nodes.ts';
import type { RecordedEvent } from '../domain/events.ts';
import type { AppendObserver, AppendOptions, AppendOutcome, AppendRequest, AppendResult, EventStore, Heartbeat, ReadAllOptions, SubscribeOptions } from './event-store.ts';
import type { NewEvent } from '../domain/events.ts';
import type { IterateEventsOptions } from './sqlite/event-store.ts';

/** What reading the log needs (ps, inspect, events, replay, export, the API). */
export interface ReadableLog extends Pick<EventStore, 'read' | 'readAll' | 'streamVersion' | 'streams' | 'listActors' | 'getActor' | 'latestSnapshot' | 'snapshotAtOrBefore'> {
  readonly file: string;
  lastSeq(): number;
  subscribe(options: SubscribeOptions, handler: (event: RecordedEvent) => void): () => void;
  iterateEvents(options?: IterateEventsOptions): IterableIterator<RecordedEvent>;
  readAllJson?(afterSeq: number, limit: number): { seq: number; json: string }[];
  readHeartbeat(): Heartbeat | null;
  /**
   * A cluster's log (PostgreSQL): the node an actor last ran on (the node that appended its latest event) and the
   * node that owns it now (holds its lease; null once it has ended). Absent on SQLite (one supervisor).
   */
  placement?(stream: string): { node: string | null; owner: string | null };
  /** A cluster's log (PostgreSQL): every node's heartbeat and every lease, read from the database now. */
  clusterRecords?(): Promise<ClusterRecords>;
  close(): void | Promise<void>;
}

/** What the supervisor needs on top: appends (maybe asynchronous), the heartbeat, metrics. */
export interface HostStore extends ReadableLog {
  append(stream: string, events: readonly NewEvent[], options: AppendOptions): AppendResult | Promise<AppendResult>;
  appendMany(requests: readonly AppendRequest[]): AppendOutcome[] | Promise<AppendOutcome[]>;
  replaceProjection(rows: Parameters<EventStore['replaceProjection']>[0]): void | Promise<void>;
  writeHeartbeat(h: Heartbeat): void;
  /**
   * A store that can be briefly unreachable (PostgreSQL restarting): resolves once it answers again and the
   * reads have caught up with what was committed meanwhile (rejects when the store is closed): true; false when
   * it has not answered within `withinMs` (default: no limit). Absent on SQLite.
   */
  whenAvailable?(withinMs?: number): Promise<boolean>;
  /**
   * A request stream's events that may still be open, oldest first (all of them on SQLite). For readers that
   * want only requests still open (the execution queue, placement, hand-over), never for a history.
   */
  readRecent(stream: string): RecordedEvent[];
  sizeBytes(): number;
  onAppend: AppendObserver | undefined;
}

export type { IterateEventsOptions, ReadAllOptions };

export { isPostgresUrl } from './postgres/url.ts';
