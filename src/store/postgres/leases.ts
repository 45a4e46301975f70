// Leases: which node owns which live actor, in the `leases` table (migration 3). A lease has a fencing token
// from a sequence (a new owner's token is always higher than the last one) and an expiry on PostgreSQL's clock
// (never a node's own: a paused or skewed node cannot believe its lease is live when the server says not). The
// owner renews its leases every beat; a node that stops renewing — dead, paused, cut off — loses them when
// they expire, and a survivor takes them over with new tokens. Every append of an owner carries its token and
// is checked in the append's transaction (PgEventStore.appendMany's fence), so a node that wakes up after a
// takeover cannot append for what it no longer owns.
//
// A lease is not taken over before the server has been up for a full TTL (liveUntil): an outage of PostgreSQL
// itself shorter than the TTL (stopped, restarted, its postmaster killed) changes no owner, however old a lease was
// when it began — the holder gets a whole TTL from the server's start to renew it.
//
// Every statement here runs on the store's lease connections (never waiting for one behind appends), locks lease
// rows in one order (ORDER BY stream, as the fence check and claims do in postgres/append.ts: no deadlock between them),
// and is tried again on a serialization failure, a deadlock or a lock timeout (postgres/retry.ts).
import { performance } from 'node:perf_hooks';
import { serverUnavailable } from './lease-renewals.ts';
import type { PgEventStore } from './event-store.ts';
import { withRetries } from './retry.ts';
import type { TakenLease } from '../capabilities.ts';

/** When a lease stops being live, in SQL: its expiry, but never before the server has been up for `ttl` ($ttl: an interval). */
export const liveUntil = (ttl: string): string => `greatest(expires_at, pg_postmaster_start_time() + ${ttl})`;

/**
 * Renews the leases ($2 streams, $3 tokens) node $1 holds with those tokens, by $4: the rows locked first, in
 * stream order (an UPDATE … FROM unnest would lock them in whatever order the join yields them).
 */
const LOCKED_RENEWAL = `WITH k AS MATERIALIZED (
    SELECT l.stream FROM leases l JOIN unnest($2::text[], $3::bigint[]) AS h(stream, token) ON l.stream = h.stream AND l.token = h.token
    WHERE l.node = $1 ORDER BY l.stream FOR UPDATE OF l)
  UPDATE leases l SET expires_at = clock_timestamp() + $4::interval FROM k WHERE l.stream = k.stream RETURNING $RETURNING`;

/**
 * Hears how each renewal of the node's leases ended (the node's self-fence, supervisor/cluster/self-fence.ts): a renewal
 * statement sent at t that PostgreSQL answered set every lease it names to expire at the server's time of running
 * it plus the TTL, so none of them can expire before t + TTL on this node's clock (give or take the clocks' rates,
 * never their offsets). One still waiting for its answer calls nothing.
 */
export interface RenewalListener {
  /** A renewal sent at `sentAtMs` (on the Leases' `nowMs` clock) was answered. */
  answered(sentAtMs: number): void;
  /** A renewal sent at `sentAtMs` failed with `err` (after the retries of postgres/retry.ts). */
  failed(sentAtMs: number, err: unknown): void;
}

export interface LeasesOptions {
  /** Told of every renewal's end (default: nobody). */
  renewals?: RenewalListener;
  /** A monotonic clock in ms for the renewals' sending times (default performance.now). */
  nowMs?: () => number;
  /** How soon a renewal the server said no to is tried again (default renewRetryMs(ttl)). */
  downRetryMs?: number;
}

/**
 * How soon a renewal the server said no to is tried again, within the beat: often enough that the node's last
 * refusal lands close to the server's start (the later it is, the later the node's self-fence falls) and its
 * renewal close to the server's answering again. Such tries are cheap: the server answers at once.
 */
export function renewRetryMs(ttlMs: number): number {
  return Math.max(10, Math.min(50, Math.floor(ttlMs / 40)));
}

export type { TakenLease } from '../capabilities.ts';

export class Leases {
  /** stream → the token this node holds for it. */
  readonly held = new Map<string, number>();

  constructor(
    private readonly pg: PgEventStore,
    readonly node: string,
    readonly ttlMs: number,
    /**
     * How long after an execution's lease expired its node may still come back and collect the result (its
     * sandbox may well run on): only then do survivors take the lease (and record the execution failed, lost).
     */
    readonly collectGraceMs = ttlMs,
    private readonly options: LeasesOptions = {},
  ) {}

  private get ttl(): string {
    return `${Math.max(1, Math.round(this.ttlMs))} milliseconds`;
  }

  private sql<R extends Record<string, unknown>>(text: string, params: unknown[]): Promise<R[]> {
    return withRetries(
      () => this.pg.leaseSql<R>(text, params),
      (err) => err,
    );
  }

  /**
   * At start: this node's leases from an earlier run (same node name) are its own again, with new tokens — which
   * also fences any older incarnation of this node still waking up somewhere. Leases that expired and were taken
   * over meanwhile are not this node's any more and are not touched.
   */
  async reclaim(): Promise<string[]> {
    const rows = await this.sql<{ stream: string; token: number }>(
      `WITH k AS MATERIALIZED (SELECT stream FROM leases WHERE node = $1 ORDER BY stream FOR UPDATE)
       UPDATE leases l SET token = nextval('lease_tokens'), expires_at = clock_timestamp() + $2::interval ` +
        'FROM k WHERE l.stream = k.stream RETURNING l.stream, l.token',
      [this.node, this.ttl],
    );
    for (const r of rows) this.held.set(r.stream, r.token);
    return rows.map((r) => r.stream);
  }

  /** The lease of a new actor's stream. False: another node holds a live lease on it. */
  async acquire(stream: string): Promise<boolean> {
    const rows = await this.sql<{ token: number }>(
      `INSERT INTO leases (stream, node, token, expires_at) VALUES ($1, $2, nextval('lease_tokens'), clock_timestamp() + $3::interval)
       ON CONFLICT (stream) DO UPDATE SET node = excluded.node, token = excluded.token, expires_at = excluded.expires_at
         WHERE leases.node = excluded.node OR greatest(leases.expires_at, pg_postmaster_start_time() + $3::interval) < clock_timestamp()
       RETURNING token`,
      [stream, this.node, this.ttl],
    );
    if (rows.length === 0) return false;
    this.held.set(stream, rows[0]!.token);
    return true;
  }

  /**
   * Renews every lease this node holds with its token. Returns the streams it turned out to have lost (taken over).
   * One the server said no to (down, starting: lease-renewals.ts serverUnavailable) is tried again every
   * renewRetryMs for up to a beat (TTL/3), then fails.
   */
  async renew(): Promise<string[]> {
    const now = this.options.nowMs ?? (() => performance.now());
    const began = now();
    for (;;) {
      const sentAtMs = now();
      try {
        return await this.renewOnce(sentAtMs);
      } catch (err) {
        this.options.renewals?.failed(sentAtMs, err);
        if (!serverUnavailable(err) || now() - began >= this.ttlMs / 3) throw err;
      }
      await new Promise((r) => setTimeout(r, this.options.downRetryMs ?? renewRetryMs(this.ttlMs)));
    }
  }

  private async renewOnce(sentAtMs: number): Promise<string[]> {
    // Holding nothing, nothing can expire: as good as an answer.
    if (this.held.size === 0) {
      this.options.renewals?.answered(sentAtMs);
      return [];
    }
    const streams = [...this.held.keys()];
    const tokens = streams.map((s) => this.held.get(s)!);
    const rows = await this.sql<{ stream: string }>(LOCKED_RENEWAL.replace('$RETURNING', 'l.stream'), [
      this.node,
      streams,
      tokens,
      this.ttl,
    ]);
    this.options.renewals?.answered(sentAtMs);
    const renewed = new Set(rows.map((r) => r.stream));
    // Only a lease still held with the token the renewal sent counts as lost (one released meanwhile does not).
    const lost = streams.filter((s, i) => !renewed.has(s) && this.held.get(s) === tokens[i]);
    for (const s of lost) this.held.delete(s);
    return lost;
  }

  /** Gives up leases (ended actors). */
  async release(streams: readonly string[]): Promise<void> {
    const mine = streams.filter((s) => this.held.has(s));
    if (mine.length === 0) return;
    const tokens = mine.map((s) => this.held.get(s)!);
    for (const s of mine) this.held.delete(s);
    await this.sql(
      `WITH k AS MATERIALIZED (
         SELECT l.stream FROM leases l JOIN unnest($2::text[], $3::bigint[]) AS h(stream, token) ` +
        `ON l.stream = h.stream AND l.token = h.token
         WHERE l.node = $1 ORDER BY l.stream FOR UPDATE OF l)
       DELETE FROM leases l USING k WHERE l.stream = k.stream`,
      [this.node, mine, tokens],
    );
  }

  /**
   * Takes over leases other nodes let expire (at most `limit` per call; an execution's only after the collect
   * grace too). A lease whose row an append is holding
   * (FOR SHARE) is skipped this time: that append either commits before its lease is taken, or is refused after.
   */
  async takeExpired(limit = 500): Promise<TakenLease[]> {
    const rows = await this.sql<{ stream: string; token: number; previous: string }>(
      `WITH t AS (
         SELECT stream, node FROM leases
         WHERE node <> $1 AND ${liveUntil('$2::interval')} < clock_timestamp() ` +
        `- CASE WHEN stream LIKE 'execution-%' THEN $4::interval ELSE interval '0' END
         ORDER BY stream LIMIT $3 FOR UPDATE SKIP LOCKED
       )
       UPDATE leases l SET node = $1, token = nextval('lease_tokens'), expires_at = clock_timestamp() + $2::interval
       FROM t WHERE l.stream = t.stream RETURNING l.stream, l.token, t.node AS previous`,
      [this.node, this.ttl, limit, `${Math.max(0, Math.round(this.collectGraceMs))} milliseconds`],
    );
    for (const r of rows) this.held.set(r.stream, r.token);
    return rows;
  }

  /** Every lease PostgreSQL says this node holds (live or not), with its token. */
  async mine(): Promise<{ stream: string; token: number }[]> {
    const rows = await this.sql<{ stream: string; token: number }>('SELECT stream, token FROM leases WHERE node = $1', [
      this.node,
    ]);
    return rows.map((r) => ({ stream: r.stream, token: Number(r.token) }));
  }

  /**
   * Makes leases this node holds in PostgreSQL but did not know of its own (a claim whose reply was lost): renewed
   * with the token they have — never a new one, so a reply still on its way names the same token — and held. One
   * taken over meanwhile (another node, another token) is not touched. Returns the streams adopted.
   */
  async adopt(leases: readonly { stream: string; token: number }[]): Promise<string[]> {
    if (leases.length === 0) return [];
    const rows = await this.sql<{ stream: string; token: number }>(
      LOCKED_RENEWAL.replace('$RETURNING', 'l.stream, l.token'),
      [this.node, leases.map((l) => l.stream), leases.map((l) => l.token), this.ttl],
    );
    for (const r of rows) this.held.set(r.stream, Number(r.token));
    return rows.map((r) => r.stream);
  }

  owns(stream: string): boolean {
    return this.held.has(stream);
  }
}
