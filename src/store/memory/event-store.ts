// The event-store port in memory: for unit tests of the actor host, and the reference the contract suite
// checks the durable stores against. Events are kept as JSON text (a caller mutating an object it appended or
// read never changes the log), each append is all-or-nothing, and projections fold in the same step.
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
import { pollingSubscription, Wakeups } from '../subscription.ts';
import { upcastRecorded } from '../upcast-recorded.ts';
import { defaultUpcasters, type UpcasterRegistry } from '../upcasters.ts';

interface Row {
  seq: number;
  stream: string;
  version: number;
  type: string;
  schema: number;
  data: string;
  meta: string;
  at: string;
}

export interface MemoryEventStoreOptions extends PortOptions {
  upcasters?: UpcasterRegistry;
  now?: () => string;
}

export class MemoryEventStore implements EventStorePort {
  readonly description = 'memory';
  private readonly log: Row[] = [];
  private readonly streams = new Map<string, Row[]>();
  private readonly docs = new Map<string, Map<string, string>>();
  private readonly projections: ProjectionSet;
  private readonly upcasters: UpcasterRegistry;
  private readonly now: () => string;
  private readonly wakeups = new Wakeups();
  private readonly subscriptions = new Set<Subscription>();
  private closed = false;

  constructor(options: MemoryEventStoreOptions = {}) {
    this.projections = new ProjectionSet(options.projections);
    this.upcasters = options.upcasters ?? defaultUpcasters();
    this.now = options.now ?? (() => new Date().toISOString());
    for (const name of this.projections.names()) this.docs.set(name, new Map());
  }

  private open(): void {
    if (this.closed) throw new RunlogError('STORE_CLOSED', 'the in-memory event store is closed');
  }

  private toRecorded(r: Row): RecordedEvent {
    return upcastRecorded(this.upcasters, { seq: r.seq, stream: r.stream, version: r.version, type: r.type, schema: r.schema, data: JSON.parse(r.data), meta: JSON.parse(r.meta), at: r.at });
  }

  async *readStream(stream: string, options: ReadStreamOptions = {}): AsyncIterable<RecordedEvent> {
    this.open();
    const from = options.from ?? 1;
    const to = options.to ?? Number.MAX_SAFE_INTEGER;
    // A snapshot of the rows now: appends while the caller iterates are not seen (like a database cursor).
    const rows = (this.streams.get(stream) ?? []).slice(Math.max(0, from - 1), to);
    for (const r of rows) yield this.toRecorded(r);
  }

  async streamVersion(stream: string): Promise<number> {
    this.open();
    return this.streams.get(stream)?.length ?? 0;
  }

  async appendToStream(stream: string, events: readonly NewEvent[], options: AppendToStreamOptions): Promise<AppendToStreamResult> {
    return appendOne((r) => this.appendMany(r), stream, events, options?.expectedVersion);
  }

  async appendMany(requests: readonly StreamAppend[]): Promise<StreamAppendOutcome[]> {
    this.open();
    validateAppends(requests);
    // Everything is computed aside first and committed in one synchronous step at the end: a throw anywhere
    // before it (bad JSON, a projection) leaves the store as it was.
    const now = this.now();
    const versions = new Map<string, number>();
    const pending: Row[] = [];
    let seq = this.log.length;
    const outcomes: StreamAppendOutcome[] = requests.map((r) => {
      const actual = versions.get(r.stream) ?? this.streams.get(r.stream)?.length ?? 0;
      const conflict = conflictOutcome(r, actual);
      if (conflict) return conflict;
      let version = actual;
      const rows = r.events.map((e, j): Row => {
        version += 1;
        seq += 1;
        return {
          seq,
          stream: r.stream,
          version,
          type: e.type,
          schema: e.schema ?? this.upcasters.currentSchema(e.type),
          data: toJson(e.data, `${r.stream} event ${j} data`),
          meta: toJson(e.meta ?? {}, `${r.stream} event ${j} meta`),
          at: e.at ?? now,
        };
      });
      versions.set(r.stream, version);
      pending.push(...rows);
      const recorded = rows.map((row) => this.toRecorded(row));
      return { ok: true, result: { version, lastSeq: rows.at(-1)?.seq ?? 0, events: recorded } };
    });
    const recorded = outcomes.flatMap((o) => (o.ok ? o.result.events : []));
    const docWrites: { name: string; id: string; doc: string | null }[] = [];
    for (const t of this.projections.targets(recorded)) {
      const cur = this.docs.get(t.projection.name)!.get(t.id);
      const next = foldDocument(t, cur === undefined ? null : JSON.parse(cur));
      docWrites.push({ name: t.projection.name, id: t.id, doc: next === null ? null : toJson(next, `projection ${t.projection.name} document ${t.id}`) });
    }
    // Commit.
    for (const row of pending) {
      this.log.push(row);
      let s = this.streams.get(row.stream);
      if (!s) this.streams.set(row.stream, (s = []));
      s.push(row);
    }
    for (const w of docWrites) {
      const m = this.docs.get(w.name)!;
      if (w.doc === null) m.delete(w.id);
      else m.set(w.id, w.doc);
    }
    if (pending.length > 0) this.wakeups.wake();
    return outcomes;
  }

  async *readAll(options: ReadAllOptions = {}): AsyncIterable<RecordedEvent> {
    this.open();
    const from = Math.max(1, options.from ?? 1);
    const to = Math.min(options.to ?? Number.MAX_SAFE_INTEGER, from - 1 + (options.limit ?? Number.MAX_SAFE_INTEGER));
    const rows = this.log.slice(from - 1, to);
    for (const r of rows) yield this.toRecorded(r);
  }

  async lastSeq(): Promise<number> {
    this.open();
    return this.log.length;
  }

  subscribe(options: SubscribeOptions, handler: (event: RecordedEvent) => void | Promise<void>): Subscription {
    this.open();
    const read = async (from: number, limit: number): Promise<RecordedEvent[]> => {
      const out: RecordedEvent[] = [];
      for await (const e of this.readAll({ from, limit })) out.push(e);
      return out;
    };
    const sub = pollingSubscription(read, this.wakeups, options, handler);
    this.subscriptions.add(sub);
    return sub;
  }

  projection<D>(name: string): ProjectionReader<D> {
    this.projections.get(name);
    const docs = (): Map<string, string> => {
      this.open();
      return this.docs.get(name)!;
    };
    return {
      get: async (id) => {
        const d = docs().get(id);
        return d === undefined ? undefined : (JSON.parse(d) as D);
      },
      list: async () =>
        [...docs().entries()]
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
          .map(([id, d]) => ({ id, doc: JSON.parse(d) as D })),
    };
  }

  async rebuildProjection(name: string): Promise<{ documents: number; events: number }> {
    this.open();
    const p = this.projections.get(name);
    const all = this.log.map((r) => this.toRecorded(r));
    const next = new Map<string, string>();
    for (const t of this.projections.targets(all, p)) {
      const doc = foldDocument(t, null);
      if (doc !== null) next.set(t.id, toJson(doc, `projection ${name} document ${t.id}`));
    }
    this.docs.set(name, next);
    return { documents: next.size, events: all.length };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    this.closed = true;
  }
}
