// Strays: what Docker holds under this home that no live actor owns. A container is recorded on the reconciler's
// stream (`reconciler.discovered`, with its evidence and the decision) and then removed, or, a running instance
// container whose stream the log does not know under orphanPolicy 'adopt', adopted as a new instance actor.
// Materializer carriers, dead locks, unsealed volumes and seals without content are removed the same way.
import { EGRESS_PROXY_KIND } from '../../adapters/egress/egress-proxy-host.ts';
import { join } from 'node:path';
import type { ContainerSummary } from '../../adapters/docker/docker-port.ts';
import { LABEL_SEAL_FOR, LABEL_VOLUME_KIND, SEAL_SUFFIX } from '../../adapters/docker/materialized-volume-labels.ts';
import { DEFAULT_LOCK_LIMITS, lockHolderVerdict, LOCK_KIND } from '../../adapters/docker/materialize-lock.ts';
import { loadManifest } from '../../adapters/apps/load-manifest.ts';
import type { OrphanRecord } from '../../adapters/sandbox/app-sandbox-runner.ts';
import { parseStreamName } from '../../domain/events.ts';
import type { ExecutionContext } from '../../machines/execution.machine.ts';
import { DEFAULT_RESTART, type InstanceSpec } from '../../machines/instance.machine.ts';
import { initialSnapshot, isTerminal, machines, stateName, step } from '../../machines/runtime.ts';
import { PRESTART_KIND } from '../executions/pool/sandbox-pool.ts';
import { containerEvidence, evidenceOf, runlogLabels, type Inventory } from './actor-observations.ts';
import {
  errorText,
  recordFact,
  type OrphanPolicy,
  type ReconcileAction,
  type ReconcileDeps,
  type ReconcileRun,
} from './reconcile-run.ts';

/** Whether the instance machine can start an actor from a discovered container (`new --instance.discovered--> adopted`). */
export function machineCanAdoptDiscovered(): boolean {
  const m = machines.instance;
  return step(m, initialSnapshot(m), { type: 'instance.discovered', at: '1970-01-01T00:00:00.000Z', data: {} })
    .accepted;
}

/** Containers no live actor owns: recorded as discovered, then removed (or, by the orphan policy, adopted). */
export async function strayContainers(deps: ReconcileDeps, inv: Inventory, run: ReconcileRun): Promise<void> {
  const host = deps.host();
  for (const c of inv.containers) {
    const kind = c.labels['runlog.kind'] ?? '';
    const stream = c.labels['runlog.stream'] ?? '';
    const ref = parseStreamName(stream);
    const actor = ref ? await host.fetch(ref.kind, ref.id) : undefined;
    // Another node's (it restarted the instance after this node was gone): this node's container of it is a stray.
    const liveActor = actor && !isTerminal(actor.snapshot) && deps.owns(stream) ? actor : undefined;
    const state = actor ? stateName(actor.snapshot) : null;
    let reason: string;
    if (kind === 'instance') {
      if (liveActor) continue; // its actor decides (below)
      reason = actor ? `its instance is ${state} in the log` : 'no stream in the log knows it';
    } else if (kind === 'execution') {
      if (liveActor) {
        if (host.busy('execution', liveActor.id)) continue; // on demand: its effect is working with it
        const owned =
          (state === 'running' || state === 'adopted') &&
          (liveActor.snapshot.context as ExecutionContext).containerId === c.id;
        if (owned) continue;
        reason = `its execution is ${state} and runs in ${(liveActor.snapshot.context as ExecutionContext).containerId ?? 'no container'}`;
      } else reason = actor ? `its execution is ${state} in the log` : 'no stream in the log knows it';
    } else if (kind === PRESTART_KIND) {
      if (deps.executions.pool.owns(c.id)) continue; // waiting in this process's pool
      const user = host
        .live()
        .find((a) => a.kind === 'execution' && (a.snapshot.context as ExecutionContext).containerId === c.id);
      if (user) continue; // a live execution took it: its actor decides (below)
      reason = 'a pre-started sandbox that no pool and no live execution holds';
    } else if (kind === LOCK_KIND) {
      // The lock of a volume being materialized (by this node or another process on the daemon): only a gone holder's.
      const verdict = await lockHolderVerdict(c.labels, DEFAULT_LOCK_LIMITS);
      if (verdict.holder === 'alive') continue;
      reason = `the lock of a materialization whose holder is gone (${verdict.why})`;
    } else if (kind === EGRESS_PROXY_KIND) {
      if (deps.executions.egressHost?.owns(c.id)) continue; // this process's: network-granted executions use it
      reason = "an earlier supervisor's egress proxy";
    } else if (kind === 'materializer') {
      if (liveActor && state === 'materializing' && host.busy('execution', liveActor.id)) continue; // in flight, on demand
      reason = 'the carrier of a materialization that did not finish';
    } else {
      reason = `a container of kind '${kind}' that runlog does not run`;
    }
    await stray(deps, c, kind, ref?.id ?? null, actor === undefined, reason, inv, run);
  }
}

async function stray(
  deps: ReconcileDeps,
  c: ContainerSummary,
  kind: string,
  streamId: string | null,
  unknownStream: boolean,
  reason: string,
  inv: Inventory,
  run: ReconcileRun,
): Promise<void> {
  const engine = deps.executions.engine;
  const info = await engine.inspectContainer(c.id);
  if (!info) return; // removed meanwhile
  const evidence = { ...containerEvidence(c.id, info), labels: runlogLabels(c.labels), reason };
  let decision: OrphanPolicy = 'remove';
  let note: string | undefined;
  const rec = inv.records.get(c.id);
  if (kind === 'instance' && unknownStream && info.state.running && run.policy === 'adopt') {
    if (!rec) note = 'its instance record could not be read';
    else if (!machineCanAdoptDiscovered()) note = 'the instance machine has no instance.discovered transition';
    else decision = 'adopt';
  }
  const id = streamId ?? c.id;
  const actionKind: ReconcileAction['kind'] =
    kind === 'instance' || kind === 'execution' || kind === 'materializer' ? kind : 'container';
  run.report.actions.push({
    id,
    kind: actionKind,
    action: 'discovered',
    evidence: { ...evidence, decision, ...(note ? { note } : {}) },
  });
  await recordFact(deps, run, 'reconciler.discovered', {
    object: 'container',
    kind,
    stream: c.labels['runlog.stream'] ?? null,
    evidence,
    decision,
    ...(note ? { note } : {}),
  });
  deps.log(
    `reconcile: discovered container ${c.id.slice(0, 12)} (${kind || 'unknown kind'}, ` +
      `${c.labels['runlog.stream'] ?? 'no stream'}): ${reason}; ${decision}`,
  );
  if (decision === 'adopt' && rec && streamId) {
    run.report.actions.push({ id, kind: 'instance', action: 'adopted', evidence: evidenceOf(rec) });
    if (run.dryRun) return;
    await adoptDiscovered(deps, streamId, rec, evidence);
    await recordFact(deps, run, 'reconciler.adopted', { object: 'container', containerId: c.id, instanceId: streamId });
    deps.fault({ eventType: 'reconciler.adopted' });
    return;
  }
  if (run.dryRun) {
    run.report.actions.push({ id, kind: actionKind, action: 'removed', evidence: { containerId: c.id } });
    return;
  }
  try {
    await engine.removeContainer(c.id, { force: true });
    run.report.actions.push({ id, kind: actionKind, action: 'removed', evidence: { containerId: c.id } });
    await recordFact(deps, run, 'reconciler.removed', {
      object: 'container',
      containerId: c.id,
      stream: c.labels['runlog.stream'] ?? null,
    });
  } catch (err) {
    run.report.actions.push({
      id,
      kind: actionKind,
      action: 'remove-failed',
      evidence: { containerId: c.id, error: errorText(err) },
    });
    await recordFact(deps, run, 'reconciler.remove-failed', {
      object: 'container',
      containerId: c.id,
      error: errorText(err),
    });
  }
  deps.fault({ eventType: 'reconciler.removed' });
}

/** A running container whose instance the log never knew becomes an actor: `instance.discovered` → adopted → running. */
async function adoptDiscovered(
  deps: Pick<ReconcileDeps, 'host' | 'instances'>,
  instanceId: string,
  rec: OrphanRecord,
  evidence: Record<string, unknown>,
): Promise<void> {
  const appDir = join(deps.instances.appsDir, rec.appId);
  let manifest: { runtime: string; tools: string[]; restart?: Partial<InstanceSpec['restart']> } = {
    runtime: 'unknown',
    tools: [],
  };
  try {
    const m = loadManifest(appDir);
    manifest = { runtime: m.runtime, tools: [...m.tools], restart: m.restart };
  } catch {
    /* the app (or its manifest) is gone or broken: the container still runs, adopt it with what its labels say */
  }
  const spec: InstanceSpec = {
    instanceId,
    appId: rec.appId,
    appDir,
    sandbox: 'container',
    runtime: manifest.runtime,
    tools: manifest.tools,
    lifecycleBasePath: rec.basePath,
    restart: { ...DEFAULT_RESTART, ...manifest.restart },
  };
  deps.instances.adoptable.set(instanceId, rec);
  await deps.host().create('instance', instanceId, {
    type: 'instance.discovered',
    data: {
      spec,
      containerId: rec.containerId,
      host: rec.host,
      port: rec.port,
      pid: rec.pid,
      startedAt: rec.startedAt,
      evidence,
    },
    meta: { source: 'reconciler' },
  });
}

/** Volumes no sealed cache accounts for: unsealed materializations, seals without content, foreign volumes. */
export async function strayVolumes(deps: ReconcileDeps, inv: Inventory, run: ReconcileRun): Promise<void> {
  const engine = deps.executions.engine;
  const names = new Set(inv.volumes.map((v) => v.name));
  const exists = async (name: string) => names.has(name) || (await engine.inspectVolume(name)) !== null;
  const host = deps.host();
  for (const v of inv.volumes) {
    let reason: string | null = null;
    const sealFor = v.labels[LABEL_SEAL_FOR];
    if (sealFor !== undefined) {
      if (!(await exists(sealFor))) reason = `the seal of ${sealFor}, which is gone`;
    } else if (v.labels[LABEL_VOLUME_KIND] !== undefined) {
      if (await exists(`${v.name}${SEAL_SUFFIX}`)) continue; // a sealed cache
      const ref = parseStreamName(v.labels['runlog.stream'] ?? '');
      const owner = ref ? await host.fetch(ref.kind, ref.id) : undefined;
      if (owner && stateName(owner.snapshot) === 'materializing' && host.busy(owner.kind, owner.id)) continue; // being filled, on demand
      reason = 'a materialization that did not finish (no seal)';
    } else {
      reason = 'a volume runlog does not create';
    }
    if (reason === null) continue;
    const evidence = { volume: v.name, labels: runlogLabels(v.labels), createdAt: v.createdAt ?? null, reason };
    run.report.actions.push({
      id: v.name,
      kind: 'volume',
      action: 'discovered',
      evidence: { ...evidence, decision: 'remove' },
    });
    await recordFact(deps, run, 'reconciler.discovered', { object: 'volume', evidence, decision: 'remove' });
    if (run.dryRun) {
      run.report.actions.push({ id: v.name, kind: 'volume', action: 'removed', evidence: { volume: v.name } });
      continue;
    }
    try {
      await engine.removeVolume(v.name);
      run.report.actions.push({ id: v.name, kind: 'volume', action: 'removed', evidence: { volume: v.name } });
      await recordFact(deps, run, 'reconciler.removed', { object: 'volume', volume: v.name });
    } catch (err) {
      run.report.actions.push({
        id: v.name,
        kind: 'volume',
        action: 'remove-failed',
        evidence: { volume: v.name, error: errorText(err) },
      });
      await recordFact(deps, run, 'reconciler.remove-failed', {
        object: 'volume',
        volume: v.name,
        error: errorText(err),
      });
    }
    deps.fault({ eventType: 'reconciler.removed' });
  }
}
