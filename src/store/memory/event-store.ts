// The event-store port in memory: for unit tests of the actor host, and the reference the contract suite
// checks the durable stores against. Events are kept as JSON text (a caller mutating an object it appended or
// read never changes the log), each append is all-or-nothing, and the actors rows, snapshots and projections an
// append carries or touches are written in the same step.
import { RunlogError, type EventEncodingError } from '../../domain/errors.ts';
import type { NewEvent, RecordedEvent } from '../../domain/events.ts';
import {
  toJson,
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
import { appendOne, conflictOutcome } from '../expected-version.ts';
import { foldDocument, ProjectionSet } from '../projection-set.ts';
import { encodeJson } from '../sqlite/encoding.ts';
import { pollingSubscription, Wakeups, trackedSubscription } from '../subscription.ts';
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

/** One request's part of an append, computed aside before anything is committed. */
interface Pending {
  rows: Row[];
  /** The actors row as JSON text (keyed by actor id), with the version the append brings the stream to. */
  actor?: { id: string; json: string };
  snapshot?: SnapshotRecord;
}

const byCreation = (a: ActorRow, b: ActorRow): number =>
  a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;

export class MemoryEventStore implements EventStorePort {
  readonly description = 'memory';
  private readonly log: Row[] = [];
  private readonly streams = new Map<string, Row[]>();
  private readonly docs = new Map<string, Map<string, string>>();
  /** The actors projection as appends and replaceActorRows gave it: JSON text per actor id. */
  private actors = new Map<string, string>();
  /** Each stream's snapshots, oldest first (older ones are kept, as `replay --to` reads them). */
  private readonly snapshots = new Map<string, SnapshotRecord[]>();
  private heartbeat: Heartbeat | null = null;
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
    return upcastRecorded(this.upcasters, {
      seq: r.seq,
      stream: r.stream,
      version: r.version,
      type: r.type,
      schema: r.schema,
      data: JSON.parse(r.data),
      meta: JSON.parse(r.meta),
      at: r.at,
    });
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

  async listStreams(kind?: string): Promise<StreamInfo[]> {
    this.open();
    const out: StreamInfo[] = [];
    for (const [stream, rows] of this.streams) {
      const k = stream.split('-')[0]!;
      if (kind && k !== kind) continue;
      const times = rows.map((r) => r.at).sort();
      out.push({ stream, kind: k, version: rows.length, createdAt: times[0]!, updatedAt: times.at(-1)! });
    }
    return out.sort((a, b) => (a.stream < b.stream ? -1 : a.stream > b.stream ? 1 : 0));
  }

  /** The whole stream: memory holds every event. */
  async readRecent(stream: string): Promise<RecordedEvent[]> {
    this.open();
    return (this.streams.get(stream) ?? []).map((r) => this.toRecorded(r));
  }

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
    // Everything is computed aside first and committed in one synchronous step at the end: a throw anywhere
    // before it (a projection) leaves the store as it was.
    const now = this.now();
    const versions = new Map<string, number>();
    const pending: Pending[] = [];
    let seq = this.log.length;
    const outcomes: StreamAppendOutcome[] = requests.map((r) => {
      let encoded: { data: string; meta: string }[];
      let actor: string | undefined;
      try {
        // Encoded first, as a durable store does before its transaction: an event JSON cannot encode (or a row)
        // fails its own request and nothing of it is written.
        encoded = r.events.map((e) => ({
          data: encodeJson(e.data, r.stream, e.type),
          meta: encodeJson(e.meta ?? {}, r.stream, e.type),
        }));
        if (r.row) actor = encodeJson(r.row, r.stream, r.events[0]?.type ?? 'projection');
      } catch (err) {
        return { ok: false, error: err as EventEncodingError };
      }
      const actual = versions.get(r.stream) ?? this.streams.get(r.stream)?.length ?? 0;
      const conflict = conflictOutcome(r, actual);
      if (conflict) return conflict;
      if (r.events.length === 0) return { ok: true, result: { version: actual, lastSeq: 0, events: [] } };
      let version = actual;
      const rows = r.events.map((e, j): Row => {
        version += 1;
        seq += 1;
        const schema = e.schema ?? this.upcasters.currentSchema(e.type);
        return {
          seq,
          stream: r.stream,
          version,
          type: e.type,
          schema,
          data: encoded[j]!.data,
          meta: encoded[j]!.meta,
          at: e.at ?? now,
        };
      });
      versions.set(r.stream, version);
      pending.push({
        rows,
        ...(r.row && actor ? { actor: { id: r.row.id, json: JSON.stringify({ ...JSON.parse(actor), version }) } } : {}),
        // A snapshot stands for exactly the version this append brings the stream to; any other is not kept.
        ...(r.snapshot && r.snapshot.stream === r.stream && r.snapshot.version === version
          ? { snapshot: { ...r.snapshot } }
          : {}),
      });
      return { ok: true, result: { version, lastSeq: seq, events: rows.map((row) => this.toRecorded(row)) } };
    });
    const docWrites = this.foldProjections(outcomes.flatMap((o) => (o.ok ? o.result.events : [])));
    this.commit(pending, docWrites);
    return outcomes;
  }

  /** The projection documents an append's events change (null deletes), computed without writing any. */
  private foldProjections(recorded: readonly RecordedEvent[]): { name: string; id: string; doc: string | null }[] {
    const writes: { name: string; id: string; doc: string | null }[] = [];
    for (const t of this.projections.targets(recorded)) {
      const cur = this.docs.get(t.projection.name)!.get(t.id);
      const next = foldDocument(t, cur === undefined ? null : JSON.parse(cur));
      writes.push({
        name: t.projection.name,
        id: t.id,
        doc: next === null ? null : toJson(next, `projection ${t.projection.name} document ${t.id}`),
      });
    }
    return writes;
  }

  private commit(
    pending: readonly Pending[],
    docWrites: readonly { name: string; id: string; doc: string | null }[],
  ): void {
    for (const p of pending) {
      for (const row of p.rows) {
        this.log.push(row);
        let s = this.streams.get(row.stream);
        if (!s) this.streams.set(row.stream, (s = []));
        s.push(row);
      }
      if (p.actor) this.actors.set(p.actor.id, p.actor.json);
      if (p.snapshot) {
        let list = this.snapshots.get(p.snapshot.stream);
        if (!list) this.snapshots.set(p.snapshot.stream, (list = []));
        list.push(p.snapshot);
      }
    }
    for (const w of docWrites) {
      const m = this.docs.get(w.name)!;
      if (w.doc === null) m.delete(w.id);
      else m.set(w.id, w.doc);
    }
    if (pending.length > 0) this.wakeups.wake();
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
    const read = async (from: number, limit: number): Promise<RecordedEvent[]> =>
      this.log.slice(from - 1, from - 1 + limit).map((r) => this.toRecorded(r));
    return trackedSubscription(pollingSubscription(read, this.wakeups, options, handler), this.subscriptions);
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

  /** Live actors (every one with `all`), oldest first, then by id: the order `ps` lists them in. */
  async listActors(filter: ActorFilter = {}): Promise<ActorRow[]> {
    this.open();
    return [...this.actors.values()]
      .map((j) => JSON.parse(j) as ActorRow)
      .filter((r) => (!filter.kind || r.kind === filter.kind) && (filter.all || r.status === 'active'))
      .sort(byCreation);
  }

  async getActor(id: string): Promise<ActorRow | undefined> {
    this.open();
    const j = this.actors.get(id);
    return j === undefined ? undefined : (JSON.parse(j) as ActorRow);
  }

  async replaceActorRows(rows: readonly ActorRow[]): Promise<void> {
    this.open();
    const next = new Map<string, string>();
    for (const r of rows) next.set(r.id, toJson(r, `actor ${r.id}`));
    this.actors = next;
  }

  async snapshotAtOrBefore(stream: string, version?: number): Promise<SnapshotRecord | undefined> {
    this.open();
    const list = this.snapshots.get(stream) ?? [];
    const found = version === undefined ? list.at(-1) : list.findLast((s) => s.version <= version);
    return found ? { ...found } : undefined;
  }

  async readHeartbeat(): Promise<Heartbeat | null> {
    this.open();
    return this.heartbeat ? { ...this.heartbeat } : null;
  }

  async writeHeartbeat(heartbeat: Heartbeat): Promise<void> {
    if (this.closed) return; // a beat after close is dropped, as the durable stores do
    this.heartbeat = { ...heartbeat };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
  }
}
