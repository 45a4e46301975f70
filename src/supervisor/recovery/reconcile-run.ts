// One reconciliation's shared parts: the report it fills, the recoveries it holds back until every finding is
// recorded, the facts it records on its own stream, and the services its steps use. The steps (inventory and
// observation, strays, acting on decisions) are separate modules; this is what they have in common.
import type { ActorKind, KindNewEvent } from '../../domain/events.ts';
import type { ExecutionSupervisor } from '../executions/executions.ts';
import type { ActorHost, LiveActor } from '../host/actor-host.ts';
import type { InstanceSupervisor } from '../instances/instances.ts';

/** The stream where the reconciler records what it found outside any actor's log, and what it did about it. */
export const RECONCILER_STREAM = 'reconciler';

/** What to do with a running, labelled instance container whose stream the log does not know. */
export type OrphanPolicy = 'adopt' | 'remove';

export interface ReconcileAction {
  /** The actor's id; for strays the instance/execution id its label names, else the container id or volume name. */
  id: string;
  kind: 'instance' | 'execution' | 'materializer' | 'container' | 'volume';
  action:
    | 'adopted'
    | 'crashed'
    | 'exited'
    | 'lost'
    | 'failed'
    | 'resumed'
    | 'collect'
    | 'discovered'
    | 'removed'
    | 'remove-failed';
  evidence: Record<string, unknown>;
}

export interface ReconcileReport {
  dryRun: boolean;
  actions: ReconcileAction[];
  /** Parts that could not be asked (e.g. Docker down): their actors were left as they were. */
  unreachable: string[];
}

/** One reconciliation in progress. */
export interface ReconcileRun {
  report: ReconcileReport;
  dryRun: boolean;
  policy: OrphanPolicy;
  /** `recovered` events (their effects run again), recorded once every finding is (see act()). */
  recoveries: { actor: LiveActor; event: KindNewEvent<ActorKind>; entry: ReconcileAction }[];
}

/** What the reconciler's steps work with: the host, the supervisors whose sandboxes they observe, the log. */
export interface ReconcileDeps {
  host: () => ActorHost;
  instances: InstanceSupervisor;
  executions: ExecutionSupervisor;
  log: (m: string) => void;
  /** A cluster node: whether it owns the actor (its lease). */
  owns: (stream: string) => boolean;
  /** Reports a mid-reconcile fault-injection point. */
  fault: (detail: { eventType?: string; effect?: string }) => void;
}

export const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** Records a finding on the reconciler's stream (nothing in a dry run). */
export async function recordFact(
  deps: Pick<ReconcileDeps, 'host'>,
  run: ReconcileRun,
  type: string,
  data: Record<string, unknown>,
): Promise<void> {
  if (run.dryRun) return;
  await deps.host().appendFact(RECONCILER_STREAM, [{ type, data, meta: { source: 'reconciler' } }]);
}
