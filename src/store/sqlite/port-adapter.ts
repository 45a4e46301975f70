// A SQLite log behind the port (port.ts), with the capabilities a file has: its hash chain checked, its size and
// appends metered, ended actors archived. The synchronous engine underneath (SqliteEventStore) does the work: one
// file, WAL, synchronous=FULL, the events, the actors row and the snapshot of an append in one transaction, and the
// registered projections' documents (projection_documents) folded inside that same transaction (its inAppend
// hook), so they commit together or not at all.
//
// Appends go straight to the engine: the port's requests are handed over as they are (no copy of an event) and the
// outcomes handed back. Reads of the log come a page at a time, each page read synchronously; between pages the
// reader yields to the event loop, so a long read never holds the process.
import { RunlogError } from '../../domain/errors.ts';
import type { NewEvent, RecordedEvent } from '../../domain/events.ts';
import type {
  AppendObserver,
  ArchiveFinding,
  Archiving,
  ArchiveOptions,
  ArchiveResult,
  Auditing,
  ChainVerifying,
  Metered,
} from '../capabilities.ts';
import type { ChainCheck } from '../chain.ts';
import { appendOne } from '../expected-version.ts';
import {
  validateAppends,
  type ActorFilter,
  type ActorRow,
  type AppendToStreamOptions,
  type AppendToStreamResult,
  type EventStorePort,
  type Heartbeat,
  type PortOptions,
  type ProjectionReader,
  type ReadAllOptions,
  type ReadStreamOptions,
  type SnapshotRecord,
  type StreamAppend,
  type StreamAppendOutcome,
  type StreamInfo,
  type SubscribeOptions,
  type Subscription,
} from '../port.ts';
import { ProjectionSet } from '../projection-set.ts';
import { pollingSubscription, Wakeups, trackedSubscription } from '../subscription.ts';
import type { EngineAppendRequest } from './engine-types.ts';
import { SqliteEventStore, type SqliteEventStoreOptions } from './event-store.ts';
import { ProjectionDocuments } from './projection-documents.ts';

export interface SqlitePortOptions extends PortOptions, Omit<SqliteEventStoreOptions, 'inAppend' | 'upcastAppended'> {}

/** Events read synchronously at a time before a reader yields to the event loop. */
const PAGE = 500;
const END = Number.MAX_SAFE_INTEGER;

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A port request as the engine takes it: the same events, the row as the engine's actors-table write. */
const toEngine = (r: StreamAppend): EngineAppendRequest => ({
  stream: r.stream,
  events: r.events,
  options: {
    expectedVersion: r.expectedVersion,
    ...(r.row ? { projection: r.row } : {}),
    ...(r.snapshot ? { snapshot: r.snapshot } : {}),
  },
});

export class SqlitePortStore implements EventStorePort, ChainVerifying, Metered, Archiving, Auditing {
  readonly description: string;
  /** The engine underneath: the CLI's file-level commands (doctor, checkpoint, verify) use it directly. */
  readonly store: SqliteEventStore;
  private readonly projections: ProjectionSet;
  private readonly documents: ProjectionDocuments;
  private readonly wakeups = new Wakeups();
  private readonly subscriptions = new Set<Subscription>();
  private closed = false;

  constructor(file: string, options: SqlitePortOptions = {}) {
    const { projections, ...engine } = options;
    this.projections = new ProjectionSet(projections);
    const fold =
      this.projections.size > 0 ? (events: readonly RecordedEvent[]) => this.documents.fold(events) : undefined;
    // Appended events come back as readers see them (upcast), and the projections fold them so.
    this.store = new SqliteEventStore(file, { ...engine, upcastAppended: true, ...(fold ? { inAppend: fold } : {}) });
    this.documents = new ProjectionDocuments(this.store.connection, this.projections);
    this.description = file;
  }

  private open(): void {
    if (this.closed) throw new RunlogError('STORE_CLOSED', `event log ${this.description} is closed`);
  }

  // --- streams ---

  async *readStream(stream: string, options: ReadStreamOptions = {}): AsyncIterable<RecordedEvent> {
    this.open();
    const to = options.to ?? END;
    let from = Math.max(1, options.from ?? 1);
    for (;;) {
      const page = this.store.streamPage(stream, from, to, PAGE);
      yield* page;
      if (page.length < PAGE) return;
      from = page.at(-1)!.version + 1;
      await nextTurn();
      this.open();
    }
  }

  async streamVersion(stream: string): Promise<number> {
    this.open();
    return this.store.streamVersion(stream);
  }

  async listStreams(kind?: string): Promise<StreamInfo[]> {
    this.open();
    return this.store.listStreams(kind);
  }

  /** The whole stream: a file holds every event, nothing is paged out. */
  async readRecent(stream: string): Promise<RecordedEvent[]> {
    this.open();
    return this.store.read(stream);
  }

  // --- appends ---

  async appendToStream(
    stream: string,
    events: readonly NewEvent[],
    options: AppendToStreamOptions,
  ): Promise<AppendToStreamResult> {
    return appendOne((r) => this.appendMany(r), stream, events, options?.expectedVersion, options ?? {});
  }

  async appendMany(requests: readonly StreamAppend[]): Promise<StreamAppendOutcome[]> {
    this.open();
    validateAppends(requests);
    // The engine reports a conflict or an event JSON cannot encode in the request's own outcome; those are the
    // only errors it puts there (anything else throws and writes nothing).
    const outcomes = this.store.appendMany(requests.map(toEngine)) as StreamAppendOutcome[];
    if (outcomes.some((o) => o.ok && o.result.events.length > 0)) this.wakeups.wake();
    return outcomes;
  }

  // --- the global log ---

  async *readAll(options: ReadAllOptions = {}): AsyncIterable<RecordedEvent> {
    this.open();
    const to = options.to ?? END;
    let left = options.limit ?? END;
    let after = Math.max(1, options.from ?? 1) - 1;
    while (left > 0) {
      const want = Math.min(PAGE, left);
      const page = this.store.logPage(after, to, want);
      yield* page;
      if (page.length < want) return;
      left -= page.length;
      after = page.at(-1)!.seq;
      if (left > 0) {
        await nextTurn();
        this.open();
      }
    }
  }

  async lastSeq(): Promise<number> {
    this.open();
    return this.store.lastSeq();
  }

  subscribe(options: SubscribeOptions, handler: (event: RecordedEvent) => void | Promise<void>): Subscription {
    this.open();
    // This process's appends wake subscriptions at once; other processes' are found by polling (every pollMs).
    const read = async (from: number, limit: number): Promise<RecordedEvent[]> =>
      this.closed ? [] : this.store.logPage(from - 1, END, limit);
    return trackedSubscription(pollingSubscription(read, this.wakeups, options, handler), this.subscriptions);
  }

  // --- projections ---

  projection<D>(name: string): ProjectionReader<D> {
    this.projections.get(name);
    return {
      get: async (id) => {
        this.open();
        return this.documents.get<D>(name, id);
      },
      list: async () => {
        this.open();
        return this.documents.list<D>(name);
      },
    };
  }

  async rebuildProjection(name: string): Promise<{ documents: number; events: number }> {
    this.open();
    this.projections.get(name);
    return this.store.writeTransaction('rebuild a projection', () =>
      this.documents.rebuild(name, (after, limit) => this.store.logPage(after, END, limit)),
    );
  }

  async listActors(filter: ActorFilter = {}): Promise<ActorRow[]> {
    this.open();
    return this.store.listActors(filter);
  }

  async getActor(id: string): Promise<ActorRow | undefined> {
    this.open();
    return this.store.getActor(id);
  }

  async replaceActorRows(rows: readonly ActorRow[]): Promise<void> {
    this.open();
    this.store.replaceProjection(rows);
  }

  // --- snapshots and the heartbeat ---

  async snapshotAtOrBefore(stream: string, version?: number): Promise<SnapshotRecord | undefined> {
    this.open();
    return version === undefined ? this.store.latestSnapshot(stream) : this.store.snapshotAtOrBefore(stream, version);
  }

  async readHeartbeat(): Promise<Heartbeat | null> {
    this.open();
    return this.store.readHeartbeat();
  }

  /** A beat after close is dropped, as the engine does (a timer may fire while the supervisor stops). */
  async writeHeartbeat(heartbeat: Heartbeat): Promise<void> {
    this.store.writeHeartbeat(heartbeat);
  }

  // --- capabilities ---

  async verifyChain(options: { afterSeq?: number } = {}): Promise<ChainCheck> {
    this.open();
    return this.store.verifyChain(options);
  }

  async sizeBytes(): Promise<number> {
    return this.store.sizeBytes();
  }

  observeAppends(observer: AppendObserver | undefined): void {
    this.store.onAppend = observer;
  }

  async archiveEnded(options: ArchiveOptions): Promise<ArchiveResult> {
    this.open();
    // Loaded when asked: a read-only `ps` opens this store and never archives (cli.ps measures its start).
    const { archiveEnded } = await import('./archive.ts');
    return archiveEnded(this.store, options);
  }

  async *snapshots(): AsyncIterable<SnapshotRecord> {
    this.open();
    yield* this.store.iterateSnapshots();
  }

  async *olderSnapshots(): AsyncIterable<SnapshotRecord> {
    this.open();
    yield* this.store.iterateSnapshotHistory();
  }

  async snapshotVersions(): Promise<Map<string, number>> {
    this.open();
    return this.store.snapshotVersions();
  }

  async checkArchives(dirs: readonly string[]): Promise<{ checked: number; findings: ArchiveFinding[] }> {
    this.open();
    const { checkArchives } = await import('../archive/archive-check.ts');
    return checkArchives(this.store, { dirs });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    this.store.close();
  }
}
