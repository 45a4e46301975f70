// What a supervisor records as it stops gracefully, before it stops its sandboxes: each PRoot instance (whose
// sandbox is the supervisor's child and stops with it) is suspended (`instance.suspended`, decided by the pure
// onGracefulStop of machines/reconcile-decision.ts), so the next start spawns it again without counting a crash.
// Bounded: a store that does not answer must not hold the shutdown; an instance whose suspension was not
// recorded is found at the next start as the log had it, and recovery counts a crash, which is what a
// supervisor that died would have left.
import { onGracefulStop } from '../../machines/reconcile-decision.ts';
import type { ActorHost } from './actor-host.ts';

/** How long the suspensions may take before the shutdown goes on without the rest. */
const SUSPEND_BOUND_MS = 5000;

/**
 * Records the suspensions; resolves with how many were recorded. `runs` says whether this process runs the
 * instance's sandbox (a runner tracks it); an effect in flight (a spawn starting it) counts as running it too.
 */
export async function suspendOnStop(
  host: ActorHost,
  runs: (instanceId: string) => boolean,
  log: (m: string) => void,
  boundMs = SUSPEND_BOUND_MS,
): Promise<number> {
  let recorded = 0;
  const all = Promise.all(
    host.live().map(async (actor) => {
      if (actor.kind !== 'instance') return;
      for (const event of onGracefulStop(actor, runs(actor.id) || host.busy('instance', actor.id))) {
        try {
          const r = await host.dispatch('instance', actor.id, { ...event, meta: { source: 'shutdown' } });
          if (r.accepted) recorded++;
        } catch (err) {
          log(
            `could not record the suspension of instance ${actor.id} (its next start counts a crash): ` +
              `${err instanceof Error ? err.message : String(err)}`,
          );
        }
      }
    }),
  );
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), boundMs)));
  const outcome = await Promise.race([all.then(() => 'done' as const), bound]);
  clearTimeout(timer);
  if (outcome === 'late')
    log(`suspending PRoot instances took longer than ${boundMs} ms: the shutdown goes on (${recorded} recorded)`);
  else if (recorded > 0)
    log(
      `suspended ${recorded} PRoot instance${recorded === 1 ? '' : 's'}: the next start spawns ${recorded === 1 ? 'it' : 'them'} again`,
    );
  return recorded;
}
