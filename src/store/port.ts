// The event-store port, async (in the manner of Emmett's event store): read a stream, append to a
// stream with an expected version, append to many streams atomically, read the whole log by global position,
// and subscribe to it. Projections are registered with the store and run inside the append transaction, so a
// projection never runs ahead of (or behind) the log. Three implementations pass one contract suite
// (test/contract/store/): in memory, SQLite (sqlite/port-adapter.ts over SqliteEventStore) and PostgreSQL.
//
// One convention for positions: a stream's `version` and the log's global position (`seq` on RecordedEvent)
// are 1-based, and every `from`/`to` is inclusive.
import { ValidationError, type ConcurrencyError, type EventEncodingError, type FencedError } from '../domain/errors.ts';
import type { HeartbeatRecord } from '../domain/supervision.ts';
import type { NewEvent, RecordedEvent } from '../domain/events.ts';
import { isVersion } from './expected-version.ts';

/**
 * `'no-stream'`: the stream must not exist yet; `'stream-exists'`: it must have at least one event; `'any'`: no
 * check; a number: the stream's current version (0 = no stream).
 */
export type ExpectedStreamVersion = 'no-stream' | 'stream-exists' | 'any' | number;

/** What the writer knows an append brings its stream to, written in the append's own transaction. */
export interface AppendExtras {
  /**
   * The actor's row after the append (the host decides transitions and knows it). A store that folds the actors
   * projection itself (PostgreSQL, a registered projection) may ignore it: the two must agree.
   */
  row?: ActorRow;
  /** The actor's snapshot at the version this append brings it to (a cache: see inspect/snapshots.ts). */
  snapshot?: SnapshotRecord;
}

export interface AppendToStreamOptions extends AppendExtras {
  expectedVersion: ExpectedStreamVersion;
}

export interface AppendToStreamResult {
  /** The stream's version after the append: the expectedVersion of the next one. */
  version: number;
  /** Global position of the last appended event (0 when nothing was appended). */
  lastSeq: number;
  /** The appended events as readers see them (upcast). */
  events: RecordedEvent[];
}

/** One stream's part of an atomic multi-stream append. */
export interface StreamAppend extends AppendExtras {
  stream: string;
  events: readonly NewEvent[];
  expectedVersion: ExpectedStreamVersion;
}

/**
 * Per request: its result, or what kept its events out while the other requests still commit: a ConcurrencyError,
 * an EventEncodingError (an event JSON cannot encode), or on a fenced store a FencedError.
 */
export type StreamAppendOutcome =
  | { ok: true; result: AppendToStreamResult }
  | { ok: false; error: ConcurrencyError | FencedError | EventEncodingError };

export interface ReadStreamOptions {
  /** First version to return (inclusive, 1-based; default 1). */
  from?: number;
  /** Last version to return (inclusive; default: the stream's end). */
  to?: number;
}

export interface ReadAllOptions {
  /** First global position to return (inclusive, 1-based; default 1). */
  from?: number;
  /** Last global position to return (inclusive). */
  to?: number;
  /** At most this many events. */
  limit?: number;
}

export interface SubscribeOptions {
  /** First global position to deliver (inclusive, default 1: the whole log). */
  from?: number;
  /** Only this stream's events (the position still moves past the others). */
  stream?: string;
  /** How often to look for events written by other processes (ms). */
  pollMs?: number;
  /**
   * Called once if the handler throws or a read fails; the subscription has stopped (nothing is skipped). A read cut
   * off because the store is unreachable (STORE_UNAVAILABLE) is tried again instead.
   */
  onError?: (error: unknown) => void;
}

/** Sees every event from `from` on exactly once, in global order; the handler is awaited before the next one. */
export interface Subscription {
  /** Global position of the last event the handler finished (from − 1 before the first). */
  readonly position: number;
  close(): Promise<void>;
}

/**
 * A projection: a document per id, folded from events by a pure `evolve`. The store loads the documents an
 * append touches, folds the new events and writes them back in the append's own transaction: an `evolve` that
 * throws rolls the append back. Pure on purpose: the same projection runs unchanged on every store.
 */
export interface Projection<D = unknown> {
  /** Unique per store; names the projection's documents. */
  readonly name: string;
  /** Event types it reads (default: every event). */
  readonly canHandle?: readonly string[];
  /** The document an event changes (default: the event's stream); null = none. */
  documentId?(event: RecordedEvent): string | null;
  /**
   * The document after the event; null deletes it. Must return a JSON-serialisable value. It must not depend on
   * the event's `seq`: PostgreSQL folds documents before the append's positions are assigned (they are given at the
   * commit, postgres/append.ts) and passes `seq` 0.
   */
  evolve(document: D | null, event: RecordedEvent): D | null;
}

/** Read access to one projection's documents. */
export interface ProjectionReader<D> {
  get(id: string): Promise<D | undefined>;
  /** Every document, in id order. */
  list(): Promise<{ id: string; doc: D }[]>;
}

/** What `ps` lists of one actor: a row of the actors projection, rebuildable from its events at any time. */
export interface ActorRow {
  id: string;
  kind: string;
  stream: string;
  state: string;
  status: 'active' | 'terminal';
  version: number;
  createdAt: string;
  updatedAt: string;
  summary: Record<string, unknown>;
  /** Set when the actor's events were moved to an archive (`runlog archive`): the file and when. */
  archived?: { file: string; at: string };
}

/** Which actors `listActors` returns: live ones by default, every one with `all`. */
export interface ActorFilter {
  kind?: string;
  all?: boolean;
}

/** A cached fold of one actor's stream at `version` (inspect/snapshots.ts encodes and checks it; stores keep it). */
export interface SnapshotRecord {
  stream: string;
  version: number;
  /** The machine definition that made it. */
  fingerprint: string;
  /** The actor's first event's time (a snapshot replaces reading that event). */
  createdAt: string;
  /** The persisted machine snapshot, as JSON text. */
  state: string;
  checksum: string;
}

/** One stream as the log knows it. */
export interface StreamInfo {
  stream: string;
  kind: string;
  version: number;
  createdAt: string;
  updatedAt: string;
}

/** The supervisor's last heartbeat; `stoppedAt` is set by a clean shutdown. */
export type Heartbeat = HeartbeatRecord;

/**
 * The one event-store port: what the actor host, the supervisor, the server, the CLI and retention use, and what
 * every store implements and the contract suite (test/contract/store/) proves. Everything is asynchronous: a
 * store may be a file in this process or a database across a network, and reads of history come a page at a time.
 */
export interface EventStorePort {
  /** What the store is (a file, a URL without its password): for messages. */
  readonly description: string;

  // --- streams ---
  /** One stream's events in version order, read a page at a time. */
  readStream(stream: string, options?: ReadStreamOptions): AsyncIterable<RecordedEvent>;
  /** The stream's current version (0 = no stream). */
  streamVersion(stream: string): Promise<number>;
  /** Every stream (of one kind: the name's prefix before the first '-'), in name order. */
  listStreams(kind?: string): Promise<StreamInfo[]>;
  /**
   * A request stream's events that may still be open, oldest first: at least every event younger than the
   * store's request horizon (a store may return the whole stream). For readers that want only requests still
   * open (the execution queue, placement, hand-over), never for a history.
   */
  readRecent(stream: string): Promise<RecordedEvent[]>;

  // --- appends ---
  /** Appends to one stream; a version mismatch throws ConcurrencyError and writes nothing. */
  appendToStream(
    stream: string,
    events: readonly NewEvent[],
    options: AppendToStreamOptions,
  ): Promise<AppendToStreamResult>;
  /**
   * Appends to many streams in one transaction (one commit: group commit). Each request's expectedVersion is
   * checked on its own, in order (a later request sees an earlier one's events): a conflict keeps only that
   * request out and is reported in its outcome, as is an event JSON cannot encode. Any other failure (a projection
   * throwing, bad input, I/O) writes nothing and throws.
   */
  appendMany(requests: readonly StreamAppend[]): Promise<StreamAppendOutcome[]>;

  // --- the global log ---
  /** The whole log by global position, read a page at a time. */
  readAll(options?: ReadAllOptions): AsyncIterable<RecordedEvent>;
  /** The global position of the last committed event (0 = empty log). */
  lastSeq(): Promise<number>;
  subscribe(options: SubscribeOptions, handler: (event: RecordedEvent) => void | Promise<void>): Subscription;

  // --- projections ---
  /** Reads a registered projection's documents. Unknown names throw. */
  projection<D>(name: string): ProjectionReader<D>;
  /** Recomputes a registered projection from the whole log, in one transaction. */
  rebuildProjection(name: string): Promise<{ documents: number; events: number }>;
  /** The actors projection: live actors (every one with `all`), in the order they were created (then by id). */
  listActors(filter?: ActorFilter): Promise<ActorRow[]>;
  getActor(id: string): Promise<ActorRow | undefined>;
  /** Replaces the whole actors projection in one transaction (`runlog rebuild`). */
  replaceActorRows(rows: readonly ActorRow[]): Promise<void>;

  // --- snapshots ---
  /** The stream's newest snapshot at or before `version` (default: its newest); undefined when none is kept. */
  snapshotAtOrBefore(stream: string, version?: number): Promise<SnapshotRecord | undefined>;

  // --- the heartbeat ---
  readHeartbeat(): Promise<Heartbeat | null>;
  writeHeartbeat(heartbeat: Heartbeat): Promise<void>;

  close(): Promise<void>;
}

/** Options every implementation takes. */
export interface PortOptions {
  projections?: readonly Projection<any>[];
}

// The expected-version check and the helpers around it live in one module every store uses (expected-version.ts).
export { ExpectedVersionError, versionMatches } from './expected-version.ts';

/** Checks every request before anything is written; lists every problem (bad input writes nothing). */
export function validateAppends(requests: readonly StreamAppend[]): void {
  const issues: string[] = [];
  requests.forEach((r, i) => {
    const where = requests.length > 1 ? `request ${i} (${String(r?.stream)})` : `stream ${String(r?.stream)}`;
    if (typeof r?.stream !== 'string' || r.stream.length === 0)
      issues.push(`${where}: stream must be a non-empty string`);
    if (!isVersion(r?.expectedVersion))
      issues.push(
        `${where}: expectedVersion must be 'no-stream', 'stream-exists', 'any' or a version >= 0, ` +
          `got ${JSON.stringify(r?.expectedVersion)}`,
      );
    if (!Array.isArray(r?.events)) {
      issues.push(`${where}: events must be an array`);
      return;
    }
    r.events.forEach((e, j) => {
      if (typeof e?.type !== 'string' || e.type.length === 0)
        issues.push(`${where} event ${j}: type must be a non-empty string`);
      if (typeof e?.data !== 'object' || e.data === null || Array.isArray(e.data))
        issues.push(`${where} event ${j}: data must be an object`);
      if (e?.schema !== undefined && !(Number.isSafeInteger(e.schema) && e.schema >= 1))
        issues.push(`${where} event ${j}: schema must be an integer >= 1`);
      const atProblem = eventTimeProblem(e?.at);
      if (atProblem) issues.push(`${where} event ${j}: ${atProblem}`);
    });
  });
  if (issues.length > 0) throw new ValidationError('STORE_INPUT', 'invalid append', issues);
}

/** An event time as the log writes it: ISO 8601 with seconds and a zone (what `Date.prototype.toISOString` gives). */
const EVENT_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/**
 * The last time eventTimeProblem accepted: the answer depends on the string alone, and an append's events mostly
 * share their time, each checked twice (the port's validation, then the store's encoding), so the pattern and the
 * date parse run once per time rather than twice per event.
 */
let lastGoodTime: string | undefined;

/**
 * Why an event's `at` cannot be written, or null when it can (absent: the store's clock).
 *
 * The time is part of each event's chain link, hashed as the text the store keeps: a number or a date that a
 * store would rewrite (PostgreSQL's `12` read back as `12.0`) would be stored as one value and hashed as another,
 * and verify would then report a chain that was never broken.
 */
export function eventTimeProblem(at: unknown): string | null {
  if (at === undefined || at === lastGoodTime) return null;
  if (typeof at !== 'string') return `at must be an ISO 8601 time string, got ${typeof at}`;
  if (!EVENT_TIME.test(at) || !Number.isFinite(Date.parse(at)))
    return `at must be an ISO 8601 time with seconds and a zone (2026-01-02T03:04:05.000Z), got ${JSON.stringify(at.slice(0, 64))}`;
  lastGoodTime = at;
  return null;
}

/** Serialises to JSON or throws a ValidationError naming the field (BigInt, cycles): nothing is written then. */
export function toJson(value: unknown, what: string): string {
  try {
    return JSON.stringify(value);
  } catch (err) {
    throw new ValidationError('STORE_INPUT', `${what} is not JSON-serialisable: ${(err as Error).message}`, [
      `${what}: ${(err as Error).message}`,
    ]);
  }
}

/** Reads an async iterable to the end (a bounded range: one actor's tail, a page of the log). */
export async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}
