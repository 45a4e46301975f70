// The sandbox pool's facts (a sandbox was started, claimed, removed) recorded in its fact stream, through a store
// that may be briefly unreachable: sent again until it answers, and looked for in the log before each resend.
import type { RecordedEvent } from '../../../domain/events.ts';
import { RunlogError } from '../../../domain/errors.ts';
import type { ActorHost } from '../../host/actor-host.ts';
import { POOL_STREAM } from './sandbox-pool.ts';

export interface PoolFactsDeps {
  host: () => ActorHost;
  /** Reads a fact stream of the log (whether a cut-off append landed). */
  readFacts?: (stream: string) => Promise<RecordedEvent[]>;
  log?: (msg: string) => void;
}

/**
 * The pool's facts are observed facts (a sandbox was started, claimed, removed): while PostgreSQL restarts they
 * are sent again until it answers, never an unhandled rejection (that would end the supervisor) nor a silent
 * loss (a claimed sandbox's container would be unaccounted for). One cut off after it committed is found in
 * the log (by its sandbox) before it is sent again.
 */
export async function recordPoolFacts(
  deps: PoolFactsDeps,
  events: Parameters<ActorHost['appendFact']>[1],
): Promise<void> {
  const sandboxOf = (data: unknown) => (data as { sandbox?: unknown } | undefined)?.sandbox;
  let failure: unknown = null;
  // Sent again only once a read of the log says it did not land; a read cut off as well is tried again first.
  let send = true;
  for (let attempt = 0, delay = 500; attempt <= 30; attempt++, delay = Math.min(delay * 2, 5000)) {
    if (send) {
      try {
        await deps.host().appendFact(POOL_STREAM, events);
        return;
      } catch (err) {
        failure = err;
        if (!(err instanceof RunlogError && err.code === 'STORE_UNAVAILABLE') || attempt >= 30) break;
      }
    }
    await new Promise((r) => setTimeout(r, delay));
    const landed = deps.readFacts ? await deps.readFacts(POOL_STREAM).catch(() => null) : [];
    if (landed && events.every((e) => landed.some((l) => l.type === e.type && sandboxOf(l.data) === sandboxOf(e.data))))
      return;
    send = landed !== null;
  }
  deps.log?.(
    `pool fact ${events.map((e) => e.type).join(', ')} not recorded: ${failure instanceof Error ? failure.message : String(failure)}`,
  );
}
