// A fenced or projected append on PostgreSQL, as one transaction whose global append lock no client can hold while
// it is stopped. The lock (append_events, postgres/schema.ts) orders positions and must be held until the commit; so it is
// taken last, by one statement (append_commit) sent in the same query string as its COMMIT: the server takes it,
// writes, commits and lets it go without waiting for the client once. Everything the client does between
// statements comes before, under locks that only appends to the same actors share:
//
//   1. claims and the fence: the new streams' lease rows taken, the fenced ones locked FOR SHARE (ORDER BY stream,
//      the one order every lease statement locks in, so renewals and fence checks cannot deadlock);
//   2. a transaction-scoped advisory lock per stream and per projection document the batch touches, in key order;
//   3. under them, each stream's version and each document are read, the expected versions decided, and the
//      documents folded (evolve sees the events with `seq` 0: their positions are assigned at the commit);
//   4. append_commit + COMMIT: the append with the expected versions pinned to what step 3 read, the documents, the
//      snapshots, the claims to give back. An append that took no stream lock and changed a stream meanwhile makes
//      a request come out otherwise than predicted: a serialization failure, and the store runs it all again.
//
// A client stopped in steps 1-3 (paused, swapped out) holds only its own actors' rows and locks, and only until
// idle_in_transaction_session_timeout ends its session: other nodes' appends and every lease renewal go on.
import pg from 'pg';
import { FencedError } from '../../domain/errors.ts';
import type { RecordedEvent } from '../../domain/events.ts';
import type { SnapshotRecord } from '../port.ts';
import { versionMatches } from '../expected-version.ts';
import { foldDocument, type ProjectionSet } from '../projection-set.ts';
import { liveUntil } from './leases.ts';
import { toJson, type StreamAppend, type StreamAppendOutcome } from '../port.ts';

/** Which node appends, and the lease token it holds for each stream it owns (postgres/leases.ts). */
export interface Fence {
  node: string;
  tokens: ReadonlyMap<string, number>;
  /** The leases' TTL: a lease is live until its expiry, and never ends before the server has been up that long (postgres/leases.ts). */
  ttlMs?: number;
  /**
   * New actors' streams whose lease this append takes in its own transaction (a claim: a spawn, a queued
   * execution started here): the lease and the stream's first event commit together or not at all, so of two
   * nodes claiming one stream exactly one gets it. The tokens taken are put into `claimed`.
   */
  claim?: { streams: ReadonlySet<string>; ttlMs: number; claimed: Map<string, number> };
}

/** A batch of requests as append_events takes them: per request its stream, expectation and count; per event its columns. */
export interface Encoded {
  streams: string[];
  expected: string[];
  counts: number[];
  types: string[];
  data: string[];
  meta: string[];
  at: string[];
  schemas: number[];
  projected: boolean;
}

export type AppendRow = { o_ok: boolean; o_actual: number; o_version: number; o_first: number };

/** What the transaction needs of its store. */
export interface AppendContext {
  client: pg.PoolClient;
  channel: string;
  projections: ProjectionSet;
  encode(requests: readonly StreamAppend[]): Encoded;
  toRecorded(row: {
    seq: number;
    stream: string;
    version: number;
    type: string;
    schema: number;
    data: Record<string, unknown>;
    meta: Record<string, unknown>;
    at: string;
  }): RecordedEvent;
  outcomes(requests: readonly StreamAppend[], rows: AppendRow[], batch: Encoded): StreamAppendOutcome[];
  /** The `append-locked` fault point (supervisor/host/faults.ts), once per event. */
  faults?: ((point: 'append-locked', detail: { eventType: string }) => void) | undefined;
}

export interface AppendInput {
  requests: readonly StreamAppend[];
  fence?: Fence | undefined;
  snapshots: readonly (SnapshotRecord | undefined)[];
}

/**
 * Takes the leases of new streams in the caller's transaction: inserted, or this node's own stale row renewed; a
 * stream another node holds a lease on (live or expired: that is a takeover's business) is not taken. A racing
 * claim waits on the row's unique index until the first commits, then finds it taken.
 */
async function claimLeases(
  client: pg.PoolClient,
  node: string,
  streams: readonly string[],
  ttlMs: number,
): Promise<{ taken: Map<string, number>; renewed: Set<string> }> {
  // xmax = 0 only on a row this statement inserted: the others are this node's own rows, renewed.
  const { rows } = await client.query<{ stream: string; token: number; inserted: boolean }>(
    `INSERT INTO leases (stream, node, token, expires_at)
       SELECT s, $1, nextval('lease_tokens'), clock_timestamp() + $3::interval FROM unnest($2::text[]) AS s ORDER BY s
     ON CONFLICT (stream) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at WHERE leases.node = excluded.node
     RETURNING stream, token, (xmax = 0) AS inserted`,
    [node, [...streams], `${Math.max(1, Math.round(ttlMs))} milliseconds`],
  );
  return {
    taken: new Map(rows.map((r) => [r.stream, Number(r.token)])),
    renewed: new Set(rows.filter((r) => !r.inserted).map((r) => r.stream)),
  };
}

/** Locks the fenced streams' lease rows and returns the indexes of requests whose lease is not this node's, live, with that token. */
async function checkFence(
  client: pg.PoolClient,
  fence: Fence,
  requests: readonly StreamAppend[],
  tokens: (number | undefined)[],
): Promise<Set<number>> {
  const streams = [...new Set(requests.filter((_, i) => tokens[i] !== undefined).map((r) => r.stream))];
  const { rows } = await client.query<{ stream: string; node: string; token: number; live: boolean }>(
    `SELECT stream, node, token, ${liveUntil('$2::interval')} > clock_timestamp() AS live ` +
      'FROM leases WHERE stream = ANY($1::text[]) ORDER BY stream FOR SHARE',
    [streams, `${Math.max(0, Math.round(fence.ttlMs ?? 0))} milliseconds`],
  );
  const byStream = new Map(rows.map((r) => [r.stream, r]));
  const refused = new Set<number>();
  requests.forEach((r, i) => {
    const t = tokens[i];
    if (t === undefined) return;
    const l = byStream.get(r.stream);
    if (!l || l.node !== fence.node || l.token !== t || !l.live) refused.add(i);
  });
  return refused;
}

/**
 * The events of the requests picked by `use` as evolve sees them before their positions exist (`seq` 0), at the
 * versions they will get (request i's first is from[i] + 1), from the very columns the server will store.
 */
function provisional(
  ctx: AppendContext,
  requests: readonly StreamAppend[],
  batch: Encoded,
  from: readonly number[],
  use: readonly boolean[],
): RecordedEvent[] {
  const out: RecordedEvent[] = [];
  let e = 0;
  requests.forEach((r, i) => {
    if (use[i]) {
      r.events.forEach((ev, k) => {
        const x = e + k;
        out.push(
          ctx.toRecorded({
            seq: 0,
            stream: r.stream,
            version: from[i]! + k + 1,
            type: ev.type,
            schema: batch.schemas[x]!,
            data: JSON.parse(batch.data[x]!),
            meta: JSON.parse(batch.meta[x]!),
            at: batch.at[x]!,
          }),
        );
      });
    }
    e += r.events.length;
  });
  return out;
}

/** Takes one advisory lock per key, in key order (any two transactions lock their common keys in the same order). */
async function lockKeys(client: pg.PoolClient, keys: readonly string[]): Promise<void> {
  if (keys.length === 0) return;
  await client.query(
    'SELECT pg_advisory_xact_lock(k) FROM (SELECT DISTINCT hashtextextended(current_schema() || chr(1) || x, 0) AS k ' +
      'FROM unnest($1::text[]) AS x ORDER BY k) AS q',
    [keys],
  );
}

/** What the requests' streams stand at now (under their locks), and each expected version decided as append_events will. */
function predict(
  requests: readonly StreamAppend[],
  versions: Map<string, number>,
): { ok: boolean[]; from: number[]; pinned: string[] } {
  const cur = new Map(versions);
  const ok: boolean[] = [];
  const from: number[] = [];
  const pinned: string[] = [];
  for (const r of requests) {
    const v = cur.get(r.stream) ?? 0;
    const matches = versionMatches(r.expectedVersion, v);
    ok.push(matches);
    from.push(v);
    // A match is pinned to the version read: if anything moved the stream since, it no longer matches (40001).
    pinned.push(matches ? String(v) : String(r.expectedVersion));
    if (matches) cur.set(r.stream, v + r.events.length);
  }
  return { ok, from, pinned };
}

/** Folds the documents the kept events touch (their current versions read under the documents' locks). */
async function fold(
  ctx: AppendContext,
  events: readonly RecordedEvent[],
): Promise<{ put: [string[], string[], string[]]; del: [string[], string[]] }> {
  const put: [string[], string[], string[]] = [[], [], []];
  const del: [string[], string[]] = [[], []];
  const targets = ctx.projections.targets(events);
  if (targets.length === 0) return { put, del };
  const current = await ctx.client.query<{ projection: string; id: string; doc: unknown }>(
    'SELECT d.projection, d.id, d.doc FROM projection_documents d ' +
      'JOIN unnest($1::text[], $2::text[]) AS k(projection, id) USING (projection, id)',
    [targets.map((t) => t.projection.name), targets.map((t) => t.id)],
  );
  const docs = new Map(current.rows.map((r) => [`${r.projection}\u0000${r.id}`, r.doc]));
  for (const t of targets) {
    const next = foldDocument(t, docs.get(`${t.projection.name}\u0000${t.id}`) ?? null);
    if (next === null) {
      del[0].push(t.projection.name);
      del[1].push(t.id);
    } else {
      put[0].push(t.projection.name);
      put[1].push(t.id);
      put[2].push(toJson(next, `projection ${t.projection.name} document ${t.id}`));
    }
  }
  return { put, del };
}

/**
 * One try of the transaction (the caller retries a serialization failure, a deadlock or a lock timeout: each rolls
 * it back whole). Returns each request's outcome (FencedError for one refused by its lease) and the rows appended.
 */
export async function appendInTransaction(
  ctx: AppendContext,
  input: AppendInput,
): Promise<{ outcomes: StreamAppendOutcome[]; rows: AppendRow[] }> {
  const { client } = ctx;
  const { requests, fence, snapshots } = input;
  const claims = fence?.claim && fence.claim.streams.size > 0 ? fence.claim : null;
  let fenced = fence ? requests.map((r) => fence.tokens.get(r.stream)) : [];
  await client.query('BEGIN');
  const refused = new Set<number>();
  const { taken, renewed } = claims
    ? await claimLeases(client, fence!.node, [...claims.streams], claims.ttlMs)
    : { taken: new Map<string, number>(), renewed: new Set<string>() };
  if (claims) {
    // A claim not taken (another node holds the stream) is refused like an append without its lease.
    requests.forEach((r, i) => {
      if (claims.streams.has(r.stream) && !taken.has(r.stream)) refused.add(i);
    });
    fenced = requests.map((r, i) => taken.get(r.stream) ?? fenced[i]);
  }
  if (fence && fenced.some((t) => t !== undefined))
    for (const i of await checkFence(client, fence, requests, fenced)) refused.add(i);
  const kept = requests.filter((_, i) => !refused.has(i));
  const keptSnapshots = snapshots.filter((_, i) => !refused.has(i));
  const batch = ctx.encode(kept);
  const streams = [...new Set(kept.map((r) => r.stream))];
  // The documents the batch may touch (documentId reads the event, not its version or position).
  const guess = batch.projected
    ? ctx.projections.targets(
        provisional(
          ctx,
          kept,
          batch,
          kept.map(() => 0),
          kept.map(() => true),
        ),
      )
    : [];
  await lockKeys(client, [
    ...streams.map((s) => `s\u0001${s}`),
    ...guess.map((t) => `d\u0001${t.projection.name}\u0001${t.id}`),
  ]);
  const { rows: vrows } = await client.query<{ stream: string; v: number }>(
    'SELECT s AS stream, (SELECT coalesce(max(version), 0) FROM events WHERE stream = s)::integer AS v FROM unnest($1::text[]) AS s',
    [streams],
  );
  const { ok, from, pinned } = predict(kept, new Map(vrows.map((r) => [r.stream, r.v])));
  const { put, del } = batch.projected
    ? await fold(ctx, provisional(ctx, kept, batch, from, ok))
    : { put: [[], [], []] as [string[], string[], string[]], del: [[], []] as [string[], string[]] };
  // A claimed stream whose first event will not be appended (it exists already) is not leased by this claim —
  // unless this node held its lease already: a retried claim whose first try committed with its reply lost finds
  // its own stream, and the lease stays (renewed; the node's pick-up adopts it), or the actor would be left with
  // no owner at all.
  const unclaimed = [
    ...new Set(kept.flatMap((r, j) => (taken.has(r.stream) && !renewed.has(r.stream) && !ok[j] ? [r.stream] : []))),
  ];
  // Snapshots, each only for the version its request brings the stream to.
  const due = kept.flatMap((r, j) => {
    const s = keptSnapshots[j];
    return ok[j] && s && s.stream === r.stream && s.version === from[j]! + r.events.length ? [s] : [];
  });
  if (ctx.faults) for (const t of batch.types) ctx.faults('append-locked', { eventType: t });
  const payload = {
    streams: batch.streams,
    expected: pinned,
    predicted: ok.map(String),
    counts: batch.counts,
    types: batch.types,
    schemas: batch.schemas,
    data: batch.data,
    meta: batch.meta,
    at: batch.at,
    put_p: put[0],
    put_i: put[1],
    put_d: put[2],
    del_p: del[0],
    del_i: del[1],
    unclaimed,
    unclaimed_tokens: unclaimed.map((s) => taken.get(s)),
    snapshots: due,
    channel: ctx.channel,
  };
  // One query string, two statements: the server runs the append and commits without a round trip between them.
  // why: node-postgres types query() as one result; a query string of several statements gives one per statement.
  const results = (await client.query(
    `SELECT o_ok, o_actual, o_version, o_first FROM append_commit(${client.escapeLiteral(JSON.stringify(payload))}::json); COMMIT`,
  )) as unknown as pg.QueryResult<AppendRow>[];
  const rows = results[0]!.rows.map((r) => ({
    o_ok: r.o_ok,
    o_actual: Number(r.o_actual),
    o_version: Number(r.o_version),
    o_first: Number(r.o_first),
  }));
  if (claims) for (const [stream, token] of taken) if (!unclaimed.includes(stream)) claims.claimed.set(stream, token);
  const keptOutcomes = ctx.outcomes(kept, rows, batch);
  let k = 0;
  return {
    outcomes: requests.map((r, i) =>
      refused.has(i) ? { ok: false, error: new FencedError(r.stream, fence!.node) } : keptOutcomes[k++]!,
    ),
    rows,
  };
}
