// The synchronous interface of the SQLite engine (SqliteEventStore) and its types: internal to sqlite/. Everything
// outside the store uses the async port (port.ts); sqlite/port-adapter.ts puts this engine behind it. The engine keeps
// a synchronous face because the CLI's file-level commands (doctor, checkpoint, verify) and retention run on it.
import type { NewEvent, RecordedEvent } from '../../domain/events.ts';
import type { ActorRow, ExpectedStreamVersion, SnapshotRecord, StreamInfo } from '../port.ts';

/** `'no-stream'` = the stream must not exist yet; a number = the stream's current version; `'any'` = skip the check. */
export type ExpectedVersion = number | 'no-stream' | 'any';

export interface AppendOptions {
  expectedVersion: ExpectedVersion;
  /** The actor kind (informational; a stream's kind is its name's prefix). */
  kind?: string;
  /** Written in the same transaction as the events (rule 1: projections never run ahead of the log). */
  projection?: ActorRow;
  /** The actor's snapshot at the version this append brings it to (a cache: see inspect/snapshots.ts). */
  snapshot?: SnapshotRecord;
}

/** What the engine itself accepts: every expected-version form of the port ('stream-exists' too). */
export interface EngineAppendOptions extends Omit<AppendOptions, 'expectedVersion'> {
  expectedVersion: ExpectedStreamVersion;
}

/** A snapshot as both stores keep it in their `snapshots` / `snapshot_history` tables. */
export interface SnapshotRow {
  stream: string;
  version: number;
  fingerprint: string;
  created_at: string;
  state: string;
  checksum: string;
}

export const toSnapshot = (r: SnapshotRow): SnapshotRecord => ({
  stream: r.stream,
  version: r.version,
  fingerprint: r.fingerprint,
  createdAt: r.created_at,
  state: r.state,
  checksum: r.checksum,
});

export interface AppendResult {
  /** The stream's version after the append. */
  version: number;
  /** `seq` of the last appended event (0 when nothing was appended). */
  lastSeq: number;
  events: RecordedEvent[];
}

/** One stream's part of a multi-stream append. */
export interface AppendRequest {
  stream: string;
  events: readonly NewEvent[];
  options: AppendOptions;
}

/** An AppendRequest with any expected-version form of the port. */
export interface EngineAppendRequest {
  stream: string;
  events: readonly NewEvent[];
  options: EngineAppendOptions;
}

/**
 * Per request: its result, or the error that kept its events out (a ConcurrencyError, or an EventEncodingError
 * for an event JSON cannot encode); the other requests still commit.
 */
export type AppendOutcome = { ok: true; result: AppendResult } | { ok: false; error: Error };

export interface ReadOptions {
  /** First version to return (inclusive, 1-based). */
  from?: number;
  /** Last version to return (inclusive). */
  to?: number;
}

export interface ReadAllOptions {
  /** Return events with seq > afterSeq. */
  afterSeq?: number;
  limit?: number;
}

export interface SubscribeOptions {
  afterSeq?: number;
  /** Only events of this stream. */
  stream?: string;
  /** How often to look for events written by other processes (ms). */
  pollMs?: number;
}

export interface EventStore {
  readonly file: string;
  append(stream: string, events: readonly NewEvent[], options: AppendOptions): AppendResult;
  /**
   * Appends to many streams in one transaction: one commit, one fsync (group commit). Each request's
   * expectedVersion is checked on its own, in order: a conflict keeps that request's events out and is
   * reported in its outcome; the others commit. Events are encoded before the transaction starts: a request holding
   * one JSON cannot encode fails alone the same way. Any other failure (disk full, I/O) writes nothing and throws.
   */
  appendMany(requests: readonly AppendRequest[]): AppendOutcome[];
  read(stream: string, options?: ReadOptions): RecordedEvent[];
  readAll(options?: ReadAllOptions): RecordedEvent[];
  streamVersion(stream: string): number;
  streams(kind?: string): StreamInfo[];
  subscribe(options: SubscribeOptions, handler: (event: RecordedEvent) => void): () => void;
  listActors(filter?: { kind?: string; all?: boolean }): ActorRow[];
  getActor(id: string): ActorRow | undefined;
  /** The stream's newest snapshot (stores without a snapshot cache leave this out: actors are folded from events). */
  latestSnapshot?(stream: string): SnapshotRecord | undefined;
  /** The newest snapshot at or before `version` (older ones are kept for `replay --to`); SQLite only. */
  snapshotAtOrBefore?(stream: string, version: number): SnapshotRecord | undefined;
  /** Replaces the whole projection in one transaction (`runlog rebuild`). */
  replaceProjection(rows: readonly ActorRow[]): void;
  close(): void;
}

/** Which events `iterateEvents` pages through: the whole log after a position, or one stream's versions. */
export interface IterateEventsOptions {
  /** The whole log: events with seq > afterSeq … */
  afterSeq?: number;
  /** … and seq <= toSeq. */
  toSeq?: number;
  /** One stream instead, versions from..to (inclusive). */
  stream?: string;
  from?: number;
  to?: number;
  pageSize?: number;
}
