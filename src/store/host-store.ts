// The store seam the actor host, the supervisor, the server and the inspection commands use: reads are
// synchronous (the host decides a transition from memory), appends may be asynchronous. SqliteEventStore is one
// (every call synchronous, as before); PgHostStore (postgres/host-store.ts) is the other: reads from a copy
// of the log it keeps current by following PostgreSQL (a supervisor's copy without ended actors' events: pageIn),
// appends through the PostgreSQL event store.
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
   * A store that pages ended actors' events out of memory (a PostgreSQL supervisor, postgres/log-copy.ts): makes
   * the stream's whole history readable by the synchronous reads for a while (read from the database into a small
   * cache). Callers that can wait call it before reading an actor that may have ended; without it such a read
   * throws PAGED_OUT. Absent where everything is held.
   */
  pageIn?(stream: string): Promise<void>;
  /** readAll, from the database when the range reaches paged-out positions (see pageIn). */
  readAllAsync?(options?: ReadAllOptions): Promise<RecordedEvent[]>;
  /** Whether the synchronous reads of the whole log after this position are complete (false: use readAllAsync). */
  holdsAfter?(afterSeq: number): boolean;
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
   * A request stream's events this store holds, oldest first: all of them on SQLite; on a PostgreSQL supervisor
   * (pageOut.requestStreams) its oldest ones are paged out once older than any request's deadline. For readers
   * that want only requests still open (the execution queue, placement, hand-over), never for a history.
   */
  readRecent(stream: string): RecordedEvent[];
  sizeBytes(): number;
  onAppend: AppendObserver | undefined;
}

export type { IterateEventsOptions, ReadAllOptions };

export { isPostgresUrl } from './postgres/url.ts';
