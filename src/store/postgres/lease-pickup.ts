// Leases a cluster node holds in PostgreSQL but does not run. A new actor's lease is taken in the transaction of
// its first event (postgres/event-store.ts claimLeases); when the reply to that commit is lost (PostgreSQL restarting,
// the connection cut), the caller hears STORE_UNAVAILABLE, the node never learns the lease's token, and no actor
// is in its host — yet the lease names this node, so no survivor takes it while it is live, and none should: this
// node is alive. The node picks such actors up itself: it adopts the lease (same token) and rehydrates the actor
// from the log exactly as start-up does. Which leases are such orphans is decided here, purely.

export interface LeaseRow {
  stream: string;
  token: number;
}

export interface PickUpInput {
  /** This node's leases as PostgreSQL has them (node = this node). */
  leased: readonly LeaseRow[];
  /** The tokens this node knows it holds. */
  held: ReadonlyMap<string, number>;
  /** Streams whose claim is being sent right now (its reply may still come: not an orphan yet). */
  claiming: ReadonlySet<string>;
  /** Streams whose lease is being given back (the actor ended). */
  ending: ReadonlySet<string>;
  /** Whether the node's host has this actor in memory (live, or being created). */
  running(stream: string): boolean;
}

const ACTOR_STREAM = /^(instance|execution)-/;

/**
 * The leases to pick up: an actor's lease this node holds in PostgreSQL whose actor its host does not run, either
 * unknown to the node (the claim's reply was lost) or known with the same token. A lease PostgreSQL has with a
 * token other than the one held is left alone (a renewal sorts that out: it is this node's only with its token).
 */
export function leasesToPickUp(input: PickUpInput): LeaseRow[] {
  return input.leased.filter((l) => {
    if (!ACTOR_STREAM.test(l.stream) || input.claiming.has(l.stream) || input.ending.has(l.stream)) return false;
    const known = input.held.get(l.stream);
    if (known !== undefined && known !== l.token) return false;
    return !input.running(l.stream);
  });
}
