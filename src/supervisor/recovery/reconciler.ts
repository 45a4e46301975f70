// Reconciliation: after a restart (or a Docker daemon restart, or on demand) the log says what should be,
// Docker and /proc say what is. What is observed becomes events with their evidence (container id, state, exit
// code, start time); Docker state is never read as truth on its own.
//
//   1. inventory   every container and volume labelled runlog.home=<home>
//   2. strays      a container no live actor owns (its stream is unknown, terminal, or names another container)
//                  is recorded on the `reconciler` stream (`reconciler.discovered`, with the evidence and the
//                  decision), then removed (`reconciler.removed`) — or, for a running instance container whose
//                  stream the log does not know and orphanPolicy 'adopt', adopted as a new instance actor.
//                  Materializer carriers of a materialization that died, unsealed volumes and seals without
//                  content are removed the same way: a volume labelled by runlog is a sealed cache or gone.
//   3. actors      each live actor that nothing in this process is working on: its sandbox is observed (PRoot:
//                  died with the supervisor; container: running, paused, exited with its code, missing; execution:
//                  the container the log names, created-never-started, started, missing) and the pure
//                  decide(actor, observation) of machines/reconcile-decision.ts says what to record (its decision
//                  table is test/unit/machines/reconcile-decision.test.ts): adopted, crashed, exited, lost, failed — or
//                  `<kind>.recovered`, on which the machine enters its state again and emits what must run again
//                  (the step's effect, reattach, the stop, the invocation, the collection). This file is the IO around
//                  it: inventory, inspection, the container removals and watches a decision asks for, recording.
// Restart timers: recovered at rehydration (recoverRehydrated), armed from the machine's own armRestart.
// Docker unreachable: what needs Docker is left as logged and reported under `unreachable`.
import { join } from 'node:path';
import type { ContainerInfo, ContainerSummary, VolumeInfo } from '../../adapters/docker/docker-port.ts';
import { LABEL_SEAL_FOR, LABEL_VOLUME_KIND, SEAL_SUFFIX } from '../../adapters/docker/materializer.ts';
import { DEFAULT_LOCK_LIMITS, lockHolderVerdict, LOCK_KIND } from '../../adapters/docker/materialize-lock.ts';
import { loadManifest } from '../../adapters/apps/load-manifest.ts';
import type { OrphanRecord } from '../../adapters/sandbox/app-sandbox-runner.ts';
import { mapConcurrent } from '../../domain/concurrency.ts';
import { parseStreamName, type ActorKind, type KindNewEvent } from '../../domain/events.ts';
import type { ExecutionContext } from '../../machines/execution.machine.ts';
import {
  decide,
  onRehydrate,
  type Decision,
  type ExecutionObservation,
  type InstanceObservation,
} from '../../machines/reconcile-decision.ts';
import { DEFAULT_RESTART, type InstanceContext, type InstanceSpec } from '../../machines/instance.machine.ts';
import { initialSnapshot, isTerminal, machines, stateName, step } from '../../machines/runtime.ts';
import type { ActorHost, LiveActor } from '../host/actor-host.ts';
import type { ExecutionSupervisor } from '../executions/executions.ts';
import { PRESTART_KIND } from '../executions/pool/sandbox-pool.ts';
import { noFaults, type FaultHook } from '../host/faults.ts';
import { systemClock } from '../host/system-clock.ts';
import type { Clock } from '../../domain/clock.ts';
import type { InstanceSupervisor } from '../instances/instances.ts';

/** Actors reconciled at once (each may inspect or remove a container: bounded to spare the Docker daemon). */
const ACTOR_CONCURRENCY = 256;

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

export interface ReconcilerOptions {
  /** Default 'remove' (safer): a container nobody asked for in this log does not keep running. */
  orphanPolicy?: OrphanPolicy;
  /** Fault injection (mid-reconcile). Default: the host's hook. */
  faults?: FaultHook;
  /** What "now" is when deciding whether a deadline passed while the supervisor was down (default: the wall clock). */
  clock?: Clock;
  /** A cluster node: whether it owns the actor (its lease). A container here of an actor another node owns is a stray. */
  owns?: (stream: string) => boolean;
}

export interface ReconcileOptions {
  dryRun?: boolean;
  /** Overrides the reconciler's orphanPolicy for this run. */
  orphanPolicy?: OrphanPolicy;
  /**
   * The Docker daemon restarted (or was unreachable) while this supervisor ran: its container exit watchers may be
   * stuck on dead connections. Drop them first (once no container instance has an effect in flight, waiting up to
   * 60 s), so running containers are re-adopted and exits that happened meanwhile are recorded.
   */
  reattach?: boolean;
}

const evidenceOf = (r: OrphanRecord) => ({
  containerId: r.containerId,
  state: r.state,
  exitCode: r.exitCode,
  startedAt: r.startedAt,
  finishedAt: r.finishedAt,
  pid: r.pid,
});
const containerEvidence = (id: string, info: ContainerInfo | null) =>
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
const runlogLabels = (labels: Record<string, string>) =>
  Object.fromEntries(Object.entries(labels).filter(([k]) => k.startsWith('runlog.')));
const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** Whether the instance machine can start an actor from a discovered container (`new --instance.discovered--> adopted`). */
export function machineCanAdoptDiscovered(): boolean {
  const m = machines.instance;
  return step(m, initialSnapshot(m), { type: 'instance.discovered', at: '1970-01-01T00:00:00.000Z', data: {} })
    .accepted;
}

interface Inventory {
  containers: ContainerSummary[];
  volumes: VolumeInfo[];
  /** Instance containers with what adoption needs (host, port, pid), by container id. */
  records: Map<string, OrphanRecord>;
}

interface Run {
  report: ReconcileReport;
  dryRun: boolean;
  policy: OrphanPolicy;
  /** `recovered` events (their effects run again), recorded once every finding is (see act()). */
  recoveries: { actor: LiveActor; event: KindNewEvent<ActorKind>; entry: ReconcileAction }[];
}

export class Reconciler {
  private readonly policy: OrphanPolicy;
  private readonly faultsOverride: FaultHook | undefined;
  private readonly clock: Clock;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly host: () => ActorHost,
    private readonly instances: InstanceSupervisor,
    private readonly executions: ExecutionSupervisor,
    private readonly log: (m: string) => void = () => undefined,
    options: ReconcilerOptions = {},
  ) {
    this.policy = options.orphanPolicy ?? 'remove';
    if (this.policy !== 'adopt' && this.policy !== 'remove')
      throw new Error(`orphanPolicy must be 'adopt' or 'remove', got ${JSON.stringify(this.policy)}`);
    this.faultsOverride = options.faults;
    this.clock = options.clock ?? systemClock;
    this.owns = options.owns ?? (() => true);
  }

  private readonly owns: (stream: string) => boolean;

  private get home(): string {
    return this.instances.layout.home;
  }

  private fault(detail: { eventType?: string; effect?: string }): void {
    (this.faultsOverride ?? this.host().faultHook ?? noFaults)('mid-reconcile', detail);
  }

  /** One reconciliation at a time (start, engine reconnects and `runlog reconcile` may overlap). */
  reconcile(opts: ReconcileOptions = {}): Promise<ReconcileReport> {
    const next = this.queue.catch(() => undefined).then(() => this.run(opts));
    this.queue = next;
    return next;
  }

  private async run(opts: ReconcileOptions): Promise<ReconcileReport> {
    const run: Run = {
      report: { dryRun: opts.dryRun ?? false, actions: [], unreachable: [] },
      dryRun: opts.dryRun ?? false,
      policy: opts.orphanPolicy ?? this.policy,
      recoveries: [],
    };
    if (opts.reattach && !run.dryRun) {
      const spawning = () =>
        this.host()
          .live()
          .some(
            (a) =>
              a.kind === 'instance' &&
              (a.snapshot.context as InstanceContext).spec?.sandbox === 'container' &&
              this.host().busy('instance', a.id),
          );
      for (const until = this.clock.nowMs() + 60_000; spawning() && this.clock.nowMs() < until;)
        await new Promise((r) => this.clock.after(250, () => r(undefined)));
      await this.instances.detachContainers();
      this.log(
        'reconcile: container watchers dropped after the Docker Engine came back; re-attaching from what it says now',
      );
    }
    const live = this.host().live();
    const versions = new Map(live.map((a) => [a.stream, a.version]));
    const inventory = await this.inventory(run);
    if (inventory) {
      try {
        await this.strayContainers(inventory, run);
        await this.strayVolumes(inventory, run);
      } catch (err) {
        run.report.unreachable.push(`strays: ${errorText(err)}`);
        this.log(`reconcile: containers and volumes no actor owns were not all handled: ${errorText(err)}`);
      }
    }
    // Actors are independent of each other: reconciled concurrently, so their findings reach the host in the
    // same turns of the event loop and share its group commits (one fsync for many adoptions).
    await mapConcurrent(live, ACTOR_CONCURRENCY, async (actor) => {
      if (actor.kind !== 'instance' || this.untouchable(actor, versions)) return;
      try {
        await this.instance(actor, inventory, run);
      } catch (err) {
        run.report.unreachable.push(`instance ${actor.id}: ${errorText(err)}`);
        this.log(`reconcile: instance ${actor.id} left as logged: ${errorText(err)}`);
      }
    });
    await mapConcurrent(live, ACTOR_CONCURRENCY, async (actor) => {
      if (actor.kind !== 'execution' || this.untouchable(actor, versions)) return;
      if (!inventory) return; // every execution step needs Docker
      try {
        await this.execution(actor, run);
      } catch (err) {
        run.report.unreachable.push(`docker (execution ${actor.id}): ${errorText(err)}`);
        this.log(`reconcile: execution ${actor.id} left as logged: ${errorText(err)}`);
      }
    });
    await Promise.all(
      run.recoveries.map(async ({ actor, event, entry }) => {
        try {
          const r = await this.host().dispatch(actor.kind, actor.id, { ...event, meta: { source: 'reconciler' } });
          if (!r.accepted) entry.evidence = { ...entry.evidence, rejected: `the actor was ${r.from}` };
        } catch (err) {
          run.report.unreachable.push(`${actor.kind} ${actor.id}: ${errorText(err)}`);
        }
      }),
    );
    return run.report;
  }

  /**
   * An actor this process is working on (an effect in flight, a runner watching it, or events since this
   * reconciliation began, e.g. a restart timer that fired) is not recovery's business.
   */
  private untouchable(actor: LiveActor, versions: Map<string, number>): boolean {
    const current = this.host().get(actor.kind, actor.id);
    if (!current || isTerminal(current.snapshot) || current.version !== versions.get(actor.stream)) return true;
    return this.host().busy(actor.kind, actor.id) || (actor.kind === 'instance' && this.instances.tracks(actor.id));
  }

  private async inventory(run: Run): Promise<Inventory | null> {
    const engine = this.executions.engine;
    let containers: ContainerSummary[];
    let volumes: VolumeInfo[];
    try {
      [containers, volumes] = await Promise.all([
        engine.listContainers({ 'runlog.home': this.home }, { all: true }),
        engine.listVolumes({ 'runlog.home': this.home }),
      ]);
    } catch (err) {
      run.report.unreachable.push(`docker: ${errorText(err)}`);
      this.log(`reconcile: Docker unreachable, what needs it is left as logged: ${errorText(err)}`);
      return null;
    }
    const records = new Map<string, OrphanRecord>();
    if (containers.some((c) => c.labels['runlog.kind'] === 'instance')) {
      try {
        // Inspects what was just listed (in parallel); no second listing.
        for (const r of await this.instances.runner('container').listOrphanRecords(containers))
          records.set(r.containerId, r);
      } catch (err) {
        run.report.unreachable.push(`container runner: ${errorText(err)}`);
        this.log(`reconcile: cannot read instance containers: ${errorText(err)}`);
      }
    }
    return { containers, volumes, records };
  }

  // --- recording ---------------------------------------------------------------------------------------

  private async fact(run: Run, type: string, data: Record<string, unknown>): Promise<void> {
    if (run.dryRun) return;
    await this.host().appendFact(RECONCILER_STREAM, [{ type, data, meta: { source: 'reconciler' } }]);
  }

  // --- strays ------------------------------------------------------------------------------------------

  private async strayContainers(inv: Inventory, run: Run): Promise<void> {
    const host = this.host();
    for (const c of inv.containers) {
      const kind = c.labels['runlog.kind'] ?? '';
      const stream = c.labels['runlog.stream'] ?? '';
      const ref = parseStreamName(stream);
      const actor = ref ? await host.fetch(ref.kind, ref.id) : undefined;
      // Another node's (it restarted the instance after this node was gone): this node's container of it is a stray.
      const liveActor = actor && !isTerminal(actor.snapshot) && this.owns(stream) ? actor : undefined;
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
        if (this.executions.pool.owns(c.id)) continue; // waiting in this process's pool
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
      } else if (kind === 'materializer') {
        if (liveActor && state === 'materializing' && host.busy('execution', liveActor.id)) continue; // in flight, on demand
        reason = 'the carrier of a materialization that did not finish';
      } else {
        reason = `a container of kind '${kind}' that runlog does not run`;
      }
      await this.stray(c, kind, ref?.id ?? null, actor === undefined, reason, inv, run);
    }
  }

  private async stray(
    c: ContainerSummary,
    kind: string,
    streamId: string | null,
    unknownStream: boolean,
    reason: string,
    inv: Inventory,
    run: Run,
  ): Promise<void> {
    const engine = this.executions.engine;
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
    await this.fact(run, 'reconciler.discovered', {
      object: 'container',
      kind,
      stream: c.labels['runlog.stream'] ?? null,
      evidence,
      decision,
      ...(note ? { note } : {}),
    });
    this.log(
      `reconcile: discovered container ${c.id.slice(0, 12)} (${kind || 'unknown kind'}, ${c.labels['runlog.stream'] ?? 'no stream'}): ${reason}; ${decision}`,
    );
    if (decision === 'adopt' && rec && streamId) {
      run.report.actions.push({ id, kind: 'instance', action: 'adopted', evidence: evidenceOf(rec) });
      if (run.dryRun) return;
      await this.adoptDiscovered(streamId, rec, evidence);
      await this.fact(run, 'reconciler.adopted', { object: 'container', containerId: c.id, instanceId: streamId });
      this.fault({ eventType: 'reconciler.adopted' });
      return;
    }
    if (run.dryRun) {
      run.report.actions.push({ id, kind: actionKind, action: 'removed', evidence: { containerId: c.id } });
      return;
    }
    try {
      await engine.removeContainer(c.id, { force: true });
      run.report.actions.push({ id, kind: actionKind, action: 'removed', evidence: { containerId: c.id } });
      await this.fact(run, 'reconciler.removed', {
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
      await this.fact(run, 'reconciler.remove-failed', {
        object: 'container',
        containerId: c.id,
        error: errorText(err),
      });
    }
    this.fault({ eventType: 'reconciler.removed' });
  }

  /** A running container whose instance the log never knew becomes an actor: `instance.discovered` → adopted → running. */
  private async adoptDiscovered(
    instanceId: string,
    rec: OrphanRecord,
    evidence: Record<string, unknown>,
  ): Promise<void> {
    const appDir = join(this.instances.appsDir, rec.appId);
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
    this.instances.adoptable.set(instanceId, rec);
    await this.host().create('instance', instanceId, {
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

  private async strayVolumes(inv: Inventory, run: Run): Promise<void> {
    const engine = this.executions.engine;
    const names = new Set(inv.volumes.map((v) => v.name));
    const exists = async (name: string) => names.has(name) || (await engine.inspectVolume(name)) !== null;
    const host = this.host();
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
      await this.fact(run, 'reconciler.discovered', { object: 'volume', evidence, decision: 'remove' });
      if (run.dryRun) {
        run.report.actions.push({ id: v.name, kind: 'volume', action: 'removed', evidence: { volume: v.name } });
        continue;
      }
      try {
        await engine.removeVolume(v.name);
        run.report.actions.push({ id: v.name, kind: 'volume', action: 'removed', evidence: { volume: v.name } });
        await this.fact(run, 'reconciler.removed', { object: 'volume', volume: v.name });
      } catch (err) {
        run.report.actions.push({
          id: v.name,
          kind: 'volume',
          action: 'remove-failed',
          evidence: { volume: v.name, error: errorText(err) },
        });
        await this.fact(run, 'reconciler.remove-failed', { object: 'volume', volume: v.name, error: errorText(err) });
      }
      this.fault({ eventType: 'reconciler.removed' });
    }
  }

  // --- actors: observe, decide (machines/reconcile-decision.ts), act ------------------------------------

  private async instance(actor: LiveActor, inv: Inventory | null, run: Run): Promise<void> {
    const c = actor.snapshot.context as InstanceContext;
    const at = new Date(this.clock.nowMs()).toISOString();
    let observation: InstanceObservation;
    let rec: OrphanRecord | undefined;
    if (c.spec?.sandbox !== 'container') observation = { at, sandbox: 'proot' };
    else {
      if (inv === null) return; // Docker unreachable: left as logged (reported)
      const summary = inv.containers.find(
        (x) => x.labels['runlog.kind'] === 'instance' && x.labels['runlog.stream'] === actor.stream,
      );
      rec = summary ? inv.records.get(summary.id) : undefined;
      if (summary && !rec) return; // could not read it (reported): left as logged
      observation = !rec
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
    }
    const d = decide('instance', actor, observation);
    if (!run.dryRun && rec) {
      for (const p of d.prepare) {
        if (p === 'remove-container') await this.executions.engine.removeContainer(rec.containerId, { force: true });
        else if (p === 'hold-for-reattach') this.instances.adoptable.set(actor.id, rec);
        else this.instances.adoptForStop(actor, rec);
      }
    }
    await this.act(run, actor, d);
  }

  private async execution(actor: LiveActor, run: Run): Promise<void> {
    const c = actor.snapshot.context as ExecutionContext;
    const at = new Date(this.clock.nowMs()).toISOString();
    let observation: ExecutionObservation = { at, container: 'unrecorded' };
    if (c.containerId) {
      const info = await this.executions.engine.inspectContainer(c.containerId);
      const evidence = containerEvidence(c.containerId, info);
      observation = !info
        ? { at, container: 'missing', evidence }
        : info.state.startedAt === null
          ? { at, container: 'created', evidence }
          : { at, container: 'started', evidence };
    }
    await this.act(run, actor, decide('execution', actor, observation));
  }

  /**
   * Records a decision: its report entry, then its events. A `recovered` event (whose effects run again) waits
   * until every finding of this run is recorded, so a death mid-reconcile interrupts none of them.
   */
  private async act<K extends ActorKind>(run: Run, actor: LiveActor, d: Decision<K>): Promise<void> {
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
      const r = await this.host().dispatch(actor.kind, actor.id, {
        ...event,
        meta: { source: 'reconciler' },
      } as KindNewEvent<ActorKind>);
      if (!r.accepted) entry.evidence = { ...evidence, rejected: `the actor was ${r.from}` };
      this.fault({ eventType: event.type });
    }
  }
}

/**
 * Right after rehydration, before anything is observed: what the machines ask for again by themselves (a restart
 * timer, armed from the machine's own `armRestart` at the due time the log holds; an overdue one fires now).
 */
export async function recoverRehydrated(
  host: ActorHost,
  actors: readonly LiveActor[],
  log: (m: string) => void,
): Promise<void> {
  await Promise.all(
    actors.map(async (actor) => {
      if (actor.kind !== 'instance') return;
      for (const event of onRehydrate(actor)) {
        await host
          .dispatch('instance', actor.id, { ...event, meta: { source: 'rehydration' } })
          .catch((err: unknown) => log(`recovering ${actor.stream}: ${errorText(err)}`));
      }
    }),
  );
}
