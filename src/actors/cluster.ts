// What a cluster node does when leases change hands. Taking over (the previous owner let its leases expire: it
// is dead, paused or cut off) the new owner records what it knows. An instance whose node is gone is lost (its
// sandbox ran on that node's host, which this node cannot see): when its restart policy restarts it, that is
// recorded as a crash with reason `node-lost` (the machine's restart policy then restarts it here, on a live
// node), else as `instance.lost`. An execution in flight there ends `failed` with reason `lost` — survivors take
// an execution's lease only after the collect grace (pg-leases.ts), so a node that comes back in time collects
// its own. An instance waiting for a restart has its timer armed here. Losing a lease (this node was paused
// past its expiry and another took over) it lets go of the actor and acts on it no more — its appends would be
// refused anyway (fenced).
import { parseStreamName } from '../domain/events.ts';
import { isTerminal, machines, stateName, step } from '../machines/runtime.ts';
import type { LeaseListener } from '../store/postgres/pg-host-store.ts';
import type { TakenLease } from '../store/postgres/pg-leases.ts';
import type { ActorHost, LiveActor } from './actor-host.ts';

export interface ClusterHooks {
  /** Gives the lease of an ended actor back. */
  letGo(stream: string): void;
  /** An actor taken over that waits on a timer (a restart's backoff): arm it here. */
  resume(actor: LiveActor): void;
  /** An instance whose lease this node lost: its sandbox here is killed (the new owner decides about it). */
  relinquish(instanceId: string): Promise<void>;
  log(message: string): void;
}

export function clusterListener(host: () => ActorHost, node: string, hooks: ClusterHooks): LeaseListener {
  const { log } = hooks;
  return {
    lost(streams) {
      for (const s of streams) {
        host().forget(s);
        const ref = parseStreamName(s);
        if (ref?.kind === 'instance') void hooks.relinquish(ref.id);
      }
      log(`lost the lease of ${streams.length} actor(s) to another supervisor (this one was paused or cut off past the lease): no longer acting on ${streams.slice(0, 5).join(', ')}${streams.length > 5 ? ', …' : ''}`);
    },
    taken(leases) {
      void takeOver(host(), node, leases, hooks);
    },
  };
}

/** The event that records an instance lost with its node: a crash (reason node-lost) when its restart policy restarts it. */
function instanceLost(actor: LiveActor, evidence: Record<string, unknown>, previous: string) {
  const crash = { type: 'instance.crashed' as const, data: { reason: 'node-lost' as const, message: `its node ${previous} is gone (its supervisor stopped renewing its lease)`, evidence }, meta: { source: 'cluster' } };
  const next = step(machines.instance, actor.snapshot, { ...crash, at: new Date().toISOString() });
  return next.accepted && stateName(next.snapshot) === 'crashed.backoff' ? crash : { type: 'instance.lost' as const, data: { evidence }, meta: { source: 'cluster' } };
}

async function takeOver(host: ActorHost, node: string, leases: TakenLease[], hooks: ClusterHooks): Promise<void> {
  const { letGo, log } = hooks;
  let recorded = 0;
  let restarting = 0;
  await Promise.all(
    leases.map(async (l) => {
      const ref = parseStreamName(l.stream);
      if (!ref) return;
      const actor = host.get(ref.kind, ref.id);
      if (!actor || isTerminal(actor.snapshot)) {
        letGo(l.stream); // ended already: its lease is given back at the next beat
        return;
      }
      // Waiting for a restart already (a crash recorded before its node went): the timer is armed here now.
      if (stateName(actor.snapshot) === 'crashed.backoff') {
        hooks.resume(actor);
        restarting += 1;
        return;
      }
      const evidence = { node: l.previous, takenOverBy: node, reason: `supervisor ${l.previous} stopped renewing its lease` };
      try {
        const lostEvent = ref.kind === 'instance' ? instanceLost(actor, evidence, l.previous) : null;
        if (lostEvent?.type === 'instance.crashed') restarting += 1;
        const r =
          lostEvent
            ? await host.dispatch('instance', ref.id, lostEvent)
            : await host.dispatch('execution', ref.id, {
                type: 'execution.failed',
                data: { reason: 'lost', code: 'NODE_LOST', message: `its supervisor (${l.previous}) is gone; the result cannot be collected`, evidence },
                meta: { source: 'cluster' },
              });
        if (r.accepted) recorded += 1;
      } catch (err) {
        log(`taking over ${l.stream} from ${l.previous}: ${(err as Error).message}`);
      }
    }),
  );
  log(`took over ${leases.length} lease(s) from ${[...new Set(leases.map((l) => l.previous))].join(', ')}: ${recorded} actor(s) recorded lost, ${restarting} instance(s) restarting here per their restart policy`);
}
