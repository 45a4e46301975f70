// The cluster's records in a PostgreSQL log: each node's heartbeat (the nodes table, beat on the server's clock) and
// the leases, as the supervisor writes them and ps, inspect and the inspector read them.
import { hostname } from 'node:os';
import type { ClusterRecords } from '../../domain/cluster-nodes.ts';
import type { Heartbeat } from '../port.ts';
import type { PgEventStore } from './event-store.ts';

/**
 * The heartbeat write, awaited (a clean stop waits for its stop mark). The beat's time is PostgreSQL's, not
 * this node's: liveness is judged on the server's clock alone (clusterRecords carries its time), so skewed hosts agree.
 */
export async function writeNodeRow(pg: PgEventStore, h: Heartbeat): Promise<void> {
  await pg.sql(
    `INSERT INTO nodes (node, pid, host, started_at, beat_at, interval_ms, stopped_at)
     VALUES ($1, $2, $3, $4, to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), $5, $6)
     ON CONFLICT (node) DO UPDATE SET pid = excluded.pid, host = excluded.host, started_at = excluded.started_at,
       beat_at = excluded.beat_at, interval_ms = excluded.interval_ms, stopped_at = excluded.stopped_at`,
    [h.node, h.pid, hostname(), h.startedAt, h.intervalMs, h.stoppedAt],
  );
}

/** The newest heartbeat, who holds each lease, and the log's size on disk (read with the follower's polls). */
export async function readNodeState(
  pg: PgEventStore,
): Promise<{ heartbeat: Heartbeat | null; owners: Map<string, string>; size: number }> {
  // Beats carry PostgreSQL's time; their age is taken on that clock and the beat handed out on this reader's, so
  // `supervision(readHeartbeat(), now())` (ps, inspect, /api/status) judges it right even on a skewed host.
  const [r] = await pg.sql<{
    node: string;
    pid: number;
    started_at: string;
    beat_at: string;
    interval_ms: number;
    stopped_at: string | null;
    age_ms: number;
  }>(
    'SELECT node, pid, started_at, beat_at, interval_ms, stopped_at, ' +
      `(extract(epoch FROM clock_timestamp() - beat_at::timestamptz) * 1000)::float8 AS age_ms
       FROM nodes ORDER BY (stopped_at IS NULL) DESC, beat_at DESC LIMIT 1`,
    [],
  );
  const heartbeat = r
    ? {
        node: r.node,
        pid: r.pid,
        startedAt: r.started_at,
        beatAt: new Date(Date.now() - Math.max(0, r.age_ms)).toISOString(),
        intervalMs: r.interval_ms,
        stoppedAt: r.stopped_at,
      }
    : null;
  const owners = new Map(
    (await pg.sql<{ stream: string; node: string }>('SELECT stream, node FROM leases', [])).map((l) => [
      l.stream,
      l.node,
    ]),
  );
  const [sz] = await pg.sql<{ n: number }>(
    "SELECT (pg_total_relation_size('events') + pg_total_relation_size('projection_documents'))::bigint AS n",
    [],
  );
  return { heartbeat, owners, size: sz?.n ?? 0 };
}

/** Every node's heartbeat and every lease, read now (the inspector's nodes; expiry judged on the server's clock). */
export async function readClusterRecords(pg: PgEventStore): Promise<ClusterRecords> {
  const [nodes, leases, [clock]] = await Promise.all([
    pg.sql<{
      node: string;
      pid: number;
      host: string;
      started_at: string;
      beat_at: string;
      interval_ms: number;
      stopped_at: string | null;
    }>('SELECT node, pid, host, started_at, beat_at, interval_ms, stopped_at FROM nodes', []),
    pg.sql<{ stream: string; node: string; token: number; expires_at: Date; left_ms: number }>(
      'SELECT stream, node, token, expires_at, (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS left_ms FROM leases',
      [],
    ),
    pg.sql<{ at: string }>(
      `SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at`,
      [],
    ),
  ]);
  return {
    ...(clock ? { at: clock.at } : {}),
    nodes: nodes.map((n) => ({
      node: n.node,
      pid: n.pid,
      host: n.host,
      startedAt: n.started_at,
      beatAt: n.beat_at,
      intervalMs: n.interval_ms,
      stoppedAt: n.stopped_at,
    })),
    leases: leases.map((l) => ({
      stream: l.stream,
      node: l.node,
      token: l.token,
      expiresAt: l.expires_at.toISOString(),
      expiresInMs: Math.round(l.left_ms),
    })),
  };
}
