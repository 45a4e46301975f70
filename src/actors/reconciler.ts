// Reconciliation: after a restart the log says what should be, Docker and /proc say what is. What is
// observed becomes events with their evidence (container id, state, exit code, start time); Docker
// state is never read as truth on its own.
import type { OrphanRecord } from '../adapters/sandbox/sandbox-runner.ts';
import type { ExecutionContext } from '../machines/execution.machine.ts';
import type { InstanceContext } from '../machines/instance.machine.ts';
import { stateName } from '../machines/replay.ts';
import type { ActorHost, LiveActor } from './actor-host.ts';
import type { ExecutionSupervisor } from './executions.ts';
import type { InstanceSupervisor } from './instances.ts';

export interface ReconcileAction {
  id: string;
  kind: 'instance' | 'execution';
  action: 'adopted' | 'crashed' | 'exited' | 'lost' | 'resumed' | 'collect' | 'discovered' | 'removed';
  evidence: Record<string, unknown>;
}

export interface ReconcileReport {
  dryRun: boolean;
  actions: ReconcileAction[];
  /** Parts that could not be asked (e.g. Docker down): their actors were left as they were. */
  unreachable: string[];
}

const evidenceOf = (r: OrphanRecord) => ({ containerId: r.containerId, state: r.state, exitCode: r.exitCode, startedAt: r.startedAt, finishedAt: r.finishedAt, pid: r.pid });

export class Reconciler {
  constructor(
    private readonly host: () => ActorHost,
    private readonly instances: InstanceSupervisor,
    private readonly executions: ExecutionSupervisor,
    private readonly log: (m: string) => void = () => undefined,
  ) {}

  async reconcile(opts: { dryRun?: boolean } = {}): Promise<ReconcileReport> {
    const dryRun = opts.dryRun ?? false;
    const report: ReconcileReport = { dryRun, actions: [], unreachable: [] };
    const live = this.host().live();
    const instances = live.filter((a) => a.kind === 'instance');
    const executions = live.filter((a) => a.kind === 'execution');

    let orphans: OrphanRecord[] | null = null;
    const needsDocker = instances.some((a) => (a.snapshot.context as InstanceContext).spec?.sandbox === 'container');
    if (needsDocker) {
      try {
        orphans = await this.instances.runner('container').listOrphanRecords();
      } catch (err) {
        report.unreachable.push(`docker: ${(err as Error).message}`);
        this.log(`reconcile: Docker unreachable, container instances left as logged: ${(err as Error).message}`);
      }
    }
    for (const actor of instances) await this.instance(actor, orphans, report, dryRun);
    for (const actor of executions) {
      try {
        await this.execution(actor, report, dryRun);
      } catch (err) {
        report.unreachable.push(`docker (execution ${actor.id}): ${(err as Error).message}`);
      }
    }
    return report;
  }

  private async record(report: ReconcileReport, dryRun: boolean, actor: LiveActor, action: ReconcileAction['action'], evidence: Record<string, unknown>, event?: { type: string; data: Record<string, unknown> }) {
    report.actions.push({ id: actor.id, kind: actor.kind, action, evidence });
    if (!dryRun && event) await this.host().dispatch(actor.kind, actor.id, { ...event, meta: { source: 'reconciler' } });
  }

  private async instance(actor: LiveActor, orphans: OrphanRecord[] | null, report: ReconcileReport, dryRun: boolean): Promise<void> {
    const c = actor.snapshot.context as InstanceContext;
    const state = stateName(actor.snapshot);
    if (state.startsWith('crashed')) return; // backoff timers were re-armed at rehydration
    const stopping = state === 'stopping';
    if (c.spec?.sandbox !== 'container') {
      // PRoot children are the supervisor's own: they died with it (its watchdog saw to that).
      const evidence = { sandbox: 'proot', pid: c.pid };
      if (stopping) await this.record(report, dryRun, actor, 'exited', evidence, { type: 'instance.exited', data: { exitCode: null, signal: null, evidence } });
      else await this.record(report, dryRun, actor, 'crashed', evidence, { type: 'instance.crashed', data: { reason: 'supervisor-restart', exitCode: null, message: 'its PRoot process died with the supervisor', evidence } });
      return;
    }
    if (orphans === null) return;
    const rec = orphans.find((o) => o.instanceId === actor.id);
    if (!rec) {
      const evidence = { containerId: c.containerId, observed: 'no container with this stream label' };
      await this.record(report, dryRun, actor, 'lost', evidence, { type: 'instance.lost', data: { evidence } });
      return;
    }
    const evidence = evidenceOf(rec);
    if (rec.state === 'running') {
      if (stopping) {
        // We had decided to stop it: finish the job.
        if (!dryRun) this.instances.adoptable.set(actor.id, rec);
        await this.record(report, dryRun, actor, 'adopted', evidence, { type: 'instance.adopted', data: { containerId: rec.containerId, host: rec.host, port: rec.port, pid: rec.pid, startedAt: rec.startedAt, evidence } });
        return;
      }
      if (!dryRun) this.instances.adoptable.set(actor.id, rec);
      await this.record(report, dryRun, actor, 'adopted', evidence, { type: 'instance.adopted', data: { containerId: rec.containerId, host: rec.host, port: rec.port, pid: rec.pid, startedAt: rec.startedAt, evidence } });
      return;
    }
    if (stopping) await this.record(report, dryRun, actor, 'exited', evidence, { type: 'instance.exited', data: { exitCode: rec.exitCode, signal: null, evidence } });
    else await this.record(report, dryRun, actor, 'crashed', evidence, { type: 'instance.crashed', data: { reason: 'exit', exitCode: rec.exitCode, message: `exited while the supervisor was down (code ${rec.exitCode})`, evidence } });
    if (!dryRun) await this.executions.engine.removeContainer(rec.containerId, { force: true }).catch(() => undefined);
  }

  private async execution(actor: LiveActor, report: ReconcileReport, dryRun: boolean): Promise<void> {
    const c = actor.snapshot.context as ExecutionContext;
    const state = stateName(actor.snapshot);
    if (state === 'running' || state === 'adopted') {
      const evidence: Record<string, unknown> = { containerId: c.containerId };
      const info = c.containerId ? await this.executions.engine.inspectContainer(c.containerId) : null;
      if (info) {
        Object.assign(evidence, { state: info.state.status, exitCode: info.state.exitCode, startedAt: info.state.startedAt, finishedAt: info.state.finishedAt });
      } else {
        evidence.observed = 'container not found';
        await this.record(report, dryRun, actor, 'lost', evidence, { type: 'execution.failed', data: { reason: 'lost', code: 'CONTAINER_GONE', message: 'its container is gone; the result cannot be collected', evidence } });
        return;
      }
      if (state === 'adopted') {
        // Adopted before but not finished: collect again.
        report.actions.push({ id: actor.id, kind: 'execution', action: 'collect', evidence });
        if (!dryRun) this.host().resumeEffects(actor, [{ type: 'collect', params: { containerId: c.containerId, deadline: c.deadline } }]);
        return;
      }
      await this.record(report, dryRun, actor, 'adopted', evidence, { type: 'execution.adopted', data: { containerId: c.containerId, evidence } });
      return;
    }
    // resolving / materializing / starting: the step died with the supervisor; its effect is idempotent, so run it again.
    const effect = state === 'resolving' ? 'resolve' : state === 'materializing' ? 'materialize' : state === 'starting' ? 'createSandbox' : null;
    if (!effect) return;
    report.actions.push({ id: actor.id, kind: 'execution', action: 'resumed', evidence: { state, effect } });
    if (!dryRun) this.host().resumeEffects(actor, [{ type: effect, params: { request: c.request, resolved: c.resolved, materialized: c.materialized } }]);
  }
}
