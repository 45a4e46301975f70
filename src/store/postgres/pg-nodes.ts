// The cluster's nodes as placement sees them: which are live (a fresh heartbeat, not stopped) and how loaded
// (live leases they hold). Liveness is read from each node's own heartbeat clock (the `nodes` table holds the
// time the node wrote): a node is live while its last beat is younger than three of its intervals on the
// reader's clock, so hosts whose clocks differ by more than that disagree (keep them NTP-synced).
import type { PgEventStore } from './pg-event-store.ts';

export interface NodeLoad {
  node: string;
  live: boolean;
  beatAt: string;
  stoppedAt: string | null;
  /** Live instances whose lease the node holds. */
  instances: number;
  /** Live executions whose lease the node holds. */
  executions: number;
}

/** A beat older than this many of the node's intervals: the node is not live. */
const STALE_BEATS = 3;

export async function nodeLoads(pg: Pick<PgEventStore, 'sql'>, nowMs: number): Promise<NodeLoad[]> {
  const rows = await pg.sql<{ node: string; beat_at: string; interval_ms: number; stopped_at: string | null; instances: number; executions: number }>(
    `SELECT n.node, n.beat_at, n.interval_ms, n.stopped_at,
            count(l.stream) FILTER (WHERE l.stream LIKE 'instance-%')::integer AS instances,
            count(l.stream) FILTER (WHERE l.stream LIKE 'execution-%')::integer AS executions
       FROM nodes n LEFT JOIN leases l ON l.node = n.node AND l.expires_at > clock_timestamp()
      GROUP BY n.node ORDER BY n.node`,
    [],
  );
  return rows.map((r) => ({
    node: r.node,
    live: r.stopped_at === null && nowMs - Date.parse(r.beat_at) <= STALE_BEATS * r.interval_ms,
    beatAt: r.beat_at,
    stoppedAt: r.stopped_at,
    instances: r.instances,
    executions: r.executions,
  }));
}
