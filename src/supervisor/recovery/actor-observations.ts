// What Docker and /proc say is there, as a reconciliation observes it: the inventory of labelled containers and
// volumes, and each live actor's sandbox turned into an observation (with its evidence) for the pure decide() of
// machines/reconcile-decision.ts. Only IO and shaping here: what an observation means is the decision table's.
import type { ContainerInfo, ContainerSummary, DockerEngine, VolumeInfo } from '../../adapters/docker/docker-port.ts';
import type { OrphanRecord } from '../../adapters/sandbox/app-sandbox-runner.ts';
import type { ExecutionContext } from '../../machines/execution.machine.ts';
import type { InstanceContext } from '../../machines/instance.machine.ts';
import type { ExecutionObservation, InstanceObservation } from '../../machines/reconcile-decision.ts';
import type { LiveActor } from '../host/actor-host.ts';
import type { InstanceSupervisor } from '../instances/instances.ts';
import { errorText } from './reconcile-run.ts';

export interface Inventory {
  containers: ContainerSummary[];
  volumes: VolumeInfo[];
  /** Instance containers with what adoption needs (host, port, pid), by container id. */
  records: Map<string, OrphanRecord>;
}

export const evidenceOf = (r: OrphanRecord) => ({
  containerId: r.containerId,
  state: r.state,
  exitCode: r.exitCode,
  startedAt: r.startedAt,
  finishedAt: r.finishedAt,
  pid: r.pid,
});
export const containerEvidence = (id: string, info: ContainerInfo | null) =>
  info
    ? {
        containerId: info.id,
        name: info.name,
        state: info.state.status,
        exitCode: info.state.running ? null : info.state.exitCode,
        startedAt: info.state.startedAt,
        finishedAt: info.state.finishedAt,
        oomKilled: info.state.oomKilled,
      }
    : { containerId: id, observed: 'container not found' };
export const runlogLabels = (labels: Record<string, string>) =>
  Object.fromEntries(Object.entries(labels).filter(([k]) => k.startsWith('runlog.')));

/**
 * Every container and volume labelled with this home; null when Docker cannot be asked. What could not be read is
 * pushed on `unreachable`, as the run reports it.
 */
export async function takeInventory(
  engine: DockerEngine,
  instances: InstanceSupervisor,
  home: string,
  unreachable: string[],
  log: (m: string) => void,
): Promise<Inventory | null> {
  let containers: ContainerSummary[];
  let volumes: VolumeInfo[];
  try {
    [containers, volumes] = await Promise.all([
      engine.listContainers({ 'runlog.home': home }, { all: true }),
      engine.listVolumes({ 'runlog.home': home }),
    ]);
  } catch (err) {
    unreachable.push(`docker: ${errorText(err)}`);
    log(`reconcile: Docker unreachable, what needs it is left as logged: ${errorText(err)}`);
    return null;
  }
  const records = new Map<string, OrphanRecord>();
  if (containers.some((c) => c.labels['runlog.kind'] === 'instance')) {
    try {
      // Inspects what was just listed (in parallel); no second listing.
      for (const r of await instances.runner('container').listOrphanRecords(containers)) records.set(r.containerId, r);
    } catch (err) {
      unreachable.push(`container runner: ${errorText(err)}`);
      log(`reconcile: cannot read instance containers: ${errorText(err)}`);
    }
  }
  return { containers, volumes, records };
}

/**
 * An instance's sandbox as observed: PRoot (died with the supervisor), or its container alive, exited or gone,
 * with the record adoption needs. null: it cannot be observed now (Docker unreachable, its container unreadable;
 * both reported), and it is left as logged.
 */
export function observeInstance(
  actor: LiveActor,
  inv: Inventory | null,
  at: string,
): { observation: InstanceObservation; rec: OrphanRecord | undefined } | null {
  const c = actor.snapshot.context as InstanceContext;
  if (c.spec?.sandbox !== 'container') return { observation: { at, sandbox: 'proot' }, rec: undefined };
  if (inv === null) return null; // Docker unreachable: left as logged (reported)
  const summary = inv.containers.find(
    (x) => x.labels['runlog.kind'] === 'instance' && x.labels['runlog.stream'] === actor.stream,
  );
  const rec = summary ? inv.records.get(summary.id) : undefined;
  if (summary && !rec) return null; // could not read it (reported): left as logged
  const observation: InstanceObservation = !rec
    ? { at, sandbox: 'container', container: 'none' }
    : rec.state === 'running' || rec.state === 'paused'
      ? {
          at,
          sandbox: 'container',
          container: 'alive',
          location: {
            containerId: rec.containerId,
            host: rec.host,
            port: rec.port,
            pid: rec.pid,
            startedAt: rec.startedAt,
          },
          evidence: evidenceOf(rec),
        }
      : { at, sandbox: 'container', container: 'exited', exitCode: rec.exitCode, evidence: evidenceOf(rec) };
  return { observation, rec };
}

/** An execution's container as observed: none recorded, missing, created but never started, or started. */
export async function observeExecution(
  engine: () => DockerEngine,
  actor: LiveActor,
  at: string,
): Promise<ExecutionObservation> {
  const c = actor.snapshot.context as ExecutionContext;
  let observation: ExecutionObservation = { at, container: 'unrecorded' };
  if (c.containerId) {
    const info = await engine().inspectContainer(c.containerId);
    const evidence = containerEvidence(c.containerId, info);
    observation = !info
      ? { at, container: 'missing', evidence }
      : info.state.startedAt === null
        ? { at, container: 'created', evidence }
        : { at, container: 'started', evidence };
  }
  return observation;
}
