// Request streams: the execution queue and each node's placement stream (spawns placed there, hand-over
// requests). Every entry carries a deadline (a queued execution's claimBy, a placement's or a hand-over's
// deadline), after which nobody acts on it, and their readers (execution-queue.ts, placement.ts, handover.ts) look
// only for requests still open. They never end and grow with every execution and placement the cluster runs, so a
// store on PostgreSQL holds only their newest events (postgres/host-store.ts pageOut.requestStreams, read through
// readRecent): its copy of a years-old log does not carry every request ever made.
// The names live here, with no imports, so the CLI's one-shot open can use them without loading the actors.

/** The execution queue's stream (execution-queue.ts). */
export const EXECUTION_QUEUE = 'queue-executions';

const PLACEMENT_PREFIX = 'placement-';

/** A node's placement stream: spawns placed on it and hand-over requests to it (placement.ts, handover.ts). */
export const placementStream = (node: string): string => `${PLACEMENT_PREFIX}${node}`;

export function isRequestStream(stream: string): boolean {
  return stream === EXECUTION_QUEUE || stream.startsWith(PLACEMENT_PREFIX);
}
