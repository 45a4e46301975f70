// Operations on an instance this node runs: finding the live actor a call is for, stop and kill with their waits,
// the actor whose lines `logs` reads, and a hand-over request carried out here as a call taken here would be.
import { ValidationError } from '../../domain/errors.ts';
import type { ActorKind } from '../../domain/events.ts';
import { boundLines, type HandoverRequest } from '../../domain/handover.ts';
import { collect, type EventStorePort } from '../../store/port.ts';
import { IllegalEventError, type ActorHost, type LiveActor } from '../host/actor-host.ts';
import { actedOn, type HandoverDeps } from '../cluster/handover.ts';
import { inspectActor, resolveActor, type ActorView } from '../../inspect/inspection.ts';
import type { InstanceSupervisor } from './instances.ts';
import { byState, instanceStopped, type SettleWaits } from '../host/settle-waits.ts';

export interface OperationInputs {
  store: EventStorePort;
  host: ActorHost;
  instances: InstanceSupervisor;
  waits: SettleWaits;
  /** The default grace of a stop (RunlogOptions.killGraceMs). */
  killGraceMs: number | undefined;
}

export interface InstanceOperations {
  /** The live actor `id` names (WRONG_KIND, or ILLEGAL_EVENT when it has ended). */
  live(id: string, kind?: ActorKind, request?: string): Promise<LiveActor>;
  /** Whose lines `logs` reads: the instance as the host holds it, or as the log has it once ended (a just-stopped one's buffer). */
  logSource(id: string): Promise<LiveActor>;
  /** The actor as the log has it now (any actor, live or ended). */
  inspectNow(id: string): Promise<ActorView>;
  stopHere(id: string, graceMs: number | null | undefined, meta?: Record<string, unknown>): Promise<ActorView>;
  killHere(id: string, meta?: Record<string, unknown>): Promise<ActorView>;
  /** A hand-over request this node holds the lease for, carried out as a call taken here would be. */
  actHere: HandoverDeps['act'];
}

export function instanceOperations({
  store,
  host,
  instances,
  waits,
  killGraceMs,
}: OperationInputs): InstanceOperations {
  const live = async (id: string, kind?: ActorKind, request = 'this request'): Promise<LiveActor> => {
    const ref = await resolveActor(store, id);
    if (kind && ref.kind !== kind) throw new ValidationError('WRONG_KIND', `${id} is an ${ref.kind}, not an ${kind}`);
    // It exists but has ended (not rehydrated): a conflict with its state, not "not found". Its row says so without
    // folding its history.
    const row = await store.getActor(ref.id);
    if (row?.status === 'terminal') throw new IllegalEventError(ref.id, row.state, request);
    // In memory when it is live here; else read from the log (another node's: its events are refused, FENCED).
    const actor = await host.fetch(ref.kind, ref.id);
    if (!actor) throw new IllegalEventError(ref.id, row?.state ?? (await inspectActor(store, id)).state, request);
    return actor;
  };
  const logSource = async (id: string): Promise<LiveActor> => {
    const ref = await resolveActor(store, id);
    // An ended instance is read from the log: its runner may still hold its last lines.
    return (ref.kind === 'instance' ? await host.fetch('instance', ref.id) : undefined) ?? live(id, 'instance');
  };
  const inspectNow = (id: string): Promise<ActorView> => inspectActor(store, id);
  const stopped = byState(instanceStopped);
  // stop and kill on this node; `meta` marks the event with the hand-over request it carries out (handover.ts).
  const stopHere = async (
    id: string,
    graceMs: number | null | undefined,
    meta?: Record<string, unknown>,
  ): Promise<ActorView> => {
    const actor = await live(id, 'instance', 'instance.stop-requested');
    return waits.waitFor('instance', actor.id, stopped, (graceMs ?? killGraceMs ?? 5000) + 30_000, async () => {
      const r = await host.dispatch('instance', actor.id, {
        type: 'instance.stop-requested',
        data: { graceMs: graceMs ?? null },
        ...(meta ? { meta } : {}),
      });
      // Stopped meanwhile, or already on its way: the wait resolves when it is stopped.
      if (!r.accepted && !(instanceStopped(r.from) || r.from === 'stopping'))
        throw new IllegalEventError(actor.id, r.from, 'instance.stop-requested');
    });
  };
  const killHere = async (id: string, meta?: Record<string, unknown>): Promise<ActorView> => {
    const actor = await live(id, 'instance', 'instance.kill-requested');
    return waits.waitFor('instance', actor.id, stopped, 30_000, async () => {
      const r = await host.dispatch('instance', actor.id, {
        type: 'instance.kill-requested',
        data: {},
        ...(meta ? { meta } : {}),
      });
      if (!r.accepted) throw new IllegalEventError(actor.id, r.from, 'instance.kill-requested');
    });
  };
  const settledLocally = (id: string): Promise<ActorView> =>
    waits.waitFor('instance', id, stopped, 60_000, () => Promise.resolve());
  const actHere = async (r: HandoverRequest) => {
    const stream = `instance-${r.instanceId}`;
    if (r.action === 'logs') {
      const lines = [];
      for await (const l of instances.logs(await logSource(r.instanceId), false)) lines.push(l);
      return boundLines(lines);
    }
    const current = await inspectActor(store, r.instanceId);
    // Taken already (by this node, or by the owner before it died): only its outcome is left to report.
    const view = actedOn(await collect(store.readStream(stream)), r.requestId)
      ? instanceStopped(current.state)
        ? current
        : await settledLocally(r.instanceId)
      : r.action === 'stop'
        ? instanceStopped(current.state)
          ? current
          : await stopHere(r.instanceId, r.graceMs, { handover: r.requestId })
        : await killHere(r.instanceId, { handover: r.requestId });
    return { state: view.state };
  };
  return { live, logSource, inspectNow, stopHere, killHere, actHere };
}
