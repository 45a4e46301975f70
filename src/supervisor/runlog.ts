// The library entry point. `createRunlog()` opens the log; with `supervise` (the default) it also
// rehydrates every live actor and runs effects, i.e. it is the supervisor. Inspection works either way.
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { resolve } from 'node:path';
import { newExecutionId, newInstanceId } from '../adapters/ids.ts';
import { discoverParts } from '../config/parts.ts';
import { resolvePaths } from '../config/paths.ts';
import { checkExecuteRequest } from '../domain/at-run/execute-request.ts';
import type { Clock } from '../domain/clock.ts';
import { RunlogError, ValidationError } from '../domain/errors.ts';
import { routeRequest } from '../domain/handover.ts';
import { assertNodeChoice, chooseNode, type NodeChoice } from '../domain/placement.ts';
import { supervision } from '../domain/supervision.ts';
import type { ExecutionContext } from '../machines/execution.machine.ts';
import type { InstanceContext } from '../machines/instance.machine.ts';
import { isPostgresUrl } from '../store/postgres/url.ts';
import type { EventStorePort } from '../store/port.ts';
import type { Leasing } from '../store/capabilities.ts';
import { WriterLock } from '../store/sqlite/writer-lock.ts';
import { IllegalEventError } from './host/actor-host.ts';
import { buildHost, type HostServices } from './host/actor-host-wiring.ts';
import { changeAppTool } from './instances/app-tool-changes.ts';
import { AppToolSync } from './instances/app-tool-sync.ts';
import { createBus, type Bus } from './host/bus.ts';
import { startCluster, type ClusterServices } from './cluster/cluster-services.ts';
import { startEngineWatch } from './recovery/engine-watch.ts';
import { ExecutionLimiter } from './executions/execution-limiter.ts';
import { awaitQueued } from './executions/execution-queue.ts';
import { noFaults } from './host/faults.ts';
import { suspendOnStop } from './host/graceful-stop.ts';
import type { Handover } from './cluster/handover.ts';
import { startHeartbeat, type HeartbeatHandle } from './host/heartbeat.ts';
import {
  actorEvents,
  inspectActor,
  listActors,
  rebuildProjection,
  replayActor,
  type ActorView,
} from '../inspect/inspection.ts';
import { instanceOperations, type InstanceOperations } from './instances/instance-operations.ts';
import { RunlogMetrics } from './observability/metrics.ts';
import { DEFAULT_LEASE_TTL_MS, openLog, type OpenedLog } from './open-log.ts';
import { pinnedTarget, pinnedWatch, raceGuard } from './cluster/pinned-wait.ts';
import { leaseOf, nodeLoads, readNodes } from './cluster/nodes.ts';
import { Reconciler, recoverRehydrated, type ReconcileOptions } from './recovery/reconciler.ts';
import type { ReconcileReport } from './recovery/reconcile-run.ts';
import type { ExecuteOptions, ExecutionOutcome, Runlog, RunlogOptions } from './runlog-api.ts';
import { byState, executionEnded, instanceStopped, SettleWaits, spawnSettled } from './host/settle-waits.ts';
import { systemClock } from './host/system-clock.ts';
import { RunlogTracing } from './observability/tracing.ts';

/** How long a queued execution waits to be claimed before its caller is told PLACEMENT_TIMEOUT. */
const QUEUE_CLAIM_MS = 300_000;

// The public types (options, views and the Runlog facade) live in runlog-api.ts.
export type {
  AppToolsView,
  ExecuteOptions,
  ExecutionOutcome,
  LogLine,
  Runlog,
  RunlogOptions,
  SpawnAppOptions,
} from './runlog-api.ts';

export async function createRunlog(options: RunlogOptions = {}): Promise<Runlog> {
  // An explicit db wins over the environment's store.
  const url = options.store ?? (options.db === undefined ? process.env.RUNLOG_STORE || undefined : undefined);
  const pgUrl = isPostgresUrl(url) ? url : undefined;
  const paths = resolvePaths({ ...options, ...(url && !pgUrl ? { db: url } : {}) });
  const supervise = options.supervise ?? true;
  const readOnly = options.readOnly ?? !supervise;
  if (supervise && readOnly)
    throw new ValidationError(
      'OPTIONS_INVALID',
      'a supervising runlog writes its log: supervise and readOnly exclude each other',
    );
  // The writer lock comes first: a second writer must be refused before it reads, reconciles or appends anything.
  if (options.writerLock && (readOnly || options.writerLock.dbFile !== paths.db || !options.writerLock.held)) {
    throw new ValidationError('OPTIONS_INVALID', `writerLock must be held for ${paths.db} by a writable runlog`);
  }
  // On PostgreSQL there is no file to lock: supervisors share the log (leases say who owns which actor).
  const writer =
    readOnly || pgUrl ? null : (options.writerLock ?? WriterLock.acquire(paths.db, options.command ?? 'createRunlog'));
  try {
    return await openRunlog(options, paths, supervise, readOnly, writer, pgUrl);
  } catch (err) {
    writer?.release();
    throw err;
  }
}

/** What the facade's calls are made of: the services openRunlog composed, each a typed value. */
interface Composed {
  options: RunlogOptions;
  paths: { home: string; db: string };
  supervise: boolean;
  writer: WriterLock | null;
  opened: OpenedLog;
  store: EventStorePort;
  /** This node's leases (null: not a cluster node). */
  leasing: Leasing | null;
  selfNode: string;
  bus: Bus;
  log: (msg: string) => void;
  clock: Clock;
  now: () => string;
  tracing: RunlogTracing | null;
  services: HostServices;
  toolSync: AppToolSync;
  spawned: (instanceId: string) => <R>(r: R) => R;
  reconcile(o?: ReconcileOptions): Promise<ReconcileReport>;
  metrics: RunlogMetrics | null;
  heartbeat: HeartbeatHandle | null;
  cluster: ClusterServices | null;
  engineWatch: { close(): Promise<void> } | null;
  waits: SettleWaits;
  ops: InstanceOperations;
  limiter: ExecutionLimiter;
  guardPinned: ReturnType<typeof pinnedWatch> | null;
  placeOn(choice: NodeChoice): Promise<string>;
}

/** The composition root: the log, the host and its supervisors, the cluster's services, then the facade over them. */
async function openRunlog(
  options: RunlogOptions,
  paths: { home: string; db: string },
  supervise: boolean,
  readOnly: boolean,
  writer: WriterLock | null,
  pgUrl: string | undefined,
): Promise<Runlog> {
  // A supervisor on PostgreSQL is a cluster node (maybe the only one): its actors are leased to it.
  const node = pgUrl && supervise ? (options.node ?? hostname()) : undefined;
  const openedAtMs = performance.now(); // no later than the store reclaims this node's leases (self-fence.ts)
  const log = options.log ?? ((m: string) => process.stderr.write(`[runlog] ${m}\n`));
  const opened = await openLog(options, paths.db, readOnly, pgUrl, node, supervise, log);
  const { store } = opened;
  const leasing = opened.cluster?.leasing ?? null;
  if (node) options = { ...options, labels: { ...options.labels, 'runlog.node': node } };
  const bus = createBus();
  const faults = options.faults ?? noFaults;
  const parts = discoverParts(options.parts);
  const clock = options.clock ?? systemClock;
  const now = options.now ?? (() => new Date(clock.nowMs()).toISOString());
  const tracing = supervise ? new RunlogTracing(bus, options.tracerProvider) : null;
  const services = buildHost({
    options,
    home: paths.home,
    store,
    leasing,
    reconnecting: opened.reconnecting,
    supervise,
    bus,
    log,
    faults,
    parts,
    clock,
    now,
    tracing,
  });
  const { host, hostRef, instances, executions } = services;
  // `cap` changes reach the instances this node owns (all of them, on one machine): app-tool-sync.ts.
  const toolSync = new AppToolSync({
    store,
    live: () => host.live(),
    owns: (s) => !leasing || leasing.owns(s),
    dispatch: (id, e) => host.dispatch('instance', id, e),
    log,
  });
  /** Passes a spawn's first-event result on, after asking for the `cap` look at it (app-tool-sync.ts spawned). */
  const spawned =
    (instanceId: string) =>
    <R>(r: R): R => {
      void toolSync
        .spawned(`instance-${instanceId}`)
        .catch((err: unknown) => log(`cap changes for ${instanceId}: ${(err as Error).message}`));
      return r;
    };
  const reconciler = new Reconciler(hostRef, instances, executions, log, {
    clock,
    ...(options.orphanPolicy ? { orphanPolicy: options.orphanPolicy } : {}),
    ...(leasing ? { owns: (stream: string) => leasing.owns(stream) } : {}),
  });
  // This supervisor's node name (on SQLite: the host's, the only node there is).
  const selfNode = node ?? options.node ?? hostname();
  const placeOn = (choice: NodeChoice) => placeRequest(choice, leasing, selfNode, now);
  const heartbeat = supervise ? startHeartbeat(store, now, options.heartbeatMs, log, node) : null;
  const metrics =
    supervise && (options.metrics ?? true)
      ? new RunlogMetrics({
          store,
          metered: opened.metered,
          host: hostRef,
          bus,
          now,
          lastHeartbeat: () => heartbeat?.lastBeat() ?? null,
          appWatch: () => instances.appWatchMode(),
          prestart: () => executions.pool.accounts(),
        })
      : null;
  const reconcile = async (o?: ReconcileOptions): Promise<ReconcileReport> => {
    const report = await reconciler.reconcile(o);
    metrics?.reconciled(report);
    return report;
  };
  // Waits for an actor to settle, each with its deadline: ended by close() (settle-waits.ts).
  const waits = new SettleWaits({ bus, store, followLog: leasing !== null });
  const ops = instanceOperations({ store, host, instances, waits, killGraceMs: options.killGraceMs });
  const cluster = supervise
    ? await startSupervising({
        options,
        services,
        store,
        opened,
        node,
        bus,
        clock,
        log,
        toolSync,
        spawned,
        reconcile,
        openedAtMs,
        ops,
      })
    : null;
  // Docker restarting or briefly unreachable: reconnect, resubscribe to engine events, reconcile.
  const engineWatch =
    supervise && (options.engineWatch ?? true)
      ? startEngineWatch({
          socketPath: parts.dockerSocket,
          engine: services.engine(),
          home: paths.home,
          host: hostRef,
          reconcile: () => reconcile({ reattach: true }),
          tracks: (id) => instances.tracks(id),
          log,
        })
      : null;
  // A pinned execution's node is watched while it waits to be claimed: NODE_UNAVAILABLE once it is not live (pinned-wait.ts).
  const guardPinned =
    leasing && cluster
      ? pinnedWatch({ self: selfNode, leasing, store, queue: cluster.queue, nowMs: () => clock.nowMs(), log })
      : null;
  // Hand-over requests are carried out from here on.
  if (supervise) await cluster?.handover.start();
  if (supervise) await cluster?.follows.owner.start();
  if (supervise && leasing) {
    // Every node follows the `cap` changes any node records; those recorded while this one was down apply now.
    await toolSync.start();
    void toolSync.syncAll().catch((err: unknown) => log(`cap changes at start-up: ${(err as Error).message}`));
  }
  const limiter = new ExecutionLimiter(executions.policy.executions, clock);
  return runlogFacade({
    options,
    paths,
    supervise,
    writer,
    opened,
    store,
    leasing,
    selfNode,
    bus,
    log,
    clock,
    now,
    tracing,
    services,
    toolSync,
    spawned,
    reconcile,
    metrics,
    heartbeat,
    cluster,
    engineWatch,
    waits,
    ops,
    limiter,
    guardPinned,
    placeOn,
  });
}

/** Where a request for `choice` goes: this node's name, or another live node's (NODE_UNKNOWN, NODE_UNAVAILABLE). */
async function placeRequest(
  choice: NodeChoice,
  leasing: Leasing | null,
  selfNode: string,
  now: () => string,
): Promise<string> {
  assertNodeChoice(choice);
  if (!leasing) {
    if (choice === 'any' || choice === selfNode) return selfNode;
    throw new RunlogError(
      'NODE_UNKNOWN',
      `no node named ${choice}: a SQLite log has one node, this one (${selfNode}); use node 'any' or '${selfNode}'`,
      { node: choice },
    );
  }
  // This node is live while it answers, whatever its last recorded beat says.
  const loads = nodeLoads(await leasing.clusterRecords()).map((n) => (n.node === selfNode ? { ...n, live: true } : n));
  if (!loads.some((n) => n.node === selfNode))
    loads.push({ node: selfNode, live: true, beatAt: now(), stoppedAt: null, instances: 0, executions: 0 });
  return chooseNode(choice, loads, selfNode);
}

/**
 * A supervisor's start: live actors rehydrated and recovered, the cluster's services started (a cluster node),
 * Docker reconciled, placed requests and queued executions taken, the apps workspace followed, the runner record
 * published.
 */
async function startSupervising(c: {
  options: RunlogOptions;
  services: HostServices;
  store: EventStorePort;
  opened: OpenedLog;
  node: string | undefined;
  bus: Bus;
  clock: Clock;
  log: (msg: string) => void;
  toolSync: AppToolSync;
  spawned: (instanceId: string) => <R>(r: R) => R;
  reconcile(o?: ReconcileOptions): Promise<ReconcileReport>;
  openedAtMs: number;
  ops: InstanceOperations;
}): Promise<ClusterServices | null> {
  const { options, services, node, log } = c;
  const clusterLog = c.opened.cluster;
  const { host, instances, executions } = services;
  const rehydrated = await host.rehydrate();
  await recoverRehydrated(host, rehydrated, log);
  const cluster =
    clusterLog && node
      ? await startCluster({
          node,
          leasing: clusterLog.leasing,
          leaseTtlMs: options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS,
          follows: clusterLog.follows,
          renewals: clusterLog.renewals,
          store: c.store,
          hostRef: services.hostRef,
          bus: c.bus,
          clock: c.clock,
          instances,
          executions,
          timers: services.timers,
          toolSync: c.toolSync,
          log,
          rehydrated,
          openedAtMs: c.openedAtMs,
          execLimit: options.execLimit,
          reconciles: options.reconcile ?? true,
          reconcile: () => c.reconcile(),
          act: (r) => c.ops.actHere(r),
          spawned: c.spawned,
          live: (id) => c.ops.live(id, 'instance'),
        })
      : null;
  if (options.reconcile ?? true) {
    // Pre-started sandboxes of an earlier supervisor are removed (and recorded) first, but for one a live
    // execution runs in: its actor's recovery (below) decides about that one.
    const inUse = new Set(
      host.live().flatMap((a) => {
        const containerId = a.kind === 'execution' ? (a.snapshot.context as ExecutionContext).containerId : null;
        return containerId ? [containerId] : [];
      }),
    );
    await executions.pool
      .recover(inUse)
      .catch((err: unknown) =>
        log(`pre-started sandboxes of an earlier run were not all removed: ${(err as Error).message}`),
      );
    const report = await c.reconcile();
    if (report.actions.length > 0) log(`reconciled ${report.actions.length} actors (${summarizeActions(report)})`);
  }
  // Requests placed on this node, and queued executions, are taken once it has recovered and reconciled.
  await cluster?.placement.start();
  await cluster?.queue.start();
  if (options.watchApps ?? true)
    await instances
      .startRegistry(options.appWatch)
      .catch((err: unknown) => log(`apps: manifest edits are not followed: ${(err as Error).message}`));
  if (options.receipts) {
    await executions
      .publishRunnerRecord()
      .catch((err: unknown) => log(`could not publish the runner record: ${(err as Error).message}`));
  }
  return cluster;
}

/** The Runlog facade: the public calls over the composed services. */
function runlogFacade(c: Composed): Runlog {
  const { store, supervise, services, ops } = c;
  const { host, executions } = services;
  const requireSupervisor = (what: string) => {
    if (!supervise)
      throw new RunlogError('READ_ONLY', `${what} needs a supervising runlog (createRunlog({ supervise: true }))`);
  };
  const toolInputs = {
    store,
    leasing: c.leasing,
    host,
    instances: services.instances,
    toolSync: c.toolSync,
    clock: c.clock,
    selfNode: c.selfNode,
    inspectNow: ops.inspectNow,
  };
  return {
    home: c.paths.home,
    dbPath: c.opened.kind === 'pg' ? store.description : c.paths.db,
    store,
    writer: c.writer,
    host,
    bus: c.bus,
    metrics: c.metrics,
    supervision: async () => supervision(await store.readHeartbeat(), c.now()),
    nodes: () => readNodes(store, c.opened.clusterRecords, c.now()),
    archiving: c.opened.archiving,
    policy: executions.policy,
    list: (filter) => listActors(store, filter),
    inspect: (id) => inspectActor(store, id),
    events: (id, range) => actorEvents(store, id, range),
    replay: (id, o) => replayActor(store, id, o?.to),
    rebuild: async () => {
      if (c.opened.kind !== 'sqlite')
        throw new RunlogError(
          'NOT_SUPPORTED',
          `rebuild works on a SQLite log; on PostgreSQL the store folds the actors projection in every append (${store.description})`,
        );
      return rebuildProjection(store);
    },
    reconcile: (o) => {
      requireSupervisor('reconcile');
      return c.reconcile(o);
    },
    on: (event, cb) => c.bus.on(event, cb),
    send: (kind, id, event) => host.dispatch(kind, id, event),
    ...instanceCalls(c, requireSupervisor),
    async grant(appId, tool) {
      requireSupervisor('grant');
      return changeAppTool(toolInputs, appId, tool, true);
    },
    async revoke(appId, tool) {
      requireSupervisor('revoke');
      return changeAppTool(toolInputs, appId, tool, false);
    },
    async execute(o) {
      requireSupervisor('execute');
      return executeCall(c, o);
    },
    async idle() {
      await host.idle();
      await executions.idle(); // the pool's starts and removals, which no actor's effect holds
    },
    close: () => closeRunlog(c),
  };
}

/** spawnApp, stop, kill and logs: here, or on the node that owns the instance (placement.ts, handover.ts). */
function instanceCalls(
  c: Composed,
  requireSupervisor: (what: string) => void,
): Pick<Runlog, 'spawnApp' | 'stop' | 'kill' | 'logs'> {
  const { options, services, ops, leasing, cluster, selfNode } = c;
  const { host, instances } = services;
  /** Where an operation on a live instance runs: here (null), or on the node holding its lease (handover.ts). */
  const ownerOf = async (view: ActorView): Promise<{ owner: string; handover: Handover } | null> => {
    if (!leasing || !cluster || view.kind !== 'instance' || view.status === 'terminal' || leasing.owns(view.stream))
      return null;
    const records = await leasing.clusterRecords();
    const [lease, loads] = [leaseOf(records, view.stream), nodeLoads(records)];
    const route = routeRequest(
      view.id,
      lease,
      new Set([selfNode, ...loads.filter((n) => n.live).map((n) => n.node)]),
      selfNode,
    );
    return route.here ? null : { owner: route.owner, handover: cluster.handover };
  };
  const handoverMs = (graceMs: number) => graceMs + 30_000 + (options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS);
  return {
    async spawnApp(o) {
      requireSupervisor('spawnApp');
      const timeoutMs = (options.healthTimeoutMs ?? 30_000) + 30_000;
      const target = o.node === undefined ? selfNode : await c.placeOn(o.node);
      let view: ActorView;
      if (target !== selfNode) {
        // Another node of the cluster spawns it (handed over through the log): it prepares the app on its host.
        if (!cluster)
          throw new RunlogError('INTERNAL', `node ${target} was chosen, but this supervisor is not a cluster node`);
        view = await cluster.placement.spawnOn(
          target,
          {
            instanceId: o.instanceId ?? newInstanceId(),
            appDir: resolve(o.appDir),
            ...(o.sandbox ? { sandbox: o.sandbox } : {}),
          },
          timeoutMs + 30_000,
        );
      } else {
        const spec = await instances.prepare(o.appDir, o.sandbox, o.instanceId);
        view = await c.waits.waitFor('instance', spec.instanceId, spawnSettled, timeoutMs, () =>
          host
            .create('instance', spec.instanceId, { type: 'instance.requested', data: { spec } })
            .then(c.spawned(spec.instanceId)),
        );
      }
      if (view.state !== 'running') view = (await c.waits.reread('instance', view.id)) ?? view; // a failure only as the log has it now
      if (view.state !== 'running') {
        const crash = (view.context as InstanceContext).lastCrash;
        throw new RunlogError('SPAWN_FAILED', crash?.message ?? `instance ${view.id} ended ${view.state}`, {
          instanceId: view.id,
          state: view.state,
          reason: crash?.reason ?? null,
        });
      }
      return view;
    },
    async stop(id, o) {
      requireSupervisor('stop');
      // Stopping what has already stopped succeeds (as `docker stop` does): scripts need not check first.
      const current = await ops.inspectNow(id);
      if (current.kind === 'instance' && instanceStopped(current.state)) return current;
      const remote = await ownerOf(current);
      if (remote) {
        await remote.handover.ask(
          remote.owner,
          'stop',
          current.id,
          o?.graceMs ?? null,
          handoverMs(o?.graceMs ?? options.killGraceMs ?? 5000),
        );
        return ops.inspectNow(current.id); // this copy has read everything up to the owner's answer
      }
      return ops.stopHere(id, o?.graceMs);
    },
    async kill(id) {
      requireSupervisor('kill');
      const current = await ops.inspectNow(id);
      // Ended on a cluster: its lease was given back, so its refusal could not even be recorded (FENCED); say why.
      if (current.kind === 'instance' && current.status === 'terminal' && leasing && !leasing.owns(current.stream))
        throw new IllegalEventError(current.id, current.state, 'instance.kill-requested');
      const remote = await ownerOf(current);
      if (remote) {
        await remote.handover.ask(remote.owner, 'kill', current.id, null, handoverMs(0));
        return ops.inspectNow(current.id);
      }
      return ops.killHere(id);
    },
    logs(id, o) {
      if (!cluster)
        return (async function* () {
          yield* instances.logs(await ops.logSource(id), o?.follow ?? false);
        })();
      // On a cluster the instance may run on another node's host: its owner reads them there (handover.ts).
      return (async function* () {
        const current = await ops.inspectNow(id);
        const remote = await ownerOf(current);
        if (!remote) {
          yield* instances.logs(await ops.logSource(id), o?.follow ?? false);
          return;
        }
        if (o?.follow) {
          // Streamed by the owner over LISTEN/NOTIFY (remote-follow.ts), never through the log.
          yield* cluster.follows.remote(remote.owner, current.id, o.signal);
          return;
        }
        const a = await remote.handover.ask(remote.owner, 'logs', current.id, null, 30_000);
        yield* a.lines ?? [];
      })();
    },
  };
}

/** Runs one at-run execution to its outcome: queued in the log on a cluster, else here within the limiter. */
async function executeCall(c: Composed, o: ExecuteOptions): Promise<ExecutionOutcome> {
  const { store, clock, services } = c;
  const { host, executions } = services;
  // Everything is checked before anything is appended: a bad request fails alone, with a typed error.
  const fields = checkExecuteRequest(o, executions.policy.input);
  const executionId = newExecutionId();
  const timeoutMs = fields.timeoutMs ?? executions.policy.defaults.timeoutMs;
  const request = {
    executionId,
    uri: fields.uri,
    handler: fields.handler,
    input: fields.input,
    callerDid: fields.callerDid,
    timeoutMs,
  };
  // A named node must be live (or, on SQLite, be this one), unless the caller waits for it (pinned-wait.ts).
  const pinned = await pinnedTarget(o.node, o.nodeWaitMs, c.placeOn, c.leasing !== null);
  const off = typeof o.onProgress === 'function' ? executions.onProgress(executionId, o.onProgress) : () => undefined;
  try {
    const queue = c.cluster?.queue;
    if (queue) {
      // In a cluster it is queued in the log and started by a node with room (progress is reported when that is this node).
      const claimBy = clock.nowMs() + QUEUE_CLAIM_MS;
      const ended = async () => ['succeeded', 'failed'].includes((await inspectActor(store, executionId)).state);
      const abort = new AbortController();
      const waiting = awaitQueued(
        store,
        executionId,
        ended,
        claimBy,
        QUEUE_CLAIM_MS + timeoutMs + 600_000,
        () => clock.nowMs(),
        AbortSignal.any([c.waits.signal, abort.signal]),
      );
      try {
        await queue.enqueue({
          executionId,
          request,
          from: c.selfNode,
          node: pinned,
          headStart: o.node === undefined,
          claimBy: new Date(claimBy).toISOString(),
        });
      } catch (err) {
        waiting.catch(() => undefined);
        throw err;
      }
      await raceGuard(waiting, c.guardPinned?.(pinned, executionId, o.nodeWaitMs ?? 0, claimBy) ?? null, abort);
    } else {
      // At most policy.executions.maxRunning at once here, the rest in line with their deadline running
      // (execution-limiter.ts). Resolution and pulls count against the deadline only up to a generous bound.
      await c.limiter.run(clock.nowMs() + timeoutMs, (left) =>
        c.waits.waitFor('execution', executionId, byState(executionEnded), left + 600_000, () =>
          host.create('execution', executionId, {
            type: 'execution.requested',
            data: {
              request: { ...request, timeoutMs: left },
              deadline: new Date(clock.nowMs() + left + 120_000).toISOString(),
            },
          }),
        ),
      );
    }
    // Answered on the outcome: the used container's removal (the cleanup effect) goes on after this returns,
    // awaited by idle() and close(); a supervisor killed before it is done removes it on restart (reconciler).
    const view = await c.ops.inspectNow(executionId);
    const ctx = view.context as ExecutionContext;
    return {
      executionId,
      status: view.state === 'succeeded' ? 'succeeded' : 'failed',
      ...(ctx.result ? { output: ctx.result.output } : {}),
      ...(ctx.failure ? { failure: ctx.failure } : {}),
      view,
    };
  } finally {
    off();
  }
}

/** Closes in dependency order: the cluster's services, the watchers, the host and its supervisors, then the log. */
async function closeRunlog(c: Composed): Promise<void> {
  const { cluster, services, log } = c;
  const { host, instances, executions } = services;
  cluster?.stopSelfFence();
  await cluster?.placement.stop();
  await cluster?.handover.stop();
  cluster?.follows.close();
  await c.toolSync.stop();
  await cluster?.queue.stop();
  await c.engineWatch?.close();
  await executions.close(); // the pool's removals are recorded: before the host closes
  await c.waits.close();
  if (c.supervise) await suspendOnStop(host, (id) => instances.tracks(id), log); // before the runners stop the PRoot sandboxes
  await host.close();
  services.timers.close();
  await instances.close();
  // Effects still waiting on something that closing detached (an exit watcher) must not hold the process.
  await Promise.race([host.idle().catch(() => undefined), new Promise((r) => setTimeout(r, 5000).unref())]);
  c.tracing?.close();
  c.metrics?.close();
  await c.heartbeat?.stop();
  await c.store.close();
  c.writer?.release();
}

function summarizeActions(r: ReconcileReport): string {
  const counts = new Map<string, number>();
  for (const a of r.actions) counts.set(a.action, (counts.get(a.action) ?? 0) + 1);
  return [...counts].map(([k, v]) => `${v} ${k}`).join(', ');
}
