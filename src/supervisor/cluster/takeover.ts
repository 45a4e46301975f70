// What a cluster node does when leases change hands. Taking over (the previous owner let its leases expire: it
// is dead, paused or cut off) the new owner records what it knows. An instance whose node is gone is lost (its
// sandbox ran on that node's host, which this node cannot see): when its restart policy restarts it, that is
// recorded as a crash with reason `node-lost` (the machine's restart policy then restarts it here, on a live
// node), else as `instance.lost`. An execution in flight there ends `failed` with reason `lost` — survivors take
// an execution's lease only after the collect grace (postgres/leases.ts), so a node that comes back in time collects
// its own. An instance waiting for a restart has its timer armed here: by the machine, on the `instance.recovered`
// the takeover records; when that cannot be recorded, straight from the log's state (timers.ts rearm) — else it
// would never fire while the lease stays here. The previous owner's containers of an instance on this node's
// Docker daemon (nodes sharing one host) are removed first: a node dead or frozen cannot stop its copy itself.
// Losing a lease (this node was paused past its expiry and another took over) it lets go of the actor and acts on
// it no more — its appends would be refused anyway (fenced). Picking up (a lease this node holds but whose actor
// it does not run: a new actor's claim committed but its reply was lost) it rehydrates the actor from the log and
// recovers it exactly as at start-up (recoverRehydrated, then a reconcile): its node is this one, alive, so
// nothing is recorded lost.
import { FencedError } from '../../domain/errors.ts';
import { parseStreamName, type ActorKind, type KindNewEvent } from '../../domain/events.ts';
import { decide } from '../../machines/reconcile-decision.ts';
import { isTerminal } from '../../machines/runtime.ts';
import type { LeaseListener, TakenLease } from '../../store/capabilities.ts';
import type { ActorHost, LiveActor } from '../host/actor-host.ts';

export interface ClusterHooks {
  /** Gives the lease of an ended actor back. */
  letGo(stream: string): void;
  /** The node's clock (what a taken-over execution's deadline is compared with). */
  nowMs(): number;
  /** An instance whose lease this node lost: its sandbox here is killed (the new owner decides about it). */
  relinquish(instanceId: string): Promise<void>;
  /** An instance taken over from `node`: that node's containers of it on this host's Docker daemon are removed. */
  removeNodesContainers?(instanceId: string, node: string): Promise<{ removed: number; running: number }>;
  /** Leases just taken: requests handed over for these actors wait (handover.ts) … */
  taking?(streams: string[]): void;
  /** … until what this node knows about them is recorded. */
  tookOver?(streams: string[]): void;
  /** Arms the persisted timer of an actor taken over whose takeover could not be recorded (timers.ts rearm). */
  rearm?(actor: LiveActor): void;
  /** Actors picked up (rehydrated from the log here): recovered as start-up recovers what it rehydrates. */
  recover?(actors: LiveActor[]): Promise<void>;
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
      log(
        `lost the lease of ${streams.length} actor(s) to another supervisor (this one was paused or cut off past the lease): ` +
          `no longer acting on ${streams.slice(0, 5).join(', ')}${streams.length > 5 ? ', …' : ''}`,
      );
    },
    taken(leases) {
      const streams = leases.map((l) => l.stream);
      hooks.taking?.(streams);
      void takeOver(host(), node, leases, hooks).finally(() => hooks.tookOver?.(streams));
    },
    running: (stream) => host().holds(stream),
    pickUp(streams) {
      hooks.taking?.(streams);
      void pickUp(host(), streams, hooks).finally(() => hooks.tookOver?.(streams));
    },
  };
}

async function pickUp(host: ActorHost, streams: string[], hooks: ClusterHooks): Promise<void> {
  const live: LiveActor[] = [];
  for (const s of streams) {
    const ref = parseStreamName(s);
    if (!ref) continue;
    // Read from the log as start-up reads it (snapshot + tail); now that the lease is held, the host keeps it.
    const actor = await host.fetch(ref.kind, ref.id);
    if (!actor || isTerminal(actor.snapshot)) hooks.letGo(s);
    else live.push(actor);
  }
  if (live.length === 0) return;
  hooks.log(
    `picked up ${live.length} actor(s) whose lease this node held but did not run (a request's reply was lost): ${live
      .slice(0, 5)
      .map((a) => a.stream)
      .join(', ')}${live.length > 5 ? ', …' : ''}`,
  );
  try {
    await hooks.recover?.(live);
  } catch (err) {
    hooks.log(`recovering picked-up actors: ${(err as Error).message}`);
  }
}

async function takeOver(host: ActorHost, node: string, leases: TakenLease[], hooks: ClusterHooks): Promise<void> {
  const { letGo, log } = hooks;
  let recorded = 0;
  let restarting = 0;
  await Promise.all(
    leases.map(async (l) => {
      const ref = parseStreamName(l.stream);
      if (!ref) return;
      const actor = await host.fetch(ref.kind, ref.id);
      if (!actor || isTerminal(actor.snapshot)) {
        letGo(l.stream); // ended already: its lease is given back at the next beat
        return;
      }
      // The previous owner's copy, if it ran on this Docker daemon, goes before this node starts its own.
      if (ref.kind === 'instance' && hooks.removeNodesContainers) {
        const r = await hooks.removeNodesContainers(ref.id, l.previous).catch((err: unknown) => {
          log(`removing ${l.previous}'s containers of ${l.stream}: ${(err as Error).message}`);
          return null;
        });
        if (r && r.removed > 0)
          log(
            `removed ${r.removed} container(s) of ${l.stream} that ${l.previous} left on this Docker daemon (${r.running} running)`,
          );
      }
      // What to record is the pure decision of recovery (machines/reconcile-decision.ts, its table in
      // test/unit/machines/reconcile-decision.test.ts): lost or crashed node-lost, failed lost; waiting for a restart
      // already (a crash recorded before its node went), recovered: the machine arms the timer here.
      const observation = {
        at: new Date(hooks.nowMs()).toISOString(),
        node: 'gone' as const,
        evidence: {
          node: l.previous,
          takenOverBy: node,
          reason: `supervisor ${l.previous} stopped renewing its lease`,
        },
      };
      try {
        const d =
          ref.kind === 'instance' ? decide('instance', actor, observation) : decide('execution', actor, observation);
        if (d.outcome === 'crashed' || d.outcome === 'resumed') restarting += 1;
        for (const event of d.events) {
          // An observed fact: recorded even if PostgreSQL is briefly unreachable (its append waits for it).
          const r = await host.dispatchObserved(ref.kind, ref.id, {
            ...event,
            meta: { source: 'cluster' },
          } as KindNewEvent<ActorKind>);
          if (r.accepted && d.outcome !== 'resumed') recorded += 1;
        }
      } catch (err) {
        log(`taking over ${l.stream} from ${l.previous}: ${(err as Error).message}`);
        // Not recorded (the store failed it): a restart the log has scheduled still comes due here, unless this
        // node lost the lease again meanwhile.
        if (!(err instanceof FencedError)) hooks.rearm?.(actor);
      }
    }),
  );
  log(
    `took over ${leases.length} lease(s) from ${[...new Set(leases.map((l) => l.previous))].join(', ')}: ` +
      `${recorded} actor(s) recorded lost, ${restarting} instance(s) restarting here per their restart policy`,
  );
}
