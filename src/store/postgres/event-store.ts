// The event store on PostgreSQL (node-postgres): appends, reads, subscriptions and projections over the events
// table, what PgHostStore (postgres/host-store.ts, the port's PostgreSQL implementation) is built on. Durable on
// commit: every session runs with synchronous_commit on, and opening checks that the server really commits that way
// (synchronous_commit and fsync) before anything is written. Global positions are gapless and assigned in commit
// order (see append_events in postgres/schema.ts for how, and what it costs), so following the log by position never
// skips an event. Projections registered with the store fold inside the append's transaction.
import pg from 'pg';
import { FencedError, RunlogError } from '../../domain/errors.ts';

export { FencedError };
import type { NewEvent, RecordedEvent } from '../../domain/events.ts';
import type { ChainCheck } from '../chain.ts';
import { toSnapshot, type SnapshotRow } from '../sqlite/engine-types.ts';
import {
  validateAppends,
  type AppendToStreamOptions,
  type AppendToStreamResult,
  type PortOptions,
  type SnapshotRecord,
  type ProjectionReader,
  type ReadAllOptions,
  type ReadStreamOptions,
  type StreamAppend,
  type StreamAppendOutcome,
  type SubscribeOptions,
  type Subscription,
} from '../port.ts';
import { appendOne } from '../expected-version.ts';
import { foldDocument, ProjectionSet } from '../projection-set.ts';
import { pollingSubscription, Wakeups, trackedSubscription } from '../subscription.ts';
import { defaultUpcasters, type UpcasterRegistry } from '../upcasters.ts';
import { appendInTransaction, type AppendInput, type AppendRow, type Encoded, type Fence } from './append.ts';
import { appendOutcomes, appendQuery, encodeAppends, type EncodingContext } from './append-encoding.ts';
import { sqlState, withRetries } from './retry.ts';
import { checkChain } from './chain-check.ts';
import { rebuildProjectionPg } from './projection-rebuild.ts';
import { CommitListener } from './commit-listener.ts';
import { COLUMNS, toRecordedEvent, type EventRow } from './event-rows.ts';
import { readStreamsSince, readStreamsUpTo, type RowReader } from './open-reads.ts';
import {
  checkout,
  DEFAULT_HOLD_LIMIT_MS,
  makePool,
  migrate,
  redactUrl,
  StoreUnavailableError,
  translate,
} from './connection.ts';

export type { ChainRow } from './chain-check.ts';
export { redactUrl, StoreNotDurableError, StoreUnavailableError } from './connection.ts';

export type { Fence };

export interface PgEventStoreOptions extends PortOptions {
  /** postgres://user:password@host:port/database */
  url: string;
  /** The schema the log lives in (created when missing; default `runlog`). Lower-case letters, digits, `_`. */
  schema?: string;
  upcasters?: UpcasterRegistry;
  now?: () => string;
  /** Connections in the pool (default 10). */
  maxConnections?: number;
  /**
   * The longest a session waits for a lock (lock_timeout: the wait fails, 55P03, and the append is tried again)
   * and stays idle inside a transaction (idle_in_transaction_session_timeout: the server ends the session and its
   * transaction rolls back, so a stopped client's locks go). Default 10 s; a cluster node uses its lease TTL.
   */
  holdLimitMs?: number;
  /** Fault injection (supervisor/host/faults.ts): called at the `append-locked` point, once per event, with its type. */
  faults?: AppendFaultHook;
}

export type AppendFaultHook = (point: 'append-locked', detail: { eventType: string }) => void;

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
const PAGE = 1000;

/** The NOTIFY channel of a log: its schema's (channel names are at most 63 bytes; a shared prefix only wakes a reader for nothing). */
export function notifyChannel(schema: string): string {
  return `rl_${schema.slice(0, 60)}`;
}

export class PgEventStore {
  readonly description: string;
  readonly schema: string;
  private readonly pool: pg.Pool;
  private readonly projections: ProjectionSet;
  private readonly upcasters: UpcasterRegistry;
  private readonly now: () => string;
  private readonly wakeups = new Wakeups();
  private readonly subscriptions = new Set<Subscription>();
  /** What appends are encoded with (append-encoding.ts). */
  private readonly encoding: EncodingContext;
  /** What the open's reads read rows with (open-reads.ts). */
  private readonly openReads: RowReader = {
    query: (sql, params) => this.query<EventRow>(sql, params),
    toRecorded: (r) => this.toRecorded(r),
  };
  private closed = false;
  private readonly url: string;
  readonly channel: string;
  private readonly faults: AppendFaultHook | undefined;
  private readonly commits: CommitListener;

  private readonly leasePool: pg.Pool;

  private constructor(options: PgEventStoreOptions, pool: pg.Pool, leasePool: pg.Pool, schema: string) {
    this.leasePool = leasePool;
    this.faults = options.faults;
    this.description = `${redactUrl(options.url)} (schema ${schema})`;
    this.url = options.url;
    this.channel = notifyChannel(schema);
    this.commits = new CommitListener(options.url, this.channel);
    this.schema = schema;
    this.pool = pool;
    this.projections = new ProjectionSet(options.projections);
    this.upcasters = options.upcasters ?? defaultUpcasters();
    this.now = options.now ?? (() => new Date().toISOString());
    const all = (options.projections ?? []).some((p) => !p.canHandle);
    const projectedTypes = all ? null : new Set((options.projections ?? []).flatMap((p) => p.canHandle ?? []));
    this.encoding = { projections: this.projections, projectedTypes, upcasters: this.upcasters, now: () => this.now() };
  }

  /** Connects, checks durability, creates or migrates the schema. Nothing is written to a schema that is not a runlog log. */
  static async open(options: PgEventStoreOptions): Promise<PgEventStore> {
    const schema = options.schema ?? 'runlog';
    if (!SCHEMA_NAME.test(schema))
      throw new RunlogError(
        'STORE_INPUT',
        `schema name ${JSON.stringify(schema)} must be lower-case letters, digits and _ (at most 63)`,
        { schema },
      );
    new ProjectionSet(options.projections); // invalid projections fail before connecting
    const where = redactUrl(options.url);
    const pool = makePool(
      options.url,
      schema,
      options.maxConnections ?? 10,
      options.holdLimitMs ?? DEFAULT_HOLD_LIMIT_MS,
    );
    try {
      await migrate(pool, schema, where);
    } catch (err) {
      await pool.end().catch(() => {});
      throw translate(where, err);
    }
    // Leases are renewed on connections of their own: a renewal never waits for a connection behind appends.
    return new PgEventStore(
      options,
      pool,
      makePool(options.url, schema, 2, options.holdLimitMs ?? DEFAULT_HOLD_LIMIT_MS),
      schema,
    );
  }

  private open(): void {
    if (this.closed) throw new RunlogError('STORE_CLOSED', `event store ${this.description} is closed`);
  }

  private toRecorded(r: EventRow): RecordedEvent {
    return toRecordedEvent(this.upcasters, r);
  }

  /** One statement on the log's schema (the node and lease tables use it). */
  sql<R extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<R[]> {
    return this.query<R>(sql, params);
  }

  /** One statement on the lease connections (postgres/leases.ts), never queued behind appends for a connection. */
  async leaseSql<R extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<R[]> {
    this.open();
    try {
      return (await this.leasePool.query<R>(sql, params)).rows;
    } catch (err) {
      throw translate(this.description, err);
    }
  }

  /**
   * One statement whose rows are handed to `onRow` as they arrive, not gathered into one result first (a
   * supervisor's open reads every actors row: each is kept as it comes, nothing else of it outlives the row). If
   * `onRow` throws, the rest of the rows are skipped and the statement rejects with that error once it ends.
   */
  async eachRow<R extends pg.QueryResultRow>(sql: string, params: unknown[], onRow: (row: R) => void): Promise<number> {
    return this.withClient(
      (client) =>
        new Promise<number>((resolve, reject) => {
          let n = 0;
          let failed: { err: unknown } | undefined;
          const q = new pg.Query<R>({ text: sql, values: params });
          q.on('row', (row) => {
            if (failed) return;
            try {
              onRow(row);
              n += 1;
            } catch (err) {
              failed = { err };
            }
          });
          q.on('error', reject);
          q.on('end', () => (failed ? reject(failed.err) : resolve(n)));
          client.query(q);
        }),
    );
  }

  private async query<R extends pg.QueryResultRow>(sql: string | pg.QueryConfig, params?: unknown[]): Promise<R[]> {
    this.open();
    try {
      return (typeof sql === 'string' ? await this.pool.query<R>(sql, params) : await this.pool.query<R>(sql)).rows;
    } catch (err) {
      throw translate(this.description, err);
    }
  }

  async *readStream(stream: string, options: ReadStreamOptions = {}): AsyncIterable<RecordedEvent> {
    const to = options.to ?? 2147483647;
    let from = options.from ?? 1;
    while (from <= to) {
      const rows = await this.query<EventRow>(
        `SELECT ${COLUMNS} FROM events WHERE stream = $1 AND version >= $2 AND version <= $3 ORDER BY version LIMIT ${PAGE}`,
        [stream, from, to],
      );
      for (const r of rows) yield this.toRecorded(r);
      if (rows.length < PAGE) return;
      from = rows.at(-1)!.version + 1;
    }
  }

  async streamVersion(stream: string): Promise<number> {
    const [r] = await this.query<{ v: number }>(
      'SELECT coalesce(max(version), 0)::integer AS v FROM events WHERE stream = $1',
      [stream],
    );
    return r!.v;
  }

  async appendToStream(
    stream: string,
    events: readonly NewEvent[],
    options: AppendToStreamOptions,
  ): Promise<AppendToStreamResult> {
    return appendOne((r) => this.appendMany(r), stream, events, options?.expectedVersion);
  }

  /**
   * With `fence`: each request on a stream the fence names appends only if the node still holds that stream's
   * lease with that token, unexpired on the server's clock, checked in the append's own transaction with the
   * lease rows locked (FOR SHARE) — a takeover waits for the append to commit, and an append after a takeover
   * (or after the lease ran out, however long this process was paused) is refused with FencedError.
   */
  async appendMany(
    requests: readonly StreamAppend[],
    options: { fence?: Fence; snapshots?: readonly (SnapshotRecord | undefined)[] } = {},
  ): Promise<StreamAppendOutcome[]> {
    this.open();
    validateAppends(requests);
    // Everything is serialised before the database is touched: bad data is a typed error and writes nothing.
    const batch = this.encode(requests);
    const fence = options.fence;
    const snapshots = options.snapshots ?? [];
    const giveUp = (err: unknown, tries: number) =>
      new StoreUnavailableError(
        this.description,
        `${sqlState(err)}: ${(err as Error).message} (tried ${tries} times)`,
        { cause: err },
      );
    let outcomes: StreamAppendOutcome[];
    let rows: AppendRow[];
    const plain =
      !batch.projected &&
      !(fence?.claim && fence.claim.streams.size > 0) &&
      !requests.some((r) => fence?.tokens.has(r.stream)) &&
      !snapshots.some((x) => x !== undefined);
    if (plain) {
      // One statement in its own implicit transaction: one round trip, one commit, the lock never held by a client.
      rows = await withRetries(() => this.query<AppendRow>(appendQuery(batch, this.channel)), giveUp);
      outcomes = this.outcomes(requests, rows, batch);
    } else {
      ({ outcomes, rows } = await withRetries(() => this.appendTransaction({ requests, fence, snapshots }), giveUp));
    }
    if (rows.some((r) => r.o_ok && r.o_first > 0)) this.wakeups.wake();
    return outcomes;
  }

  /** One try of a fenced or projected append (postgres/append.ts), on a connection of its own. */
  private async appendTransaction(input: AppendInput): Promise<{ outcomes: StreamAppendOutcome[]; rows: AppendRow[] }> {
    let checkedOut: Awaited<ReturnType<typeof checkout>>;
    try {
      checkedOut = await checkout(this.pool);
    } catch (err) {
      throw translate(this.description, err);
    }
    const client = checkedOut.client;
    let broken = false;
    try {
      return await appendInTransaction(
        {
          client,
          channel: this.channel,
          projections: this.projections,
          faults: this.faults,
          encode: (r) => this.encode(r),
          toRecorded: (r) => this.toRecorded(r),
          outcomes: (r, x, b) => this.outcomes(r, x, b),
        },
        input,
      );
    } catch (err) {
      try {
        await client.query('ROLLBACK');
      } catch {
        broken = true; // the connection is gone: the server rolls back what did not commit
      }
      throw translate(this.description, err);
    } finally {
      checkedOut.release(broken);
    }
  }

  private encode(requests: readonly StreamAppend[]): Encoded {
    return encodeAppends(requests, this.encoding);
  }

  private outcomes(requests: readonly StreamAppend[], rows: AppendRow[], batch: Encoded): StreamAppendOutcome[] {
    return appendOutcomes(requests, rows, batch, (r) => this.toRecorded(r));
  }

  async *readAll(options: ReadAllOptions = {}): AsyncIterable<RecordedEvent> {
    const to = options.to;
    let left = options.limit ?? Number.MAX_SAFE_INTEGER;
    // Without an upper bound the query is a plain index range scan in seq order (a bound the planner cannot
    // estimate made it sort a bitmap scan of the rest of the log for every page).
    const page = (from: number, n: number): Promise<EventRow[]> =>
      to === undefined
        ? this.query<EventRow>(`SELECT ${COLUMNS} FROM events WHERE seq >= $1 ORDER BY seq LIMIT $2`, [from, n])
        : this.query<EventRow>(`SELECT ${COLUMNS} FROM events WHERE seq >= $1 AND seq <= $2 ORDER BY seq LIMIT $3`, [
            from,
            to,
            n,
          ]);
    let n = Math.min(PAGE, left);
    let pending = page(Math.max(1, options.from ?? 1), n);
    while (left > 0) {
      const rows = await pending;
      left -= rows.length;
      const more = rows.length === n && left > 0;
      if (more) {
        // The next page is fetched while the caller works through this one (replay folds as the rows arrive).
        n = Math.min(PAGE, left);
        pending = page(rows.at(-1)!.seq + 1, n);
        pending.catch(() => {}); // a caller that stops early never awaits it
      }
      for (const r of rows) yield this.toRecorded(r);
      if (!more) return;
    }
  }

  /** Every event of these streams at positions <= `upTo`, in position order (open-reads.ts). */
  async readStreamsUpTo(streams: readonly string[], upTo: number): Promise<RecordedEvent[]> {
    return readStreamsUpTo(this.openReads, streams, upTo);
  }

  /** Of each of these streams, its newest events at positions <= `upTo` whose `at` reaches `since` (open-reads.ts). */
  async readStreamsSince(streams: readonly string[], upTo: number, since: string): Promise<RecordedEvent[]> {
    return readStreamsSince(this.openReads, streams, upTo, since);
  }

  // --- the hash chain and snapshots (postgres/schema.ts migration 4) -----------------------------------------

  /**
   * Checks the hash chain: every event from `afterSeq` on (the whole log by default) against the link before it
   * (recomputed from its stored columns with the same function as SQLite's), then the last one against
   * chain_head. Holes archiving left (chain_gaps, postgres/archive.ts) restart the chain from the link recorded for
   * them; a hole no archive recorded is damage. Stops at the first bad position. `afterSeq` trusts the hash stored
   * at that seq: a tail check (a supervisor's start) is as cheap as the tail is short.
   */
  async verifyChain(options: { afterSeq?: number } = {}): Promise<ChainCheck> {
    // One snapshot for the whole check: other nodes append (and archive) meanwhile, and a head read after the
    // events, or a hole recorded after they were read, would look like damage.
    return this.withClient(async (client) => {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      try {
        return await checkChain(
          async <R extends pg.QueryResultRow>(sql: string, params: unknown[]) =>
            (await client.query<R>(sql, params)).rows,
          options.afterSeq ?? 0,
        );
      } finally {
        await client.query('COMMIT');
      }
    });
  }

  /** The newest snapshot of each of these streams that has one. */
  async latestSnapshots(streams: readonly string[]): Promise<SnapshotRecord[]> {
    if (streams.length === 0) return [];
    return (await this.query<SnapshotRow>('SELECT * FROM snapshots WHERE stream = ANY($1::text[])', [streams])).map(
      toSnapshot,
    );
  }

  /** The newest snapshot at or before `version` (the current one or one it replaced). */
  async snapshotAtOrBefore(stream: string, version: number): Promise<SnapshotRecord | undefined> {
    const [r] = await this.query<SnapshotRow>(
      'SELECT * FROM (SELECT * FROM snapshots WHERE stream = $1 AND version <= $2 UNION ALL ' +
        'SELECT * FROM snapshot_history WHERE stream = $1 AND version <= $2) s ORDER BY version DESC LIMIT 1',
      [stream, version],
    );
    return r ? toSnapshot(r) : undefined;
  }

  /** Every stored snapshot, the newest per stream (`history`: the ones they replaced), a page at a time. */
  async *iterateSnapshots(options: { history?: boolean } = {}): AsyncIterable<SnapshotRecord> {
    const table = options.history ? 'snapshot_history' : 'snapshots';
    let after: [string, number] = ['', -1];
    for (;;) {
      const rows = await this.query<SnapshotRow>(
        `SELECT * FROM ${table} WHERE (stream, version) > ($1, $2) ORDER BY stream COLLATE "C", version LIMIT 256`,
        after,
      );
      for (const r of rows) yield toSnapshot(r);
      if (rows.length < 256) return;
      after = [rows.at(-1)!.stream, rows.at(-1)!.version];
    }
  }

  /**
   * Runs `fn` on one connection of the pool, held until it returns (retention: its session lock and its
   * transaction, postgres/archive.ts). A failure is translated like every other query's.
   */
  async withClient<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    this.open();
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw translate(this.description, err);
    }
    let broken = false;
    try {
      return await fn(client);
    } catch (err) {
      broken = true; // a session lock or a transaction may be left on it: never hand it to anyone else
      throw translate(this.description, err);
    } finally {
      client.release(broken);
    }
  }

  /** Which version each stream's snapshot stands at, as recorded apart from the snapshots (postgres/schema.ts migration 5). */
  async snapshotVersions(): Promise<Map<string, number>> {
    return new Map(
      (await this.query<{ stream: string; version: number }>('SELECT stream, version FROM snapshot_versions', [])).map(
        (r) => [r.stream, r.version],
      ),
    );
  }

  async lastSeq(): Promise<number> {
    const [r] = await this.query<{ s: number }>('SELECT coalesce(max(seq), 0)::bigint AS s FROM events', []);
    return r!.s;
  }

  /**
   * Calls `onCommit` whenever any process commits an append to this log (LISTEN/NOTIFY, commit-listener.ts). A
   * wake-up, not a delivery: the caller reads by position, and keeps polling as the fallback.
   */
  listen(onCommit: () => void): () => void {
    this.open();
    return this.commits.listen(onCommit);
  }

  subscribe(options: SubscribeOptions, handler: (event: RecordedEvent) => void | Promise<void>): Subscription {
    this.open();
    // Other processes' commits wake it through LISTEN/NOTIFY (polling every pollMs, default 100, stays the
    // fallback); this handle's own wake it at once.
    const read = async (from: number, limit: number): Promise<RecordedEvent[]> => {
      if (this.closed) return [];
      const rows = await this.query<EventRow>(`SELECT ${COLUMNS} FROM events WHERE seq >= $1 ORDER BY seq LIMIT $2`, [
        from,
        limit,
      ]);
      return rows.map((r) => this.toRecorded(r));
    };
    const unlisten = this.listen(() => this.wakeups.wake());
    return trackedSubscription(pollingSubscription(read, this.wakeups, options, handler), this.subscriptions, unlisten);
  }

  projection<D>(name: string): ProjectionReader<D> {
    this.projections.get(name);
    return {
      get: async (id) =>
        (
          await this.query<{ doc: D }>('SELECT doc FROM projection_documents WHERE projection = $1 AND id = $2', [
            name,
            id,
          ])
        )[0]?.doc,
      list: async () =>
        this.query<{ id: string; doc: D }>(
          'SELECT id, doc FROM projection_documents WHERE projection = $1 ORDER BY id COLLATE "C"',
          [name],
        ),
    };
  }

  /** Folds the whole log into projection `name` again: with nothing locked, put in place by one statement (projection-rebuild.ts). */
  async rebuildProjection(name: string): Promise<{ documents: number; events: number }> {
    this.open();
    const p = this.projections.get(name);
    const fold = (rows: EventRow[], docs: Map<string, unknown>) => {
      for (const t of this.projections.targets(
        rows.map((r) => this.toRecorded(r)),
        p,
      ))
        docs.set(t.id, foldDocument(t, docs.get(t.id) ?? null));
    };
    return rebuildProjectionPg<EventRow>(name, {
      sql: (text, params) => this.query(text, params),
      columns: COLUMNS,
      fold,
      description: this.description,
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    this.closed = true;
    this.commits.close();
    await Promise.all([this.pool.end(), this.leasePool.end()]);
  }
}

export function openPgEventStore(options: PgEventStoreOptions): Promise<PgEventStore> {
  return PgEventStore.open(options);
}
