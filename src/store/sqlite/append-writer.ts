// A SQLite log's appends inside their transaction (event-store.ts): the version checked, each event written with its
// link in the hash chain (chain.ts), the chain's head moved, the actors row and the snapshot put, and the events handed
// back as the caller asked for them. Kept apart from the store because this is what one write transaction does; the
// store around it checks it may write, encodes first, marks the WAL guard, translates errors and wakes subscribers.
import { ConcurrencyError } from '../../domain/errors.ts';
import type { RecordedEvent } from '../../domain/events.ts';
import { GENESIS, eventHash } from '../chain.ts';
import { ExpectedVersionError, versionMatches } from '../expected-version.ts';
import type { SnapshotRecord } from '../port.ts';
import type { UpcasterRegistry } from '../upcasters.ts';
import type { Database } from './driver.ts';
import type { EncodedRequest } from './encoding.ts';
import type { AppendOutcome, AppendResult, EngineAppendOptions, EngineAppendRequest } from './engine-types.ts';
import { EventRows } from './event-rows.ts';
import type { Statements } from './statements.ts';

export interface AppendWriterOptions {
  upcasters: UpcasterRegistry;
  /** Clock for `at` when an event has none. */
  now: () => string;
  /** Hand appended events back as readers see them (SqliteEventStoreOptions.upcastAppended). */
  upcastAppended: boolean;
  /** Runs inside every append's transaction once its events are written (SqliteEventStoreOptions.inAppend). */
  inAppend: ((events: readonly RecordedEvent[]) => void) | undefined;
}

export class AppendWriter {
  /** One request in one IMMEDIATE transaction. */
  readonly one: (request: EncodedRequest) => AppendResult;
  /** Many requests in one IMMEDIATE transaction: a conflict fails its own request, not the others. */
  readonly many: (requests: readonly EncodedRequest[]) => AppendOutcome[];
  private readonly upcasters: UpcasterRegistry;
  private readonly now: () => string;
  private readonly upcastAppended: boolean;
  private readonly inAppend: ((events: readonly RecordedEvent[]) => void) | undefined;
  /** The events' rows, written several to an INSERT (event-rows.ts). */
  private readonly rows: EventRows;

  constructor(
    db: Database.Database,
    private readonly stmt: Statements,
    options: AppendWriterOptions,
  ) {
    this.upcasters = options.upcasters;
    this.now = options.now;
    this.upcastAppended = options.upcastAppended;
    this.inAppend = options.inAppend;
    this.rows = new EventRows(db, stmt.insertEvent);
    this.one = db.transaction((request: EncodedRequest) => {
      const result = this.appendInTx(request);
      if (this.inAppend && result.events.length > 0) this.inAppend(result.events);
      return result;
    }).immediate as never;
    this.many = db.transaction((requests: readonly EncodedRequest[]) => {
      const outcomes = requests.map((r): AppendOutcome => {
        try {
          return { ok: true, result: this.appendInTx(r) };
        } catch (err) {
          // appendInTx checks the version before it writes anything: a conflict leaves nothing to undo.
          if (err instanceof ConcurrencyError) return { ok: false, error: err };
          throw err;
        }
      });
      if (this.inAppend) this.inAppend(outcomes.flatMap((o) => (o.ok ? o.result.events : [])));
      return outcomes;
    }).immediate as never;
  }

  private appendInTx({ stream, events, options, summary, snapshot }: EncodedRequest): AppendResult {
    const actual = this.checkVersion(stream, options);
    // An empty append checks the version and writes nothing: no link, no row, no snapshot.
    if (events.length === 0) return { version: actual, lastSeq: 0, events: [] };
    const now = this.now();
    const recorded: RecordedEvent[] = [];
    let version = actual;
    // Read inside the transaction: a rolled-back append leaves no link behind (chain.ts). The head, not the last
    // row, says where the log ends: the last events may have been archived, and a seq is never given twice.
    const head = this.stmt.chainHead!.get();
    let lastSeq = Math.max(this.stmt.maxSeq.get()!.s, head?.seq ?? 0);
    let hash: Buffer = head?.hash ?? GENESIS;
    const rows = this.rows;
    rows.start(stream, lastSeq + 1, version + 1);
    for (const { event: e, data, meta: metaText } of events) {
      version += 1;
      lastSeq += 1;
      const schema = e.schema ?? this.upcasters.currentSchema(e.type);
      const at = e.at ?? now;
      const meta = e.meta ?? {};
      // Rows are held and written several at a time; whatever may throw (an upcast, below) runs once the rows
      // before it are written, so an append fails with the error it failed with when each row was written at once.
      hash = eventHash(hash, lastSeq, stream, version, e.type, schema, at, data, metaText);
      rows.add(e.type, schema, data, metaText, at, hash);
      // The caller's own data (no copy on the append path), unless asked for as readers see it and not current.
      if (!this.upcastAppended || this.upcasters.isCurrent(e.type, schema))
        recorded.push({
          seq: lastSeq,
          stream,
          version,
          type: e.type,
          schema,
          data: e.data as Record<string, unknown>,
          meta,
          at,
        });
      else {
        rows.write(); // an upcast may throw (a schema newer than this runlog knows)
        recorded.push({
          seq: lastSeq,
          stream,
          version,
          type: e.type,
          ...this.upcasters.upcast(e.type, schema, JSON.parse(data)),
          meta,
          at,
        });
      }
    }
    rows.write();
    this.stmt.setChainHead!.run(lastSeq, hash);
    const p = options.projection;
    if (p) {
      this.stmt.upsertActor.run(
        p.id,
        p.kind,
        p.stream,
        p.state,
        p.status,
        version,
        p.createdAt,
        p.updatedAt,
        summary ?? '{}',
      );
    }
    // A snapshot stands for exactly this version: one made for another is a caller's bug, never stored.
    if (snapshot && snapshot.stream === stream && snapshot.version === version) this.putSnapshotRow(snapshot);
    return { version, lastSeq, events: recorded };
  }

  /** The stream's version, or the conflict thrown when `options.expectedVersion` does not accept it. */
  checkVersion(stream: string, options: EngineAppendOptions): number {
    const actual = this.stmt.streamVersion.get(stream)?.version ?? 0;
    if (!versionMatches(options.expectedVersion, actual))
      throw new ExpectedVersionError(stream, options.expectedVersion, actual);
    return actual;
  }

  /** An append with no events: the version checked, nothing written (a conflict is its outcome). */
  emptyOutcome(r: EngineAppendRequest): AppendOutcome {
    try {
      return { ok: true, result: { version: this.checkVersion(r.stream, r.options), lastSeq: 0, events: [] } };
    } catch (err) {
      if (err instanceof ConcurrencyError) return { ok: false, error: err };
      throw err;
    }
  }

  /** Stores a snapshot, keeping the one it replaces, and marks its version on the actors row. */
  putSnapshotRow(r: SnapshotRecord): void {
    this.stmt.keepOlderSnapshot!.run(r.stream, r.version); // the one it replaces stays usable for replay --to
    this.stmt.putSnapshot!.run(r.stream, r.version, r.fingerprint, r.createdAt, r.state, r.checksum);
    this.stmt.markSnapshot!.run(r.version, r.stream);
  }
}
