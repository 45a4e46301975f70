// The nodes of a log and what each owns (GET /api/nodes, `runlog nodes`, the inspector's Nodes card), and the
// cluster's nodes as placement and hand-over see them (which are live, how loaded, who holds a lease). On a
// cluster's log (PostgreSQL) the nodes and leases are read from the database now, each judged on the server's
// clock (so nodes whose own clocks disagree still agree on who is live); on SQLite there is one supervisor and no
// lease, so its heartbeat is the one node.
import { nodesView, type ClusterRecords, type NodesView } from '../../domain/cluster-nodes.ts';
import type { LeaseNow } from '../../domain/handover.ts';
import { supervision } from '../../domain/supervision.ts';
import type { EventStorePort } from '../../store/port.ts';

/** Where a cluster's records come from (a node's Leasing, or a reader of the same tables). */
export interface ClusterRecordsSource {
  clusterRecords(): Promise<ClusterRecords>;
}

const ACTOR_STREAM = /^(instance|execution)-/;

/** `cluster`: the cluster's records (null: a log without nodes, SQLite). */
export async function readNodes(
  store: Pick<EventStorePort, 'listActors' | 'getActor' | 'readHeartbeat'>,
  cluster: ClusterRecordsSource | null,
  now: string,
): Promise<NodesView> {
  const live = (await store.listActors({})).map((r) => ({ stream: r.stream, id: r.id, kind: r.kind, state: r.state }));
  if (!cluster) {
    const hb = await store.readHeartbeat();
    return nodesView({ nodes: hb ? [{ ...hb, host: null }] : [], leases: [] }, now, { live, state: () => null }, false);
  }
  // Beats are written on PostgreSQL's clock: their ages are measured on it too (a skewed reader agrees).
  const records = await cluster.clusterRecords();
  // Each leased actor's state, read once here (nodesView is pure).
  const states = new Map<string, string>();
  await Promise.all(
    records.leases.map(async (l) => {
      if (!ACTOR_STREAM.test(l.stream)) return;
      const row = await store.getActor(l.stream.replace(ACTOR_STREAM, ''));
      if (row?.stream === l.stream) states.set(l.stream, row.state);
    }),
  );
  return nodesView(records, records.at ?? now, { live, state: (stream) => states.get(stream) ?? null }, true);
}

/** One node as placement sees it: live (a fresh beat, not stopped) and its load (the live leases it holds). */
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

/** Every node that has beaten, by name, with its liveness and load, judged on the server's clock (records.at). */
export function nodeLoads(records: ClusterRecords): NodeLoad[] {
  const at = records.at ?? new Date().toISOString();
  return records.nodes
    .map((n) => {
      const held = records.leases.filter((l) => l.node === n.node && l.expiresInMs > 0);
      return {
        node: n.node,
        live: supervision(n, at).supervised,
        beatAt: n.beatAt,
        stoppedAt: n.stoppedAt,
        instances: held.filter((l) => l.stream.startsWith('instance-')).length,
        executions: held.filter((l) => l.stream.startsWith('execution-')).length,
      };
    })
    .sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
}

/** Who holds the stream's lease now, and for how long yet on the server's clock (negative: expired); null: nobody. */
export function leaseOf(records: ClusterRecords, stream: string): LeaseNow | null {
  const l = records.leases.find((x) => x.stream === stream);
  return l ? { node: l.node, expiresInMs: l.expiresInMs } : null;
}
