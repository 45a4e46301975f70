// The cluster's nodes as placement and hand-over see them: which are live (a fresh heartbeat, not stopped) and
// how loaded (live leases they hold). Liveness is judged on PostgreSQL's clock alone: a node writes its beat
// with the server's time (PgHostStore.writeNode) and this query compares it with the server's time now, so
// nodes whose own clocks disagree still agree on who is live (no node's clock enters the judgement).
import type { LeaseNow } from '../../domain/handover.ts';
import type { NodeLoad } from '../capabilities.ts';
import type { PgEventStore } from './event-store.ts';

export type { NodeLoad };

/** A beat older than this many of the node's intervals: the node is not live. */
export const STALE_BEATS = 3;

export async function nodeLoads(pg: Pick<PgEventStore, 'sql'>): Promise<NodeLoad[]> {
  const rows = await pg.sql<{ node: string; beat_at: string; live: boolean; stopped_at: string | null; instances: number; executions: number }>(
    `SELECT n.node, n.beat_at, n.stopped_at,
            (n.stopped_at IS NULL AND n.beat_at::timestamptz >= clock_timestamp() - make_interval(secs => $1 * n.interval_ms / 1000.0)) AS live,
            count(l.stream) FILTER (WHERE l.stream LIKE 'instance-%')::integer AS instances,
            count(l.stream) FILTER (WHERE l.stream LIKE 'execution-%')::integer AS executions
       FROM nodes n LEFT JOIN leases l ON l.node = n.node AND l.expires_at > clock_timestamp()
      GROUP BY n.node ORDER BY n.node`,
    [STALE_BEATS],
  );
  return rows.map((r) => ({ node: r.node, live: r.live, beatAt: r.beat_at, stoppedAt: r.stopped_at, instances: r.instances, executions: r.executions }));
}

/** Who holds the stream's lease now, and for how long yet on the server's clock (null: nobody). */
export async function leaseNow(pg: Pick<PgEventStore, 'sql'>, stream: string): Promise<LeaseNow | null> {
  const [r] = await pg.sql<{ node: string; left_ms: number }>('SELECT node, (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS left_ms FROM leases WHERE stream = $1', [stream]);
  return r ? { node: r.node, expiresInMs: r.left_ms } : null;
}
