// When a caller's wait for an actor is over, judged from what the log says of the actor (pure, so the rules are
// tested on their own: test/settle-rules.unit.test.ts). In a cluster another node may settle the actor a caller
// waits for (it took the lease over mid-spawn): the answer must be what the log says, never a failure the log
// does not record. A spawn whose node was lost is not over while the survivor restarts it (crashed.backoff with
// reason `node-lost`): the spawn did not fail, its node went, and the instance runs again elsewhere. Nor is one
// whose node fenced itself (reason `self-fenced`) while its node restarts it, nor one recovered as a supervisor
// recovers what it finds at start-up (reason `supervisor-restart`): a node whose claim's reply was lost in a
// store outage picks its new actor up from the log that way, and the spawn it interrupted is restarted.

/** What the rules read of an actor: its state and its context (an instance's last crash). */
export interface SettleView {
  state: string;
  context: Record<string, unknown>;
}

/** Whether the caller's wait ends at this view of the actor. */
export type SettleRule = (view: SettleView) => boolean;

const SPAWN_IN_FLIGHT = new Set(['new', 'spawning', 'healthy', 'adopted']);

const crashReason = (view: SettleView): string | null => {
  const crash = view.context.lastCrash as { reason?: unknown } | null | undefined;
  return typeof crash?.reason === 'string' ? crash.reason : null;
};

/** Crashes that are the runner's doing, not the app's: the restart that follows is the spawn's answer. */
const CLUSTER_CRASHES: ReadonlySet<string> = new Set(['node-lost', 'self-fenced', 'supervisor-restart']);

/**
 * A spawn's answer is due: it runs, or it ended or crashed for a reason of its own. Not while it is being
 * spawned, nor while it is restarted after its node was lost, fenced itself or recovered it (the restart's outcome
 * is the answer).
 */
export const spawnSettled: SettleRule = (view) => {
  if (SPAWN_IN_FLIGHT.has(view.state)) return false;
  return !(view.state === 'crashed.backoff' && CLUSTER_CRASHES.has(crashReason(view) ?? ''));
};

/** An instance has stopped: stopped, lost, or down for good. */
export const instanceStopped = (state: string): boolean =>
  state === 'stopped' || state === 'lost' || state === 'crashed.down';

/** An execution has its outcome. */
export const executionEnded = (state: string): boolean => state === 'succeeded' || state === 'failed';

/** A rule on the state alone, as a SettleRule. */
export const byState =
  (done: (state: string) => boolean): SettleRule =>
  (view) =>
    done(view.state);
