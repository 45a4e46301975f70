// What a cluster node does when leases change hands. Taking over (the previous owner let its leases expire: it
// is dead, paused or cut off) the new owner records what it knows: an instance whose node is gone is `lost` (its
// container ran on that node's host, which this node cannot see), an execution in flight there ends `failed`
// with reason `lost`. Losing a lease (this node was paused past its expiry and another took over) it lets go of
// the actor and acts on it no more — its appends would be refused anyway (fenced).
import { parseStreamName } from '../domain/events.ts';
import { isTerminal } from '../machines/runtime.ts';
import type { LeaseListener } from '../store/postgres/pg-host-store.ts';
import type { TakenLease } from '../store/postgres/pg-leases.ts';
import type { ActorHost } from './actor-host.ts';

export function clusterListener(host: () => ActorHost, node: string, letGo: (stream: string) => void, log: (m: string) => void): LeaseListener {
  return {
    lost(streams) {
      for (const s of streams) host().forget(s);
      log(`lost the lease of ${streams.length} actor(s) to another supervisor (this one was paused or cut off past the lease): no longer acting on ${streams.slice(0, 5).join(', ')}${streams.length > 5 ? ', …' : ''}`);
    },
    taken(leases) {
      void takeOver(host(), node, leases, letGo, log);
    },
  };
}

async function takeOver(host: ActorHost, node: string, leases: TakenLease[], letGo: (stream: string) => void, log: (m: string) => void): Promise<void> {
  let recorded = 0;
  await Promise.all(
    leases.map(async (l) => {
      const ref = parseStreamName(l.stream);
      if (!ref) return;
      const actor = host.get(ref.kind, ref.id);
      if (!actor || isTerminal(actor.snapshot)) {
        letGo(l.stream); // ended already: its lease is given back at the next beat
        return;
      }
      const evidence = { node: l.previous, takenOverBy: node, reason: `supervisor ${l.previous} stopped renewing its lease` };
      try {
        const r =
          ref.kind === 'instance'
            ? await host.dispatch('instance', ref.id, { type: 'instance.lost', data: { evidence }, meta: { source: 'cluster' } })
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
  log(`took over ${leases.length} lease(s) from ${[...new Set(leases.map((l) => l.previous))].join(', ')}: ${recorded} actor(s) recorded lost`);
}
