// A cluster node's leases on a PostgreSQL log (the Leasing capability, ../capabilities.ts): what PgHostStore
// gives the node's services when it was opened with `node`. The lease table is leases.ts, the beat that renews,
// releases, takes over and picks up is lease-beat.ts; the store fences its appends with the same leases.
import type { ClusterRecords } from '../../domain/cluster-nodes.ts';
import type { LeaseListener, Leasing, Placement } from '../capabilities.ts';
import { ACTOR_STREAM, type LeaseBeat } from './lease-beat.ts';
import type { Leases } from './leases.ts';

/** Where the store has seen an actor run: the node of its latest event, and the lease holder it last read. */
export interface PlacementSource {
  placement(stream: string): Promise<Placement>;
  clusterRecords(): Promise<ClusterRecords>;
}

export class PgLeasing implements Leasing {
  readonly node: string;

  constructor(
    /** The lease table as this node holds it (tokens, TTL): the self-fence and tests read it. */
    readonly leases: Leases,
    private readonly beats: LeaseBeat,
    private readonly source: PlacementSource,
  ) {
    this.node = leases.node;
  }

  /** Streams that are not actors' are everyone's; an actor's is this node's while it holds the lease. */
  owns(stream: string): boolean {
    return !ACTOR_STREAM.test(stream) || this.leases.owns(stream);
  }

  /** Gives the stream's lease back at the next beat (an ended actor). */
  letGo(stream: string): void {
    if (this.leases.owns(stream)) this.beats.ending.add(stream);
  }

  /** Starts beating: renew this node's leases, give back ended actors', take over expired ones (every ttl/3). */
  startLeases(listener: LeaseListener): void {
    this.beats.start(listener);
  }

  beat(): Promise<void> {
    return this.beats.beat();
  }

  /** Looks for leases held but not run at the next beat (a cut-off claim was found committed after all). */
  pickUpSoon(): void {
    this.beats.pickupDue = true;
  }

  placement(stream: string): Promise<Placement> {
    return this.source.placement(stream);
  }

  clusterRecords(): Promise<ClusterRecords> {
    return this.source.clusterRecords();
  }
}
