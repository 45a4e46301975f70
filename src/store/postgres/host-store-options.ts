// What PgHostStore is opened with, what its open read, and what it tells the cluster about leases.
import type { ActorRow, Projection } from '../port.ts';
import type { UpcasterRegistry } from '../upcasters.ts';
import type { AppendFaultHook } from './event-store.ts';
import type { RenewalListener } from './leases.ts';

export type { LeaseListener } from '../capabilities.ts';

export interface PgHostStoreOptions {
  /** postgres://user:password@host:port/database (a `schema` query parameter picks the schema). */
  url: string;
  schema?: string;
  /** Registered with the PostgreSQL store (they fold in the append's transaction). */
  projections?: readonly Projection<any>[];
  /**
   * The projection whose documents are ps's rows (default `actors`), and how a document becomes a row (default:
   * without its `snapshot` and `rev`).
   */
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
   * Page ended actors' events out of memory (a supervisor: log-copy.ts). The reads stay complete: what memory does
   * not hold is read from PostgreSQL. `keepRecent`: how many of the newest positions are held whatever their
   * stream (default 10,000). Unset: everything is held. `requestStreams`: streams of requests with deadlines (the
   * execution queue, placement), whose oldest events are paged out too, once older than the window and than
   * `keepMs` (default 6 hours): readRecent() reads the rest.
   */
  pageOut?: { keepRecent?: number; requestStreams?: { is(stream: string): boolean; keepMs?: number } };
}

/** How long a request stream's events are held whatever the window: longer than any request's deadline. */
export const REQUEST_KEEP_MS = 6 * 3600_000;

/** What a store's open read (loadStats): the events it read, and the request streams' events it left unread. */
export interface LoadStats {
  /** The log's head when the open began (events after it committed while it ran: read, and their rows again). */
  before: number;
  /** Events read from PostgreSQL at open (every one the copy holds; ended actors' below the window are never read). */
  eventsRead: number;
  /** Request streams' oldest events (older than the window and than their keepMs): neither read nor held. */
  requestEventsPagedOut: number;
}
