// The facade's instance calls (spawnApp, stop, kill, logs): carried out here, or, on a cluster, handed to the node
// that owns the instance (placement.ts, handover.ts). Kept together because each asks the same question first:
// where does this instance live, and who may act on it.
import { resolve } from 'node:path';
import { newInstanceId } from '../../adapters/ids.ts';
import { RunlogError } from '../../domain/errors.ts';
import { routeRequest } from '../../domain/handover.ts';
import type { ActorView } from '../../inspect/inspection.ts';
import type { InstanceContext } from '../../machines/instance.machine.ts';
import type { Handover } from '../cluster/handover.ts';
import { leaseOf, nodeLoads } from '../cluster/nodes.ts';
import type { Composed } from '../composed.ts';
import { IllegalEventError } from '../host/actor-host.ts';
import { instanceStopped, spawnSettled } from '../host/settle-waits.ts';
import { DEFAULT_LEASE_TTL_MS } from '../open-log.ts';
import type { Runlog } from '../runlog-api.ts';

/** spawnApp, stop, kill and logs: here, or on the node that owns the instance (placement.ts, handover.ts). */
export function instanceCalls(
  c: Composed,
  requireSupervisor: (what: string) => void,
): Pick<Runlog, 'spawnApp' | 'stop' | 'kill' | 'logs'> {
  const { options, services, ops, leasing, cluster, selfNode } = c;
  const { host, instances } = services;
  /** Where an operation on a live instance runs: here (null), or on the node holding its lease (handover.ts). */
  const ownerOf = async (view: ActorView): Promise<{ owner: string; handover: Handover } | null> => {
    if (!leasing || !cluster || view.kind !== 'instance' || view.status === 'terminal' || leasing.owns(view.stream))
      return null;
    const records = await leasing.clusterRecords();
    const [lease, loads] = [leaseOf(records, view.stream), nodeLoads(records)];
    const route = routeRequest(
      view.id,
      lease,
      new Set([selfNode, ...loads.filter((n) => n.live).map((n) => n.node)]),
      selfNode,
    );
    return route.here ? null : { owner: route.owner, handover: cluster.handover };
  };
  const handoverMs = (graceMs: number) => graceMs + 30_000 + (options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS);
  return {
    async spawnApp(o) {
      requireSupervisor('spawnApp');
      const timeoutMs = (options.healthTimeoutMs ?? 30_000) + 30_000;
      const target = o.node === undefined ? selfNode : await c.placeOn(o.node);
      let view: ActorView;
      if (target !== selfNode) {
        // Another node of the cluster spawns it (handed over through the log): it prepares the app on its host.
        if (!cluster)
          throw new RunlogError('INTERNAL', `node ${target} was chosen, but this supervisor is not a cluster node`);
        view = await cluster.placement.spawnOn(
          target,
          {
            instanceId: o.instanceId ?? newInstanceId(),
            appDir: resolve(o.appDir),
            ...(o.sandbox ? { sandbox: o.sandbox } : {}),
          },
          timeoutMs + 30_000,
        );
      } else {
        const spec = await instances.prepare(o.appDir, o.sandbox, o.instanceId);
        view = await c.waits.waitFor('instance', spec.instanceId, spawnSettled, timeoutMs, () =>
          host
            .create('instance', spec.instanceId, { type: 'instance.requested', data: { spec } })
            .then(c.spawned(spec.instanceId)),
        );
      }
      if (view.state !== 'running') view = (await c.waits.reread('instance', view.id)) ?? view; // a failure only as the log has it now
      if (view.state !== 'running') {
        const crash = (view.context as InstanceContext).lastCrash;
        throw new RunlogError('SPAWN_FAILED', crash?.message ?? `instance ${view.id} ended ${view.state}`, {
          instanceId: view.id,
          state: view.state,
          reason: crash?.reason ?? null,
        });
      }
      return view;
    },
    async stop(id, o) {
      requireSupervisor('stop');
      // Stopping what has already stopped succeeds (as `docker stop` does): scripts need not check first.
      const current = await ops.inspectNow(id);
      if (current.kind === 'instance' && instanceStopped(current.state)) return current;
      const remote = await ownerOf(current);
      if (remote) {
        await remote.handover.ask(
          remote.owner,
          'stop',
          current.id,
          o?.graceMs ?? null,
          handoverMs(o?.graceMs ?? options.killGraceMs ?? 5000),
        );
        return ops.inspectNow(current.id); // this copy has read everything up to the owner's answer
      }
      return ops.stopHere(id, o?.graceMs);
    },
    async kill(id) {
      requireSupervisor('kill');
      const current = await ops.inspectNow(id);
      // Ended on a cluster: its lease was given back, so its refusal could not even be recorded (FENCED); say why.
      if (current.kind === 'instance' && current.status === 'terminal' && leasing && !leasing.owns(current.stream))
        throw new IllegalEventError(current.id, current.state, 'instance.kill-requested');
      const remote = await ownerOf(current);
      if (remote) {
        await remote.handover.ask(remote.owner, 'kill', current.id, null, handoverMs(0));
        return ops.inspectNow(current.id);
      }
      return ops.killHere(id);
    },
    logs(id, o) {
      if (!cluster)
        return (async function* () {
          yield* instances.logs(await ops.logSource(id), o?.follow ?? false);
        })();
      // On a cluster the instance may run on another node's host: its owner reads them there (handover.ts).
      return (async function* () {
        const current = await ops.inspectNow(id);
        const remote = await ownerOf(current);
        if (!remote) {
          yield* instances.logs(await ops.logSource(id), o?.follow ?? false);
          return;
        }
        if (o?.follow) {
          // Streamed by the owner over LISTEN/NOTIFY (remote-follow.ts), never through the log.
          yield* cluster.follows.remote(remote.owner, current.id, o.signal);
          return;
        }
        const a = await remote.handover.ask(remote.owner, 'logs', current.id, null, 30_000);
        yield* a.lines ?? [];
      })();
    },
  };
}
