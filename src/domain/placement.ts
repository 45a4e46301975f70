// Where a spawn goes in a cluster: pure, so its rules are tested on their own (test/unit/cluster/placement.test.ts).
import { RunlogError, ValidationError } from './errors.ts';

/** A node name as `runlog serve --node` takes it. */
export const NODE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;

export type NodeChoice = string | 'any';

export interface NodeState {
  node: string;
  live: boolean;
  instances: number;
}

export function assertNodeChoice(node: unknown): asserts node is NodeChoice {
  if (typeof node !== 'string' || (node !== 'any' && !NODE_NAME.test(node))) {
    throw new ValidationError(
      'NODE_INVALID',
      `node must be 'any' or a node name (letters, digits, '.', '_' or '-', at most 63), not ${JSON.stringify(node)}`,
      [`node: ${JSON.stringify(node)}`],
    );
  }
}

/**
 * The node a spawn runs on. A named node must be live (NODE_UNKNOWN: no such node has ever supervised this log;
 * NODE_UNAVAILABLE: it stopped, or its heartbeat is stale). `any`: the live node with the fewest live instances;
 * on a tie this node (no hand-over needed), then the first by name.
 */
export function chooseNode(requested: NodeChoice, nodes: readonly NodeState[], self: string): string {
  if (requested !== 'any') {
    const n = nodes.find((x) => x.node === requested);
    if (!n)
      throw new RunlogError(
        'NODE_UNKNOWN',
        `no node named ${requested} supervises this log (known: ${nodes.map((x) => x.node).join(', ') || 'none'})`,
        { node: requested },
      );
    if (!n.live)
      throw new RunlogError(
        'NODE_UNAVAILABLE',
        `node ${requested} is not live (stopped, or its heartbeat is stale): spawn on another node or on 'any'`,
        { node: requested },
      );
    return requested;
  }
  const live = nodes.filter((x) => x.live);
  if (live.length === 0) throw new RunlogError('NODE_UNAVAILABLE', 'no live node supervises this log', { node: 'any' });
  return [...live].sort(
    (a, b) =>
      a.instances - b.instances ||
      Number(b.node === self) - Number(a.node === self) ||
      (a.node < b.node ? -1 : a.node > b.node ? 1 : 0),
  )[0]!.node;
}
