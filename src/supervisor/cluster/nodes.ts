// The nodes of a log and what each owns (GET /api/nodes, `runlog nodes`, the inspector's Nodes card). On a
// cluster's log (PostgreSQL) the nodes and leases are read from the database now; on SQLite there is one
// supervisor and no lease, so its heartbeat is the one node.
import { nodesView, type ClusterRecords, type NodesView } from '../../domain/cluster-nodes.ts';
import type { EventStorePort } from '../../store/port.ts';

/** Where a cluster's records come from (a node's Leasing, or a reader of the same tables). */
export interface ClusterRecordsSource {
  clusterRecords(): Promise<ClusterRecords>;
}

const ACTOR_STREAM = /^(instance|execution)-/;

/** `cluster`: the cluster's records (null: a log without nodes, SQLite). */
export async function readNodes(store: Pick<EventStorePort, 'listActors' | 'getActor' | 'readHeartbeat'>, cluster: ClusterRecordsSource | null, now: string): Promise<NodesView> {
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
