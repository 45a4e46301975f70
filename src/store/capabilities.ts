// What only some stores can do, each a named interface the composition root (supervisor/open-log.ts) checks once
// and hands to the services that need it. A capability is never an optional method probed at a call site: a
// service that needs leases is given a `Leasing`, or is not built.
import type { ClusterRecords } from '../domain/cluster-nodes.ts';
import type { ChainCheck } from './chain.ts';
import type { SnapshotRecord } from './port.ts';

/** A lease this node took over from a node that let it expire. */
export interface TakenLease {
  stream: string;
  token: number;
  /** The node that held it and let it expire. */
  previous: string;
}

/** What the store tells the node about its leases (the node's host acts on it). */
export interface LeaseListener {
  /** Leases this node turned out to have lost (it was paused or cut off past their expiry and someone took them). */
  lost(streams: string[]): void;
  /** Leases this node took over from a node that let them expire (the store has caught up with the log first). */
  taken(leases: TakenLease[]): void;
  /** Whether the node's host has the actor in memory (live, or being created): a lease of one it lacks is picked up. */
  running?(stream: string): boolean;
  /** Leases this node held but whose actors it did not run (a claim's reply was lost), now adopted: rehydrate them. */
  pickUp?(streams: string[]): void;
}

/** Where an actor ran last (the node that appended its latest event) and who owns it now (null once it ended). */
export interface Placement {
  node: string | null;
  owner: string | null;
}

/**
 * A log shared by a cluster of supervisors (PostgreSQL): every actor's stream is leased to one node, and an
 * append to a stream this node does not hold is refused as FENCED.
 */
export interface Leasing {
  /** This node's name. */
  readonly node: string;
  /** Whether this node holds the stream's lease (streams that are not actors' are everyone's). */
  owns(stream: string): boolean;
  /** The actor ended: its lease is released with the next beat. */
  letGo(stream: string): void;
  /** Starts renewing, releasing, taking over and picking up leases, telling `listener`. */
  startLeases(listener: LeaseListener): void;
  /** One beat now (renewals, releases, take-overs, pick-ups). */
  beat(): Promise<void>;
  /** Looks for leases to pick up soon (a claim's reply may have been lost). */
  pickUpSoon(): void;
  placement(stream: string): Promise<Placement>;
  /**
   * Every node's heartbeat and every lease, read from the database now and judged on its clock (liveness, loads
   * and lease holders are derived from it: supervisor/cluster/nodes.ts).
   */
  clusterRecords(): Promise<ClusterRecords>;
}

/** A store that can be briefly unreachable (a database restarting). */
export interface Reconnecting {
  /**
   * Resolves true once the store answers again and its reads have caught up with what was committed meanwhile;
   * false when it has not answered within `withinMs` (default: no limit). Rejects when the store is closed.
   */
  whenAvailable(withinMs?: number): Promise<boolean>;
}

/** Told about every durable append (metrics); must be cheap and must not throw. */
export type AppendObserver = (seconds: number, events: number) => void;

/** What metrics read of a store. */
export interface Metered {
  /** The store's size on disk (bytes). */
  sizeBytes(): Promise<number>;
  /** Told about every durable append. */
  observeAppends(observer: AppendObserver | undefined): void;
}

/** A store whose events are chained by hash (see chain.ts): the chain can be checked from any position on. */
export interface ChainVerifying {
  verifyChain(options?: { afterSeq?: number }): Promise<ChainCheck>;
}

/** Where a run stands, told to `onStep` (tests kill the process there). */
export type ArchiveStep = 'planned' | 'file-written' | 'file-linked' | 'removing' | 'committed' | 'vacuumed';

export interface ArchiveOptions {
  /** Actors whose last event is before this ISO time, and that ended, are archived. */
  before: string;
  /** The archive file to create (never overwritten). */
  out: string;
  now?: () => string;
  /** Told where the run stands; a store that runs asynchronously awaits what it returns. */
  onStep?: (step: ArchiveStep) => void | Promise<void>;
}

export interface ArchiveResult {
  /** null: nothing had ended before `before`; no file was written. */
  file: string | null;
  actors: number;
  events: number;
  /** Bytes of the archive file. */
  bytes: number;
  sha256: string | null;
  /** The chain link the archive ends on (its last event), and the log's chain head when it was written. */
  lastSeq: number | null;
  lastHash: string | null;
  /** The log's file size before and after (the WAL checkpointed), and how space came back. */
  sizeBefore: number;
  sizeAfter: number;
  /** SQLite: incremental or full; PostgreSQL: a plain VACUUM of the tables (the space is reused, not given back to the OS). */
  vacuum: 'incremental' | 'full' | 'plain' | 'none';
}

/** A store that moves ended actors' events to an archive file (`runlog archive`, `serve --retain`). */
export interface Archiving {
  archiveEnded(options: ArchiveOptions): Promise<ArchiveResult>;
}

/** What verify found wrong with an archive file (or where it went). */
export interface ArchiveFinding {
  code: 'ARCHIVE_DAMAGED' | 'ARCHIVE_NOT_FOUND';
  severity: 'damage' | 'warning';
  message: string;
  file: string;
  seq?: number;
  stream?: string;
  version?: number;
}

/** What `runlog verify` reads beside the events: the snapshots a store keeps, and the archives its retention wrote. */
export interface Auditing {
  /** The newest snapshot per actor. */
  snapshots(): AsyncIterable<SnapshotRecord>;
  /** The older ones (replaced by a newer one, kept for replay --to). */
  olderSnapshots(): AsyncIterable<SnapshotRecord>;
  /** Which version each actor's snapshot stands at, as recorded apart from the snapshots. */
  snapshotVersions(): Promise<Map<string, number>>;
  /** Reads the archives the store's retention wrote (or `dirs`, where they were moved) and checks them. */
  checkArchives(dirs: readonly string[]): Promise<{ checked: number; findings: ArchiveFinding[] }>;
}
