// What a supervisor on PostgreSQL runs as a node of the cluster, started once its actors are rehydrated: the lease
// beat and its listener, the self-fence, hand-over and placement requests, the execution queue, and `logs --follow`
// across nodes. Each is a typed value of ClusterServices: a caller holding one never checks for a missing part.
import type { Clock } from '../../domain/clock.ts';
import type { ClusterRecords } from '../../domain/cluster-nodes.ts';
import type { LogLine } from '../../domain/log-line.ts';
import type { Leasing } from '../../store/capabilities.ts';
import type { FollowBus } from '../../store/postgres/follow-channel.ts';
import type { EventStorePort } from '../../store/port.ts';
import type { ActorHost, LiveActor } from '../host/actor-host.ts';
import type { Bus } from '../host/bus.ts';
import { clusterListener } from './takeover.ts';
import { ExecutionQueue } from '../executions/execution-queue.ts';
import type { ExecutionSupervisor } from '../executions/executions.ts';
import { Handover, type HandoverDeps } from './handover.ts';
import type { InstanceSupervisor } from '../instances/instances.ts';
import { Placement } from './placement.ts';
import { recoverRehydrated } from '../recovery/reconciler.ts';
import type { FollowOwner } from './remote-follow.ts';
import { selfFenceAfterMs, startSelfFence, type RenewalRelay } from './self-fence.ts';
import type { RestartTimers } from '../host/timers.ts';
import type { AppToolSync } from '../instances/app-tool-sync.ts';

/** How long the cluster node that took an execution's call has it to itself before other nodes may claim it. */
const QUEUE_HEAD_START_MS = 2000;

/**
 * The pub/sub `logs --follow` across nodes rides on, outside the log (PostgreSQL LISTEN/NOTIFY:
 * store/postgres/follow-channel.ts PgFollowBus and controlChannel), made by the composition root with the store.
 */
export interface FollowChannels {
  bus: FollowBus;
  /** A node's control channel (where follows of its instances are asked for). */
  control(node: string): string;
  close(): void;
}

export interface ClusterInputs {
  node: string;
  store: EventStorePort;
  /** This node's leases. */
  leasing: Leasing;
  /** How long a lease lives without renewal (ms): the self-fence stops this node's sandboxes well within it. */
  leaseTtlMs: number;
  follows: FollowChannels;
  hostRef: () => ActorHost;
  bus: Bus;
  clock: Clock;
  instances: InstanceSupervisor;
  executions: ExecutionSupervisor;
  timers: RestartTimers;
  toolSync: AppToolSync;
  log: (msg: string) => void;
  /** The streams rehydrated at start: leases reclaimed for any other are given back. */
  rehydrated: readonly { stream: string }[];
  /** The store's lease renewal reports, for the self-fence. */
  renewals: RenewalRelay;
  /** When the store was opened (no later than it reclaimed this node's leases: self-fence.ts). */
  openedAtMs: number;
  execLimit: number | undefined;
  /** Whether to reconcile with Docker (after a take-over, after the self-fence). */
  reconciles: boolean;
  reconcile(): Promise<unknown>;
  /** A hand-over request this node holds the lease for, carried out here. */
  act: HandoverDeps['act'];
  /** Spawns a placed instance here: resolves with what the instance's first event answered. */
  spawned(instanceId: string): <R>(r: R) => R;
  /** The live instance whose lines a remote follower reads (a typed error when it does not run here). */
  live(id: string): Promise<LiveActor>;
}

export interface ClusterServices {
  handover: Handover;
  placement: Placement;
  queue: ExecutionQueue;
  follows: {
    owner: FollowOwner;
    remote(owner: string, id: string, signal?: AbortSignal): AsyncIterable<LogLine>;
    close(): void;
  };
  stopSelfFence(): void;
}

export async function startCluster(c: ClusterInputs): Promise<ClusterServices> {
  const { node, leasing, hostRef, clock, instances, log } = c;
  const requests = clusterRequests(c);
  // Leases reclaimed from an earlier run of this node whose actors have ended are given back.
  const liveStreams = new Set(c.rehydrated.map((a) => a.stream));
  try {
    for (const l of (await leasing.clusterRecords()).leases)
      if (l.node === node && !liveStreams.has(l.stream)) leasing.letGo(l.stream);
  } catch (err) {
    log(`leases of ended actors are kept until the next start: ${(err as Error).message}`);
  }
  leasing.startLeases(
    clusterListener(hostRef, node, {
      letGo: (s) => leasing.letGo(s),
      nowMs: () => clock.nowMs(),
      relinquish: (id) => instances.relinquish(id),
      rearm: (actor) => void c.timers.rearm(actor),
      removeNodesContainers: (id, previous) => instances.removeNodesContainers(id, previous),
      taking: (streams) => requests.handover.taking(streams),
      tookOver: (streams) => {
        requests.handover.tookOver(streams);
        // What the dead owner had not applied of the app's `cap` changes is applied here, once.
        void c.toolSync
          .syncStreams(streams)
          .catch((err: unknown) => log(`cap changes for taken-over instances: ${(err as Error).message}`));
      },
      // As start-up recovers what it rehydrates: restart timers armed again, then a reconcile observes each
      // actor's sandbox and the reconcile decision says what to record (an interrupted spawn, an execution
      // whose log says how far it got).
      recover: async (actors) => {
        await recoverRehydrated(hostRef(), actors, log);
        if (c.reconciles) await c.reconcile();
      },
      log,
    }),
  );
  // A node that cannot renew its leases stops its instance sandboxes before they can run elsewhere too.
  // Once renewals are answered again, what the fence stopped is recorded first (crashed, self-fenced: restarted
  // here), then a reconcile observes the rest.
  const resumed = async () => {
    await instances.recordSelfFenced(selfFenceAfterMs(c.leaseTtlMs));
    if (c.reconciles) await c.reconcile();
  };
  const fenceDeps = {
    sandboxed: () => instances.sandboxed(),
    relinquish: (id: string) => instances.relinquish(id, 'self-fence'),
    resumed: () =>
      void resumed().catch((err: unknown) => log(`recovery after the self-fence: ${(err as Error).message}`)),
    log,
  };
  const stopSelfFence = startSelfFence(c.leaseTtlMs, c.renewals, fenceDeps, c.openedAtMs, async () =>
    leastLeaseLeftMs(await leasing.clusterRecords(), node),
  );
  // An execution that ended here makes room for a queued one.
  c.bus.on('actor:transition', (t) => {
    if (t.kind === 'execution' && (t.to === 'succeeded' || t.to === 'failed')) requests.queue.pump();
  });
  return { ...requests, follows: await followAcrossNodes(c), stopSelfFence };
}

/** The requests nodes leave each other in the log: hand-overs (stop, kill, logs), placed spawns, queued executions. */
function clusterRequests(c: ClusterInputs): Pick<ClusterServices, 'handover' | 'placement' | 'queue'> {
  const { node, leasing, store, hostRef, clock, instances, log } = c;
  const handover = new Handover({
    store,
    node,
    nowMs: () => clock.nowMs(),
    owns: (s) => leasing.owns(s),
    appendFact: (stream, events) => hostRef().appendFact(stream, events),
    act: (r) => c.act(r),
    log,
  });
  const placement = new Placement({
    store,
    node,
    nowMs: () => clock.nowMs(),
    appendFact: (stream, events) => hostRef().appendFact(stream, events),
    spawnHere: async (r) => {
      const spec = await instances.prepare(r.appDir, r.sandbox, r.instanceId);
      return hostRef()
        .create('instance', spec.instanceId, { type: 'instance.requested', data: { spec } })
        .then(c.spawned(spec.instanceId));
    },
    log,
  });
  const queue = new ExecutionQueue({
    store,
    node,
    limit: c.execLimit ?? c.executions.policy.executions.maxRunning,
    headStartMs: QUEUE_HEAD_START_MS,
    nowMs: () => clock.nowMs(),
    running: () =>
      hostRef()
        .live()
        .filter((a) => a.kind === 'execution').length,
    appendFact: (stream, events) => hostRef().appendFact(stream, events),
    cancel: (id) => hostRef().dispatch('execution', id, { type: 'execution.cancel-requested', data: {} }),
    claim: (q) =>
      hostRef().create('execution', q.executionId, {
        type: 'execution.requested',
        data: {
          request: q.request as never,
          deadline: new Date(clock.nowMs() + q.request.timeoutMs + 120_000).toISOString(),
        },
      }),
    log,
  });
  return { handover, placement, queue };
}

/** `logs --follow` across nodes: LISTEN/NOTIFY, outside the log (remote-follow.ts); loaded on a cluster only. */
async function followAcrossNodes(c: ClusterInputs): Promise<ClusterServices['follows']> {
  const { node, leasing, follows, log } = c;
  const rf = await import('./remote-follow.ts');
  const owner = new rf.FollowOwner({
    bus: follows.bus,
    channel: follows.control(node),
    node,
    owns: (id) => leasing.owns(`instance-${id}`),
    open: (id) => followHere(c, id),
    timers: rf.realTimers,
    log,
  });
  return {
    owner,
    remote: (on, id, signal) =>
      rf.followRemote({ bus: follows.bus, node, timers: rf.realTimers }, on, follows.control(on), id, signal),
    close: () => {
      owner.stop();
      follows.close();
    },
  };
}

/** The local follow of an instance this node runs (its actor found first: a typed error when it does not run here). */
async function* followHere(c: ClusterInputs, id: string): AsyncGenerator<LogLine> {
  yield* c.instances.logs(await c.live(id), true);
}

/** How long the node's leases have left on the server's clock, the least of them (null: it holds none). */
function leastLeaseLeftMs(records: ClusterRecords, node: string): number | null {
  const left = records.leases.filter((l) => l.node === node).map((l) => l.expiresInMs);
  return left.length > 0 ? Math.min(...left) : null;
}
