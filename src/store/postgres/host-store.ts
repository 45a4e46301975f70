// The event-store port (../port.ts) on PostgreSQL, as a supervisor uses it. The actor host reads a live actor's
// history at every transition, so this keeps a copy of the log in memory (log-copy.ts), loaded at open and kept
// current by following PostgreSQL by global position (gapless and in commit order, see postgres/schema.ts:
// following never skips an event). Appends go to PostgreSQL first; only once they are committed are they put
// into the copy, in position order, and only then does the append resolve — so rule 1 holds (an event is durable
// before any effect of it starts) and a read after an append sees it.
//
// The actors projection (what ps lists) is folded by PostgreSQL's event store in the append's transaction; the
// copy keeps its rows: the host's own row for its own appends (the two agree), the stored document for events
// other processes wrote (fetched when the follower sees them; actor-rows.ts).
//
// Memory (log-copy.ts): a supervisor's store (pageOut, set for a supervising node) holds live actors' histories,
// every stream that is not an actor's (app grants, facts; of the request streams, the execution queue and
// placement, only the requests that may still be open: pageOut.requestStreams), the newest 10,000 positions
// whatever their stream, the rows of the actors it holds (ps) and live actors' newest snapshots. An ended actor
// whose events are older than that window is dropped whole once every subscriber has seen them, row and all (at
// open it is never read, nor named). Every read is complete all the same (copy-reads.ts, unheld-reads.ts): what
// memory does not hold is read from PostgreSQL, a page at a time, so memory follows the live fleet, not the log.
// Archived events (postgres/archive.ts) leave holes in the positions, so the copy goes by position, never by index.
//
// A cluster node's store (opened with `node`) fences every append to an actor's stream with that actor's lease
// and hands its leases to the node's services as `leasing` (leasing.ts).
import type { ClusterRecords } from '../../domain/cluster-nodes.ts';
import { RunlogError } from '../../domain/errors.ts';
import type { NewEvent, RecordedEvent } from '../../domain/events.ts';
import type {
  AppendObserver,
  ArchiveOptions,
  ArchiveResult,
  Archiving,
  ChainVerifying,
  Metered,
  Placement,
  Reconnecting,
} from '../capabilities.ts';
import type { ChainCheck } from '../chain.ts';
import {
  validateAppends,
  type ActorFilter,
  type ActorRow,
  type AppendToStreamOptions,
  type AppendToStreamResult,
  type EventStorePort,
  type Heartbeat,
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
import { pollingSubscription, Wakeups } from '../subscription.ts';
import { ActorRowsCopy } from './actor-rows.ts';
import { archiveEndedPg } from './archive.ts';
import { ClusterView } from './cluster-view.ts';
import { CopyFollower } from './copy-follower.ts';
import { loadBelowWindow } from './copy-load.ts';
import { logPage, readLogComplete, readStreamComplete, streamVersionComplete } from './copy-reads.ts';
import { PgEventStore } from './event-store.ts';
import { sendAppends, type AppendSender } from './fenced-append.ts';
import type { LoadStats, PgHostStoreOptions } from './host-store-options.ts';
import { eventStoreOptions, KEEP_RECENT, logCopyOptions } from './host-store-parts.ts';
import { ACTOR_STREAM, LeaseBeat } from './lease-beat.ts';
import { Leases } from './leases.ts';
import { PgLeasing } from './leasing.ts';
import { LiveSnapshots } from './live-snapshots.ts';
import { LogCopy } from './log-copy.ts';
import { readClusterRecords, writeNodeRow } from './node-records.ts';
import { lastNodesUpTo, streamsUpTo } from './unheld-reads.ts';
import { splitStoreUrl } from './url.ts';

export { splitStoreUrl };
export { REQUEST_KEEP_MS, type LeaseListener, type LoadStats, type PgHostStoreOptions } from './host-store-options.ts';
export type { PgLeasing } from './leasing.ts';

const PAGE = 1000;

export class PgHostStore implements EventStorePort, Reconnecting, Metered, ChainVerifying, Archiving {
  readonly description: string;
  /** This node's leases (leasing.ts); null when the store was opened without `node` (not a cluster node). */
  readonly leasing: PgLeasing | null;
  private observer: AppendObserver | undefined;
  /** The events held (log-copy.ts: ended actors' are paged out when `pageOut` is set). */
  private readonly copy: LogCopy;
  /** The actors rows (actor-rows.ts): what ps lists. */
  private readonly rows: ActorRowsCopy;
  /** Live actors' newest snapshots (live-snapshots.ts). */
  private readonly snapshots: LiveSnapshots;
  /** Wakes the subscriptions when the copy has taken new events. */
  private readonly wakeups = new Wakeups();
  /** Each subscription's position (the last event it finished): paging out never drops what one has yet to see. */
  private readonly subscriptions = new Map<Subscription, () => number>();
  /** The heartbeats, the leases' holders, each stream's last writer and the size, as last read (cluster-view.ts). */
  private readonly cluster: ClusterView;
  private compactDue = false;
  /** Ingestion into the copy, one step at a time, in position order. */
  private chain: Promise<unknown> = Promise.resolve();
  /** Follows other processes' commits into the copy (copy-follower.ts). */
  private readonly follower: CopyFollower;
  private closed = false;
  /** This node's leases (null: not supervising as a cluster node). */
  private readonly leases: Leases | null;
  /** This node's beat: renewals, releases, take-overs and pick-ups (lease-beat.ts; null: not a cluster node). */
  private readonly leaseBeat: LeaseBeat | null;
  private readonly inflight = new Set<Promise<unknown>>();
  /** What appends go out through (fenced-append.ts). */
  private readonly sender: AppendSender;
  private readonly loaded: LoadStats = {
    before: 0,
    eventsRead: 0,
    requestEventsPagedOut: 0,
  };

  private constructor(
    /** The PostgreSQL event store underneath (appends, and reads of what the copy does not hold). */
    readonly pg: PgEventStore,
    private readonly options: PgHostStoreOptions,
  ) {
    this.description = pg.description;
    this.snapshots = new LiveSnapshots(pg);
    this.leases = options.node
      ? new Leases(
          pg,
          options.node.name,
          options.node.leaseTtlMs,
          options.node.collectGraceMs ?? options.node.leaseTtlMs,
          options.node.renewals ? { renewals: options.node.renewals } : {},
        )
      : null;
    this.leaseBeat = this.leases
      ? new LeaseBeat(
          this.leases,
          () => this.serial(() => this.catchUp()),
          () => this.closed,
        )
      : null;
    this.leasing = this.leases && this.leaseBeat ? new PgLeasing(this.leases, this.leaseBeat, this) : null;
    this.cluster = new ClusterView(pg, this.leases);
    this.sender = {
      pg,
      leases: this.leases,
      leaseBeat: this.leaseBeat,
      leasing: this.leasing,
      snapshots: this.snapshots,
      observer: () => this.observer,
    };
    this.rows = new ActorRowsCopy(
      pg,
      options.actorRows,
      (stream) => this.copy.markEnded(stream),
      (stream) => this.copy.knows(stream),
    );
    this.follower = new CopyFollower(
      pg,
      () => this.serial(() => this.catchUp()),
      () => this.cluster.refresh(),
      () => this.closed,
    );
    this.copy = new LogCopy(
      logCopyOptions(
        options,
        (stream) => ACTOR_STREAM.test(stream) && this.rows.get(stream)?.status === 'terminal',
        (stream) => {
          this.rows.forget(stream);
          this.cluster.forget(stream);
        },
      ),
    );
  }

  static async open(options: PgHostStoreOptions): Promise<PgHostStore> {
    const pg = await PgEventStore.open(eventStoreOptions(options));
    const store = new PgHostStore(pg, options);
    try {
      await store.load();
      await store.leases?.reclaim();
    } catch (err) {
      await pg.close().catch(() => {});
      throw err;
    }
    const pollMs = options.pollMs ?? 250;
    if (pollMs > 0) store.follower.start(pollMs);
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

  /** How many streams and actors rows this store holds in memory: they follow the live fleet, not the history. */
  get heldStreams(): { streams: number; rows: number } {
    return { streams: this.copy.heldStreams, rows: this.rows.size };
  }

  /** What the open read: the head it began at, the events it read, and the request streams' events it left. */
  get loadStats(): LoadStats {
    return { ...this.loaded };
  }

  private async load(): Promise<void> {
    const before = await this.pg.lastSeq();
    this.loaded.before = before;
    // An ended actor's events older than the recent window are never read (the rows, read first, say which
    // actors have not ended: those, and every stream that is no actor's, are what the copy holds there).
    const pageBelow = this.copy.pagingOut ? Math.max(0, before - (this.options.pageOut?.keepRecent ?? KEEP_RECENT)) : 0;
    await this.rows.load();
    if (pageBelow > 0)
      await loadBelowWindow(this.pg, this.copy, pageBelow, this.rows.live(), {
        put: (e) => this.put(e),
        loaded: this.loaded,
      });
    const late = new Set<string>();
    for await (const e of this.pg.readAll({ from: pageBelow + 1 })) {
      this.put(e);
      this.loaded.eventsRead += 1;
      // The window's ended actors have no row yet (only those that have not ended were read): read theirs.
      if (e.seq > before || (ACTOR_STREAM.test(e.stream) && !this.rows.get(e.stream))) late.add(e.stream);
    }
    // Documents read before events committed after `before` may be older than those events: read them again.
    await this.rows.refresh(late);
    this.compact(true);
    const live = this.rows.live();
    await this.snapshots.load(live);
    await this.cluster.refresh();
  }

  private put(e: RecordedEvent): void {
    this.copy.put(e);
    this.cluster.saw(e);
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
    for (const position of this.subscriptions.values()) min = Math.min(min, position());
    this.copy.compact(min, force);
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.chain.then(fn);
    this.chain = p.catch(() => undefined);
    return p;
  }

  /**
   * Reads what other processes committed after the copy's head (up to `upTo`), with their rows. The rows are read
   * before the events go into the copy: a reader handed an event (a subscription's poll can come between the two)
   * then finds its actor's row at least that new; `events --follow` judges from the row that an actor has ended.
   */
  private async catchUp(upTo = Number.MAX_SAFE_INTEGER): Promise<void> {
    const taken: RecordedEvent[] = [];
    for (let head = this.head; head < upTo;) {
      const n = Math.min(PAGE, upTo - head);
      let got = 0;
      // Bounded by `upTo` too: past archived holes, n events from head + 1 can reach beyond it.
      for await (const e of this.pg.readAll({
        from: head + 1,
        limit: n,
        ...(upTo < Number.MAX_SAFE_INTEGER ? { to: upTo } : {}),
      })) {
        taken.push(e);
        head = e.seq;
        got += 1;
      }
      if (got < n) break;
    }
    if (taken.length === 0) return;
    await this.rows.refresh(new Set(taken.map((e) => e.stream)));
    for (const e of taken) this.put(e);
    this.wakeups.wake();
    this.compactSoon();
  }

  /** One look at PostgreSQL for other processes' commits (skipped while the last look is still out). */
  poll(): Promise<void> {
    return this.follower.poll();
  }

  private assertOpen(): void {
    if (this.closed) throw new RunlogError('STORE_CLOSED', `event log ${this.description} is closed`);
  }

  // --- appends --------------------------------------------------------------------------------------

  async appendToStream(
    stream: string,
    events: readonly NewEvent[],
    options: AppendToStreamOptions,
  ): Promise<AppendToStreamResult> {
    const [o] = await this.appendMany([
      {
        stream,
        events,
        expectedVersion: options?.expectedVersion,
        ...(options?.row ? { row: options.row } : {}),
        ...(options?.snapshot ? { snapshot: options.snapshot } : {}),
      },
    ]);
    if (!o!.ok) throw o!.error;
    return o!.result;
  }

  /**
   * `row` is the host's word for the actor's row after the append: PostgreSQL folds the registered actors
   * projection itself (the two agree), and the copy takes the host's row rather than reading the folded one back.
   */
  appendMany(requests: readonly StreamAppend[]): Promise<StreamAppendOutcome[]> {
    try {
      this.assertOpen();
      validateAppends(requests);
    } catch (err) {
      return Promise.reject(err);
    }
    // close() lets appends already sent finish (into the copy too) before it ends the pool.
    const p = this.appendSent(requests);
    this.inflight.add(p);
    void p.catch(() => undefined).finally(() => this.inflight.delete(p));
    return p;
  }

  private async appendSent(requests: readonly StreamAppend[]): Promise<StreamAppendOutcome[]> {
    // Checked, fenced and signed as it goes out (fenced-append.ts); what committed goes into the copy.
    const { outcomes, sent, results } = await sendAppends(this.sender, requests);
    await this.serial(() => this.ingest(sent, results));
    let k = 0;
    return outcomes.map((o) => o ?? results[k++]!);
  }

  /** This store's committed appends into the copy, in position order, before anyone hears of them. */
  private async ingest(sent: readonly StreamAppend[], results: readonly StreamAppendOutcome[]): Promise<void> {
    const mine = results.flatMap((o, i) => (o.ok ? o.result.events.map((e) => ({ e, row: sent[i]!.row })) : []));
    if (mine.length > 0) {
      const first = mine[0]!.e.seq;
      if (first > this.head + 1) await this.catchUp(first - 1);
      // A stream whose row was not given is read back, before its events show (as catchUp does).
      const unrowed = new Set(
        mine.filter(({ e, row }) => !row && ACTOR_STREAM.test(e.stream)).map(({ e }) => e.stream),
      );
      await this.rows.refresh(unrowed);
      let added = false;
      for (const { e, row } of mine) {
        if (e.seq <= this.head) continue; // the follower got here first (and read the row PostgreSQL folded)
        // The caller keeps the appended events it was handed: the copy holds its own.
        this.put(structuredClone(e));
        added = true;
        if (row && row.version === e.version) this.rows.set(row);
      }
      if (added) this.wakeups.wake();
      this.compactSoon();
    }
    // Someone else appended (a conflict): the copy catches up so the host's re-read sees their events.
    if (results.some((o) => !o.ok)) await this.catchUp();
  }

  /**
   * Resolves once PostgreSQL answers again and the copy has caught up (an observed fact's append then retries):
   * true; false when it has not answered within `withinMs` (default: waits as long as it takes).
   */
  async whenAvailable(withinMs = Number.POSITIVE_INFINITY): Promise<boolean> {
    const deadline = Date.now() + withinMs;
    for (let delay = 100; ; delay = Math.min(delay * 2, 2000)) {
      this.assertOpen();
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

  // --- reads: complete, from memory where the copy holds them, else from PostgreSQL (copy-reads.ts) -------

  async *readStream(stream: string, options: ReadStreamOptions = {}): AsyncIterable<RecordedEvent> {
    this.assertOpen();
    yield* readStreamComplete(this.copy, this.pg, stream, options);
  }

  async *readAll(options: ReadAllOptions = {}): AsyncIterable<RecordedEvent> {
    this.assertOpen();
    yield* readLogComplete(this.copy, this.pg, options);
  }

  async readRecent(stream: string): Promise<RecordedEvent[]> {
    this.assertOpen();
    return this.copy.readRecent(stream);
  }

  async streamVersion(stream: string): Promise<number> {
    this.assertOpen();
    return streamVersionComplete(this.copy, this.pg, stream);
  }

  /**
   * In name order (code unit by code unit, as PostgreSQL's COLLATE "C"). A paging-out copy does not know every
   * stream (ended actors are dropped whole), so it lists them from PostgreSQL, up to its head.
   */
  async listStreams(kind?: string): Promise<StreamInfo[]> {
    this.assertOpen();
    if (this.copy.pagingOut) return streamsUpTo(this.pg, this.head, kind);
    return this.copy.streams(kind).sort((a, b) => (a.stream < b.stream ? -1 : a.stream > b.stream ? 1 : 0));
  }

  async lastSeq(): Promise<number> {
    this.assertOpen();
    return this.head;
  }

  /**
   * Delivers from the copy as it takes events (woken at once), and from PostgreSQL what it has paged out; the
   * subscription's position holds back paging out, so once it reaches memory it stays there.
   */
  subscribe(options: SubscribeOptions, handler: (event: RecordedEvent) => void | Promise<void>): Subscription {
    this.assertOpen();
    const inner = pollingSubscription(
      (from, limit) => logPage(this.copy, this.pg, from - 1, limit),
      this.wakeups,
      options,
      handler,
    );
    const sub: Subscription = {
      get position() {
        return inner.position;
      },
      close: async () => {
        this.subscriptions.delete(sub);
        await inner.close();
      },
    };
    this.subscriptions.set(sub, () => inner.position);
    // A one-shot reader (pollMs 0 at open) that subscribes starts following now.
    if (!this.follower.started) this.follower.start(options.pollMs ?? 200);
    return sub;
  }

  async snapshotAtOrBefore(stream: string, version?: number): Promise<SnapshotRecord | undefined> {
    this.assertOpen();
    return this.snapshots.atOrBefore(stream, version);
  }

  projection<D>(name: string): ProjectionReader<D> {
    return this.pg.projection<D>(name);
  }

  /** Folds the whole log into the projection again; the actors rows are read back when it is theirs. */
  async rebuildProjection(name: string): Promise<{ documents: number; events: number }> {
    const result = await this.pg.rebuildProjection(name);
    if (name === this.rows.projection) await this.rows.reload();
    return result;
  }

  async listActors(filter: ActorFilter = {}): Promise<ActorRow[]> {
    this.assertOpen();
    return this.rows.list(filter);
  }

  async getActor(id: string): Promise<ActorRow | undefined> {
    this.assertOpen();
    return this.rows.find(id);
  }

  /**
   * This store folds the actors projection itself: `runlog rebuild` folds it again from the whole log, which gives
   * the rows a rebuild computes (the two agree, as an append's row does). A store opened without that projection
   * registered (a one-shot reader) cannot fold it, and refuses.
   */
  async replaceActorRows(_rows: readonly ActorRow[]): Promise<void> {
    this.assertOpen();
    if (!this.options.projections?.some((p) => p.name === this.rows.projection)) {
      throw new RunlogError(
        'NOT_SUPPORTED',
        `the actors rows of ${this.description} are folded by the supervisors' store in every append; ` +
          'this store was opened without that projection and cannot rebuild them',
      );
    }
    await this.rebuildProjection(this.rows.projection);
  }

  // --- supervision --------------------------------------------------------------------------------

  /**
   * Recorded in the `nodes` table (one row per node). The beat's time is PostgreSQL's, not this node's: liveness
   * is judged on the server's clock alone (clusterRecords carries its time), so skewed hosts agree. close() waits for a write
   * still on its way (a clean stop's mark).
   */
  writeHeartbeat(h: Heartbeat): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.cluster.heartbeat = h;
    const p = writeNodeRow(this.pg, h);
    this.inflight.add(p);
    void p.catch(() => undefined).finally(() => this.inflight.delete(p));
    return p;
  }

  /** The newest heartbeat of any node (read with the follower's polls). */
  async readHeartbeat(): Promise<Heartbeat | null> {
    return this.cluster.heartbeat;
  }

  /** Every node's heartbeat and every lease, read now (the inspector's nodes; expiry judged on the server's clock). */
  clusterRecords(): Promise<ClusterRecords> {
    return readClusterRecords(this.pg);
  }

  /** The node that appended the actor's latest event, and the node holding its lease (null: none, or it ended). */
  async placement(stream: string): Promise<Placement> {
    return (await this.placements([stream])).get(stream)!;
  }

  /**
   * placement() of each stream. Of the streams whose older events the copy does not hold, and that none of the held
   * ones names, the node comes from PostgreSQL, in one statement for all of them.
   */
  async placements(streams: readonly string[]): Promise<Map<string, Placement>> {
    const out = new Map<string, Placement>();
    const ask: string[] = [];
    for (const stream of streams) {
      const place = this.cluster.placement(stream);
      out.set(stream, place);
      const whole = this.copy.knows(stream) && this.copy.missing(stream) === 0;
      if (place.node === null && this.copy.pagingOut && !whole) ask.push(stream);
    }
    if (ask.length > 0)
      for (const [stream, node] of await lastNodesUpTo(this.pg, ask, this.head))
        out.set(stream, { ...out.get(stream)!, node });
    return out;
  }

  // --- capabilities: metrics, the hash chain, retention ----------------------------------------------

  /** The events and actors tables' size (read with the follower's polls). */
  async sizeBytes(): Promise<number> {
    return this.cluster.size;
  }

  observeAppends(observer: AppendObserver | undefined): void {
    this.observer = observer;
  }

  verifyChain(options: { afterSeq?: number } = {}): Promise<ChainCheck> {
    return this.pg.verifyChain(options);
  }

  /** Archives ended actors (postgres/archive.ts); their rows are read back to say where their events went. */
  async archiveEnded(options: ArchiveOptions): Promise<ArchiveResult> {
    const archived: string[] = [];
    const result = await archiveEndedPg(this.pg, {
      ...options,
      projection: this.rows.projection,
      removed: (streams) => archived.push(...streams),
    });
    await this.rows.refresh(new Set(archived));
    return result;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.follower.stop();
    this.leaseBeat?.stop();
    await Promise.all([...this.subscriptions.keys()].map((s) => s.close()));
    await Promise.allSettled([...this.inflight]);
    await this.chain.catch(() => undefined);
    // The heartbeat's stop mark, if one was being written, goes out before the pool ends.
    if (this.cluster.heartbeat?.stoppedAt) await writeNodeRow(this.pg, this.cluster.heartbeat).catch(() => undefined);
    await this.pg.close();
  }
}
