// Today's SqliteEventStore behind the new port (port.ts), without changing it: the same file, the same events
// table and durability (WAL, synchronous=FULL), plus the registered projections' documents
// (projection_documents, migration 2) written in the append's own transaction. better-sqlite3 nests
// transactions as savepoints, so the adapter opens the outer IMMEDIATE transaction and calls the store's own
// append inside it: the events and the documents commit together, or neither does.
import type Database from 'better-sqlite3';
import { RunlogError } from '../../domain/errors.ts';
import type { NewEvent, RecordedEvent } from '../../domain/events.ts';
import {
  toJson,
  validateAppends,
  type AppendToStreamOptions,
  type AppendToStreamResult,
  type EventStorePort,
  type PortOptions,
  type ProjectionReader,
  type ReadAllOptions,
  type ReadStreamOptions,
  type StreamAppend,
  type StreamAppendOutcome,
  type SubscribeOptions,
  type Subscription,
} from '../port.ts';
import { appendOne, conflictOutcome } from '../expected-version.ts';
import { foldDocument, ProjectionSet } from '../projection-set.ts';
import { SqliteEventStore, type SqliteEventStoreOptions } from './event-store.ts';
import { pollingSubscription, Wakeups } from '../subscription.ts';
import { upcastRecorded } from '../upcast-recorded.ts';
import { defaultUpcasters, type UpcasterRegistry } from '../upcasters.ts';

export interface SqlitePortOptions extends PortOptions, SqliteEventStoreOptions {}

const PAGE = 500;

export class SqlitePortStore implements EventStorePort {
  readonly description: string;
  /** The store underneath (the actor host still uses it directly until it moves onto the port). */
  readonly store: SqliteEventStore;
  private readonly db: Database.Database;
  private readonly projections: ProjectionSet;
  private readonly upcasters: UpcasterRegistry;
  private readonly wakeups = new Wakeups();
  private readonly subscriptions = new Set<Subscription>();
  private readonly stmt: {
    getDoc: Database.Statement<[string, string], { doc: string }>;
    putDoc: Database.Statement<[string, string, string]>;
    deleteDoc: Database.Statement<[string, string]>;
    listDocs: Database.Statement<[string], { id: string; doc: string }>;
    clearDocs: Database.Statement<[string]>;
  };
  private readonly appendTx: (requests: readonly StreamAppend[]) => StreamAppendOutcome[];
  private closed = false;

  constructor(file: string, options: SqlitePortOptions = {}) {
    this.upcasters = options.upcasters ?? defaultUpcasters();
    this.projections = new ProjectionSet(options.projections);
    this.store = new SqliteEventStore(file, { ...options, upcasters: this.upcasters });
    this.description = file;
    // The store keeps its connection private and is being changed on other branches right now; the next slice
    // (the host on the port) gives it a public transaction hook. Until then the adapter borrows the handle.
    this.db = this.store['db'];
    const db = this.db;
    this.stmt = {
      getDoc: db.prepare('SELECT doc FROM projection_documents WHERE projection = ? AND id = ?'),
      putDoc: db.prepare('INSERT INTO projection_documents (projection, id, doc) VALUES (?, ?, ?) ON CONFLICT (projection, id) DO UPDATE SET doc = excluded.doc'),
      deleteDoc: db.prepare('DELETE FROM projection_documents WHERE projection = ? AND id = ?'),
      listDocs: db.prepare('SELECT id, doc FROM projection_documents WHERE projection = ? ORDER BY id'),
      clearDocs: db.prepare('DELETE FROM projection_documents WHERE projection = ?'),
    };
    this.appendTx = db.transaction((requests: readonly StreamAppend[]) => this.appendInTx(requests)).immediate as never;
  }

  private open(): void {
    if (this.closed) throw new RunlogError('STORE_CLOSED', `event log ${this.description} is closed`);
  }

  private appendInTx(requests: readonly StreamAppend[]): StreamAppendOutcome[] {
    const outcomes = requests.map((r): StreamAppendOutcome => {
      // Inside the IMMEDIATE transaction nobody else writes: the version read here is the one appended on.
      const actual = this.store.streamVersion(r.stream);
      const conflict = conflictOutcome(r, actual);
      if (conflict) return conflict;
      if (r.events.length === 0) return { ok: true, result: { version: actual, lastSeq: 0, events: [] } };
      const res = this.store.append(r.stream, r.events, { expectedVersion: actual === 0 ? 'no-stream' : actual });
      // The store returns the caller's objects as given: hand back what a reader would get (a JSON copy, upcast).
      const events = res.events.map((e) => upcastRecorded(this.upcasters, { ...e, data: JSON.parse(JSON.stringify(e.data)), meta: JSON.parse(JSON.stringify(e.meta)) }));
      return { ok: true, result: { version: res.version, lastSeq: res.lastSeq, events } };
    });
    if (this.projections.size > 0) {
      for (const t of this.projections.targets(outcomes.flatMap((o) => (o.ok ? o.result.events : [])))) {
        const cur = this.stmt.getDoc.get(t.projection.name, t.id);
        const next = foldDocument(t, cur ? JSON.parse(cur.doc) : null);
        if (next === null) this.stmt.deleteDoc.run(t.projection.name, t.id);
        else this.stmt.putDoc.run(t.projection.name, t.id, toJson(next, `projection ${t.projection.name} document ${t.id}`));
      }
    }
    return outcomes;
  }

  async *readStream(stream: string, options: ReadStreamOptions = {}): AsyncIterable<RecordedEvent> {
    this.open();
    const to = options.to ?? Number.MAX_SAFE_INTEGER;
    let from = options.from ?? 1;
    while (from <= to) {
      const page = this.store.read(stream, { from, to: Math.min(to, from + PAGE - 1) });
      for (const e of page) yield e;
      if (page.length < PAGE) return;
      from = page.at(-1)!.version + 1;
    }
  }

  async streamVersion(stream: string): Promise<number> {
    this.open();
    return this.store.streamVersion(stream);
  }

  async appendToStream(stream: string, events: readonly NewEvent[], options: AppendToStreamOptions): Promise<AppendToStreamResult> {
    return appendOne((r) => this.appendMany(r), stream, events, options?.expectedVersion);
  }

  async appendMany(requests: readonly StreamAppend[]): Promise<StreamAppendOutcome[]> {
    this.open();
    validateAppends(requests);
    // Serialise up front so bad data is a typed error before the transaction starts (nothing written).
    requests.forEach((r) => r.events.forEach((e, j) => (toJson(e.data, `${r.stream} event ${j} data`), toJson(e.meta ?? {}, `${r.stream} event ${j} meta`))));
    const outcomes = this.appendTx(requests);
    if (outcomes.some((o) => o.ok && o.result.events.length > 0)) this.wakeups.wake();
    return outcomes;
  }

  async *readAll(options: ReadAllOptions = {}): AsyncIterable<RecordedEvent> {
    this.open();
    const to = options.to ?? Number.MAX_SAFE_INTEGER;
    let left = options.limit ?? Number.MAX_SAFE_INTEGER;
    let after = Math.max(1, options.from ?? 1) - 1;
    while (left > 0) {
      const page = this.store.readAll({ afterSeq: after, limit: Math.min(PAGE, left) });
      for (const e of page) {
        if (e.seq > to) return;
        yield e;
      }
      if (page.length < Math.min(PAGE, left)) return;
      left -= page.length;
      after = page.at(-1)!.seq;
    }
  }

  async lastSeq(): Promise<number> {
    this.open();
    return this.store.lastSeq();
  }

  subscribe(options: SubscribeOptions, handler: (event: RecordedEvent) => void | Promise<void>): Subscription {
    this.open();
    // Other processes' commits are found by polling (every pollMs); this process's wake subscribers at once.
    const read = async (from: number, limit: number): Promise<RecordedEvent[]> => (this.closed ? [] : this.store.readAll({ afterSeq: from - 1, limit }));
    const sub = pollingSubscription(read, this.wakeups, options, handler);
    this.subscriptions.add(sub);
    return sub;
  }

  projection<D>(name: string): ProjectionReader<D> {
    this.projections.get(name);
    return {
      get: async (id) => {
        this.open();
        const r = this.stmt.getDoc.get(name, id);
        return r ? (JSON.parse(r.doc) as D) : undefined;
      },
      list: async () => {
        this.open();
        return this.stmt.listDocs.all(name).map((r) => ({ id: r.id, doc: JSON.parse(r.doc) as D }));
      },
    };
  }

  async rebuildProjection(name: string): Promise<{ documents: number; events: number }> {
    this.open();
    const p = this.projections.get(name);
    return this.db.transaction(() => {
      // Folded in global order, one page of events at a time; the documents live in memory until written.
      const docs = new Map<string, unknown>();
      let events = 0;
      let after = 0;
      for (;;) {
        const page = this.store.readAll({ afterSeq: after, limit: PAGE });
        for (const t of this.projections.targets(page, p)) docs.set(t.id, foldDocument(t, docs.get(t.id) ?? null));
        events += page.length;
        if (page.length < PAGE) break;
        after = page.at(-1)!.seq;
      }
      this.stmt.clearDocs.run(name);
      let documents = 0;
      for (const [id, doc] of docs) {
        if (doc === null) continue;
        this.stmt.putDoc.run(name, id, toJson(doc, `projection ${name} document ${id}`));
        documents += 1;
      }
      return { documents, events };
    }).immediate();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    this.closed = true;
    this.store.close();
  }
}
