// Acting on what decide() (machines/reconcile-decision.ts) said about a live actor: the container work a decision
// asks for first, its report entry, then its events. `recovered` events, whose effects run again, are held back
// and dispatched once every finding of the run is recorded, so a death mid-reconcile interrupts none of them.
import type { OrphanRecord } from '../../adapters/sandbox/app-sandbox-runner.ts';
import type { ActorKind, KindNewEvent } from '../../domain/events.ts';
import type { Decision } from '../../machines/reconcile-decision.ts';
import type { LiveActor } from '../host/actor-host.ts';
import { errorText, type ReconcileAction, type ReconcileDeps, type ReconcileRun } from './reconcile-run.ts';

/** What an instance's decision asks for before its events: its container removed, held to re-attach, or stopped. */
export async function prepareInstance(
  deps: Pick<ReconcileDeps, 'instances' | 'executions'>,
  actor: LiveActor,
  d: Decision<'instance'>,
  rec: OrphanRecord,
): Promise<void> {
  for (const p of d.prepare) {
    if (p === 'remove-container') await deps.executions.engine.removeContainer(rec.containerId, { force: true });
    else if (p === 'hold-for-reattach') deps.instances.adoptable.set(actor.id, rec);
    else deps.instances.adoptForStop(actor, rec);
  }
}

/**
 * Records a decision: its report entry, then its events. A `recovered` event (whose effects run again) waits
 * until every finding of this run is recorded, so a death mid-reconcile interrupts none of them.
 */
export async function act<K extends ActorKind>(
  deps: Pick<ReconcileDeps, 'host' | 'fault'>,
  run: ReconcileRun,
  actor: LiveActor,
  d: Decision<K>,
): Promise<void> {
  if (d.outcome === null) return;
  const evidence = d.outcome === 'resumed' ? { ...d.evidence, effect: d.effects.join(',') } : d.evidence;
  const entry: ReconcileAction = { id: actor.id, kind: actor.kind, action: d.outcome, evidence };
  run.report.actions.push(entry);
  if (run.dryRun) return;
  for (const event of d.events) {
    if (event.type.endsWith('.recovered')) {
      run.recoveries.push({ actor, event, entry });
      continue;
    }
    const r = await deps.host().dispatch(actor.kind, actor.id, {
      ...event,
      meta: { source: 'reconciler' },
    } as KindNewEvent<ActorKind>);
    if (!r.accepted) entry.evidence = { ...evidence, rejected: `the actor was ${r.from}` };
    deps.fault({ eventType: event.type });
  }
}

/** The run's held-back `recovered` events, dispatched together once every finding is recorded. */
export async function dispatchRecoveries(deps: Pick<ReconcileDeps, 'host'>, run: ReconcileRun): Promise<void> {
  await Promise.all(
    run.recoveries.map(async ({ actor, event, entry }) => {
      try {
        const r = await deps.host().dispatch(actor.kind, actor.id, { ...event, meta: { source: 'reconciler' } });
        if (!r.accepted) entry.evidence = { ...entry.evidence, rejected: `the actor was ${r.from}` };
      } catch (err) {
        run.report.unreachable.push(`${actor.kind} ${actor.id}: ${errorText(err)}`);
      }
    }),
  );
}
