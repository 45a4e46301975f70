// The event log in one SQLite file. WAL + synchronous=FULL by default: an append that returned is on
// disk. Opening never damages a file it does not recognise: foreign or corrupt files get a clear
// error naming the file and are left exactly as they were.
import { closeSync, existsSync, linkSync, mkdirSync, openSync, readSync, rmSync, statSync, unlinkSync } from 'node:fs';
import { dirname } from 'node:path';
import { ACTOR_KINDS, type NewEvent, type RecordedEvent, type ReplayEvent } from '../domain/events.ts';
import { MAX_EVENT_DEPTH, nestedDeeperThan } from '../domain/json-input.ts';
import {
  ConcurrencyError,
  ForeignDatabaseError,
  LogMissingError,
  LogUnreadableError,
  ReadOnlyLogError,
  RunlogError,
  StoreChainError,
  StoreCorruptError,
  StoreEmptyError,
  StoreTruncatedError,
  StoreVersionError,
  StoreWalDamagedError,
  StoreWriteError,
} from '../domain/errors.ts';
import { CHAIN_COLUMNS, GENESIS, eventHash, rowHash, type ChainCheck, type ChainRow } from './chain.ts';
import type {
  ActorRow,
  AppendObserver,
  AppendOptions,
  AppendOutcome,
  AppendRequest,
  AppendResult,
  EventStore,
  Heartbeat,
  ReadAllOptions,
  ReadOptions,
  SnapshotRecord,
  SnapshotRow,
  StreamInfo,
  SubscribeOptions,
} from './event-store.ts';
import { toSnapshot } from './event-store.ts';
import { APPLICATION_ID, CHAIN_MIGRATION, LATEST_SCHEMA, MIGRATIONS } from './schema.ts';
import { readShutdownRecord, shutdownRecordFile, writeShutdownRecord } from './shutdown-record.ts';
import { scanWal } from './wal-scan.ts';
import { Database } from './sqlite.ts';
import { readOnlyTarget } from './read-only-target.ts';
import { defaultUpcasters, type UpcasterRegistry } from './upcasters.ts';
import { WalGuard } from './wal-guard.ts';

export interface SqliteEventStoreOptions {
  /** 'FULL' (default) survives power loss; 'NORMAL' is a documented opt-in that may lose the last commits on power loss (never on a process crash). */
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
   * Inspection: open an existing log without writing anything (nothing appears beside it, every commit is seen:
   * read-only-target.ts). A missing file is LOG_MISSING, an empty or short one STORE_CORRUPT; no migration, no
   * pragma that writes, no marker file, no whole-file quick_check (a damaged page is STORE_CORRUPT when read).
   */
  readOnly?: boolean;
  /** With readOnly: opened in place through WAL, since an immutable open or a private copy never sees later commits. */
  followsWriters?: boolean;
}

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

interface EventRow {
  seq: number;
  stream: string;
  version: number;
  type: string;
  schema: number;
  data: string;
  meta: string;
  at: string;
}

/** A row of iterateReplay's query, in `.raw()` form: seq, stream, version, type, schema, data, at. */
type ReplayRow = [number, string, number, string, number, string, string];

/** The actors projection with, for an archived actor, where its events went (tombstones, migration 6). */
const ACTOR_SELECT = `SELECT actors.*, archives.file AS archived_to, archives.created_at AS archived_at FROM actors
  LEFT JOIN tombstones ON tombstones.stream = actors.stream LEFT JOIN archives ON archives.id = tombstones.archive`;

/** An actors row as SQLite returns it (retention plans its tombstones from the same shape). */
export interface ActorDbRow {
  archived_to: string | null;
  archived_at: string | null;
  id: string;
  kind: string;
  stream: string;
  state: string;
  status: string;
  version: number;
  created_at: string;
  updated_at: string;
  summary: string;
}

/** One request with its events already encoded: encoding happens before any transaction starts. */
interface EncodedRequest {
  stream: string;
  snapshot?: SnapshotRecord;
  events: { event: NewEvent; data: string; meta: string }[];
  options: AppendOptions;
  summary: string | null;
}

/**
 * An event (or its projection row) that JSON cannot encode: a BigInt, a cycle, nesting deeper than MAX_EVENT_DEPTH.
 * It fails only its own append; nothing of it was written.
 */
export class EventEncodingError extends RunlogError {
  constructor(stream: string, type: string, reason: string, options?: { cause?: unknown }) {
    super('EVENT_NOT_ENCODABLE', `event ${type} for ${stream} cannot be encoded as JSON (${reason}); nothing was appended`, { stream, type, reason }, options);
  }
}

function encodeJson(value: unknown, stream: string, type: string): string {
  // Bounded here, not by the encoder: Node 26's JSON.stringify encodes any depth, older lines throw at their own.
  if (nestedDeeperThan(value, MAX_EVENT_DEPTH)) throw new EventEncodingError(stream, type, `nested deeper than ${MAX_EVENT_DEPTH} levels`);
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw new EventEncodingError(stream, type, err instanceof Error ? err.message : String(err), { cause: err });
  }
  if (typeof text !== 'string') throw new EventEncodingError(stream, type, `${typeof value} is not JSON`);
  return text;
}

/** Encodes one request's events and projection, or says why it cannot be. */
function encodeRequest(r: AppendRequest): EncodedRequest {
  const events = r.events.map((e) => ({ event: e, data: encodeJson(e.data, r.stream, e.type), meta: encodeJson(e.meta ?? {}, r.stream, e.type) }));
  const summary = r.options.projection ? encodeJson(r.options.projection.summary, r.stream, r.events[0]?.type ?? 'projection') : null;
  return { stream: r.stream, events, options: r.options, summary, ...(r.options.snapshot ? { snapshot: r.options.snapshot } : {}) };
}

const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/**
 * Checks the first bytes before SQLite sees the file. An empty file is refused: SQLite would take it for a new,
 * empty database and a truncated log would silently become a valid empty one. New logs are never empty on
 * disk (see createLogFile), so a 0-byte file is always damage.
 */
function checkHeader(file: string): void {
  let size: number;
  try {
    const st = statSync(file);
    if (!st.isFile()) throw new StoreCorruptError(file, 'not a regular file');
    size = st.size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new LogMissingError(file);
    if ((err as NodeJS.ErrnoException).code === 'EACCES') throw new LogUnreadableError(file, 'permission denied');
    throw err;
  }
  if (size === 0) throw new StoreEmptyError(file);
  if (size < 100) throw new StoreTruncatedError(file, `the file is ${size} bytes, shorter than a SQLite header`, { size });
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EACCES') throw new LogUnreadableError(file, 'permission denied');
    throw err;
  }
  try {
    const head = Buffer.alloc(100);
    readSync(fd, head, 0, 100, 0);
    if (!head.subarray(0, 16).equals(SQLITE_HEADER)) throw new StoreCorruptError(file, 'not a SQLite database (bad header)');
    checkLength(file, size, head);
  } finally {
    closeSync(fd);
  }
}

/**
 * Whether the file is exactly as a writer's clean close left it: no WAL, and the size and modification time its
 * shutdown record holds. PRAGMA quick_check (a walk of every page: about 1.1 s per 150 MB) then has nothing new
 * to find, and an open costs the same whatever the log's length. After a crash, a copy, or any change made
 * without a clean close, it runs as before. Content changes inside pages are the hash chain's to find.
 */
function untouchedSinceCleanShutdown(file: string): boolean {
  const record = readShutdownRecord(file);
  if (!record || record.mtimeMs === undefined || walBytes(file) > 0) return false;
  try {
    const st = statSync(file);
    return st.size === record.size && st.mtimeMs === record.mtimeMs;
  } catch {
    return false;
  }
}

/** Bytes in a WAL file (0 when there is none). */
function walBytes(file: string): number {
  try {
    return statSync(`${file}-wal`).size;
  } catch {
    return 0;
  }
}

/**
 * A file shorter than it should be. SQLite keeps the database's page count in its header (valid while the
 * "version-valid-for" field equals the change counter), and a file is always a whole number of pages. With a
 * non-empty WAL the header may be ahead of the file (a checkpoint cut short: SQLite redoes it from the WAL), so
 * the page count is compared only when there is none. And a log shorter than its last clean shutdown recorded
 * is refused whatever its header says: the header of an old copy is consistent with itself.
 */
function checkLength(file: string, size: number, head: Buffer): void {
  const raw = head.readUInt16BE(16);
  const pageSize = raw === 1 ? 65536 : raw;
  if (pageSize >= 512 && size % pageSize !== 0) throw new StoreTruncatedError(file, `the file is ${size} bytes, not a whole number of ${pageSize}-byte pages`, { size, pageSize });
  const wal = walBytes(file);
  if (wal > 0) return;
  const pages = head.readUInt32BE(28);
  if (pages > 0 && head.readUInt32BE(24) === head.readUInt32BE(92) && pages * pageSize > size) {
    throw new StoreTruncatedError(file, `its header says ${pages} pages (${pages * pageSize} bytes) but the file has ${size} bytes`, { size, expected: pages * pageSize });
  }
  const record = readShutdownRecord(file);
  if (record && size < record.size) {
    throw new StoreTruncatedError(file, `the file is ${size} bytes; at its last clean shutdown (${record.at}) it was ${record.size} bytes`, { size, expected: record.size });
  }
}

/**
 * A damaged frame in the WAL (see wal-scan.ts), found before SQLite would recover the WAL and drop it. The last
 * good position is what SQLite sees of the log: read read-only, which changes neither the file nor the WAL.
 */
function checkWal(file: string): void {
  const damage = walDamage(file);
  if (damage) throw damage;
}

/** The damage checkWal refuses a writer's open for, as an error to report (`runlog verify`), or null. */
export function walDamage(file: string): StoreWalDamagedError | null {
  const scan = scanWal(`${file}-wal`);
  if (!scan || scan.damagedFrame === null) return null;
  let lastGoodSeq: number | null = null;
  try {
    // Read as inspection reads (read-only-target.ts): opened in place, SQLite would create a -shm beside the log.
    const { target, release } = readOnlyTarget(file, false);
    try {
      const db = new Database(target, { readonly: true, fileMustExist: true });
      try {
        lastGoodSeq = (db.prepare('SELECT coalesce(max(seq), 0) AS s FROM events').get() as { s: number }).s;
      } finally {
        db.close();
      }
    } finally {
      release();
    }
  } catch {
    /* the position stays unknown; the frame number is still reported */
  }
  return new StoreWalDamagedError(file, scan.damagedFrame, scan.lastCommitFrame, lastGoodSeq);
}

/**
 * Creates a new log atomically, mode 0600 from the first byte: the schema is written into a temporary file
 * (created 0600, so SQLite's -journal inherits that mode too) and linked into place only when complete. A log
 * file that exists is therefore always initialised; link() never replaces a file another process created meanwhile.
 */
function createLogFile(file: string): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.creating-${process.pid}-${Date.now()}`;
  closeSync(openSync(tmp, 'wx', 0o600));
  try {
    const db = new Database(tmp);
    try {
      // Before the first table: free pages can then be given back (retention) without a VACUUM of the whole file.
      db.pragma('auto_vacuum = INCREMENTAL');
      db.transaction(() => {
        for (const m of MIGRATIONS) db.exec(m);
        db.pragma(`application_id = ${APPLICATION_ID}`);
        db.pragma(`user_version = ${LATEST_SCHEMA}`);
      }).immediate();
    } finally {
      db.close();
    }
    try {
      linkSync(tmp, file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err; // created by someone else: open theirs
    }
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      /* already gone */
    }
  }
}

function sqliteCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}

/** Maps SQLite's failures onto runlog's typed errors. */
function translate(file: string, err: unknown): unknown {
  if (err instanceof RunlogError) return err;
  const code = sqliteCode(err) ?? '';
  const msg = err instanceof Error ? err.message : String(err);
  if (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB') return new StoreCorruptError(file, msg, { cause: err });
  if (code.startsWith('SQLITE_FULL')) return new StoreWriteError(file, `disk full (${msg})`, { cause: err });
  if (code.startsWith('SQLITE_IOERR') || code.startsWith('SQLITE_READONLY') || code.startsWith('SQLITE_CANTOPEN')) {
    return new StoreWriteError(file, `${code}: ${msg}`, { cause: err });
  }
  if (code.startsWith('SQLITE_BUSY')) return new RunlogError('STORE_BUSY', `event log ${file} is locked by another writer: ${msg}`, { file });
  // The WAL guard's marker file (wal-guard.ts) is written next to the database.
  if (code === 'ENOSPC') return new StoreWriteError(file, `disk full (${msg})`, { cause: err });
  if (code === 'EROFS' || code === 'EACCES' || code === 'EPERM' || code === 'EIO' || code === 'EDQUOT') return new StoreWriteError(file, `${code}: ${msg}`, { cause: err });
  return err;
}

export class SqliteEventStore implements EventStore {
  readonly file: string;
  private readonly db: Database.Database;
  private readonly upcasters: UpcasterRegistry;
  private readonly now: () => string;
  private readonly subscribers = new Set<() => void>();
  private pollTimer: NodeJS.Timeout | undefined;
  private lastDataVersion = 0;
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

  private readonly stmt: {
    streamVersion: Database.Statement<[string], { version: number | null }>;
    insertEvent: Database.Statement<[number, string, number, string, number, string, string, string, Buffer]>;
    upsertActor: Database.Statement<[string, string, string, string, string, number, string, string, string]>;
    readStream: Database.Statement<[string, number, number], EventRow>;
    readAll: Database.Statement<[number, number], EventRow>;
    dataVersion: Database.Statement<[], { data_version: number }>;
    /** The chain (chain.ts): its last link, and the next seq. Undefined when read-only. */
    chainHead?: Database.Statement<[], { seq: number; hash: Buffer }>;
    maxSeq: Database.Statement<[], { s: number }>;
    setChainHead?: Database.Statement<[number, Buffer]>;
    putSnapshot?: Database.Statement<[string, number, string, string, string, string]>;
    keepOlderSnapshot?: Database.Statement<[string, number]>;
    markSnapshot?: Database.Statement<[number, string]>;
    getSnapshot: Database.Statement<[string], SnapshotRow>;
  };

  private readonly appendTx: (request: EncodedRequest) => AppendResult;
  private readonly appendManyTx: (requests: readonly EncodedRequest[]) => AppendOutcome[];
  /** iterateEvents' page queries, prepared on first use. */
  private streamPage: Database.Statement<[string, number, number, number], EventRow> | undefined;
  private seqPage: Database.Statement<[number, number, number], EventRow> | undefined;
  private jsonPage: Database.Statement<[number, number], EventRow> | undefined;
  /** iterateReplay's page query, prepared on first use. */
  private replayPage: Database.Statement<[number, number], ReplayRow> | undefined;

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
      // Read-only: nothing may appear beside the log, and every commit must be seen (read-only-target.ts).
      if (this.readOnly) ({ target, release: this.releaseTarget } = readOnlyTarget(file, options.followsWriters ?? false));
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
      this.open(options, file !== ':memory:' && untouchedSinceCleanShutdown(file));
    } catch (err) {
      this.db.close();
      throw this.translateOpen(err);
    }
    const db = this.db;
    this.stmt = {
      streamVersion: db.prepare('SELECT max(version) AS version FROM events WHERE stream = ?'),
      insertEvent: db.prepare('INSERT INTO events (seq, stream, version, type, schema, data, meta, at, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)'),
      upsertActor: db.prepare(
        `INSERT INTO actors (id, kind, stream, state, status, version, created_at, updated_at, summary)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET state = excluded.state, status = excluded.status, version = excluded.version,
           updated_at = excluded.updated_at, summary = excluded.summary`,
      ),
      readStream: db.prepare('SELECT * FROM events WHERE stream = ? AND version >= ? AND version <= ? ORDER BY version'),
      readAll: db.prepare('SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?'),
      dataVersion: db.prepare('PRAGMA data_version'),
      maxSeq: db.prepare('SELECT coalesce(max(seq), 0) AS s FROM events'),
      getSnapshot: db.prepare('SELECT * FROM snapshots WHERE stream = ?'),
      ...(this.readOnly
        ? {}
        : {
            chainHead: db.prepare('SELECT seq, hash FROM chain_head WHERE id = 1'),
            setChainHead: db.prepare('INSERT INTO chain_head (id, seq, hash) VALUES (1, ?, ?) ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash'),
            putSnapshot: db.prepare('INSERT OR REPLACE INTO snapshots (stream, version, fingerprint, created_at, state, checksum) VALUES (?, ?, ?, ?, ?, ?)'),
            keepOlderSnapshot: db.prepare('INSERT OR REPLACE INTO snapshot_history SELECT stream, version, fingerprint, created_at, state, checksum FROM snapshots WHERE stream = ? AND version < ?'),
            markSnapshot: db.prepare('UPDATE actors SET snapshot_version = ? WHERE stream = ?'),
          }),
    };
    this.checkShutdownRecord();
    this.appendTx = db.transaction((request: EncodedRequest) => this.appendInTx(request)).immediate as never;
    this.appendManyTx = db.transaction((requests: readonly EncodedRequest[]) =>
      requests.map((r): AppendOutcome => {
        try {
          return { ok: true, result: this.appendInTx(r) };
        } catch (err) {
          // appendInTx checks the version before it writes anything: a conflict leaves nothing to undo.
          if (err instanceof ConcurrencyError) return { ok: false, error: err };
          throw err;
        }
      }),
    ).immediate as never;
    // A dead writer's commits are in the WAL we just opened: copy them into the file (which clears its marker).
    if (deadMarkers > 0) this.checkpoint('PASSIVE');
  }

  /** A read-only open that SQLite could not do is about reading, not writing. */
  private translateOpen(err: unknown): unknown {
    this.releaseTarget();
    const code = sqliteCode(err) ?? '';
    if (this.readOnly && (code.startsWith('SQLITE_CANTOPEN') || code.startsWith('SQLITE_READONLY') || code.startsWith('SQLITE_IOERR'))) {
      return new LogUnreadableError(this.file, `${code}: ${(err as Error).message}`);
    }
    return translate(this.file, err);
  }

  /** Marks this process's next commits as possibly WAL-only (see wal-guard.ts) and plans a checkpoint. */
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

  /** `untouched`: the file is as the last clean shutdown left it, which SQLite had checked (see untouchedSinceCleanShutdown). */
  private open(options: SqliteEventStoreOptions, untouched = false): void {
    const db = this.db;
    // Read-only checks first: nothing is written to a file until we know it is ours and sound. A writer checks the
    // whole file (quick_check) before it appends, unless the file is untouched since its last clean shutdown;
    // inspection does not (a second per 150 MB before the first line): the header checks above and below still
    // refuse an empty, short, truncated or foreign file, damage found while reading is STORE_CORRUPT, and a deep
    // check of a log is an explicit command's job (`runlog verify`).
    if (!options.skipQuickCheck && !this.readOnly && !untouched) {
      const rows = db.pragma('quick_check') as { quick_check: string }[];
      const problems = rows.map((r) => r.quick_check).filter((r) => r !== 'ok');
      if (problems.length > 0) throw new StoreCorruptError(this.file, `quick_check: ${problems.slice(0, 5).join('; ')}`);
    }
    const appId = db.pragma('application_id', { simple: true }) as number;
    const userVersion = db.pragma('user_version', { simple: true }) as number;
    const tables = (db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get() as { n: number }).n;
    if (appId !== APPLICATION_ID && (appId !== 0 || tables > 0 || userVersion !== 0)) {
      throw new ForeignDatabaseError(this.file, appId !== 0 ? `application_id is 0x${appId.toString(16)}` : `it has ${tables} tables of another program`);
    }
    if (userVersion > LATEST_SCHEMA) throw new StoreVersionError(this.file, userVersion, LATEST_SCHEMA);
    if (this.readOnly) {
      // Nothing may be written: a file that is not yet a runlog log (no schema) is not one to inspect.
      if (appId !== APPLICATION_ID || userVersion !== LATEST_SCHEMA) {
        throw new StoreCorruptError(this.file, userVersion === 0 ? 'it holds no runlog schema (an uninitialised or foreign SQLite file)' : `schema version ${userVersion} needs an upgrade that only a writer runs`);
      }
      db.pragma('query_only = ON');
      return;
    }

    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${options.synchronous ?? 'FULL'}`);
    db.pragma('foreign_keys = ON');

    if (userVersion < LATEST_SCHEMA) {
      db.transaction(() => {
        for (let v = userVersion; v < LATEST_SCHEMA; v++) {
          db.exec(MIGRATIONS[v]!);
          if (v + 1 === CHAIN_MIGRATION) computeChain(db);
        }
        db.pragma(`application_id = ${APPLICATION_ID}`);
        db.pragma(`user_version = ${LATEST_SCHEMA}`);
      }).immediate();
    }
  }

  private appendInTx({ stream, events, options, summary, snapshot }: EncodedRequest): AppendResult {
    const actual = this.stmt.streamVersion.get(stream)?.version ?? 0;
    const ev = options.expectedVersion;
    if (ev !== 'any') {
      const expected = ev === 'no-stream' ? 0 : ev;
      if (expected !== actual) throw new ConcurrencyError(stream, expected, actual);
    }
    const now = this.now();
    const recorded: RecordedEvent[] = [];
    let version = actual;
    // Read inside the transaction: a rolled-back append leaves no link behind (chain.ts). The head, not the last
    // row, says where the log ends: the last events may have been archived, and a seq is never given twice.
    const head = this.stmt.chainHead!.get();
    let lastSeq = Math.max(this.stmt.maxSeq.get()!.s, head?.seq ?? 0);
    let hash: Buffer = head?.hash ?? GENESIS;
    for (const { event: e, data, meta: metaText } of events) {
      version += 1;
      lastSeq += 1;
      const schema = e.schema ?? this.upcasters.currentSchema(e.type);
      const at = e.at ?? now;
      const meta = e.meta ?? {};
      hash = eventHash(hash, lastSeq, stream, version, e.type, schema, at, data, metaText);
      this.stmt.insertEvent.run(lastSeq, stream, version, e.type, schema, data, metaText, at, hash);
      recorded.push({ seq: lastSeq, stream, version, type: e.type, schema, data: e.data as Record<string, unknown>, meta, at });
    }
    this.stmt.setChainHead!.run(lastSeq, hash);
    const p = options.projection;
    if (p) {
      this.stmt.upsertActor.run(p.id, p.kind, p.stream, p.state, p.status, version, p.createdAt, p.updatedAt, summary ?? '{}');
    }
    // A snapshot stands for exactly this version: one made for another is a caller's bug, never stored.
    if (snapshot && snapshot.stream === stream && snapshot.version === version) this.putSnapshotRow(snapshot);
    return { version, lastSeq, events: recorded };
  }

  append(stream: string, events: readonly NewEvent[], options: AppendOptions): AppendResult {
    if (this.closed) throw new RunlogError('STORE_CLOSED', `event log ${this.file} is closed`);
    if (this.readOnly) throw new ReadOnlyLogError(this.file);
    if (events.length === 0) return { version: this.streamVersion(stream), lastSeq: 0, events: [] };
    // Encoded before the transaction: a value JSON cannot encode throws EventEncodingError and writes nothing.
    const encoded = encodeRequest({ stream, events, options });
    let result: AppendResult;
    const t0 = this.onAppend ? performance.now() : 0;
    try {
      this.beforeWrite();
      result = this.appendTx(encoded);
    } catch (err) {
      throw translate(this.file, err);
    }
    if (this.onAppend) this.onAppend((performance.now() - t0) / 1000, result.events.length);
    this.notify();
    return result;
  }

  appendMany(requests: readonly AppendRequest[]): AppendOutcome[] {
    if (this.closed) throw new RunlogError('STORE_CLOSED', `event log ${this.file} is closed`);
    if (this.readOnly) throw new ReadOnlyLogError(this.file);
    if (requests.every((r) => r.events.length === 0)) return requests.map((r) => ({ ok: true, result: { version: this.streamVersion(r.stream), lastSeq: 0, events: [] } }));
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
        committed = this.appendManyTx(encoded);
      } catch (err) {
        throw translate(this.file, err);
      }
      if (this.onAppend) this.onAppend((performance.now() - t0) / 1000, committed.reduce((n, o) => n + (o.ok ? o.result.events.length : 0), 0));
      let i = 0;
      for (let k = 0; k < outcomes.length; k++) if (outcomes[k] === null) outcomes[k] = committed[i++]!;
      this.notify();
    }
    return outcomes as AppendOutcome[];
  }

  private toRecorded(r: EventRow): RecordedEvent {
    const { schema, data } = this.upcasters.upcast(r.type, r.schema, JSON.parse(r.data));
    // Most events carry no metadata: skip parsing the empty object (replay reads millions of rows).
    const meta = r.meta === '{}' ? {} : (JSON.parse(r.meta) as Record<string, unknown>);
    return { seq: r.seq, stream: r.stream, version: r.version, type: r.type, schema, data, meta, at: r.at };
  }

  read(stream: string, options: ReadOptions = {}): RecordedEvent[] {
    return this.stmt.readStream.all(stream, options.from ?? 1, options.to ?? Number.MAX_SAFE_INTEGER).map((r) => this.toRecorded(r));
  }

  /** The whole stream: SQLite reads from the file, so nothing is paged out (host-store.ts). */
  readRecent(stream: string): RecordedEvent[] {
    return this.read(stream);
  }

  readAll(options: ReadAllOptions = {}): RecordedEvent[] {
    return this.stmt.readAll.all(options.afterSeq ?? 0, options.limit ?? -1).map((r) => this.toRecorded(r));
  }

  /**
   * The whole log in seq order as replay reads it (`foldLog`, `rebuild`): each event's stream, version and
   * machine event, upcast, without materialising the log. Rows are fetched in pages (better-sqlite3's `all()` is
   * several times cheaper per row than stepping `iterate()`), as arrays of only the columns replay needs (never
   * `meta`), and data already at its type's current schema skips the upcaster.
   *
   * Pages are small: under a fold a page of rows stays live while the fold's garbage triggers scavenges, and at
   * 4096 rows the extra survivors cost more GC time than the fewer queries save.
   */
  *iterateReplay(afterSeq = 0, pageSize = 512): IterableIterator<ReplayEvent> {
    this.replayPage ??= this.db
      .prepare('SELECT seq, stream, version, type, schema, data, at FROM events WHERE seq > ? ORDER BY seq LIMIT ?')
      .raw(true) as unknown as Database.Statement<[number, number], ReplayRow>; // why: raw(true) rows are arrays; better-sqlite3's types keep the object row type
    const upcasters = this.upcasters;
    let cursor = afterSeq;
    for (;;) {
      const page = this.replayPage.all(cursor, pageSize);
      for (const r of page) {
        const type = r[3];
        let data = JSON.parse(r[5]) as Record<string, unknown>;
        if (!upcasters.isCurrent(type, r[4])) data = upcasters.upcast(type, r[4], data).data;
        yield { stream: r[1], version: r[2], type, at: r[6], data };
      }
      if (page.length < pageSize) return;
      cursor = page[page.length - 1]![0];
    }
  }

  /**
   * Recorded events read a page at a time (`runlog events` prints them as they come, never holding the log):
   * the whole log in seq order (`afterSeq`, `toSeq`), or one stream in version order (`from`, `to`).
   */
  *iterateEvents(options: IterateEventsOptions = {}): IterableIterator<RecordedEvent> {
    const pageSize = options.pageSize ?? 512;
    if (options.stream !== undefined) {
      this.streamPage ??= this.db.prepare('SELECT * FROM events WHERE stream = ? AND version >= ? AND version <= ? ORDER BY version LIMIT ?');
      const to = options.to ?? Number.MAX_SAFE_INTEGER;
      let from = options.from ?? 1;
      for (;;) {
        const page = this.streamPage.all(options.stream, from, to, pageSize);
        for (const r of page) yield this.toRecorded(r);
        if (page.length < pageSize) return;
        from = page[page.length - 1]!.version + 1;
      }
    }
    this.seqPage ??= this.db.prepare('SELECT * FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?');
    const toSeq = options.toSeq ?? Number.MAX_SAFE_INTEGER;
    let cursor = options.afterSeq ?? 0;
    for (;;) {
      const page = this.seqPage.all(cursor, toSeq, pageSize);
      for (const r of page) yield this.toRecorded(r);
      if (page.length < pageSize) return;
      cursor = page[page.length - 1]!.seq;
    }
  }

  /**
   * The whole log after `afterSeq` as the JSON text of each recorded event (what `JSON.stringify` of `readAll`
   * gives), built from the stored text without parsing it again when the event is at its type's current schema.
   * For streaming many events to many readers (the SSE catch-up).
   */
  readAllJson(afterSeq: number, limit: number): { seq: number; json: string }[] {
    this.jsonPage ??= this.db.prepare('SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?');
    return this.jsonPage.all(afterSeq, limit).map((r) => {
      if (!this.upcasters.isCurrent(r.type, r.schema)) return { seq: r.seq, json: JSON.stringify(this.toRecorded(r)) };
      const json = `{"seq":${r.seq},"stream":${JSON.stringify(r.stream)},"version":${r.version},"type":${JSON.stringify(r.type)},"schema":${r.schema},"data":${r.data},"meta":${r.meta},"at":${JSON.stringify(r.at)}}`;
      return { seq: r.seq, json };
    });
  }

  streamVersion(stream: string): number {
    return this.stmt.streamVersion.get(stream)?.version ?? 0;
  }

  /** Every stream, in order of its first event. The kind is the stream name's prefix ("instance-…"). */
  streams(kind?: string): StreamInfo[] {
    const rows = this.db
      .prepare('SELECT stream, max(version) AS version, min(seq) AS first, min(at) AS created_at, max(at) AS updated_at FROM events GROUP BY stream ORDER BY first')
      .all() as { stream: string; version: number; created_at: string; updated_at: string }[];
    return rows
      .map((r) => ({ stream: r.stream, kind: r.stream.split('-')[0]!, version: r.version, createdAt: r.created_at, updatedAt: r.updated_at }))
      .filter((r) => !kind || r.kind === kind);
  }

  lastSeq(): number {
    return (this.db.prepare('SELECT coalesce(max(seq), 0) AS s FROM events').get() as { s: number }).s;
  }

  subscribe(options: SubscribeOptions, handler: (event: RecordedEvent) => void): () => void {
    let cursor = options.afterSeq ?? this.lastSeq();
    let draining = false;
    const drain = (): void => {
      if (draining || this.closed) return;
      draining = true;
      try {
        for (;;) {
          const batch = this.readAll({ afterSeq: cursor, limit: 500 });
          if (batch.length === 0) break;
          for (const e of batch) {
            cursor = e.seq;
            if (!options.stream || e.stream === options.stream) handler(e);
          }
        }
      } finally {
        draining = false;
      }
    };
    this.subscribers.add(drain);
    this.ensurePolling(options.pollMs ?? 200);
    queueMicrotask(drain);
    return () => {
      this.subscribers.delete(drain);
      if (this.subscribers.size === 0 && this.pollTimer) {
        clearInterval(this.pollTimer);
        this.pollTimer = undefined;
      }
    };
  }

  /** Other processes' commits are noticed through PRAGMA data_version, which changes only when they write. */
  private ensurePolling(pollMs: number): void {
    if (this.pollTimer) return;
    this.lastDataVersion = this.stmt.dataVersion.get()!.data_version;
    this.pollTimer = setInterval(() => {
      if (this.closed) return;
      const v = this.stmt.dataVersion.get()!.data_version;
      if (v !== this.lastDataVersion) {
        this.lastDataVersion = v;
        this.notify();
      }
    }, pollMs);
    this.pollTimer.unref();
  }

  private notify(): void {
    if (this.subscribers.size === 0) return;
    queueMicrotask(() => {
      for (const s of this.subscribers) s();
    });
  }

  listActors(filter: { kind?: string; all?: boolean } = {}): ActorRow[] {
    const where: string[] = [];
    const args: string[] = [];
    // Always a condition on kind: the index is (kind, status), and "status = 'active'" alone scans every actor
    // the log ever had (156 ms of a 5,000,000-event log's start-up; 1.6 ms through the index).
    const kinds = filter.kind ? [filter.kind] : ACTOR_KINDS;
    where.push(`actors.kind IN (${kinds.map(() => '?').join(', ')})`);
    args.push(...kinds);
    if (!filter.all) where.push("actors.status = 'active'");
    const sql = `${ACTOR_SELECT} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY actors.created_at, actors.id`;
    return (this.db.prepare(sql).all(...args) as ActorDbRow[]).map(toActorRow);
  }

  getActor(id: string): ActorRow | undefined {
    const r = this.db.prepare(`${ACTOR_SELECT} WHERE actors.id = ?`).get(id) as ActorDbRow | undefined;
    return r ? toActorRow(r) : undefined;
  }

  replaceProjection(rows: readonly ActorRow[]): void {
    if (this.readOnly) throw new ReadOnlyLogError(this.file, 'rebuild the projection');
    try {
      this.beforeWrite();
      this.db.transaction(() => {
        this.db.prepare('DELETE FROM actors').run();
        for (const p of rows) {
          this.stmt.upsertActor.run(p.id, p.kind, p.stream, p.state, p.status, p.version, p.createdAt, p.updatedAt, JSON.stringify(p.summary));
        }
        // Archived actors have no events left to fold: their rows come back from their tombstones.
        this.db
          .prepare('INSERT OR IGNORE INTO actors (id, kind, stream, state, status, version, created_at, updated_at, summary) SELECT id, kind, stream, state, status, version, created_at, updated_at, summary FROM tombstones')
          .run();
        // Which snapshot each actor has is not derived from events: it is carried over from the snapshots kept.
        this.db.prepare('UPDATE actors SET snapshot_version = (SELECT version FROM snapshots WHERE snapshots.stream = actors.stream)').run();
      }).immediate();
    } catch (err) {
      throw translate(this.file, err);
    }
  }

  /**
   * Records the supervisor's heartbeat (one row, replaced). Not through beforeWrite: a heartbeat lost with a WAL
   * loses no event, so it must not make the WAL guard report one.
   */
  writeHeartbeat(h: Heartbeat): void {
    if (this.closed) return;
    try {
      this.db
        .prepare(
          `INSERT INTO supervisor_heartbeat (id, node, pid, started_at, beat_at, interval_ms, stopped_at) VALUES (1, ?, ?, ?, ?, ?, ?)
           ON CONFLICT(id) DO UPDATE SET node = excluded.node, pid = excluded.pid, started_at = excluded.started_at,
             beat_at = excluded.beat_at, interval_ms = excluded.interval_ms, stopped_at = excluded.stopped_at`,
        )
        .run(h.node, h.pid, h.startedAt, h.beatAt, h.intervalMs, h.stoppedAt);
      this.heartbeatInWal = true;
    } catch (err) {
      throw translate(this.file, err);
    }
  }

  /** The last heartbeat, or null when no supervisor ever ran on this log (or the file predates migration 3). */
  readHeartbeat(): Heartbeat | null {
    let r: { node: string; pid: number; started_at: string; beat_at: string; interval_ms: number; stopped_at: string | null } | undefined;
    try {
      r = this.db.prepare('SELECT * FROM supervisor_heartbeat WHERE id = 1').get() as typeof r;
    } catch {
      return null; // opened without migrating (read-only): no table, no heartbeat
    }
    return r ? { node: r.node, pid: r.pid, startedAt: r.started_at, beatAt: r.beat_at, intervalMs: r.interval_ms, stoppedAt: r.stopped_at } : null;
  }

  /** Bytes on disk: the database file and its WAL (metrics). */
  sizeBytes(): number {
    if (this.file === ':memory:') return 0;
    let n = 0;
    for (const f of [this.file, `${this.file}-wal`]) {
      try {
        n += statSync(f).size;
      } catch {
        /* no WAL right now */
      }
    }
    return n;
  }

  close(): void {
    if (this.closed) return;
    if (this.pollTimer) clearInterval(this.pollTimer);
    if (this.checkpointTimer) clearTimeout(this.checkpointTimer);
    this.subscribers.clear();
    if (this.guard?.dirty || (this.guard && this.heartbeatInWal)) {
      // A clean close leaves a self-contained file: the WAL copied in and truncated (unless readers hold it).
      try {
        this.db.pragma('busy_timeout = 200');
      } catch {
        /* keep the default */
      }
      this.checkpoint('TRUNCATE');
    }
    const head = this.guard ? this.chainCheckHead() : null;
    this.closed = true;
    this.db.close();
    this.releaseTarget();
    if (head) this.recordShutdown(head);
  }

  /**
   * A writer's clean close records how long the log is and when it last changed (shutdown-record.ts), after the
   * connection is closed (closing may still touch the file). Best effort: a record is a safeguard.
   */
  private recordShutdown(head: { seq: number; hash: Buffer }): void {
    try {
      if (walBytes(this.file) > 0) return; // readers held the WAL: the file's size says nothing yet
      const st = statSync(this.file);
      writeShutdownRecord(this.file, { size: st.size, mtimeMs: st.mtimeMs, lastSeq: head.seq, hash: head.hash.toString('hex'), at: this.now() });
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
    const last = Math.max(this.stmt.maxSeq.get()!.s, (this.db.prepare('SELECT coalesce(max(seq), 0) AS s FROM chain_gaps').get() as { s: number }).s);
    if (last < record.lastSeq) {
      this.db.close();
      this.releaseTarget();
      throw new StoreTruncatedError(this.file, `it ends at event seq ${last}; at its last clean shutdown (${record.at}) it ended at seq ${record.lastSeq}`, { lastSeq: last, expected: record.lastSeq });
    }
  }

  /** The chain's last link as recorded (chain_head), or genesis for an empty log. */
  private chainCheckHead(): { seq: number; hash: Buffer } {
    try {
      const r = this.db.prepare('SELECT seq, hash FROM chain_head WHERE id = 1').get() as { seq: number; hash: Buffer } | undefined;
      return r ?? { seq: 0, hash: GENESIS };
    } catch {
      return { seq: 0, hash: GENESIS }; // opened read-only before migration 4: no chain yet
    }
  }

  /**
   * Checks the hash chain (chain.ts): every event from `afterSeq` on (the whole log by default) against the link
   * before it, then the last event against chain_head. Stops at the first bad position. `afterSeq` trusts the hash
   * stored at that seq: a tail check (`serve` at start) is as cheap as the tail is short.
   */
  verifyChain(options: { afterSeq?: number; pageSize?: number } = {}): ChainCheck {
    const pageSize = options.pageSize ?? 2048;
    let cursor = Math.max(0, options.afterSeq ?? 0);
    let prev: Buffer = GENESIS;
    if (cursor > 0) {
      const before = this.db.prepare('SELECT seq, hash FROM events WHERE seq <= ? ORDER BY seq DESC LIMIT 1').get(cursor) as { seq: number; hash: Buffer | null } | undefined;
      if (before) {
        if (!before.hash) return { ok: false, events: 0, seq: before.seq, stream: null, version: null, reason: 'the event has no hash' };
        prev = before.hash;
        cursor = before.seq;
      } else cursor = 0;
    }
    // why: raw(true) rows are arrays; better-sqlite3's types keep the object row type
    const page = this.db.prepare(`SELECT ${CHAIN_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?`).raw(true) as unknown as Database.Statement<[number, number], ChainRow>;
    // Archived events (sqlite-archive.ts) leave holes in the seqs; the hash before each hole's end was recorded.
    const gapStmt = this.db.prepare('SELECT from_seq AS "from", hash FROM chain_gaps WHERE seq = ?') as Database.Statement<[number], { from: number; hash: Buffer }>;
    // A recorded hole must cover all of what is missing (from_seq..seq): events deleted around it are still damage.
    const gap = (end: number, from: number): Buffer | undefined => {
      const g = gapStmt.get(end);
      return g && g.from <= from ? g.hash : undefined;
    };
    let events = 0;
    let lastSeq = cursor;
    for (;;) {
      const rows = page.all(cursor, pageSize);
      for (const r of rows) {
        if (r[0] !== lastSeq + 1) {
          const link = gap(r[0] - 1, lastSeq + 1);
          if (!link) return { ok: false, events, seq: r[0], stream: r[1], version: r[2], reason: `events ${lastSeq + 1}..${r[0] - 1} before it are missing (and no archive recorded them)` };
          prev = link;
        }
        const expected = rowHash(prev, r);
        if (!r[8] || !expected.equals(r[8])) {
          return { ok: false, events, seq: r[0], stream: r[1], version: r[2], reason: r[8] ? 'its bytes do not match its hash (changed after it was written)' : 'the event has no hash' };
        }
        prev = r[8];
        lastSeq = r[0];
        events += 1;
      }
      if (rows.length < pageSize) break;
      cursor = rows[rows.length - 1]![0];
    }
    const head = this.chainCheckHead();
    const archivedTail = head.seq > lastSeq ? gap(head.seq, lastSeq + 1) : undefined;
    if (archivedTail) {
      // The log's last events were archived: the head names the last archived link.
      if (!archivedTail.equals(head.hash)) return { ok: false, events, seq: head.seq, stream: null, version: null, reason: `the chain's head (seq ${head.seq}) does not match the archived link recorded for it` };
      return { ok: true, events, lastSeq: head.seq, lastHash: head.hash };
    }
    if (head.seq > lastSeq) {
      return { ok: false, events, seq: lastSeq + 1, stream: null, version: null, reason: `the chain's head is at seq ${head.seq} but the log ends at seq ${lastSeq} (events are missing from its end)` };
    }
    if (head.seq < lastSeq || !head.hash.equals(prev)) {
      return { ok: false, events, seq: lastSeq, stream: null, version: null, reason: `the chain's head (seq ${head.seq}) does not name the last event (seq ${lastSeq})` };
    }
    return { ok: true, events, lastSeq, lastHash: prev };
  }

  private putSnapshotRow(r: SnapshotRecord): void {
    this.stmt.keepOlderSnapshot!.run(r.stream, r.version); // the one it replaces stays usable for replay --to
    this.stmt.putSnapshot!.run(r.stream, r.version, r.fingerprint, r.createdAt, r.state, r.checksum);
    this.stmt.markSnapshot!.run(r.version, r.stream);
  }

  latestSnapshot(stream: string): SnapshotRecord | undefined {
    const r = this.stmt.getSnapshot.get(stream);
    return r ? toSnapshot(r) : undefined;
  }

  snapshotAtOrBefore(stream: string, version: number): SnapshotRecord | undefined {
    const r = this.db
      .prepare('SELECT * FROM (SELECT * FROM snapshots WHERE stream = ? AND version <= ? UNION ALL SELECT * FROM snapshot_history WHERE stream = ? AND version <= ?) ORDER BY version DESC LIMIT 1')
      .get(stream, version, stream, version) as SnapshotRow | undefined;
    return r ? toSnapshot(r) : undefined;
  }

  /** Every stored snapshot (`runlog verify`), a page at a time. */
  *iterateSnapshots(pageSize = 256): IterableIterator<SnapshotRecord> {
    const page = this.db.prepare('SELECT * FROM snapshots WHERE stream > ? ORDER BY stream LIMIT ?') as Database.Statement<[string, number], SnapshotRow>;
    let cursor = '';
    for (;;) {
      const rows = page.all(cursor, pageSize);
      for (const r of rows) yield toSnapshot(r);
      if (rows.length < pageSize) return;
      cursor = rows[rows.length - 1]!.stream;
    }
  }

  /** Every older snapshot kept for `replay --to` (snapshot_history; `runlog verify`), a page at a time. */
  *iterateSnapshotHistory(pageSize = 256): IterableIterator<SnapshotRecord> {
    const page = this.db.prepare('SELECT * FROM snapshot_history WHERE (stream, version) > (?, ?) ORDER BY stream, version LIMIT ?') as Database.Statement<[string, number, number], SnapshotRow>;
    let cursor: [string, number] = ['', -1];
    for (;;) {
      const rows = page.all(cursor[0], cursor[1], pageSize);
      for (const r of rows) yield toSnapshot(r);
      if (rows.length < pageSize) return;
      cursor = [rows[rows.length - 1]!.stream, rows[rows.length - 1]!.version];
    }
  }

  /** Which version each stream's snapshot stands at, as the actors projection recorded it when it was written. */
  snapshotVersions(): Map<string, number> {
    const rows = this.db.prepare('SELECT stream, snapshot_version AS v FROM actors WHERE snapshot_version IS NOT NULL').all() as { stream: string; v: number }[];
    return new Map(rows.map((r) => [r.stream, r.v]));
  }

  /** Replaces every snapshot in one transaction (`runlog rebuild --snapshots`). */
  replaceSnapshots(records: Iterable<SnapshotRecord>): number {
    if (this.readOnly) throw new ReadOnlyLogError(this.file, 'rebuild the snapshots');
    let n = 0;
    try {
      this.beforeWrite();
      this.db.transaction(() => {
        this.db.prepare('DELETE FROM snapshots').run();
        this.db.prepare('DELETE FROM snapshot_history').run();
        this.db.prepare('UPDATE actors SET snapshot_version = NULL').run();
        for (const r of records) {
          this.putSnapshotRow(r);
          n += 1;
        }
      }).immediate();
    } catch (err) {
      throw translate(this.file, err);
    }
    return n;
  }

  /**
   * @internal (not in the shipped declarations: better-sqlite3's types are not runlog's API)
   * Retention (sqlite-archive.ts) reads the log through the connection itself and removes what it archived in one
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
    this.notify();
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

/** Migration 4: the chain of the events already in the log, computed in the migration's transaction. */
function computeChain(db: Database.Database): void {
  // why: raw(true) rows are arrays; better-sqlite3's types keep the object row type
  const page = db.prepare(`SELECT ${CHAIN_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT 2048`).raw(true) as unknown as Database.Statement<[number], ChainRow>;
  const set = db.prepare('UPDATE events SET hash = ? WHERE seq = ?');
  let prev: Buffer = GENESIS;
  let cursor = 0;
  for (;;) {
    const rows = page.all(cursor);
    for (const r of rows) {
      prev = rowHash(prev, r);
      set.run(prev, r[0]);
    }
    if (rows.length < 2048) break;
    cursor = rows[rows.length - 1]![0];
  }
  if (cursor > 0 || prev !== GENESIS) {
    const last = (db.prepare('SELECT coalesce(max(seq), 0) AS s FROM events').get() as { s: number }).s;
    db.prepare('INSERT INTO chain_head (id, seq, hash) VALUES (1, ?, ?)').run(last, prev);
  }
}

function toActorRow(r: ActorDbRow): ActorRow {
  return {
    id: r.id,
    kind: r.kind,
    stream: r.stream,
    state: r.state,
    status: r.status === 'terminal' ? 'terminal' : 'active',
    version: r.version,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    summary: JSON.parse(r.summary),
    ...(r.archived_to ? { archived: { file: r.archived_to, at: r.archived_at ?? '' } } : {}),
  };
}

export function openEventStore(file: string, options?: SqliteEventStoreOptions): SqliteEventStore {
  return new SqliteEventStore(file, options);
}
