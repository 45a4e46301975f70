// The nodes of a log and what each owns (GET /api/nodes, `runlog nodes`, the inspector's Nodes card). On a
// cluster's log (PostgreSQL) the store reads the `nodes` and `leases` tables now; on SQLite there is one
// supervisor and no lease, so its heartbeat is the one node.
import { nodesView, type NodesView } from '../../domain/cluster-nodes.ts';
import type { ReadableLog } from '../../store/host-store.ts';

export async function readNodes(store: ReadableLog, now: string): Promise<NodesView> {
  const live = store.listActors({}).map((r) => ({ stream: r.stream, id: r.id, kind: r.kind, state: r.state }));
  const state = (stream: string): string | null => {
    const row = /^(instance|execution)-/.test(stream) ? store.getActor(stream.replace(/^(instance|execution)-/, '')) : undefined;
    return row?.stream === stream ? row.state : null;
  };
  const actors = { live, state };
  if (store.clusterRecords) {
    // Beats are written on PostgreSQL's clock: their ages are measured on it too (a skewed reader agrees).
    const records = await store.clusterRecords();
    return nodesView(records, records.at ?? now, actors, true);
  }
  const hb = store.readHeartbeat();
  return nodesView({ nodes: hb ? [{ ...hb, host: null }] : [], leases: [] }, now, actors, false);
}
