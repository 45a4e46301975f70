// An execution pinned to one node of a cluster (`node: '<name>'`) can be claimed by that node alone. When that
// node is not live (killed, paused, cut off: its heartbeat went stale, or it stopped), nobody else will run it, and
// a node that rejoins minutes later would run it for a caller long gone. So the caller's node watches the pinned
// node while the execution waits to be claimed; once the node is not live the caller is answered NODE_UNAVAILABLE
// at once — unless it asked to wait for the node (`nodeWaitMs`), and then when that wait runs out. Before
// answering, the entry is withdrawn from the queue in the log (execution-queue.ts): a claim that came before the
// withdrawal in log order wins (the execution runs and the caller gets its outcome), one after it is cancelled
// before it runs. The decision itself is pure (pinnedVerdict), tested on its own.
import { RunlogError } from '../../domain/errors.ts';
import type { Leasing } from '../../store/capabilities.ts';
import type { EventStorePort } from '../../store/port.ts';
import type { ExecutionQueue } from '../executions/execution-queue.ts';
import { nodeLoads } from './nodes.ts';

/** How often the caller's node looks at the pinned node's liveness while the execution is unclaimed. */
export const PINNED_CHECK_MS = 1000;

export interface PinnedState {
  /** When the pinned node was first seen not live (null: live at the last look). */
  downSinceMs: number | null;
}

/**
 * What the caller does after one look at the pinned node: keep waiting, or give up (NODE_UNAVAILABLE). A node
 * seen live again resets the wait; a caller that did not ask to wait (waitMs 0) gives up at the first look that
 * finds the node not live.
 */
export function pinnedVerdict(
  state: PinnedState,
  live: boolean,
  nowMs: number,
  waitMs: number,
): { state: PinnedState; giveUp: boolean } {
  if (live) return { state: { downSinceMs: null }, giveUp: false };
  const downSinceMs = state.downSinceMs ?? nowMs;
  return { state: { downSinceMs }, giveUp: nowMs - downSinceMs >= waitMs };
}

/** How long a caller may ask to wait for a pinned node (a day, as for an execution's own timeout). */
export const MAX_NODE_WAIT_MS = 24 * 3600_000;

export function assertNodeWait(ms: unknown): asserts ms is number | undefined {
  if (ms === undefined) return;
  if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || ms < 0 || ms > MAX_NODE_WAIT_MS) {
    throw new RunlogError(
      'NODE_WAIT_INVALID',
      `nodeWaitMs must be a whole number of milliseconds from 0 to ${MAX_NODE_WAIT_MS}, not ${JSON.stringify(ms)}`,
    );
  }
}

export interface PinnedGuardDeps {
  node: string;
  executionId: string;
  /** How long the caller waits for a node that is not live (0: not at all). */
  waitMs: number;
  nowMs(): number;
  /** Whether the node is live now (its heartbeat on the server's clock, nodes.ts). */
  live(node: string): Promise<boolean>;
  /** Whether any node has claimed the execution (its stream has events in the log). */
  claimed(): Promise<boolean>;
  /** Withdraws the entry from the queue (resolves once the withdrawal is in the log and this copy has read it). */
  withdraw(): Promise<void>;
  log(message: string): void;
  everyMs?: number;
}

/**
 * Watches the pinned node until the execution is claimed or `stop()` is called. `gaveUp` rejects with
 * NODE_UNAVAILABLE when the node was not live (past the caller's wait) and the withdrawal came before any claim;
 * it never resolves (a claim simply ends the watch: the caller goes on waiting for the outcome).
 */
export function guardPinned(d: PinnedGuardDeps): { gaveUp: Promise<never>; stop(): void } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let state: PinnedState = { downSinceMs: null };
  const gaveUp = new Promise<never>((_, reject) => {
    const everyMs = d.everyMs ?? PINNED_CHECK_MS;
    const again = (): void => {
      if (!stopped) timer = setTimeout(() => void look(), everyMs);
    };
    // null: the claim could not be read (the store briefly unreachable), so nothing is decided on it.
    const claimed = (): Promise<boolean | null> => d.claimed().catch(() => null);
    const look = async (): Promise<void> => {
      const before = stopped ? true : await claimed();
      if (before !== false) return before === null ? again() : undefined;
      let live = true;
      try {
        live = await d.live(d.node);
      } catch {
        live = true; // the store is briefly unreachable: nothing is known about the node, so nothing is decided
      }
      const still = stopped ? true : await claimed();
      if (still !== false) return still === null ? again() : undefined;
      const v = pinnedVerdict(state, live, d.nowMs(), d.waitMs);
      state = v.state;
      if (!v.giveUp) return again();
      try {
        await d.withdraw();
      } catch (err) {
        // Not withdrawn (the store is unreachable): look again; the claim, if any, still wins.
        d.log(`could not withdraw execution ${d.executionId} pinned to ${d.node}: ${(err as Error).message}`);
        return again();
      }
      // Withdrawn: whether a claim came before it must be known before answering (read again until it can be).
      let after = await claimed();
      while (after === null && !stopped) {
        await new Promise((r) => setTimeout(r, everyMs));
        after = await claimed();
      }
      if (stopped || after) return; // claimed before the withdrawal: it runs, its outcome is the answer
      const waited = d.waitMs > 0 ? ` (waited ${d.waitMs} ms for it)` : '';
      reject(
        new RunlogError(
          'NODE_UNAVAILABLE',
          `node ${d.node} is not live (stopped, or its heartbeat is stale)${waited}: ` +
            `execution ${d.executionId}, pinned to it, was withdrawn and will not run; ` +
            `run it on another node or on 'any', or ask to wait for the node (nodeWaitMs)`,
          { node: d.node, executionId: d.executionId },
        ),
      );
    };
    timer = setTimeout(() => void look(), 0);
  });
  gaveUp.catch(() => undefined);
  return {
    gaveUp,
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

/**
 * The node an execution is pinned to (null: none, or 'any'): `placeOn`'s choice, or — when it is not live and the
 * caller waits for it on a cluster — the node the caller named. NODE_WAIT_INVALID for a wait that is not a number
 * of milliseconds.
 */
export async function pinnedTarget(
  node: string | undefined,
  waitMs: number | undefined,
  placeOn: (node: string) => Promise<string>,
  cluster: boolean,
): Promise<string | null> {
  assertNodeWait(waitMs);
  if (node === undefined || node === 'any') return null;
  return placeOn(node).catch((err: unknown) => unlessWaiting(err, node, waitMs, cluster));
}

/** What a cluster node needs to watch the executions pinned to other nodes. */
export interface PinnedWatchDeps {
  self: string;
  /** The cluster's records: each node's heartbeat on the server's clock. */
  leasing: Pick<Leasing, 'clusterRecords'>;
  store: Pick<EventStorePort, 'streamVersion'>;
  queue: Pick<ExecutionQueue, 'withdraw'>;
  nowMs(): number;
  log(message: string): void;
}

/**
 * The guard of one queued execution pinned to `node` (null: no guard — not pinned, or pinned to this node, which
 * is live while it answers): liveness as placement judges it, on the server's clock (nodes.ts nodeLoads).
 */
export function pinnedWatch(d: PinnedWatchDeps) {
  return (
    node: string | null,
    executionId: string,
    waitMs: number,
    claimByMs: number,
  ): ReturnType<typeof guardPinned> | null =>
    node === null || node === d.self
      ? null
      : guardPinned({
          node,
          executionId,
          waitMs,
          nowMs: d.nowMs,
          live: async (n) => nodeLoads(await d.leasing.clusterRecords()).some((x) => x.node === n && x.live),
          claimed: async () => (await d.store.streamVersion(`execution-${executionId}`)) > 0,
          withdraw: () =>
            d.queue.withdraw({ executionId, reason: 'node-unavailable', claimBy: new Date(claimByMs).toISOString() }),
          log: d.log,
        });
}

/**
 * A pinned node found not live when the call is taken: NODE_UNAVAILABLE at once (placement's answer), unless the
 * caller asked to wait for it on a cluster — then the node it named is the one the execution is queued for.
 */
export function unlessWaiting(err: unknown, node: string, waitMs: number | undefined, cluster: boolean): string {
  if (cluster && (waitMs ?? 0) > 0 && err instanceof RunlogError && err.code === 'NODE_UNAVAILABLE') return node;
  throw err;
}

/**
 * Waits for `waiting` (the queued execution's outcome) while the guard watches the pinned node: the guard's
 * NODE_UNAVAILABLE wins when it gives up, and then `waiting` is ended through `abort` (its timers and its
 * subscription released, its HOST_CLOSED rejection swallowed).
 */
export async function raceGuard<T>(
  waiting: Promise<T>,
  guard: { gaveUp: Promise<never>; stop(): void } | null,
  abort: AbortController,
): Promise<T> {
  if (!guard) return waiting;
  try {
    return await Promise.race([waiting, guard.gaveUp]);
  } catch (err) {
    waiting.catch(() => undefined);
    abort.abort();
    throw err;
  } finally {
    guard.stop();
  }
}
