// What PgHostStore is opened with, what its open read, and what it tells the cluster about leases.
import type { ActorRow } from '../event-store.ts';
import type { Projection } from '../port.ts';
import type { UpcasterRegistry } from '../upcasters.ts';
import type { AppendFaultHook } from './event-store.ts';
import type { RenewalListener, TakenLease } from './leases.ts';

export interface PgHostStoreOptions {
  /** postgres://user:password@host:port/database (a `schema` query parameter picks the schema). */
  url: string;
  schema?: string;
  /** Registered with the PostgreSQL store (they fold in the append's transaction). */
  projections?: readonly Projection<any>[];
  /** The projection whose documents are ps's rows (default `actors`), and how a document becomes a row (default: without its `snapshot` and `rev`). */
  actorRows?: { projection: string; toRow?(doc: unknown): ActorRow };
  upcasters?: UpcasterRegistry;
  now?: () => string;
  /** How often to look for events other processes committed (ms, default 250). 0: only when asked (one-shot commands). */
  pollMs?: number;
  maxConnections?: number;
  faults?: AppendFaultHook;
  /**
   * Supervising as one node of a cluster: this node's name and its leases' time to live. Each live actor it
   * creates or takes over is leased to it, and every append to an actor's stream is fenced by that lease.
   * `renewals` hears how each renewal ended (the node's self-fence).
   */
  node?: { name: string; leaseTtlMs: number; collectGraceMs?: number; renewals?: RenewalListener };
  /**
   * Page ended actors' events out of memory (a supervisor: log-copy.ts). They are read from PostgreSQL when asked
   * (pageIn, readAllAsync); a synchronous read that reaches them throws PagedOutError. `keepRecent`: how many of
   * the newest positions are held whatever their stream (default 10,000). Unset: everything is held (one-shot readers).
   * `requestStreams`: streams of requests with deadlines (the execution queue, placement), whose oldest events are
   * paged out too, once older than the window and than `keepMs` (default 6 hours): readRecent() reads the rest.
   */
  pageOut?: { keepRecent?: number; pagedInStreams?: number; requestStreams?: { is(stream: string): boolean; keepMs?: number } };
}

/** How long a request stream's events are held whatever the window: longer than any request's deadline. */
export const REQUEST_KEEP_MS = 6 * 3600_000;

/** What a store's open read (loadStats): the events it read, and the ended actors' it summarised instead of reading. */
export interface LoadStats {
  /** The log's head when the open began (events after it committed while it ran: read, and their rows again). */
  before: number;
  /** Events read from PostgreSQL at open (every one the copy holds, plus ended actors' in the recent window). */
  eventsRead: number;
  /** Ended actors' streams whose events below the recent window were summarised (one row each), not read. */
  streamsSummarised: number;
  /** How many events those summaries stood for. */
  eventsSummarised: number;
  /** Request streams' oldest events (older than the window and than their keepMs): neither read nor held. */
  requestEventsPagedOut: number;
}

/** What the cluster tells the supervisor about leases (see runlog.ts / supervisor/cluster/takeover.ts). */
export interface LeaseListener {
  /** Leases this node turned out to have lost (it was paused or cut off past their expiry and someone took them). */
  lost(streams: string[]): void;
  /** Leases this node took over from a node that let them expire (the copy of the log has caught up first). */
  taken(leases: TakenLease[]): void;
  /** Whether the node's host has the actor in memory (live, or being created): a lease of one it lacks is picked up. */
  running?(stream: string): boolean;
  /** Leases this node held but whose actors it did not run (a claim's reply was lost), now adopted: rehydrate them. */
  pickUp?(streams: string[]): void;
}
