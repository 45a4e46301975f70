// What a supervisor on PostgreSQL runs as a node of the cluster, started once its actors are rehydrated: the lease
// beat and its listener, the self-fence, hand-over and placement requests, the execution queue, and `logs --follow`
// across nodes. Each is a typed value of ClusterServices: a caller holding one never checks for a missing part.
import type { Clock } from '../../domain/clock.ts';
import { RunlogError } from '../../domain/errors.ts';
import type { LogLine } from '../../domain/log-line.ts';
import type { HostStore } from '../../store/host-store.ts';
import type { PgHostStore } from '../../store/postgres/host-store.ts';
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
import { startSelfFence, type RenewalRelay } from './self-fence.ts';
import type { RestartTimers } from '../host/timers.ts';
import type { AppToolSync } from '../instances/app-tool-sync.ts';

/** How long the cluster node that took an execution's call has it to itself before other nodes may claim it. */
const QUEUE_HEAD_START_MS = 2000;

export interface ClusterInputs {
  node: string;
  pgUrl: string;
  pgStore: PgHostStore;
  store: HostStore;
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
  /** The live instance whose lines a remote follower reads. */
  live(id: string): LiveActor;
}

export interface ClusterServices {
  handover: Handover;
  placement: Placement;
  queue: ExecutionQueue;
  follows: { owner: FollowOwner; remote(owner: string, id: string, signal?: AbortSignal): AsyncIterable<LogLine>; close(): void };
  stopSelfFence(): void;
}

export async function startCluster(c: ClusterInputs): Promise<ClusterServices> {
  const { node, pgStore, hostRef, clock, instances, log } = c;
  const leases = pgStore.leases;
  if (!leases) throw new RunlogError('INTERNAL', `the store of cluster node ${node} holds no leases`);
  const requests = clusterRequests(c);
  // Leases reclaimed from an earlier run of this node whose actors have ended are given back.
  const liveStreams = new Set(c.rehydrated.map((a) => a.stream));
  for (const s of leases.held.keys()) if (!liveStreams.has(s)) pgStore.letGo(s);
  pgStore.startLeases(
    clusterListener(hostRef, node, {
      letGo: (s) => pgStore.letGo(s),
      nowMs: () => clock.nowMs(),
      relinquish: (id) => instances.relinquish(id),
      rearm: (actor) => void c.timers.rearm(actor),
      removeNodesContainers: (id, previous) => instances.removeNodesContainers(id, previous),
      taking: (streams) => requests.handover.taking(streams),
      tookOver: (streams) => {
        requests.handover.tookOver(streams);
        // What the dead owner had not applied of the app's `cap` changes is applied here, once.
        void c.toolSync.syncStreams(streams).catch((err: unknown) => log(`cap changes for taken-over instances: ${(err as Error).message}`));
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
  const stopSelfFence = startSelfFence(leases, c.renewals, { sandboxed: () => instances.sandboxed(), relinquish: (id) => instances.relinquish(id), resumed: () => void (c.reconciles ? c.reconcile() : null)?.catch((err: unknown) => log(`reconcile after the self-fence: ${(err as Error).message}`)), log }, c.openedAtMs, (t, p) => pgStore.pg.sql(t, p));
  // An execution that ended here makes room for a queued one.
  c.bus.on('actor:transition', (t) => {
    if (t.kind === 'execution' && (t.to === 'succeeded' || t.to === 'failed')) requests.queue.pump();
  });
  return { ...requests, follows: await followAcrossNodes(c), stopSelfFence };
}

/** The requests nodes leave each other in the log: hand-overs (stop, kill, logs), placed spawns, queued executions. */
function clusterRequests(c: ClusterInputs): Pick<ClusterServices, 'handover' | 'placement' | 'queue'> {
  const { node, pgStore, store, hostRef, clock, instances, log } = c;
  const handover = new Handover({
    store,
    node,
    nowMs: () => clock.nowMs(),
    owns: (s) => pgStore.owns(s),
    appendFact: (stream, events) => hostRef().appendFact(stream, events),
    act: (r) => c.act(r),
    log,
  });
  const placement = new Placement({
    store,
    node,
    nowMs: () => clock.nowMs(),
    appendFact: (stream, events) => hostRef().appendFact(stream, events),
    spawnHere: (r) => {
      const spec = instances.prepare(r.appDir, r.sandbox, r.instanceId);
      return hostRef().create('instance', spec.instanceId, { type: 'instance.requested', data: { spec } }).then(c.spawned(spec.instanceId));
    },
    log,
  });
  const queue = new ExecutionQueue({
    store,
    node,
    limit: c.execLimit ?? c.executions.policy.executions.maxRunning,
    headStartMs: QUEUE_HEAD_START_MS,
    nowMs: () => clock.nowMs(),
    running: () => hostRef().live().filter((a) => a.kind === 'execution').length,
    appendFact: (stream, events) => hostRef().appendFact(stream, events),
    cancel: (id) => hostRef().dispatch('execution', id, { type: 'execution.cancel-requested', data: {} }),
    claim: (q) => hostRef().create('execution', q.executionId, { type: 'execution.requested', data: { request: q.request as never, deadline: new Date(clock.nowMs() + q.request.timeoutMs + 120_000).toISOString() } }),
    log,
  });
  return { handover, placement, queue };
}

/** `logs --follow` across nodes: LISTEN/NOTIFY, outside the log (remote-follow.ts); pg loaded on a cluster only. */
async function followAcrossNodes(c: ClusterInputs): Promise<ClusterServices['follows']> {
  const { node, pgStore, log } = c;
  const [{ PgFollowBus, controlChannel }, rf, { splitStoreUrl }] = await Promise.all([import('../../store/postgres/follow-channel.ts'), import('./remote-follow.ts'), import('../../store/postgres/host-store.ts')]);
  const followBus = new PgFollowBus({ url: splitStoreUrl(c.pgUrl).url, sql: (text, params) => pgStore.pg.sql(text, params), log });
  const schema = pgStore.pg.schema;
  const owner = new rf.FollowOwner({
    bus: followBus,
    channel: controlChannel(schema, node),
    node,
    owns: (id) => pgStore.owns(`instance-${id}`),
    open: (id) => c.instances.logs(c.live(id), true),
    timers: rf.realTimers,
    log,
  });
  return {
    owner,
    remote: (on, id, signal) => rf.followRemote({ bus: followBus, node, timers: rf.realTimers }, on, controlChannel(schema, on), id, signal),
    close: () => {
      owner.stop();
      followBus.close();
    },
  };
}
