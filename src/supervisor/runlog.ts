// The library entry point. `createRunlog()` opens the log; with `supervise` (the default) it also
// rehydrates every live actor and runs effects, i.e. it is the supervisor. Inspection works either way.
// This file wires the services together and starts them; the facade over them is runlog-facade.ts.
import { startJobIntake } from './jobs/job-intake-wiring.ts';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { discoverParts } from '../config/parts.ts';
import { resolvePaths } from '../config/paths.ts';
import type { Clock } from '../domain/clock.ts';
import { RunlogError, ValidationError } from '../domain/errors.ts';
import { assertNodeChoice, chooseNode, type NodeChoice } from '../domain/placement.ts';
import type { ExecutionContext } from '../machines/execution.machine.ts';
import { isPostgresUrl } from '../store/postgres/url.ts';
import type { EventStorePort } from '../store/port.ts';
import type { Leasing } from '../store/capabilities.ts';
import { WriterLock } from '../store/sqlite/writer-lock.ts';
import { buildHost, type HostServices } from './host/actor-host-wiring.ts';
import { AppToolSync } from './instances/app-tool-sync.ts';
import { createBus, type Bus } from './host/bus.ts';
import { startCluster, type ClusterServices } from './cluster/cluster-services.ts';
import type { Composed } from './composed.ts';
import { startEngineWatch } from './recovery/engine-watch.ts';
import { ExecutionLimiter } from './executions/execution-limiter.ts';
import { noFaults } from './host/faults.ts';
import { startHeartbeat, type HeartbeatHandle } from './host/heartbeat.ts';
import { instanceOperations, type InstanceOperations } from './instances/instance-operations.ts';
import { RunlogMetrics } from './observability/metrics.ts';
import { DEFAULT_LEASE_TTL_MS, openLog, type OpenedLog } from './open-log.ts';
import { pinnedWatch } from './cluster/pinned-wait.ts';
import { nodeLoads } from './cluster/nodes.ts';
import type { Inventory } from './recovery/actor-observations.ts';
import { Reconciler, recoverRehydrated, type ReconcileOptions } from './recovery/reconciler.ts';
import type { ReconcileReport } from './recovery/reconcile-run.ts';
import type { Runlog, RunlogOptions } from './runlog-api.ts';
import { runlogFacade } from './runlog-facade.ts';
import { SettleWaits } from './host/settle-waits.ts';
import { systemClock } from './host/system-clock.ts';
import { RunlogTracing } from './observability/tracing.ts';

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

/**
 * Opens a runlog: the log (SQLite under `home`, or PostgreSQL with `store`), and, when supervising (the default), the
 * actor host, recovery of every live actor from the log, reconciliation against Docker and the other services.
 * Resolves once every live actor is rehydrated; `close()` stops the services and releases the log.
 *
 * @example
 * ```ts
 * const rl = await createRunlog({ home: '/var/lib/runlog' });
 * const view = await rl.spawnApp({ appDir: './hello', sandbox: 'container' });
 * await rl.close();
 * ```
 */
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
  // Jobs are answered with receipts in the runner's own repo, by a process that runs them.
  if (options.jobs && (!supervise || !options.receipts))
    throw new ValidationError(
      'OPTIONS_INVALID',
      'jobs are taken by a supervising runlog with receipts (the runner account they are addressed to)',
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
  const { toolSync, spawned } = appToolSync(services, store, leasing, log);
  const reconciler = new Reconciler(hostRef, instances, executions, log, {
    clock,
    ...(options.orphanPolicy ? { orphanPolicy: options.orphanPolicy } : {}),
    ...(leasing ? { owns: (stream: string) => leasing.owns(stream) } : {}),
  });
  // This supervisor's node name (on SQLite: the host's, the only node there is).
  const selfNode = node ?? options.node ?? hostname();
  const placeOn = (choice: NodeChoice) => placeRequest(choice, leasing, selfNode, now);
  const heartbeat = supervise ? startHeartbeat(store, now, options.heartbeatMs, log, node) : null;
  const metrics = supervise && (options.metrics ?? true) ? runlogMetrics(services, opened, bus, now, heartbeat) : null;
  const prefetchInventory = (): Promise<Inventory | null> => reconciler.prefetchInventory();
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
        prefetchInventory,
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
  // Jobs from the network, once everything that runs them is up (job-intake.ts).
  const jobs =
    supervise && options.jobs && options.receipts
      ? await startJobIntake({
          options: options.jobs,
          runnerDid: options.receipts.did,
          node: selfNode,
          policy: executions.policy,
          reader: executions.reader,
          host,
          store,
          bus,
          clock,
          log,
        })
      : null;
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
    jobs,
  });
}

/** `cap` changes reach the instances this node owns (all of them, on one machine): app-tool-sync.ts. */
function appToolSync(
  services: HostServices,
  store: EventStorePort,
  leasing: Leasing | null,
  log: (msg: string) => void,
): Pick<Composed, 'toolSync' | 'spawned'> {
  const { host } = services;
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
  return { toolSync, spawned };
}

/** A supervisor's metrics: the store, the host, the bus, the heartbeat, the apps watch and the sandbox pool. */
function runlogMetrics(
  services: HostServices,
  opened: OpenedLog,
  bus: Bus,
  now: () => string,
  heartbeat: HeartbeatHandle | null,
): RunlogMetrics {
  const { hostRef, instances, executions } = services;
  return new RunlogMetrics({
    store: opened.store,
    metered: opened.metered,
    host: hostRef,
    bus,
    now,
    lastHeartbeat: () => heartbeat?.lastBeat() ?? null,
    appWatch: () => instances.appWatchMode(),
    prestart: () => executions.pool.accounts(),
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
  /** Starts taking Docker's inventory for the start-up reconcile (Reconciler.prefetchInventory). */
  prefetchInventory(): Promise<Inventory | null>;
  openedAtMs: number;
  ops: InstanceOperations;
}): Promise<ClusterServices | null> {
  const { options, services, node, log } = c;
  const clusterLog = c.opened.cluster;
  const { host, instances, executions } = services;
  // Docker is asked for this home's containers while the log replays: listing them needs no log, and no execution
  // effect runs before the reconcile that uses the list.
  const reconciles = options.reconcile ?? true;
  const inventory = reconciles ? c.prefetchInventory() : null;
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
  if (reconciles) {
    // Pre-started sandboxes of an earlier supervisor are removed (and recorded) first, but for one a live
    // execution runs in: its actor's recovery (below) decides about that one.
    const inUse = new Set(
      host.live().flatMap((a) => {
        const containerId = a.kind === 'execution' ? (a.snapshot.context as ExecutionContext).containerId : null;
        return containerId ? [containerId] : [];
      }),
    );
    const listed = (await inventory)?.containers;
    await executions.pool
      .recover(inUse, listed)
      .catch((err: unknown) =>
        log(`pre-started sandboxes of an earlier run were not all removed: ${(err as Error).message}`),
      );
    const report = await c.reconcile();
    if (report.actions.length > 0) log(`reconciled ${report.actions.length} actors (${summarizeActions(report)})`);
    // An earlier supervisor's egress proxy was a stray the reconcile removed; the networks it served go after it.
    executions.sweepEgress();
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

function summarizeActions(r: ReconcileReport): string {
  const counts = new Map<string, number>();
  for (const a of r.actions) counts.set(a.action, (counts.get(a.action) ?? 0) + 1);
  return [...counts].map(([k, v]) => `${v} ${k}`).join(', ');
}
