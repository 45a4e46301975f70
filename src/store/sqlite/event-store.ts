// The event log in one SQLite file. WAL + synchronous=FULL by default: an append that returned is on
// disk. Opening never damages a file it does not recognise: foreign or corrupt files get a clear
// error naming the file and are left exactly as they were.
import { existsSync, rmSync, statSync } from 'node:fs';
import type { NewEvent, RecordedEvent, ReplayEvent } from '../../domain/events.ts';
import {
  LogUnreadableError,
  ReadOnlyLogError,
  RunlogError,
  StoreChainError,
  StoreTruncatedError,
} from '../../domain/errors.ts';
import type { ChainCheck } from '../chain.ts';
import type { AppendObserver } from '../capabilities.ts';
import type { ActorRow, Heartbeat, SnapshotRecord, StreamInfo } from '../port.ts';
import {
  toSnapshot,
  type AppendOptions,
  type AppendOutcome,
  type AppendResult,
  type EngineAppendOptions,
  type EngineAppendRequest,
  type EventStore,
  type IterateEventsOptions,
  type ReadAllOptions,
  type ReadOptions,
  type SubscribeOptions,
} from './engine-types.ts';
import { readShutdownRecord, shutdownRecordFile, writeShutdownRecord } from './shutdown-record.ts';
import { chainHead, verifyChain } from './chain-check.ts';
import { encodeRequest, type EncodedRequest } from './encoding.ts';
import { EventPages } from './event-pages.ts';
import {
  checkHeader,
  checkWal,
  createLogFile,
  logBytes,
  openSchema,
  sqliteCode,
  translate,
  untouchedSinceCleanShutdown,
  walBytes,
} from './file-checks.ts';
import { readHeartbeatRow, writeHeartbeatRow } from './heartbeat.ts';
import { getActor, listActors, replaceProjectionRows } from './projection.ts';
import {
  iterateSnapshotHistory,
  iterateSnapshots,
  replaceSnapshotRows,
  snapshotAtOrBefore,
  snapshotVersions,
} from './snapshots.ts';
import { streamInfos } from './streams.ts';
import { SqliteSubscriptions } from './subscriptions.ts';
import { Database } from './driver.ts';
import { readOnlyTarget } from './read-only-target.ts';
import { prepareStatements, type Statements } from './statements.ts';
import { AppendWriter } from './append-writer.ts';
import { defaultUpcasters, type UpcasterRegistry } from '../upcasters.ts';
import { WalGuard } from './wal-guard.ts';

// Names callers still import from here (the error moved to domain/errors.ts). Re-exported from modules whose
// declarations name no better-sqlite3 type: the shipped declarations of this class must not reach the driver's types.
export { EventEncodingError } from '../../domain/errors.ts';
export type { IterateEventsOptions } from './engine-types.ts';

export interface SqliteEventStoreOptions {
  /**
   * 'FULL' (default) survives power loss; 'NORMAL' is a documented opt-in that may lose the last commits on power loss
   * (never on a process crash).
   */
  synchronous?: 'FULL' | 'NORMAL';
  upcasters?: UpcasterRegistry;
  /** Clock for `at` when an event has none. Injected so tests can pin time. */
  now?: () => string;
  busyTimeoutMs?: number;
  /** Skip PRAGMA quick_check at open (only for throwaway stores in benchmarks). */
  skipQuickCheck?: boolean;
  /**
   * After an append, a checkpoint copies the WAL into the database file within this many ms (default 1000), so
   * the .db file alone is never far behind; a clean close checkpoints and truncates the WAL.
   */
  checkpointMs?: number;
  /** Told the duration of every durable append (metrics). */
  onAppend?: AppendObserver;
  /**
   * Runs inside every append's transaction once its events are written, with those events as readers see them (the
   * port's registered projections, sqlite/port-adapter.ts): a throw rolls the whole append back.
   */
  inAppend?: (events: readonly RecordedEvent[]) => void;
  /**
   * Hand appended events back as readers see them: an event written at an older schema than its type's current one
   * comes back upcast (and one newer than this runlog knows fails the append). Off, they come back as given.
   */
  upcastAppended?: boolean;
  /**
   * Inspection: open an existing log without writing anything (nothing appears beside it, every commit is seen:
   * sqlite/read-only-target.ts). A missing file is LOG_MISSING, an empty or short one STORE_CORRUPT; no migration, no
   * pragma that writes, no marker file, no whole-file quick_check (a damaged page is STORE_CORRUPT when read).
   */
  readOnly?: boolean;
  /** With readOnly: opened in place through WAL, since an immutable open or a private copy never sees later commits. */
  followsWriters?: boolean;
}

export class SqliteEventStore implements EventStore {
  readonly file: string;
  private readonly db: Database.Database;
  private readonly upcasters: UpcasterRegistry;
  private readonly now: () => string;
  private readonly subscriptions: SqliteSubscriptions;
  private readonly pages: EventPages;
  private closed = false;
  private readonly guard: WalGuard | null;
  private releaseTarget = (): void => undefined;
  readonly readOnly: boolean;
  private readonly checkpointMs: number;
  private checkpointTimer: NodeJS.Timeout | undefined;
  /** A heartbeat was written since the last close-time checkpoint (close() then still leaves a self-contained file). */
  private heartbeatInWal = false;
  /** Told the duration of every durable append (metrics); settable after open. */
  onAppend: AppendObserver | undefined;

  /** The prepared statements (statements.ts). */
  private readonly stmt: Statements;

  /** The append's transactions and their writes (append-writer.ts). */
  private readonly writer: AppendWriter;

  constructor(file: string, options: SqliteEventStoreOptions = {}) {
    this.file = file;
    this.upcasters = options.upcasters ?? defaultUpcasters();
    this.now = options.now ?? (() => new Date().toISOString());
    this.checkpointMs = options.checkpointMs ?? 1000;
    this.onAppend = options.onAppend;
    this.readOnly = options.readOnly ?? false;
    let deadMarkers = 0;
    let target = file;
    if (file !== ':memory:') {
      if (!this.readOnly && !existsSync(file)) {
        try {
          // The log was removed on purpose: the record of its last shutdown is not one of the new log's.
          rmSync(shutdownRecordFile(file), { force: true });
          createLogFile(file);
        } catch (err) {
          throw translate(file, err);
        }
      }
      checkHeader(file);
      deadMarkers = WalGuard.check(file).length; // throws STORE_WAL_LOST before SQLite touches anything
      // A writer's open recovers the WAL and later reuses it: damage in it must be found first, or it is gone.
      // (Read-only inspection skips this, to stay fast; `runlog verify` checks it.)
      if (!this.readOnly) checkWal(file);
      // Read-only: nothing may appear beside the log, and every commit must be seen (sqlite/read-only-target.ts).
      if (this.readOnly)
        ({ target, release: this.releaseTarget } = readOnlyTarget(file, options.followsWriters ?? false));
    }
    this.guard = file === ':memory:' || this.readOnly ? null : new WalGuard(file);
    try {
      this.db = this.readOnly
        ? new Database(target, { readonly: true, fileMustExist: true, timeout: options.busyTimeoutMs ?? 5000 })
        : new Database(file, { timeout: options.busyTimeoutMs ?? 5000 });
    } catch (err) {
      throw this.translateOpen(err);
    }
    try {
      openSchema(this.db, file, this.readOnly, options, file !== ':memory:' && untouchedSinceCleanShutdown(file));
    } catch (err) {
      this.db.close();
      throw this.translateOpen(err);
    }
    const db = this.db;
    this.stmt = prepareStatements(db, this.readOnly);
    this.checkShutdownRecord();
    this.pages = new EventPages(db, this.upcasters);
    this.subscriptions = new SqliteSubscriptions(
      this.stmt.dataVersion,
      (o) => this.readAll(o),
      () => this.lastSeq(),
      () => this.closed,
    );
    this.writer = new AppendWriter(db, this.stmt, {
      upcasters: this.upcasters,
      now: () => this.now(),
      upcastAppended: options.upcastAppended ?? false,
      inAppend: options.inAppend,
    });
    // A dead writer's commits are in the WAL we just opened: copy them into the file (which clears its marker).
    if (deadMarkers > 0) this.checkpoint('PASSIVE');
  }

  /** A read-only open that SQLite could not do is about reading, not writing. */
  private translateOpen(err: unknown): unknown {
    this.releaseTarget();
    const code = sqliteCode(err) ?? '';
    if (
      this.readOnly &&
      (code.startsWith('SQLITE_CANTOPEN') || code.startsWith('SQLITE_READONLY') || code.startsWith('SQLITE_IOERR'))
    ) {
      return new LogUnreadableError(this.file, `${code}: ${(err as Error).message}`);
    }
    return translate(this.file, err);
  }

  /** Marks this process's next commits as possibly WAL-only (see sqlite/wal-guard.ts) and plans a checkpoint. */
  private beforeWrite(): void {
    if (!this.guard) return;
    this.guard.markDirty(this.now());
    if (!this.checkpointTimer) {
      this.checkpointTimer = setTimeout(() => {
        this.checkpointTimer = undefined;
        if (this.closed) return;
        if (!this.checkpoint('PASSIVE') && this.guard?.dirty) this.beforeWrite(); // readers held it back: try again later
      }, this.checkpointMs);
      this.checkpointTimer.unref();
    }
  }

  /** Copies the WAL into the database file; true when everything was copied (the WAL could be lost without loss). */
  checkpoint(mode: 'PASSIVE' | 'TRUNCATE' = 'PASSIVE'): boolean {
    if (this.closed || !this.guard) return false;
    try {
      const [r] = this.db.pragma(`wal_checkpoint(${mode})`) as { busy: number; log: number; checkpointed: number }[];
      const complete = r !== undefined && r.busy === 0 && r.log === r.checkpointed;
      if (complete) this.guard.checkpointed();
      return complete;
    } catch {
      return false; // busy, or no room to grow the file: the WAL keeps the commits, the marker stays
    }
  }

  append(stream: string, events: readonly NewEvent[], options: AppendOptions | EngineAppendOptions): AppendResult {
    if (this.closed) throw new RunlogError('STORE_CLOSED', `event log ${this.file} is closed`);
    if (this.readOnly) throw new ReadOnlyLogError(this.file);
    if (events.length === 0) return { version: this.writer.checkVersion(stream, options), lastSeq: 0, events: [] };
    // Encoded before the transaction: a value JSON cannot encode throws EventEncodingError and writes nothing.
    const encoded = encodeRequest({ stream, events, options });
    let result: AppendResult;
    const t0 = this.onAppend ? performance.now() : 0;
    try {
      this.beforeWrite();
      result = this.writer.one(encoded);
    } catch (err) {
      throw translate(this.file, err);
    }
    if (this.onAppend) this.onAppend((performance.now() - t0) / 1000, result.events.length);
    this.subscriptions.notify();
    return result;
  }

  appendMany(requests: readonly EngineAppendRequest[]): AppendOutcome[] {
    if (this.closed) throw new RunlogError('STORE_CLOSED', `event log ${this.file} is closed`);
    if (this.readOnly) throw new ReadOnlyLogError(this.file);
    // Nothing to write: each request's version is still checked, outside any transaction.
    if (requests.every((r) => r.events.length === 0)) return requests.map((r) => this.writer.emptyOutcome(r));
    // Every request is encoded before the shared transaction: one that cannot be encoded fails alone (its outcome
    // says why) and never rolls back the others, which may be other callers' events decided in the same tick.
    const outcomes: (AppendOutcome | null)[] = [];
    const encoded: EncodedRequest[] = [];
    for (const r of requests) {
      try {
        encoded.push(encodeRequest(r));
        outcomes.push(null);
      } catch (err) {
        outcomes.push({ ok: false, error: err as Error });
      }
    }
    if (encoded.length > 0) {
      let committed: AppendOutcome[];
      const t0 = this.onAppend ? performance.now() : 0;
      try {
        this.beforeWrite();
        committed = this.writer.many(encoded);
      } catch (err) {
        throw translate(this.file, err);
      }
      if (this.onAppend)
        this.onAppend(
          (performance.now() - t0) / 1000,
          committed.reduce((n, o) => n + (o.ok ? o.result.events.length : 0), 0),
        );
      let i = 0;
      for (let k = 0; k < outcomes.length; k++) if (outcomes[k] === null) outcomes[k] = committed[i++]!;
      this.subscriptions.notify();
    }
    return outcomes as AppendOutcome[];
  }

  read(stream: string, options: ReadOptions = {}): RecordedEvent[] {
    return this.stmt.readStream
      .all(stream, options.from ?? 1, options.to ?? Number.MAX_SAFE_INTEGER)
      .map((r) => this.pages.toRecorded(r));
  }

  /** The whole stream: SQLite reads from the file, so nothing is paged out (host-store.ts). */
  readRecent(stream: string): RecordedEvent[] {
    return this.read(stream);
  }

  readAll(options: ReadAllOptions = {}): RecordedEvent[] {
    return this.stmt.readAll.all(options.afterSeq ?? 0, options.limit ?? -1).map((r) => this.pages.toRecorded(r));
  }

  /** One page of the log: at most `limit` events with afterSeq < seq <= toSeq (the port's paged reads). */
  logPage(afterSeq: number, toSeq: number, limit: number): RecordedEvent[] {
    return this.pages.logPage(afterSeq, toSeq, limit);
  }

  /** One page of a stream: at most `limit` of its versions from..to (inclusive). */
  streamPage(stream: string, from: number, to: number, limit: number): RecordedEvent[] {
    return this.pages.streamPage(stream, from, to, limit);
  }

  streamVersion(stream: string): number {
    return this.stmt.streamVersion.get(stream)?.version ?? 0;
  }

  /** Every stream, in order of its first event. The kind is the stream name's prefix ("instance-…"). */
  streams(kind?: string): StreamInfo[] {
    return streamInfos(this.db, kind, 'first-event');
  }

  /** Every stream (of one kind), in name order (the port's listStreams). */
  listStreams(kind?: string): StreamInfo[] {
    return streamInfos(this.db, kind, 'name');
  }

  lastSeq(): number {
    return (this.db.prepare('SELECT coalesce(max(seq), 0) AS s FROM events').get() as { s: number }).s;
  }

  subscribe(options: SubscribeOptions, handler: (event: RecordedEvent) => void): () => void {
    return this.subscriptions.subscribe(options, handler);
  }

  /**
   * The whole log in seq order as replay reads it (`foldLog`, `rebuild`): each event's stream, version and machine
   * event, upcast, without materialising the log (event-pages.ts).
   */
  iterateReplay(afterSeq = 0, pageSize = 512): IterableIterator<ReplayEvent> {
    return this.pages.replay(afterSeq, pageSize);
  }

  /** Recorded events read a page at a time: the whole log in seq order, or one stream in version order. */
  iterateEvents(options: IterateEventsOptions = {}): IterableIterator<RecordedEvent> {
    return this.pages.events(options);
  }

  /** The whole log after `afterSeq` as each recorded event's JSON text (the SSE catch-up). */
  readAllJson(afterSeq: number, limit: number): { seq: number; json: string }[] {
    return this.pages.json(afterSeq, limit);
  }

  listActors(filter: { kind?: string; all?: boolean } = {}): ActorRow[] {
    return listActors(this.db, filter);
  }

  getActor(id: string): ActorRow | undefined {
    return getActor(this.db, id);
  }

  replaceProjection(rows: readonly ActorRow[]): void {
    this.writeTransaction('rebuild the projection', () => replaceProjectionRows(this.db, this.stmt.upsertActor, rows));
  }

  /**
   * Records the supervisor's heartbeat (one row, replaced). Not through beforeWrite: a heartbeat lost with a WAL
   * loses no event, so it must not make the WAL guard report one.
   */
  writeHeartbeat(h: Heartbeat): void {
    if (this.closed) return;
    try {
      writeHeartbeatRow(this.db, h);
      this.heartbeatInWal = true;
    } catch (err) {
      throw translate(this.file, err);
    }
  }

  readHeartbeat(): Heartbeat | null {
    return readHeartbeatRow(this.db);
  }

  /** Bytes on disk: the database file and its WAL (metrics). */
  sizeBytes(): number {
    return logBytes(this.file);
  }

  close(): void {
    if (this.closed) return;
    if (this.checkpointTimer) clearTimeout(this.checkpointTimer);
    this.subscriptions.close();
    if (this.guard?.dirty || (this.guard && this.heartbeatInWal)) {
      // A clean close leaves a self-contained file: the WAL copied in and truncated (unless readers hold it).
      try {
        this.db.pragma('busy_timeout = 200');
      } catch {
        /* keep the default */
      }
      this.checkpoint('TRUNCATE');
    }
    const head = this.guard ? chainHead(this.db) : null;
    this.closed = true;
    this.db.close();
    this.releaseTarget();
    if (head) this.recordShutdown(head);
  }

  /**
   * A writer's clean close records how long the log is and when it last changed (sqlite/shutdown-record.ts), after the
   * connection is closed (closing may still touch the file). Best effort: a record is a safeguard.
   */
  private recordShutdown(head: { seq: number; hash: Buffer }): void {
    try {
      if (walBytes(this.file) > 0) return; // readers held the WAL: the file's size says nothing yet
      const st = statSync(this.file);
      writeShutdownRecord(this.file, {
        size: st.size,
        mtimeMs: st.mtimeMs,
        lastSeq: head.seq,
        hash: head.hash.toString('hex'),
        at: this.now(),
      });
    } catch {
      /* a full disk or a read-only directory: the next open simply has no record to compare with */
    }
  }

  /** After SQLite opened the file: a log that ends before the last clean shutdown's last event lost events. */
  private checkShutdownRecord(): void {
    if (this.file === ':memory:') return;
    const record = readShutdownRecord(this.file);
    if (!record) return;
    // An archived tail left its last link in chain_gaps (retention): those events are accounted for, not missing.
    const last = Math.max(
      this.stmt.maxSeq.get()!.s,
      (this.db.prepare('SELECT coalesce(max(seq), 0) AS s FROM chain_gaps').get() as { s: number }).s,
    );
    if (last < record.lastSeq) {
      this.db.close();
      this.releaseTarget();
      throw new StoreTruncatedError(
        this.file,
        `it ends at event seq ${last}; at its last clean shutdown (${record.at}) it ended at seq ${record.lastSeq}`,
        { lastSeq: last, expected: record.lastSeq },
      );
    }
  }

  /**
   * Checks the hash chain (chain.ts): every event from `afterSeq` on (the whole log by default) against the link
   * before it, then the last event against chain_head. Stops at the first bad position (chain-check.ts).
   */
  verifyChain(options: { afterSeq?: number; pageSize?: number } = {}): ChainCheck {
    return verifyChain(this.db, options);
  }

  latestSnapshot(stream: string): SnapshotRecord | undefined {
    const r = this.stmt.getSnapshot.get(stream);
    return r ? toSnapshot(r) : undefined;
  }

  snapshotAtOrBefore(stream: string, version: number): SnapshotRecord | undefined {
    return snapshotAtOrBefore(this.db, stream, version);
  }

  /** Every stored snapshot (`runlog verify`), a page at a time. */
  iterateSnapshots(pageSize = 256): IterableIterator<SnapshotRecord> {
    return iterateSnapshots(this.db, pageSize);
  }

  /** Every older snapshot kept for `replay --to` (snapshot_history; `runlog verify`), a page at a time. */
  iterateSnapshotHistory(pageSize = 256): IterableIterator<SnapshotRecord> {
    return iterateSnapshotHistory(this.db, pageSize);
  }

  /** Which version each stream's snapshot stands at, as the actors projection recorded it when it was written. */
  snapshotVersions(): Map<string, number> {
    return snapshotVersions(this.db);
  }

  /** Replaces every snapshot in one transaction (`runlog rebuild --snapshots`). */
  replaceSnapshots(records: Iterable<SnapshotRecord>): number {
    return this.writeTransaction('rebuild the snapshots', () =>
      replaceSnapshotRows(this.db, records, (r) => this.writer.putSnapshotRow(r)),
    );
  }

  /**
   * @internal (not in the shipped declarations: better-sqlite3's types are not runlog's API)
   * Retention (sqlite/archive.ts) reads the log through the connection itself and removes what it archived in one
   * write transaction of its own: nothing else of this store is involved, so it stays out of this file.
   */
  get connection(): Database.Database {
    return this.db;
  }

  /** Runs `fn` in one IMMEDIATE write transaction (marked in the WAL guard, like an append). */
  writeTransaction<T>(what: string, fn: () => T): T {
    if (this.closed) throw new RunlogError('STORE_CLOSED', `event log ${this.file} is closed`);
    if (this.readOnly) throw new ReadOnlyLogError(this.file, what);
    let result: T;
    try {
      this.beforeWrite();
      result = this.db.transaction(fn).immediate();
    } catch (err) {
      throw translate(this.file, err);
    }
    this.subscriptions.notify();
    return result;
  }

  /** SQLite's full integrity check (every page, every index): what `runlog verify` runs; [] when sound. */
  integrityCheck(): string[] {
    const rows = this.db.pragma('integrity_check') as { integrity_check: string }[];
    return rows.map((r) => r.integrity_check).filter((r) => r !== 'ok');
  }

  /** verifyChain, throwing StoreChainError at the first bad position. */
  assertChain(options: { afterSeq?: number } = {}): ChainCheck & { ok: true } {
    const r = this.verifyChain(options);
    if (!r.ok) throw new StoreChainError(this.file, r.seq, r.reason, { stream: r.stream, version: r.version });
    return r;
  }
}

export function openEventStore(file: string, options?: SqliteEventStoreOptions): SqliteEventStore {
  return new SqliteEventStore(file, options);
}
