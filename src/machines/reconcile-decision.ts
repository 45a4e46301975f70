// What recovery does with an actor, decided by pure code: given the actor as the log folds it (snapshot and
// version) and what the reconciler observed of its sandbox (or of its node), the events to record. The IO —
// listing and inspecting containers, removing one, watching one again — is the reconciler's shell
// (supervisor/recovery/reconciler.ts); this module only decides, so `test/unit/machines/reconcile-decision.test.ts` can hold the whole
// decision table, one row per (state, observation) pair.
//
// Where the actor's own effects must run again (a step that died with the supervisor, an adoption not
// re-attached, a stop not finished, a restart timer), the decision is `<kind>.recovered`: the machine enters its
// state again and emits those effects itself. Nothing here names an effect or builds its params.
import type { ActorKind, KindNewEvent } from '../domain/events.ts';
import type { Evidence, InstanceEventData, SandboxLocation } from '../domain/instance-events.ts';
import { msBetween } from '../domain/time.ts';
import type { ExecutionContext } from './execution.machine.ts';
import type { InstanceContext } from './instance.machine.ts';
import { machines, stateName, step, type AnySnapshot } from './runtime.ts';

/** An actor as its log folds it. */
export interface ActorAt {
  snapshot: AnySnapshot;
  /** The stream's version the snapshot is the fold of (what `recovered` records). */
  version: number;
}

/** When the observation was made (an ISO time from the shell's clock): deadlines are compared with it. */
interface Observed {
  at: string;
}

/** The actor's supervisor is gone (a cluster node stopped renewing its leases): this node took it over. */
export interface NodeGone extends Observed {
  node: 'gone';
  evidence: Evidence;
}

/** What the reconciler saw of an instance's sandbox. */
export type InstanceObservation =
  | NodeGone
  /** A PRoot child is the supervisor's own: it died with it. */
  | (Observed & { sandbox: 'proot' })
  /** No container carries the instance's stream label. */
  | (Observed & { sandbox: 'container'; container: 'none' })
  /** Its container runs (or is paused: alive, only frozen — never mistaken for an exit). */
  | (Observed & {
      sandbox: 'container';
      container: 'alive';
      location: SandboxLocation & { startedAt: string | null };
      evidence: Evidence;
    })
  /** Its container exited while the supervisor was away. */
  | (Observed & { sandbox: 'container'; container: 'exited'; exitCode: number | null; evidence: Evidence });

/** What the reconciler saw of an execution's container. */
export type ExecutionObservation =
  | NodeGone
  /** The log names no container yet (before execution.started): there is nothing to ask Docker. */
  | (Observed & { container: 'unrecorded' })
  /** The container the log names is gone. */
  | (Observed & { container: 'missing'; evidence: Evidence })
  /** Created, never started: nothing of the handler ran. */
  | (Observed & { container: 'created'; evidence: Evidence })
  /** Started (running or exited): its output is there to collect. */
  | (Observed & { container: 'started'; evidence: Evidence });

/** IO the shell does before it records the events (in this order). */
export type Preparation =
  /** Remove the container (an interrupted spawn's, or one that exited: a restart must not trip over it). */
  | 'remove-container'
  /** Hand the container's record to the `reattach` effect the events lead to. */
  | 'hold-for-reattach'
  /** Watch the container again (exit watcher, logs), so the stop the events resume sees its exit. */
  | 'watch-for-stop';

/** What the reconciler's report calls it. */
export type Outcome = 'adopted' | 'crashed' | 'exited' | 'lost' | 'failed' | 'resumed' | 'collect';

export interface Decision<K extends ActorKind> {
  /** null: the actor is left as the log has it (nothing observed calls for an event). */
  outcome: Outcome | null;
  evidence: Evidence;
  prepare: Preparation[];
  events: KindNewEvent<K>[];
  /** The effects the machine emits for these events (for the report: what runs again). */
  effects: string[];
}

const NO_CONTAINER = 'no container with this stream label';

function decision<K extends ActorKind>(
  kind: K,
  actor: ActorAt,
  at: string,
  outcome: Outcome,
  evidence: Evidence,
  events: KindNewEvent<K>[],
  prepare: Preparation[] = [],
): Decision<K> {
  const machine = machines[kind];
  let snapshot = actor.snapshot;
  const effects: string[] = [];
  for (const e of events) {
    const r = step(machine, snapshot, { type: e.type, at, data: e.data as Record<string, unknown> });
    snapshot = r.snapshot;
    effects.push(...r.effects.map((x) => x.type));
  }
  return { outcome, evidence, prepare, events, effects };
}

const nothing = <K extends ActorKind>(evidence: Evidence = {}): Decision<K> => ({
  outcome: null,
  evidence,
  prepare: [],
  events: [],
  effects: [],
});

function recovered(actor: ActorAt, evidence?: Evidence): InstanceEventData['instance.recovered'] {
  return { version: actor.version, ...(evidence ? { evidence } : {}) };
}

/** Recovery of an instance. */
export function decideInstance(actor: ActorAt, o: InstanceObservation): Decision<'instance'> {
  const c = actor.snapshot.context as InstanceContext;
  const state = stateName(actor.snapshot);
  const d = (outcome: Outcome, evidence: Evidence, events: KindNewEvent<'instance'>[], prepare?: Preparation[]) =>
    decision('instance', actor, o.at, outcome, evidence, events, prepare);
  const crash = (evidence: Evidence, message: string): KindNewEvent<'instance'> => ({
    type: 'instance.crashed',
    data: { reason: 'supervisor-restart', exitCode: null, message, evidence },
  });
  const exited = (exitCode: number | null, evidence: Evidence): KindNewEvent<'instance'> => ({
    type: 'instance.exited',
    data: { exitCode, signal: null, evidence },
  });

  if (state === 'crashed.backoff') {
    // Its restart timer is armed again (rehydration recovers it: onRehydrate); nothing observed changes that.
    // Taken over from a dead node, it is recovered here, so the machine arms its timer on this node.
    return 'node' in o
      ? d('resumed', o.evidence, [{ type: 'instance.recovered', data: recovered(actor, o.evidence) }])
      : nothing();
  }
  if (state === 'suspended') return decideSuspended(actor, o, d);
  if (!LIVE_INSTANCE.has(state)) return nothing();
  if ('node' in o) {
    // Its sandbox ran on that node's host, which this node cannot see. When its restart policy restarts it, that
    // is a crash (reason node-lost: the machine restarts it here, on a live node); else it is lost.
    const previous = String(o.evidence.node ?? 'another node');
    const crash: KindNewEvent<'instance'> = {
      type: 'instance.crashed',
      data: {
        reason: 'node-lost',
        message: `its node ${previous} is gone (its supervisor stopped renewing its lease)`,
        evidence: o.evidence,
      },
    };
    const next = step(machines.instance, actor.snapshot, {
      type: crash.type,
      at: o.at,
      data: crash.data as Record<string, unknown>,
    });
    if (next.accepted && stateName(next.snapshot) === 'crashed.backoff') return d('crashed', o.evidence, [crash]);
    return d('lost', o.evidence, [{ type: 'instance.lost', data: { evidence: o.evidence } }]);
  }
  const stopping = state === 'stopping';
  const interrupted = state === 'spawning' || state === 'healthy';

  if (o.sandbox === 'proot') {
    const evidence = { sandbox: 'proot', pid: c.pid, state };
    return stopping
      ? d('exited', evidence, [exited(null, evidence)])
      : d('crashed', evidence, [crash(evidence, 'its PRoot process died with the supervisor')]);
  }
  if (interrupted) {
    // The spawn did not finish (identity unverified or hooks not run): its container, if any, is removed and the
    // restart policy decides, as for any crash.
    const found = o.container !== 'none';
    const evidence = found
      ? { ...o.evidence, removed: true, state }
      : { containerId: c.containerId, observed: NO_CONTAINER, state };
    return d(
      'crashed',
      evidence,
      [crash(evidence, `its spawn was interrupted by a supervisor restart (${state})`)],
      found ? ['remove-container'] : [],
    );
  }
  if (o.container === 'none') {
    const evidence = { containerId: c.containerId, observed: NO_CONTAINER };
    return stopping
      ? d('exited', evidence, [exited(null, evidence)])
      : d('lost', evidence, [{ type: 'instance.lost', data: { evidence } }]);
  }
  if (o.container === 'alive') {
    // Stopping: we had decided to stop it; watch it again and do the stop again. Adopted before but not
    // re-attached: attach again. Otherwise: adopted, as it was.
    if (stopping)
      return d(
        'resumed',
        o.evidence,
        [{ type: 'instance.recovered', data: recovered(actor, o.evidence) }],
        ['watch-for-stop'],
      );
    if (state === 'adopted')
      return d(
        'resumed',
        o.evidence,
        [{ type: 'instance.recovered', data: recovered(actor, o.evidence) }],
        ['hold-for-reattach'],
      );
    return d(
      'adopted',
      o.evidence,
      [{ type: 'instance.adopted', data: { ...o.location, evidence: o.evidence } }],
      ['hold-for-reattach'],
    );
  }
  // Exited while the supervisor was away. The container goes first, so a restart cannot trip over it.
  if (stopping) return d('exited', o.evidence, [exited(o.exitCode, o.evidence)], ['remove-container']);
  return d(
    'crashed',
    o.evidence,
    [
      {
        type: 'instance.crashed',
        data: {
          reason: 'exit',
          exitCode: o.exitCode,
          message: `exited while the supervisor was down (code ${o.exitCode})`,
          evidence: o.evidence,
        },
      },
    ],
    ['remove-container'],
  );
}

type InstanceDecide = (
  outcome: Outcome,
  evidence: Evidence,
  events: KindNewEvent<'instance'>[],
  prepare?: Preparation[],
) => Decision<'instance'>;

/**
 * An instance its supervisor suspended as it stopped gracefully (onGracefulStop): its sandbox stopped on the
 * operator's request, not by the app's failure, so it is spawned again (`instance.recovered`: suspended →
 * spawning) with its restart count as it was. A container found running is adopted; one that exited is removed
 * first, so the spawn does not trip over it.
 */
function decideSuspended(actor: ActorAt, o: InstanceObservation, d: InstanceDecide): Decision<'instance'> {
  const respawn = (evidence: Evidence, prepare?: Preparation[]) =>
    d('resumed', evidence, [{ type: 'instance.recovered', data: recovered(actor, evidence) }], prepare);
  if ('node' in o) return respawn(o.evidence);
  if (o.sandbox === 'proot') return respawn({ sandbox: 'proot', state: 'suspended' });
  if (o.container === 'none')
    return respawn({
      containerId: (actor.snapshot.context as InstanceContext).containerId,
      observed: NO_CONTAINER,
      state: 'suspended',
    });
  if (o.container === 'alive')
    return d(
      'adopted',
      o.evidence,
      [{ type: 'instance.adopted', data: { ...o.location, evidence: o.evidence } }],
      ['hold-for-reattach'],
    );
  return respawn(o.evidence, ['remove-container']);
}

/** Live instance states whose sandbox recovery asks about (crashed.backoff has no sandbox). */
const LIVE_INSTANCE = new Set(['spawning', 'healthy', 'running', 'paused', 'adopted', 'stopping']);

/** Recovery of an execution. */
export function decideExecution(actor: ActorAt, o: ExecutionObservation): Decision<'execution'> {
  const c = actor.snapshot.context as ExecutionContext;
  const state = stateName(actor.snapshot);
  if (!LIVE_EXECUTION.has(state)) return nothing();
  const d = (outcome: Outcome, evidence: Evidence, events: KindNewEvent<'execution'>[]) =>
    decision('execution', actor, o.at, outcome, evidence, events);
  const timeout = (evidence: Evidence, message: string): KindNewEvent<'execution'> => ({
    type: 'execution.failed',
    data: { reason: 'timeout', code: 'DEADLINE_EXCEEDED', message, evidence },
  });
  const deadlinePassed = c.deadline !== null && msBetween(c.deadline, o.at) > 0;
  const recover = (evidence: Evidence, outcome: Outcome = 'resumed') =>
    d(outcome, evidence, [{ type: 'execution.recovered', data: { version: actor.version, evidence } }]);

  // A refused job's answer died with its supervisor (here or on another node): nothing of it ran, so it is
  // answered again, whatever its deadline; its receipt replaces the same record.
  if (state === 'refusing') return recover({ state });
  if ('node' in o) {
    const previous = String(o.evidence.node ?? 'another node');
    return d('lost', o.evidence, [
      {
        type: 'execution.failed',
        data: {
          reason: 'lost',
          code: 'NODE_LOST',
          message: `its supervisor (${previous}) is gone; the result cannot be collected`,
          evidence: o.evidence,
        },
      },
    ]);
  }
  if (state === 'resolving' || state === 'materializing' || state === 'starting') {
    // The step died with the supervisor; its effect is idempotent, so it runs again (the machine's entry for the
    // state emits it) — unless the deadline passed meanwhile.
    const evidence = { state, deadline: c.deadline };
    if (deadlinePassed)
      return d('failed', evidence, [timeout(evidence, `its deadline passed while the supervisor was down (${state})`)]);
    return recover(evidence);
  }
  // running | adopted: the log names its container.
  if (o.container === 'unrecorded' || o.container === 'missing') {
    const evidence =
      o.container === 'missing' ? o.evidence : { containerId: c.containerId, observed: 'container not found' };
    return d('lost', evidence, [
      {
        type: 'execution.failed',
        data: {
          reason: 'lost',
          code: 'CONTAINER_GONE',
          message: 'its container is gone; the result cannot be collected',
          evidence,
        },
      },
    ]);
  }
  if (state === 'adopted') return recover(o.evidence, 'collect'); // adopted before but not finished: collect again
  if (o.container === 'created') {
    // Created, never started: nothing of the handler ran, so the invocation can happen now. (If the dead
    // supervisor had already attached, StdinOnce closed the container's stdin: the invocation then ends
    // failed/lost ENVELOPE_NOT_DELIVERED — a fresh container would need a running → starting transition.)
    if (deadlinePassed)
      return d('failed', o.evidence, [
        timeout(o.evidence, 'its deadline passed while the supervisor was down; it never started'),
      ]);
    return recover(o.evidence);
  }
  return d('adopted', o.evidence, [
    { type: 'execution.adopted', data: { containerId: c.containerId, evidence: o.evidence } },
  ]);
}

const LIVE_EXECUTION = new Set(['refusing', 'resolving', 'materializing', 'starting', 'running', 'adopted']);

/** Recovery of any actor (the shell's entry point). */
export function decide(kind: 'instance', actor: ActorAt, observation: InstanceObservation): Decision<'instance'>;
export function decide(kind: 'execution', actor: ActorAt, observation: ExecutionObservation): Decision<'execution'>;
export function decide(
  kind: ActorKind,
  actor: ActorAt,
  observation: InstanceObservation | ExecutionObservation,
): Decision<'instance'> | Decision<'execution'> {
  return kind === 'instance'
    ? decideInstance(actor, observation as InstanceObservation)
    : decideExecution(actor, observation as ExecutionObservation);
}

/**
 * What a supervisor records for an instance it has just read back from the log, before any observation: a
 * restart timer is armed again from the machine's own output (an overdue one fires now). Everything else waits
 * for the reconciler's observation.
 */
export function onRehydrate(actor: ActorAt): KindNewEvent<'instance'>[] {
  return stateName(actor.snapshot) === 'crashed.backoff'
    ? [{ type: 'instance.recovered', data: { version: actor.version } }]
    : [];
}

/** States whose PRoot sandbox is running or starting: it stops with its supervisor. */
const SUSPENDABLE = new Set(['spawning', 'healthy', 'running', 'paused']);

/**
 * What a supervisor records for an instance as it stops gracefully, before it stops the sandboxes: a PRoot
 * instance whose sandbox this process runs or is starting (`here`: it is the supervisor's child and dies with it)
 * is suspended, so the next start spawns it again without counting a crash. One whose sandbox this process does
 * not hold (it died with an earlier supervisor, not yet reconciled) keeps its crash. A container instance keeps
 * running and is adopted at the next start: nothing. A supervisor that dies without this record (kill -9, the host
 * crashing) leaves the instance as the log had it, and recovery records the crash (reason supervisor-restart).
 */
export function onGracefulStop(actor: ActorAt, here: boolean): KindNewEvent<'instance'>[] {
  const c = actor.snapshot.context as InstanceContext;
  const state = stateName(actor.snapshot);
  if (!here || c.spec?.sandbox !== 'proot' || !SUSPENDABLE.has(state)) return [];
  return [
    {
      type: 'instance.suspended',
      data: {
        reason: 'supervisor-stop',
        message: 'its supervisor stopped gracefully; its PRoot sandbox stopped with it',
        evidence: { sandbox: 'proot', pid: c.pid, state },
      },
    },
  ];
}
