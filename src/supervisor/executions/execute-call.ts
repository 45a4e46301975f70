// The facade's execute call: one at-run execution run to its outcome, queued in the log on a cluster (a node with
// room claims it) or run here within the execution limiter. Everything is checked before anything is appended, so
// a bad request fails alone, with a typed error.
import { newExecutionId } from '../../adapters/ids.ts';
import { checkExecuteRequest } from '../../domain/at-run/execute-request.ts';
import { inspectActor } from '../../inspect/inspection.ts';
import type { ExecutionContext } from '../../machines/execution.machine.ts';
import { pinnedTarget, raceGuard } from '../cluster/pinned-wait.ts';
import type { Composed } from '../composed.ts';
import { byState, executionEnded } from '../host/settle-waits.ts';
import type { ExecuteOptions, ExecutionOutcome } from '../runlog-api.ts';
import { awaitQueued } from './execution-queue.ts';

/** How long a queued execution waits to be claimed before its caller is told PLACEMENT_TIMEOUT. */
const QUEUE_CLAIM_MS = 300_000;

/** Runs one at-run execution to its outcome: queued in the log on a cluster, else here within the limiter. */
export async function executeCall(c: Composed, o: ExecuteOptions): Promise<ExecutionOutcome> {
  const { store, clock, services } = c;
  const { host, executions } = services;
  // Everything is checked before anything is appended: a bad request fails alone, with a typed error.
  const fields = checkExecuteRequest(o, executions.policy.input);
  const executionId = newExecutionId();
  const timeoutMs = fields.timeoutMs ?? executions.policy.defaults.timeoutMs;
  const request = {
    executionId,
    uri: fields.uri,
    handler: fields.handler,
    input: fields.input,
    callerDid: fields.callerDid,
    timeoutMs,
  };
  // A named node must be live (or, on SQLite, be this one), unless the caller waits for it (pinned-wait.ts).
  const pinned = await pinnedTarget(o.node, o.nodeWaitMs, c.placeOn, c.leasing !== null);
  const off = typeof o.onProgress === 'function' ? executions.onProgress(executionId, o.onProgress) : () => undefined;
  try {
    const queue = c.cluster?.queue;
    if (queue) {
      // In a cluster it is queued in the log and started by a node with room (progress is reported when that is this node).
      const claimBy = clock.nowMs() + QUEUE_CLAIM_MS;
      const ended = async () => ['succeeded', 'failed'].includes((await inspectActor(store, executionId)).state);
      const abort = new AbortController();
      const waiting = awaitQueued(
        store,
        executionId,
        ended,
        claimBy,
        QUEUE_CLAIM_MS + timeoutMs + 600_000,
        () => clock.nowMs(),
        AbortSignal.any([c.waits.signal, abort.signal]),
      );
      try {
        await queue.enqueue({
          executionId,
          request,
          from: c.selfNode,
          node: pinned,
          headStart: o.node === undefined,
          claimBy: new Date(claimBy).toISOString(),
        });
      } catch (err) {
        waiting.catch(() => undefined);
        throw err;
      }
      await raceGuard(waiting, c.guardPinned?.(pinned, executionId, o.nodeWaitMs ?? 0, claimBy) ?? null, abort);
    } else {
      // At most policy.executions.maxRunning at once here, the rest in line with their deadline running
      // (execution-limiter.ts). Resolution and pulls count against the deadline only up to a generous bound.
      await c.limiter.run(clock.nowMs() + timeoutMs, (left) =>
        c.waits.waitFor('execution', executionId, byState(executionEnded), left + 600_000, () =>
          host.create('execution', executionId, {
            type: 'execution.requested',
            data: {
              request: { ...request, timeoutMs: left },
              deadline: new Date(clock.nowMs() + left + 120_000).toISOString(),
            },
          }),
        ),
      );
    }
    // Answered on the outcome: the used container's removal (the cleanup effect) goes on after this returns,
    // awaited by idle() and close(); a supervisor killed before it is done removes it on restart (reconciler).
    const view = await c.ops.inspectNow(executionId);
    const ctx = view.context as ExecutionContext;
    return {
      executionId,
      status: view.state === 'succeeded' ? 'succeeded' : 'failed',
      ...(ctx.result ? { output: ctx.result.output } : {}),
      ...(ctx.failure ? { failure: ctx.failure } : {}),
      view,
    };
  } finally {
    off();
  }
}
