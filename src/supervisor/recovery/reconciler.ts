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
//                  (the step's effect, reattach, the stop, the invocation, the collection). The IO around it is
//                  in actor-observations.ts (inventory, inspection), strays.ts and decision-actions.ts (the
//                  removals and watches a decision asks for, recording); this file runs the steps in order.
// Restart timers: recovered at rehydration (recoverRehydrated), armed from the machine's own armRestart.
// Docker unreachable: what needs Docker is left as logged and reported under `unreachable`.
import { mapConcurrent } from '../../domain/concurrency.ts';
import { decide, onRehydrate } from '../../machines/reconcile-decision.ts';
import type { InstanceContext } from '../../machines/instance.machine.ts';
import { isTerminal } from '../../machines/runtime.ts';
import type { ActorHost, LiveActor } from '../host/actor-host.ts';
import type { ExecutionSupervisor } from '../executions/executions.ts';
import { noFaults, type FaultHook } from '../host/faults.ts';
import { systemClock } from '../host/system-clock.ts';
import type { Clock } from '../../domain/clock.ts';
import type { InstanceSupervisor } from '../instances/instances.ts';
import { observeExecution, observeInstance, takeInventory, type Inventory } from './actor-observations.ts';
import { act, dispatchRecoveries, prepareInstance } from './decision-actions.ts';
import {
  errorText,
  type OrphanPolicy,
  type ReconcileDeps,
  type ReconcileReport,
  type ReconcileRun,
} from './reconcile-run.ts';
import { strayContainers, strayVolumes } from './strays.ts';

/** Actors reconciled at once (each may inspect or remove a container: bounded to spare the Docker daemon). */
const ACTOR_CONCURRENCY = 256;

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

export class Reconciler {
  private readonly policy: OrphanPolicy;
  private readonly faultsOverride: FaultHook | undefined;
  private readonly clock: Clock;
  private queue: Promise<unknown> = Promise.resolve();
  /** Docker's inventory taken ahead of the next reconcile (prefetchInventory), with what it could not read. */
  private prefetched: { inventory: Promise<Inventory | null>; unreachable: string[] } | null = null;

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
    this.deps = {
      host,
      instances,
      executions,
      log,
      owns: (stream) => this.owns(stream),
      fault: (detail) => this.fault(detail),
    };
  }

  private readonly owns: (stream: string) => boolean;
  /** What the steps of a run work with (strays, acting on decisions). */
  private readonly deps: ReconcileDeps;

  private get home(): string {
    return this.instances.layout.home;
  }

  private fault(detail: { eventType?: string; effect?: string }): void {
    (this.faultsOverride ?? this.host().faultHook ?? noFaults)('mid-reconcile', detail);
  }

  /**
   * Starts listing and inspecting this home's containers now, for the next reconcile: at start-up it overlaps the
   * log's replay. Stale by then is safe. What is removed meanwhile (pre-started sandboxes, an earlier egress proxy) a
   * stray pass inspects again and skips. What is made meanwhile belongs to an actor busy with it, which the run
   * leaves alone, and the next reconcile sees it.
   */
  prefetchInventory(): Promise<Inventory | null> {
    const unreachable: string[] = [];
    const inventory = takeInventory(this.executions.engine, this.instances, this.home, unreachable, this.log);
    this.prefetched = { inventory, unreachable };
    return inventory;
  }

  /** One reconciliation at a time (start, engine reconnects and `runlog reconcile` may overlap). */
  reconcile(opts: ReconcileOptions = {}): Promise<ReconcileReport> {
    const next = this.queue.catch(() => undefined).then(() => this.run(opts));
    this.queue = next;
    return next;
  }

  private async run(opts: ReconcileOptions): Promise<ReconcileReport> {
    const run: ReconcileRun = {
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
    const inventory = await this.inventoryFor(run, opts);
    if (inventory) {
      try {
        await strayContainers(this.deps, inventory, run);
        await strayVolumes(this.deps, inventory, run);
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
    await dispatchRecoveries(this.deps, run);
    return run.report;
  }

  /** The prefetched inventory, once, when this run may use it (not after a reattach); else one taken now. */
  private async inventoryFor(run: ReconcileRun, opts: ReconcileOptions): Promise<Inventory | null> {
    const pending = this.prefetched;
    this.prefetched = null;
    if (pending && !opts.reattach) {
      const inventory = await pending.inventory;
      run.report.unreachable.push(...pending.unreachable);
      return inventory;
    }
    return takeInventory(this.executions.engine, this.instances, this.home, run.report.unreachable, this.log);
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

  // --- actors: observe, decide (machines/reconcile-decision.ts), act ------------------------------------

  private async instance(actor: LiveActor, inv: Inventory | null, run: ReconcileRun): Promise<void> {
    const at = new Date(this.clock.nowMs()).toISOString();
    const observed = observeInstance(actor, inv, at);
    if (!observed) return; // not observable now (reported): left as logged
    const d = decide('instance', actor, observed.observation);
    if (!run.dryRun && observed.rec) await prepareInstance(this.deps, actor, d, observed.rec);
    await act(this.deps, run, actor, d);
  }

  private async execution(actor: LiveActor, run: ReconcileRun): Promise<void> {
    const at = new Date(this.clock.nowMs()).toISOString();
    const observation = await observeExecution(() => this.executions.engine, actor, at);
    await act(this.deps, run, actor, decide('execution', actor, observation));
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
