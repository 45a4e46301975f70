// What a PostgreSQL supervisor's store knows of the cluster's nodes (host-store.ts): the newest heartbeat, who holds
// each lease and the log's size, as last read with the follower's polls (node-records.ts), and the node that appended
// each stream's latest event. Kept apart from the store because these are the cluster's records as last seen, which
// ps, the inspector and placement answer from, while the store's own job is the log.
import type { RecordedEvent } from '../../domain/events.ts';
import type { Placement } from '../capabilities.ts';
import type { Heartbeat } from '../port.ts';
import type { PgEventStore } from './event-store.ts';
import type { Leases } from './leases.ts';
import { readNodeState } from './node-records.ts';

export class ClusterView {
  /** The newest heartbeat of any node (read with the follower's polls; this node's own as it writes one). */
  heartbeat: Heartbeat | null = null;
  /** stream → the node whose append was its latest (events a cluster node appends carry meta.node). */
  readonly lastNode = new Map<string, string>();
  /** stream → the node holding its lease (read with the heartbeats). */
  private owners = new Map<string, string>();
  /** The events and actors tables' size (read with the heartbeats). */
  size = 0;

  constructor(
    private readonly pg: PgEventStore,
    /** This node's leases (null: not supervising as a cluster node). */
    private readonly leases: Leases | null,
  ) {}

  /** Reads the heartbeats, the leases' holders and the size again. */
  async refresh(): Promise<void> {
    ({ heartbeat: this.heartbeat, owners: this.owners, size: this.size } = await readNodeState(this.pg));
  }

  /** Notes the node that wrote the event, when it says (meta.node). */
  saw(e: RecordedEvent): void {
    const by = (e.meta as { node?: unknown } | undefined)?.node;
    if (typeof by === 'string') this.lastNode.set(e.stream, by);
  }

  /** The store's copy dropped the stream (an ended actor's): its node is read from PostgreSQL from now on. */
  forget(stream: string): void {
    this.lastNode.delete(stream);
  }

  /** The node that appended the actor's latest event, and the node holding its lease (null: none, or it ended). */
  placement(stream: string): Placement {
    const owner = this.leases?.owns(stream) ? this.leases.node : (this.owners.get(stream) ?? null);
    return { node: this.lastNode.get(stream) ?? null, owner };
  }
}
