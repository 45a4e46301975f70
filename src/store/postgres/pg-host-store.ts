// The supervisor's store seam (../host-store.ts) on PostgreSQL. The actor host decides each transition from
// memory and reads the log synchronously (rehydrate, load an actor, inspect), so this keeps a copy of the log in
// memory, loaded at open and kept current by following PostgreSQL by global position (gapless and in commit
// order, see pg-schema.ts: following never skips an event). Appends go to PostgreSQL first; only once they are
// committed are they put into the copy, in position order, and only then does the append resolve — so rule 1
// holds (an event is durable before any effect of it starts) and a read after an append sees it.
//
// The actors projection (what ps lists) is folded by PostgreSQL's event store in the append's transaction; the
// copy keeps its rows: the host's own row for its own appends, the stored document for events other processes
// wrote (fetched when the follower sees them).
//
// Memory (log-copy.ts): a supervisor's store (pageOut, set by runlog.ts for a supervising node) holds live actors'
// histories, every stream that is not an actor's (app grants, facts; of the request streams, the execution queue
// and placement, only the requests that may still be open: pageOut.requestStreams), the newest
// 10,000 positions whatever their stream, the actors rows (ps), live actors' newest snapshots and a small stub per
// stream (version, first position, times). An ended actor's events older than that window are dropped once every
// subscriber has seen them (at open they are never read: a summary row per stream makes its stub). Callers that
// can wait read them back from PostgreSQL — pageIn(stream) (the HTTP API, a dispatch to an ended actor, stop/kill/inspect in runlog.ts, the
// reconciler) and readAllAsync (the API's /api/events and whole-log event stream) — and a synchronous read that reaches a paged-out event
// throws PAGED_OUT: never a shorter history. The CLI's one-shot commands open with pageOut and no recent window
// (cli/inspection-log.ts) and page in the actor they read; verify opens without pageOut and holds the whole log. Archived events (pg-archive.ts) leave holes in the positions, so the copy goes by position,
// never by index.
import { hostname } from 'node:os';
import { RunlogError } from '../../domain/errors.ts';
import type { NewEvent, RecordedEvent } from '../../domain/events.ts';
import type {
  ActorRow,
  AppendObserver,
  AppendOptions,
  AppendOutcome,
  AppendRequest,
  AppendResult,
  Heartbeat,
  ReadAllOptions,
  ReadOptions,
  SnapshotRecord,
  StreamInfo,
  SubscribeOptions,
} from '../event-store.ts';
import type { HostStore } from '../host-store.ts';
import type { ClusterRecords } from '../../domain/cluster-nodes.ts';
import { toJson, type Projection, type StreamAppend, type StreamAppendOutcome } from '../port.ts';
import { EventEncodingError, type IterateEventsOptions } from '../sqlite-event-store.ts';
import type { UpcasterRegistry } from '../upcasters.ts';
import { FencedError } from '../../domain/errors.ts';
import { PgEventStore, type AppendFaultHook, type StreamSummary } from './pg-event-store.ts';
import { splitStoreUrl } from './pg-url.ts';
import { leasesToPickUp } from './lease-pickup.ts';
import { Leases, type RenewalListener, type TakenLease } from './pg-leases.ts';
import { LogCopy, PagedOutError } from './log-copy.ts';

export interface PgHostStoreOptions {
  /** postgres://user:password@host:port/database (a `schema` query parameter picks the schema). */
  url: string;
  schema?: string;
  /** Registered with the PostgreSQL store (they fold in the append's transaction). */
  projections?: readonly Projection<any>[];
  /** The projection whose documents are ps's rows (default `actors`), and how a document becomes a row (default: without its `snapshot` and `rev`). */
  actorRows?: { projection: string; toRow?(doc: unknown): ActorRow };
  upcasters?: UpcasterRegistry;
  now?: () => string;
  /** How often to look for events other processes committed (ms, default 250). 0: only when asked (one-shot commands). */
  pollMs?: number;
  maxConnections?: number;
  faults?: AppendFaultHook;
  /**
   * Supervising as one node of a cluster: this node's name and its leases' time to live. Each live actor it
   * creates or takes over is leased to it, and every append to an actor's stream is fenced by that lease.
   * `renewals` hears how each renewal ended (the node's self-fence).
   */
  node?: { name: string; leaseTtlMs: number; collectGraceMs?: number; renewals?: RenewalListener };
  /**
   * Page ended actors' events out of memory (a supervisor: log-copy.ts). They are read from PostgreSQL when asked
   * (pageIn, readAllAsync); a synchronous read that reaches them throws PagedOutError. `keepRecent`: how many of
   * the newest positions are held whatever their stream (default 10,000). Unset: everything is held (one-shot readers).
   * `requestStreams`: streams of requests with deadlines (the execution queue, placement), whose oldest events are
   * paged out too, once older than the window and than `keepMs` (default 6 hours): readRecent() reads the rest.
   */
  pageOut?: { keepRecent?: number; pagedInStreams?: number; requestStreams?: { is(stream: string): boolean; keepMs?: number } };
}

/** How long a request stream's events are held whatever the window: longer than any request's deadline. */
export const REQUEST_KEEP_MS = 6 * 3600_000;

/** What a store's open read (loadStats): the events it read, and the ended actors' it summarised instead of reading. */
export interface LoadStats {
  /** The log's head when the open began (events after it committed while it ran: read, and their rows again). */
  before: number;
  /** Events read from PostgreSQL at open (every one the copy holds, plus ended actors' in the recent window). */
  eventsRead: number;
  /** Ended actors' streams whose events below the recent window were summarised (one row each), not read. */
  streamsSummarised: number;
  /** How many events those summaries stood for. */
  eventsSummarised: number;
  /** Request streams' oldest events (older than the window and than their keepMs): neither read nor held. */
  requestEventsPagedOut: number;
}

/** What the cluster tells the supervisor about leases (see runlog.ts / actors/cluster.ts). */
export interface LeaseListener {
  /** Leases this node turned out to have lost (it was paused or cut off past their expiry and someone took them). */
  lost(streams: string[]): void;
  /** Leases this node took over from a node that let them expire (the copy of the log has caught up first). */
  taken(leases: TakenLease[]): void;
  /** Whether the node's host has the actor in memory (live, or being created): a lease of one it lacks is picked up. */
  running?(stream: string): boolean;
  /** Leases this node held but whose actors it did not run (a claim's reply was lost), now adopted: rehydrate them. */
  pickUp?(streams: string[]): void;
}

/** Every how many beats (a beat is ttl/3) the node looks for leases it holds but does not run. */
const PICKUP_EVERY_BEATS = 3;

export { splitStoreUrl };

const PAGE = 1000;
/** The newest positions a paging-out copy holds whatever their stream (followers and subscribers read from there). */
const KEEP_RECENT = 10_000;
/** An actors-projection document with, for an archived actor, where its events went (tombstones, pg-schema.ts migration 5). */
const rowSelect = (doc: string): string => `SELECT ${doc} AS doc, a.file AS archived_to, a.created_at AS archived_at FROM projection_documents d
  LEFT JOIN tombstones t ON t.stream = d.id LEFT JOIN archives a ON a.id = t.archive`;
type RowDoc = { doc: unknown; archived_to: string | null; archived_at: string | null };
const ACTOR_STREAM = /^(instance|execution)-/;

export class PgHostStore implements HostStore {
  readonly file: string;
  onAppend: AppendObserver | undefined;
  /** The events held (log-copy.ts: ended actors' are paged out when `pageOut` is set). */
  private readonly copy: LogCopy;
  private readonly rows = new Map<string, ActorRow>();
  /**
   * Live actors' newest snapshots (actors/snapshots.ts), read at open and kept as this node appends them: the host
   * rehydrates an actor from its snapshot and the events after it. Ended actors' are left in PostgreSQL (a read
   * of one folds from the events here, the same answer).
   */
  private readonly snapshots = new Map<string, SnapshotRecord>();
  private readonly subscribers = new Set<() => void>();
  private heartbeat: Heartbeat | null = null;
  /** stream → the node whose append was its latest (events a cluster node appends carry meta.node). */
  private readonly lastNode = new Map<string, string>();
  /** stream → the node holding its lease (read with the heartbeats). */
  private owners = new Map<string, string>();
  private size = 0;
  /** Each subscriber's cursor (the last position it saw): paging out never drops what one has yet to see. */
  private readonly cursors = new Map<() => void, () => number>();
  private compactDue = false;
  /** Ingestion into the copy, one step at a time, in position order. */
  private chain: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private polling = false;
  private pollAgain = false;
  private unlisten: (() => void) | undefined;
  private polls = 0;
  private closed = false;
  private readonly rowsProjection: string;
  /** This node's leases (null: not supervising as a cluster node). */
  readonly leases: Leases | null;
  private leaseTimer: NodeJS.Timeout | undefined;
  private listener: LeaseListener | undefined;
  private readonly ending = new Set<string>();
  private readonly inflight = new Set<Promise<unknown>>();
  private beating = false;
  /** Streams whose claim (a new actor's lease, in its first event's transaction) is on its way to PostgreSQL. */
  private readonly claiming = new Set<string>();
  private beats = 0;
  /** Look for leases held but not run at the next beat (PostgreSQL answered again, or a lost reply was found committed). */
  private pickupDue = false;
  private readonly toRow: (doc: unknown) => ActorRow;
  /**
   * The rows' query. With the default toRow (which drops `snapshot` and `rev`) the server drops them: an actor's
   * persisted machine snapshot is most of its document, and reading every ended actor's at open cost more than
   * the events did (store.pg.open).
   */
  private readonly rowSelect: string;
  private readonly loaded: LoadStats = { before: 0, eventsRead: 0, streamsSummarised: 0, eventsSummarised: 0, requestEventsPagedOut: 0 };

  private constructor(
    readonly pg: PgEventStore,
    private readonly options: PgHostStoreOptions,
  ) {
    this.file = pg.description;
    this.leases = options.node ? new Leases(pg, options.node.name, options.node.leaseTtlMs, options.node.collectGraceMs ?? options.node.leaseTtlMs, options.node.renewals ? { renewals: options.node.renewals } : {}) : null;
    this.rowsProjection = options.actorRows?.projection ?? 'actors';
    // The default row is the document without `snapshot` and `rev`, and the server drops both (one jsonb delete
    // of the two keys: two deletes rebuilt each document twice): the document read is the row, copied no more.
    this.toRow = options.actorRows?.toRow ?? ((doc: unknown) => doc as ActorRow);
    this.rowSelect = rowSelect(options.actorRows?.toRow ? 'd.doc' : "d.doc - '{snapshot,rev}'::text[]");
    const pageOut = options.pageOut ?? null;
    const now = options.now;
    this.copy = new LogCopy({
      keepRecent: pageOut ? (pageOut.keepRecent ?? KEEP_RECENT) : null,
      ended: (stream) => ACTOR_STREAM.test(stream) && this.rows.get(stream)?.status === 'terminal',
      ...(pageOut?.pagedInStreams !== undefined ? { pagedInStreams: pageOut.pagedInStreams } : {}),
      ...(pageOut?.requestStreams
        ? { tail: { is: pageOut.requestStreams.is, keepMs: pageOut.requestStreams.keepMs ?? REQUEST_KEEP_MS, now: now ? () => Date.parse(now()) : () => Date.now() } }
        : {}),
    });
  }

  static async open(options: PgHostStoreOptions): Promise<PgHostStore> {
    const split = splitStoreUrl(options.url);
    const pg = await PgEventStore.open({
      url: split.url,
      schema: options.schema ?? split.schema ?? 'runlog',
      ...(options.projections ? { projections: options.projections } : {}),
      ...(options.upcasters ? { upcasters: options.upcasters } : {}),
      ...(options.now ? { now: options.now } : {}),
      ...(options.maxConnections ? { maxConnections: options.maxConnections } : {}),
      ...(options.faults ? { faults: options.faults } : {}),
      ...(options.node ? { holdLimitMs: options.node.leaseTtlMs } : {}), // a stopped client's locks last a TTL at most
    });
    const store = new PgHostStore(pg, options);
    try {
      await store.load();
      await store.leases?.reclaim();
    } catch (err) {
      await pg.close().catch(() => {});
      throw err;
    }
    const pollMs = options.pollMs ?? 250;
    if (pollMs > 0) {
      store.timer = setInterval(() => void store.poll(), pollMs);
      store.timer.unref();
      store.follow();
    }
    return store;
  }

  /** The log's head in this copy: every event at or below it has been seen (held, or paged out). */
  get head(): number {
    return this.copy.head;
  }

  /** How many events this store holds in memory (ended actors' are paged out when `pageOut` is set). */
  get heldEvents(): number {
    return this.copy.heldEvents;
  }

  /** What the open read: events read from PostgreSQL, and the paged-out streams (and their events) it summarised instead. */
  get loadStats(): LoadStats {
    return { ...this.loaded };
  }

  private async load(): Promise<void> {
    const before = await this.pg.lastSeq();
    this.loaded.before = before;
    // An ended actor's events older than the recent window are never held (rows read first say which have ended).
    const pageBelow = this.copy.pagingOut ? before - (this.options.pageOut?.keepRecent ?? KEEP_RECENT) : 0;
    // The rows (read directly: a one-shot reader registers no projection with the store) and, below the window,
    // a summary per stream, side by side; then only the events of the streams the copy holds (everything but
    // ended actors'); the stubs of the others come from their summaries, never from their events.
    // Each row is kept as it arrives (while the summary is still being computed), never gathered into a result.
    const [, summaries] = await Promise.all([
      this.pg.eachRow<RowDoc>(`${this.rowSelect} WHERE d.projection = $1`, [this.rowsProjection], (d) => this.putRow(d)),
      pageBelow > 0 ? this.pg.summarizeStreams(pageBelow) : [],
    ]);
    if (pageBelow > 0) await this.loadBelow(pageBelow, summaries);
    const late = new Set<string>();
    for await (const e of this.pg.readAll({ from: pageBelow + 1 })) {
      this.put(e, pageBelow);
      this.loaded.eventsRead += 1;
      if (e.seq > before) late.add(e.stream);
    }
    // Documents read before events committed after `before` may be older than those events: read them again.
    await this.refreshRows(late);
    this.compact(true);
    const live = [...this.rows.values()].filter((r) => r.status === 'active').map((r) => r.stream);
    for (const r of await this.pg.latestSnapshots(live)) this.snapshots.set(r.stream, r);
    await this.refreshNodes();
  }

  /**
   * Positions 1..pageBelow (all committed before the open read the head, so nothing appears there later): the
   * streams the copy holds are read in full, in position order; each ended actor's events there become a stub
   * (log-copy.ts), exactly what put() leaves when it drops them, and its node (placement) from the summary.
   * Whether a stream has ended is the rows' word, read before, as put() asks it.
   */
  private async loadBelow(pageBelow: number, summaries: readonly StreamSummary[]): Promise<void> {
    const paged: StreamSummary[] = [];
    const held: string[] = [];
    const requests: StreamSummary[] = [];
    for (const s of summaries) {
      if (this.copy.ended(s.stream)) paged.push(s);
      else if (this.copy.tail(s.stream)) requests.push(s);
      else held.push(s.stream);
    }
    // A page of streams at a time; the pages' events are merged into position order before the copy takes them.
    const events: RecordedEvent[] = [];
    for (let i = 0; i < held.length; i += PAGE) for (const e of await this.pg.readStreamsUpTo(held.slice(i, i + PAGE), pageBelow)) events.push(e);
    if (requests.length > 0) {
      // A request stream's events from the oldest one that is not older than the copy's tailSince() (all of them
      // below the window here): its older ones become a stub, as an ended actor's do, before its newer ones.
      const newest = await this.pg.readStreamsSince(
        requests.map((s) => s.stream),
        pageBelow,
        new Date(this.copy.tailSince()).toISOString(),
      );
      const first = new Map<string, RecordedEvent>();
      for (const e of newest) if (!first.has(e.stream)) first.set(e.stream, e);
      for (const s of requests) {
        const f = first.get(s.stream);
        if (f && f.version === 1) continue;
        this.copy.stub(f ? { ...s, version: f.version - 1, lastSeq: f.seq - 1 } : s);
        this.loaded.requestEventsPagedOut += f ? f.version - 1 : s.events;
      }
      for (const e of newest) events.push(e);
    }
    if (held.length > PAGE || requests.length > 0) events.sort((a, b) => a.seq - b.seq);
    for (const e of events) this.put(e, pageBelow);
    this.loaded.eventsRead += events.length;
    // After the held events (the copy's head is the highest position it has seen), before the window's.
    for (const s of paged) {
      this.copy.stub(s);
      if (s.node !== null) this.lastNode.set(s.stream, s.node);
      this.loaded.streamsSummarised += 1;
      this.loaded.eventsSummarised += s.events;
    }
  }

  private putRow(d: RowDoc): void {
    const row = this.toRow(d.doc);
    this.setRow(d.archived_to ? { ...row, archived: { file: d.archived_to, at: d.archived_at! } } : row);
  }

  private setRow(row: ActorRow): void {
    this.rows.set(row.stream, row);
    if (row.status === 'terminal') this.copy.markEnded(row.stream);
  }

  private put(e: RecordedEvent, pageBelow = 0): void {
    this.copy.put(e, pageBelow);
    const by = (e.meta as { node?: unknown } | undefined)?.node;
    if (typeof by === 'string') this.lastNode.set(e.stream, by);
  }

  /**
   * Compaction waits for the turn after the append or catch-up that ended an actor: what the host does as an
   * append resolves (the transition's listeners, which may read the actor that just ended) runs first.
   */
  private compactSoon(): void {
    if (!this.copy.pagingOut || this.compactDue) return;
    this.compactDue = true;
    setImmediate(() => {
      this.compactDue = false;
      if (!this.closed) this.compact();
    });
  }

  /** Pages out ended actors' events the recent window and every subscriber have left behind (log-copy.ts). */
  private compact(force = false): void {
    if (!this.copy.pagingOut) return;
    let min = Number.MAX_SAFE_INTEGER;
    for (const c of this.cursors.values()) min = Math.min(min, c());
    this.copy.compact(min, force);
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.chain.then(fn);
    this.chain = p.catch(() => undefined);
    return p;
  }

  /** Reads what other processes committed after the copy's head (up to `upTo`), with their rows. */
  private async catchUp(upTo = Number.MAX_SAFE_INTEGER): Promise<void> {
    const touched = new Set<string>();
    const start = this.head;
    while (this.head < upTo) {
      const n = Math.min(PAGE, upTo - this.head);
      let got = 0;
      // Bounded by `upTo` too: past archived holes, n events from head + 1 can reach beyond it.
      for await (const e of this.pg.readAll({ from: this.head + 1, limit: n, ...(upTo < Number.MAX_SAFE_INTEGER ? { to: upTo } : {}) })) {
        this.put(e);
        touched.add(e.stream);
        got += 1;
      }
      if (got < n) break;
    }
    if (this.head === start) return;
    await this.refreshRows(touched);
    this.notify();
    this.compactSoon();
  }

  private async refreshRows(streams: Set<string>): Promise<void> {
    if (streams.size === 0) return;
    for (const d of await this.pg.sql<RowDoc>(`${this.rowSelect} WHERE d.projection = $1 AND d.id = ANY($2::text[])`, [this.rowsProjection, [...streams]])) this.putRow(d);
  }

  private async refreshNodes(): Promise<void> {
    // Beats carry PostgreSQL's time; their age is taken on that clock and the beat handed out on this reader's, so
    // `supervision(readHeartbeat(), now())` (ps, inspect, /api/status) judges it right even on a skewed host.
    const [r] = await this.pg.sql<{ node: string; pid: number; started_at: string; beat_at: string; interval_ms: number; stopped_at: string | null; age_ms: number }>(
      `SELECT node, pid, started_at, beat_at, interval_ms, stopped_at, (extract(epoch FROM clock_timestamp() - beat_at::timestamptz) * 1000)::float8 AS age_ms
         FROM nodes ORDER BY (stopped_at IS NULL) DESC, beat_at DESC LIMIT 1`,
      [],
    );
    this.heartbeat = r ? { node: r.node, pid: r.pid, startedAt: r.started_at, beatAt: new Date(Date.now() - Math.max(0, r.age_ms)).toISOString(), intervalMs: r.interval_ms, stoppedAt: r.stopped_at } : null;
    this.owners = new Map((await this.pg.sql<{ stream: string; node: string }>('SELECT stream, node FROM leases', [])).map((l) => [l.stream, l.node]));
    const [sz] = await this.pg.sql<{ n: number }>("SELECT (pg_total_relation_size('events') + pg_total_relation_size('projection_documents'))::bigint AS n", []);
    this.size = sz?.n ?? 0;
  }

  /** Other processes' commits wake the copy at once (LISTEN/NOTIFY); the polling timer stays as the fallback. */
  private follow(): void {
    this.unlisten ??= this.pg.listen(() => {
      if (this.polling) this.pollAgain = true; // a commit announced while a look is out: look once more after it
      else void this.poll();
    });
  }

  /** One look at PostgreSQL for other processes' commits (skipped while the last look is still out). */
  async poll(): Promise<void> {
    if (this.polling || this.closed) return;
    this.polling = true;
    try {
      do {
        this.pollAgain = false;
        await this.serial(() => this.catchUp());
      } while (this.pollAgain && !this.closed);
      if ((this.polls += 1) % 8 === 0) await this.refreshNodes();
    } catch {
      // PostgreSQL briefly unreachable: the next poll tries again (appends report their own errors).
    } finally {
      this.polling = false;
    }
  }

  private notify(): void {
    if (this.subscribers.size === 0) return;
    queueMicrotask(() => {
      for (const s of this.subscribers) s();
    });
  }

  // --- appends --------------------------------------------------------------------------------------

  async append(stream: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    const [o] = await this.appendMany([{ stream, events, options }]);
    if (!o!.ok) throw o!.error;
    return o!.result;
  }

  appendMany(requests: readonly AppendRequest[]): Promise<AppendOutcome[]> {
    if (this.closed) return Promise.reject(new RunlogError('STORE_CLOSED', `event log ${this.file} is closed`));
    // close() lets appends already sent finish (into the copy too) before it ends the pool.
    const p = this.appendSent(requests);
    this.inflight.add(p);
    void p.catch(() => undefined).finally(() => this.inflight.delete(p));
    return p;
  }

  private async appendSent(requests: readonly AppendRequest[]): Promise<AppendOutcome[]> {
    // Like SQLite: an event JSON cannot encode fails its own request, not the batch it was committed with.
    const outcomes: (AppendOutcome | null)[] = requests.map((r) => {
      for (const e of r.events) {
        try {
          toJson(e.data, 'data');
          toJson(e.meta ?? {}, 'meta');
        } catch (err) {
          return { ok: false, error: new EventEncodingError(r.stream, e.type, (err as Error).message, { cause: err }) };
        }
      }
      return null;
    });
    // A cluster node appends to an actor's stream only under its lease: a new actor's is claimed in the append's
    // own transaction (lease and first event commit together); a stream whose lease it does not hold is refused
    // here, one it holds is checked again in the append's transaction.
    const claim = new Set<string>();
    if (this.leases) {
      for (const [i, r] of requests.entries()) {
        if (outcomes[i] !== null || !ACTOR_STREAM.test(r.stream) || this.leases.owns(r.stream)) continue;
        const fresh = r.options.expectedVersion === 'no-stream' || r.options.expectedVersion === 0;
        if (fresh) claim.add(r.stream);
        else outcomes[i] = { ok: false, error: new FencedError(r.stream, this.leases.node) };
      }
    }
    const sent = requests.filter((_, i) => outcomes[i] === null);
    // A cluster node signs what it appends (meta.node): ps and the inspector say where an actor last ran.
    const node = this.leases?.node;
    const signed = (events: readonly NewEvent[]): readonly NewEvent[] => (node ? events.map((e) => ({ ...e, meta: { ...e.meta, node } })) : events);
    const appends: StreamAppend[] = sent.map((r) => ({ stream: r.stream, events: signed(r.events), expectedVersion: r.options.expectedVersion }));
    const t0 = this.onAppend ? performance.now() : 0;
    const claimed = new Map<string, number>();
    const fence = this.leases ? { fence: { node: this.leases.node, tokens: this.leases.held, ttlMs: this.leases.ttlMs, ...(claim.size > 0 ? { claim: { streams: claim, ttlMs: this.leases.ttlMs, claimed } } : {}) } } : {};
    const snapshots = sent.some((r) => r.options.snapshot) ? { snapshots: sent.map((r) => r.options.snapshot) } : {};
    for (const s of claim) this.claiming.add(s);
    let results: StreamAppendOutcome[];
    try {
      results = appends.length > 0 ? await this.pg.appendMany(appends, { ...fence, ...snapshots }) : [];
    } catch (err) {
      // Cut off: a claim may have committed with its reply lost. Its lease then names this node, unknown to it:
      // the next beat looks (pickUp) once PostgreSQL answers.
      if (claim.size > 0) this.pickupDue = true;
      throw err;
    } finally {
      for (const s of claim) this.claiming.delete(s);
    }
    for (const [stream, token] of claimed) this.leases!.held.set(stream, token);
    const fenced: string[] = [];
    results.forEach((o, i) => {
      if (!o.ok && o.error instanceof FencedError && this.leases?.held.delete(sent[i]!.stream)) fenced.push(sent[i]!.stream);
      // An actor that ended gives its lease back at the next beat.
      if (o.ok && sent[i]!.options.projection?.status === 'terminal') this.ending.add(sent[i]!.stream);
      const snap = sent[i]!.options.snapshot;
      if (o.ok && snap && snap.stream === sent[i]!.stream && snap.version === o.result.version) {
        if (sent[i]!.options.projection?.status === 'terminal') this.snapshots.delete(snap.stream);
        else this.snapshots.set(snap.stream, snap);
      }
    });
    // A lease found taken at append time is lost like one found taken at renewal (the listener lets go of it).
    if (fenced.length > 0) queueMicrotask(() => this.listener?.lost(fenced));
    if (this.onAppend) this.onAppend((performance.now() - t0) / 1000, results.reduce((n, o) => n + (o.ok ? o.result.events.length : 0), 0));
    // Into the copy, in position order, before anyone hears of it.
    await this.serial(async () => {
      const mine = results.flatMap((o, i) => (o.ok ? o.result.events.map((e) => ({ e, row: sent[i]!.options.projection })) : []));
      if (mine.length > 0) {
        const first = mine[0]!.e.seq;
        if (first > this.head + 1) await this.catchUp(first - 1);
        let added = false;
        for (const { e, row } of mine) {
          if (e.seq <= this.head) continue; // the follower got here first (and read the row PostgreSQL folded)
          this.put(e);
          added = true;
          if (row && row.version === e.version) this.setRow(row);
        }
        // The host's row is the state after its event; a stream whose row was not given is read back.
        const unrowed = new Set(mine.filter(({ e, row }) => !row && /^(instance|execution)-/.test(e.stream)).map(({ e }) => e.stream));
        await this.refreshRows(unrowed);
        if (added) this.notify();
        this.compactSoon();
      }
      // Someone else appended (a conflict): the copy catches up so the host's re-read sees their events.
      if (results.some((o) => !o.ok)) await this.catchUp();
    });
    let k = 0;
    return outcomes.map((o) => {
      if (o) return o;
      const r = results[k++]!;
      return r.ok ? { ok: true, result: r.result } : { ok: false, error: r.error };
    });
  }

  /**
   * Resolves once PostgreSQL answers again and the copy has caught up (an observed fact's append then retries):
   * true; false when it has not answered within `withinMs` (default: waits as long as it takes).
   */
  async whenAvailable(withinMs = Number.POSITIVE_INFINITY): Promise<boolean> {
    const deadline = Date.now() + withinMs;
    for (let delay = 100; ; delay = Math.min(delay * 2, 2000)) {
      if (this.closed) throw new RunlogError('STORE_CLOSED', `event log ${this.file} is closed`);
      try {
        await this.serial(() => this.catchUp());
        return true;
      } catch (err) {
        if (!(err instanceof RunlogError && err.code === 'STORE_UNAVAILABLE')) throw err;
      }
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise((r) => setTimeout(r, Math.min(delay, left)));
    }
  }

  /** Looks for leases held but not run at the next beat (a cut-off claim was found committed after all). */
  pickUpSoon(): void {
    this.pickupDue = true;
  }

  replaceProjection(): Promise<void> {
    return Promise.reject(new RunlogError('NOT_SUPPORTED', `runlog rebuild works on a SQLite log; on PostgreSQL the actors projection is folded by the store in every append (${this.file})`));
  }

  // --- leases ---------------------------------------------------------------------------------------

  /** Whether this node may act on the stream (always, when not a cluster node). */
  owns(stream: string): boolean {
    return !this.leases || !ACTOR_STREAM.test(stream) || this.leases.owns(stream);
  }

  /** Gives the stream's lease back at the next beat (an ended actor). */
  letGo(stream: string): void {
    if (this.leases?.owns(stream)) this.ending.add(stream);
  }

  /** Starts beating: renew this node's leases, give back ended actors', take over expired ones (every ttl/3). */
  startLeases(listener: LeaseListener): void {
    if (!this.leases || this.leaseTimer) return;
    this.listener = listener;
    this.leaseTimer = setInterval(() => void this.beat(), Math.max(50, Math.floor(this.leases.ttlMs / 3)));
    this.leaseTimer.unref();
  }

  /** One beat (exposed for tests). */
  async beat(): Promise<void> {
    const leases = this.leases;
    if (!leases || this.beating || this.closed) return;
    this.beating = true;
    try {
      const lost = await leases.renew();
      if (lost.length > 0) this.listener?.lost(lost);
      if (this.ending.size > 0) {
        const done = [...this.ending];
        this.ending.clear();
        await leases.release(done);
      }
      const taken = await leases.takeExpired();
      if (taken.length > 0) {
        // What the previous owner committed is read before the new owner decides anything.
        await this.serial(() => this.catchUp());
        this.listener?.taken(taken);
      }
      if (this.pickupDue || (this.beats += 1) % PICKUP_EVERY_BEATS === 0) await this.pickUp();
    } catch {
      // PostgreSQL unreachable: the next beat tries again (a lease not renewed in time is lost, and fenced), and
      // looks for claims whose reply was lost as soon as it answers.
      this.pickupDue = true;
    } finally {
      this.beating = false;
    }
  }

  /**
   * Leases this node holds in PostgreSQL whose actors its host does not run (lease-pickup.ts) are adopted, the
   * copy catches up (their first events), and the listener rehydrates them as start-up does.
   */
  private async pickUp(): Promise<void> {
    const leases = this.leases!;
    const running = this.listener?.running?.bind(this.listener);
    if (!running || !this.listener?.pickUp) return;
    this.pickupDue = false;
    const orphans = leasesToPickUp({ leased: await leases.mine(), held: leases.held, claiming: this.claiming, ending: this.ending, running });
    if (orphans.length === 0) return;
    const adopted = await leases.adopt(orphans);
    await this.serial(() => this.catchUp());
    // A claim answered meanwhile put its actor in the host: that one is running after all.
    const picked = adopted.filter((s) => !this.claiming.has(s) && !running(s));
    if (picked.length > 0) this.listener.pickUp(picked);
  }

  // --- reads (synchronous, from the copy; a paged-out history throws PagedOutError) -------------

  read(stream: string, options: ReadOptions = {}): RecordedEvent[] {
    return this.copy.read(stream, options.from ?? 1, options.to);
  }

  readRecent(stream: string): RecordedEvent[] {
    return this.copy.readRecent(stream);
  }

  readAll(options: ReadAllOptions = {}): RecordedEvent[] {
    return this.copy.slice(options.afterSeq ?? 0, options.limit);
  }

  *iterateEvents(options: IterateEventsOptions = {}): IterableIterator<RecordedEvent> {
    if (options.stream !== undefined) {
      // Held events are read a page at a time (a paged-in history is a cache: nothing is copied twice).
      const to = Math.min(options.to ?? Number.MAX_SAFE_INTEGER, this.copy.streamVersion(options.stream));
      for (let v = Math.max(1, options.from ?? 1); v <= to; v += PAGE) yield* this.copy.read(options.stream, v, Math.min(to, v + PAGE - 1));
      return;
    }
    yield* this.copy.after(options.afterSeq ?? 0, options.toSeq ?? Number.MAX_SAFE_INTEGER);
  }

  // --- reads that may go to PostgreSQL (callers that can wait: the HTTP API, a host's dispatch) ------

  /**
   * Makes the stream's whole history readable synchronously: a paged-out (ended) actor's events are read from
   * PostgreSQL into a small cache of recently paged-in streams. A no-op when every event is held.
   */
  async pageIn(stream: string): Promise<void> {
    const missing = this.copy.missing(stream);
    if (missing === 0) return;
    const events: RecordedEvent[] = [];
    for await (const e of this.pg.readStream(stream, { from: 1, to: missing })) events.push(e);
    // Archived meanwhile (pg-archive.ts): its events are gone from PostgreSQL; the sync read says it is paged out.
    if (events.length === missing) this.copy.cache(stream, events);
  }

  holdsAfter(afterSeq: number): boolean {
    return this.copy.holdsAfter(afterSeq);
  }

  /** readAll, reading from PostgreSQL when the range reaches paged-out positions (bounded by the copy's head, as readAll is). */
  async readAllAsync(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const afterSeq = options.afterSeq ?? 0;
    if (this.copy.holdsAfter(afterSeq)) return this.readAll(options);
    const out: RecordedEvent[] = [];
    const limit = options.limit !== undefined && options.limit >= 0 ? options.limit : undefined;
    if (limit === 0 || afterSeq >= this.head) return out;
    for await (const e of this.pg.readAll({ from: afterSeq + 1, to: this.head, ...(limit !== undefined ? { limit } : {}) })) out.push(e);
    return out;
  }

  latestSnapshot(stream: string): SnapshotRecord | undefined {
    return this.snapshots.get(stream);
  }

  snapshotAtOrBefore(stream: string, version: number): SnapshotRecord | undefined {
    const r = this.snapshots.get(stream);
    return r && r.version <= version ? r : undefined;
  }

  streamVersion(stream: string): number {
    return this.copy.streamVersion(stream);
  }

  streams(kind?: string): StreamInfo[] {
    return this.copy.streams(kind);
  }

  lastSeq(): number {
    return this.head;
  }

  subscribe(options: SubscribeOptions, handler: (event: RecordedEvent) => void): () => void {
    let cursor = options.afterSeq ?? this.head;
    // From before what has been paged out: not here to hand out (a typed error rather than a gap).
    if (!this.copy.holdsAfter(cursor)) throw new PagedOutError({ afterSeq: cursor, floor: this.copy.floor });
    let draining = false;
    const drain = (): void => {
      if (draining || this.closed) return;
      draining = true;
      try {
        for (const e of this.copy.after(cursor)) {
          cursor = e.seq;
          if (!options.stream || e.stream === options.stream) handler(e);
        }
      } finally {
        draining = false;
      }
    };
    this.subscribers.add(drain);
    this.cursors.set(drain, () => cursor);
    // A one-shot reader (pollMs 0 at open) that subscribes starts following now.
    if (!this.timer) {
      this.timer = setInterval(() => void this.poll(), options.pollMs ?? 200);
      this.timer.unref();
      this.follow();
    }
    queueMicrotask(drain);
    return () => {
      this.subscribers.delete(drain);
      this.cursors.delete(drain);
    };
  }

  listActors(filter: { kind?: string; all?: boolean } = {}): ActorRow[] {
    return [...this.rows.values()]
      .filter((r) => (!filter.kind || r.kind === filter.kind) && (filter.all || r.status === 'active'))
      .sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  getActor(id: string): ActorRow | undefined {
    return this.rows.get(`instance-${id}`) ?? this.rows.get(`execution-${id}`);
  }

  // --- supervision --------------------------------------------------------------------------------

  /** Recorded in the `nodes` table (one row per node); written in the background, a failure is logged by the caller's next beat. */
  writeHeartbeat(h: Heartbeat): void {
    if (this.closed) return;
    this.heartbeat = h;
    void this.writeNode(h).catch(() => undefined);
  }

  /**
   * The heartbeat write, awaited (a clean stop waits for its stop mark). The beat's time is PostgreSQL's, not
   * this node's: liveness is judged on the server's clock alone (pg-nodes.ts), so skewed hosts agree.
   */
  async writeNode(h: Heartbeat): Promise<void> {
    await this.pg.sql(
      `INSERT INTO nodes (node, pid, host, started_at, beat_at, interval_ms, stopped_at)
       VALUES ($1, $2, $3, $4, to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), $5, $6)
       ON CONFLICT (node) DO UPDATE SET pid = excluded.pid, host = excluded.host, started_at = excluded.started_at,
         beat_at = excluded.beat_at, interval_ms = excluded.interval_ms, stopped_at = excluded.stopped_at`,
      [h.node, h.pid, hostname(), h.startedAt, h.intervalMs, h.stoppedAt],
    );
  }

  readHeartbeat(): Heartbeat | null {
    return this.heartbeat;
  }

  /** Every node's heartbeat and every lease, read now (the inspector's nodes; expiry judged on the server's clock). */
  async clusterRecords(): Promise<ClusterRecords> {
    const [nodes, leases, [clock]] = await Promise.all([
      this.pg.sql<{ node: string; pid: number; host: string; started_at: string; beat_at: string; interval_ms: number; stopped_at: string | null }>('SELECT node, pid, host, started_at, beat_at, interval_ms, stopped_at FROM nodes', []),
      this.pg.sql<{ stream: string; node: string; token: number; expires_at: Date; left_ms: number }>(
        'SELECT stream, node, token, expires_at, (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS left_ms FROM leases',
        [],
      ),
      this.pg.sql<{ at: string }>(`SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at`, []),
    ]);
    return {
      ...(clock ? { at: clock.at } : {}),
      nodes: nodes.map((n) => ({ node: n.node, pid: n.pid, host: n.host, startedAt: n.started_at, beatAt: n.beat_at, intervalMs: n.interval_ms, stoppedAt: n.stopped_at })),
      leases: leases.map((l) => ({ stream: l.stream, node: l.node, token: l.token, expiresAt: l.expires_at.toISOString(), expiresInMs: Math.round(l.left_ms) })),
    };
  }

  placement(stream: string): { node: string | null; owner: string | null } {
    const owner = this.leases?.owns(stream) ? this.leases.node : (this.owners.get(stream) ?? null);
    return { node: this.lastNode.get(stream) ?? null, owner };
  }

  sizeBytes(): number {
    return this.size;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    if (this.leaseTimer) clearInterval(this.leaseTimer);
    this.unlisten?.();
    this.subscribers.clear();
    await Promise.allSettled([...this.inflight]);
    await this.chain.catch(() => undefined);
    // The heartbeat's stop mark, if one is being written, goes out before the pool ends.
    if (this.heartbeat?.stoppedAt) await this.writeNode(this.heartbeat).catch(() => undefined);
    await this.pg.close();
  }
}
