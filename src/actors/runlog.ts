// The library entry point. `createRunlog()` opens the log; with `supervise` (the default) it also
// rehydrates every live actor and runs effects, i.e. it is the supervisor. Inspection works either way.
import type { TracerProvider } from '@opentelemetry/api';
import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { join, resolve } from 'node:path';
import type { AtprotoReaderOptions, Publisher } from '../adapters/atproto/index.ts';
import type { DockerEngine } from '../adapters/docker/docker-port.ts';
import { createDockerEngine } from '../adapters/docker/dockerode-engine.ts';
import type { WatchFactory } from '../adapters/apps/app-registry.ts';
import type { AppSandboxRunner } from '../adapters/sandbox/app-sandbox-runner.ts';
import { checkExecuteRequest } from '../domain/at-run/execute-request.ts';
import { DEFAULT_OPERATOR_POLICY, parseOperatorPolicy, type OperatorPolicy } from '../domain/at-run/operator-policy.ts';
import { NotFoundError, RunlogError, StoreChainError, ValidationError } from '../domain/errors.ts';
import { isValidAppId } from '../domain/manifest.ts';
import type { ExecutionContext } from '../machines/execution.machine.ts';
import type { InstanceContext } from '../machines/instance.machine.ts';
import { appStream, assertAppId, assertToolName, capReach, readToolOverrides, recordToolChange } from './app-grants.ts';
import { ExecutionSupervisor } from './executions.ts';
import { newExecutionId } from '../adapters/ids.ts';
import { InstanceSupervisor } from './instances.ts';
import { discoverParts, type Parts } from '../config/parts.ts';
import { Reconciler, recoverRehydrated, type OrphanPolicy, type ReconcileOptions, type ReconcileReport } from './reconciler.ts';
import { startEngineWatch } from './engine-watch.ts';
import type { ActorKind, KindNewEvent, RecordedEvent } from '../domain/events.ts';
import { machines } from '../machines/runtime.ts';
import type { ActorRow } from '../store/event-store.ts';
import { isPostgresUrl, type HostStore } from '../store/host-store.ts';
import type { PgHostStore } from '../store/postgres/pg-host-store.ts';
import { clusterListener } from './cluster.ts';
import { RenewalRelay, startSelfFence } from './self-fence.ts';
import { Placement } from './placement.ts';
import { actedOn, Handover } from './handover.ts';
import type { FollowOwner } from './remote-follow.ts';
import { AppToolSync } from './app-tool-sync.ts';
import { boundLines, routeRequest, type HandoverRequest } from '../domain/handover.ts';
import { awaitQueued, ExecutionQueue } from './execution-queue.ts';
import { ExecutionLimiter } from './execution-limiter.ts';
import { isRequestStream } from './request-streams.ts';
import { leaseNow, nodeLoads } from '../store/postgres/pg-nodes.ts';
import { assertNodeChoice, chooseNode, type NodeChoice } from '../domain/placement.ts';
import { newInstanceId } from '../adapters/ids.ts';

const DEFAULT_LEASE_TTL_MS = 15_000;
/** How long the cluster node that took an execution's call has it to itself before other nodes may claim it. */
const QUEUE_HEAD_START_MS = 2000;
/** How long a queued execution waits to be claimed before its caller is told PLACEMENT_TIMEOUT. */
const QUEUE_CLAIM_MS = 300_000;
import { SqliteEventStore } from '../store/sqlite-event-store.ts';
import { WriterLock } from '../store/writer-lock.ts';
import { ActorHost, IllegalEventError, type AllEffectHandlers, type EffectHandlers, type LiveActor } from './actor-host.ts';
import { createBus, type Bus, type BusEvents } from './bus.ts';
import { noFaults, type FaultHook } from './faults.ts';
import {
  actorEvents,
  inspectActor,
  listActors,
  rebuildProjection,
  replayActor,
  resolveActor,
  type ActorView,
  type ReplayView,
} from './inspection.ts';
import { supervision, type Supervision } from '../domain/supervision.ts';
import { startHeartbeat, type HeartbeatHandle } from './heartbeat.ts';
import { RunlogMetrics } from './metrics.ts';
import { resolvePaths } from '../config/paths.ts';
import { RunlogTracing } from './tracing.ts';
import { RestartTimers } from './timers.ts';
import { byState, executionEnded, instanceStopped, SettleWaits, spawnSettled } from './settle-waits.ts';
import { pinnedTarget, pinnedWatch, raceGuard } from './pinned-wait.ts';
import { onEffectError } from './effect-errors.ts';
import { suspendOnStop } from './graceful-stop.ts';
import { systemClock } from './system-clock.ts';
import type { Clock } from '../domain/clock.ts';

export interface RunlogOptions {
  /** Runlog's directory (default $RUNLOG_HOME, else ~/.runlog). */
  home?: string;
  /** The event log file (default <home>/runlog.db). */
  db?: string;
  /**
   * The event log as a URL: `postgres://user:password@host:port/database[?schema=name]` puts it on PostgreSQL
   * (several supervisors may share it); anything else is a SQLite file path, like `db`. Default: $RUNLOG_STORE,
   * else `db`.
   */
  store?: string;
  /**
   * On PostgreSQL: this supervisor's node name in the cluster (default: the host name). It owns the actors it
   * creates through leases, labels its containers `runlog.node=<name>`, and takes over actors of nodes whose
   * leases expire.
   */
  node?: string;
  /** How long a lease lives without renewal (ms, default 15000): the time a survivor waits before taking over. */
  leaseTtlMs?: number;
  /**
   * A supervisor on PostgreSQL pages ended actors' events out of memory once they are older than the log's newest
   * `pgKeepRecent` positions (default 10,000): they are read from PostgreSQL when asked (pg-host-store.ts).
   */
  pgKeepRecent?: number;
  /**
   * How long after its lease expired an execution's node may still come back and collect the result before a
   * survivor records it failed (lost) (ms, default: the lease TTL).
   */
  collectGraceMs?: number;
  /**
   * On PostgreSQL: how many executions this node runs at once (default: the policy's executions.maxRunning). Queued in the log and
   * claimed by whichever live node has room (execution-queue.ts).
   */
  execLimit?: number;
  /** Rehydrate live actors and run effects (default true). false = inspection (read-only unless readOnly: false). */
  supervise?: boolean;
  /**
   * Open the log read-only (default: true when not supervising). A writable runlog — supervising or not — holds
   * the log's writer lock (store/writer-lock.ts) until close(): a second writer is refused with SUPERVISOR_RUNNING
   * before anything is read, reconciled or appended. A read-only one never creates or changes a file.
   */
  readOnly?: boolean;
  /** How this writer is named to a second one that is refused (default: 'createRunlog'). */
  command?: string;
  /** A writer lock the caller already took for this log (a command that checks first, then prepares); released by close(). */
  writerLock?: WriterLock;
  synchronous?: 'FULL' | 'NORMAL';
  now?: () => string;
  /** The clock restart timers read and wait on (default: the wall clock); also stamps events when `now` is not given. */
  clock?: Clock;
  faults?: FaultHook;
  /** Effect handlers by kind, merged over the built-in ones (tests inject fakes here). */
  effects?: { [K in ActorKind]?: Partial<EffectHandlers<K>> };
  log?: (msg: string) => void;
  /** Where the real parts are (default: what `npm run setup` recorded). */
  parts?: Partial<Parts>;
  /** The apps workspace (default <home>/workspace). */
  workspace?: string;
  portRange?: { min: number; max: number };
  /** Labels added to every container and volume runlog creates (tests mark theirs). */
  labels?: Record<string, string>;
  containerNetwork?: string;
  healthTimeoutMs?: number;
  killGraceMs?: number;
  /** Injected sandbox runners (tests of the wiring). */
  runners?: Partial<Record<'proot' | 'container', AppSandboxRunner>>;
  /** The runner operator's policy (default: <home>/operator-policy.json, else the strict defaults). */
  policy?: OperatorPolicy;
  /** How to reach the AT Protocol network: PLC directory, strict or cid mode. */
  atproto?: AtprotoReaderOptions;
  /** Writes an execution receipt to this account's repo after each invocation (the runner's own account). */
  receipts?: Publisher;
  /** What to do with a labelled container no stream owns: remove it (default) or adopt it. */
  orphanPolicy?: OrphanPolicy;
  /** Watch Docker engine events and reconcile after the daemon comes back (default true when supervising). */
  engineWatch?: boolean;
  /** Reconcile with Docker at start (default true when supervising). */
  reconcile?: boolean;
  /** Watch the apps workspace for manifest edits (default true when supervising). */
  watchApps?: boolean;
  /** How the apps workspace is watched (default fs.watch; a test injects one the kernel refuses: it polls then). */
  appWatch?: WatchFactory;
  /** Prometheus metrics on `runlog.metrics` (default true when supervising). */
  metrics?: boolean;
  /** Where traces go (default: the globally registered OpenTelemetry provider; none registered = no tracing). */
  tracerProvider?: TracerProvider;
  /** How often the supervisor records its heartbeat in the log's database (default 5000 ms). */
  heartbeatMs?: number;
}

export interface SpawnAppOptions {
  /** An app directory holding runlog.json (it is registered into the workspace under its appId). */
  appDir: string;
  /** Overrides the manifest's sandbox. */
  sandbox?: 'proot' | 'container';
  instanceId?: string;
  /**
   * Where it runs: a node's name, or 'any' (the live node with the fewest live instances). On another node of a
   * cluster the spawn is handed over through the log (placement.ts). Default: this node. On SQLite only 'any'
   * and this host's name are accepted (NODE_UNKNOWN otherwise).
   */
  node?: NodeChoice;
}

export interface ExecuteOptions {
  /** at:// URI of a dev.mainasara.at-run.beta.v2.code record, or of an alias pointing at one. */
  uri: string;
  handler: string;
  input?: unknown;
  callerDid?: string;
  timeoutMs?: number;
  /**
   * On a cluster: which node may run it. Default: this node first (others after a short head start, when it is
   * full); 'any': the first node with room; a name: only that node.
   */
  node?: NodeChoice;
  /** With `node` a name, on a cluster: how long (ms, default 0) to wait for it while it is not live (pinned-wait.ts). */
  nodeWaitMs?: number;
  /** Progress during resolution, pulls and extraction (also recorded as execution.step events). */
  onProgress?: (step: { name: string; detail: Record<string, unknown> }) => void;
}

export interface ExecutionOutcome {
  executionId: string;
  status: 'succeeded' | 'failed';
  output?: unknown;
  failure?: { reason: string; code: string; message: string };
  view: ActorView;
}

import type { LogLine } from '../domain/log-line.ts';
export type { LogLine };

/** What `cap grant`/`cap revoke` did: the app's allowlist now, and the running instances it changed. */
export interface AppToolsView {
  appId: string;
  tool: string;
  granted: boolean;
  /**
   * The app's allowlist after the change: its manifest's tools as installed on the node that took the call (or,
   * when that node never installed it, as the app's latest instance has them) with every grant applied.
   */
  tools: string[];
  /** Running instances whose tools this change changed, on any node (`changed` says which node). */
  instances: string[];
  /** The same, each with the node that appended its instance's event (the instance's owner). */
  changed: { instanceId: string; node: string }[];
  /**
   * Running instances of the app that did not have the change yet when the call answered (their owner had not
   * applied it within a few seconds: busy, or down until a survivor takes them over). It is recorded: their owner,
   * or the node that takes them over, applies it.
   */
  pending: { instanceId: string; node: string | null }[];
  /** The app stream's event that recorded the change. */
  seq: number;
}

export interface Runlog {
  readonly home: string;
  readonly dbPath: string;
  readonly store: HostStore;
  /** The log's writer lock (null when read-only). */
  readonly writer: WriterLock | null;
  readonly host: ActorHost;
  readonly bus: Bus;
  /** Prometheus metrics of this supervisor (null when not supervising or turned off). */
  readonly metrics: RunlogMetrics | null;
  /** Whether a supervisor (this one or another process) is alive on this log, from its heartbeat. */
  supervision(): Supervision;
  /** The operator policy executions run under (input limits, ceilings, allow-lists). */
  readonly policy: OperatorPolicy;
  list(filter?: { kind?: ActorKind; all?: boolean }): ActorRow[];
  inspect(id: string): ActorView;
  events(id: string, range?: { from?: number; to?: number }): RecordedEvent[];
  replay(id: string, options?: { to?: number }): ReplayView;
  /**
   * Makes an actor's whole history readable by `inspect`, `events` and `replay` (which are synchronous): a
   * supervisor on PostgreSQL keeps ended actors' events out of memory and reads them back here (the newest few
   * dozen stay cached). Resolves at once on SQLite and for an actor whose history is held. Unknown id: NOT_FOUND.
   */
  pageIn(id: string): Promise<void>;
  /** Rebuilds the actors projection from the log. */
  rebuild(): { actors: number; events: number };
  on<K extends keyof BusEvents>(event: K, cb: BusEvents[K]): () => void;
  /** Sends an event to an actor through its machine (advanced; the typed calls below use it). */
  send<K extends ActorKind>(kind: K, id: string, event: KindNewEvent<K>): ReturnType<ActorHost['dispatch']>;
  /** Spawns an app instance; resolves once it is running (or rejects with the reason it is not). */
  spawnApp(options: SpawnAppOptions): Promise<ActorView>;
  /** Graceful stop (onStop hook, SIGTERM, SIGKILL after the grace period); resolves when stopped. */
  stop(id: string, options?: { graceMs?: number }): Promise<ActorView>;
  /** Immediate SIGKILL; resolves when stopped. */
  kill(id: string): Promise<ActorView>;
  /**
   * Grants a tool to an APP (app-grants.ts): recorded as `app.tool-granted` in the log, applied at once to every
   * running instance of the app (re-provisioned, no respawn) and to every later spawn. The manifest is not touched.
   */
  grant(appId: string, tool: string): Promise<AppToolsView>;
  /** Revokes a tool from an app, the same way (also one its manifest lists). */
  revoke(appId: string, tool: string): Promise<AppToolsView>;
  /** Output lines of an instance (buffered; with follow, live until it exits). */
  logs(id: string, options?: { follow?: boolean; signal?: AbortSignal }): AsyncIterable<LogLine>;
  /** Runs one at-run execution to its outcome (the used container is removed after it answers: see idle()). */
  execute(options: ExecuteOptions): Promise<ExecutionOutcome>;
  /** Compares the log with Docker and records what it finds (run at every start). */
  reconcile(options?: ReconcileOptions): Promise<ReconcileReport>;
  /** Waits until no effect is running and no background work (container removals, sandbox pre-starts) is under way. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

/** How long a `cap` call waits for the other nodes' owners to apply the change before it answers what is pending. */
const CAP_REACH_WAIT_MS = 5000;

/** How many of the last events a supervisor checks against the hash chain as it starts. */
const TAIL_CHECK = 1000;

export async function createRunlog(options: RunlogOptions = {}): Promise<Runlog> {
  // An explicit db wins over the environment's store.
  const url = options.store ?? (options.db === undefined ? process.env.RUNLOG_STORE || undefined : undefined);
  const pgUrl = isPostgresUrl(url) ? url : undefined;
  const paths = resolvePaths({ ...options, ...(url && !pgUrl ? { db: url } : {}) });
  const supervise = options.supervise ?? true;
  const readOnly = options.readOnly ?? !supervise;
  if (supervise && readOnly) throw new ValidationError('OPTIONS_INVALID', 'a supervising runlog writes its log: supervise and readOnly exclude each other');
  // The writer lock comes first: a second writer must be refused before it reads, reconciles or appends anything.
  if (options.writerLock && (readOnly || options.writerLock.dbFile !== paths.db || !options.writerLock.held)) {
    throw new ValidationError('OPTIONS_INVALID', `writerLock must be held for ${paths.db} by a writable runlog`);
  }
  // On PostgreSQL there is no file to lock: supervisors share the log (leases say who owns which actor).
  const writer = readOnly || pgUrl ? null : (options.writerLock ?? WriterLock.acquire(paths.db, options.command ?? 'createRunlog'));
  try {
    return await openRunlog(options, paths, supervise, readOnly, writer, pgUrl);
  } catch (err) {
    writer?.release();
    throw err;
  }
}

async function openStore(options: RunlogOptions, db: string, readOnly: boolean, pgUrl: string | undefined, node: string | undefined, renewals: RenewalRelay): Promise<HostStore> {
  if (!pgUrl) return new SqliteEventStore(db, { synchronous: options.synchronous, readOnly, ...(options.now ? { now: options.now } : {}) });
  // Loaded only for PostgreSQL: a SQLite supervisor never loads node-postgres.
  const [{ PgHostStore }, { actorsProjection, ACTORS_PROJECTION }] = await Promise.all([import('../store/postgres/pg-host-store.ts'), import('./actors-projection.ts')]);
  return PgHostStore.open({
    url: pgUrl,
    projections: [actorsProjection()],
    actorRows: { projection: ACTORS_PROJECTION },
    ...(node ? { node: { name: node, leaseTtlMs: options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS, renewals, ...(options.collectGraceMs !== undefined ? { collectGraceMs: options.collectGraceMs } : {}) } } : {}),
    // A supervisor holds live actors, not the fleet's whole history: ended actors' events are read when asked, and
    // of the request streams only the requests that may still be open (request-streams.ts).
    ...(node ? { pageOut: { ...(options.pgKeepRecent !== undefined ? { keepRecent: options.pgKeepRecent } : {}), requestStreams: { is: isRequestStream } } } : {}),
    ...(options.now ? { now: options.now } : {}), ...(options.faults ? { faults: options.faults } : {}),
  });
}

async function openRunlog(options: RunlogOptions, paths: { home: string; db: string }, supervise: boolean, readOnly: boolean, writer: WriterLock | null, pgUrl: string | undefined): Promise<Runlog> {
  // A supervisor on PostgreSQL is a cluster node (maybe the only one): its actors are leased to it.
  const node = pgUrl && supervise ? (options.node ?? hostname()) : undefined;
  const openedAtMs = performance.now(); // no later than the store reclaims this node's leases (self-fence.ts)
  const renewals = new RenewalRelay(); // the store's renewal reports, for the self-fence started once instances exist
  const store = await openStore(options, paths.db, readOnly, pgUrl, node, renewals);
  if (supervise && store instanceof SqliteEventStore) {
    // The tail of the hash chain, before anything is read from it or appended to it (the whole log: runlog verify).
    try {
      store.assertChain({ afterSeq: store.lastSeq() - TAIL_CHECK });
    } catch (err) {
      store.close();
      throw err;
    }
  }
  if (supervise && pgUrl) {
    // The same tail check on PostgreSQL (one snapshot of the log: other nodes may be appending meanwhile).
    const pgLog = store as PgHostStore;
    const tail = await pgLog.pg.verifyChain({ afterSeq: pgLog.lastSeq() - TAIL_CHECK }).catch(async (err: unknown) => {
      await pgLog.close();
      throw err;
    });
    if (!tail.ok) {
      await pgLog.close();
      throw new StoreChainError(pgLog.file, tail.seq, tail.reason, { stream: tail.stream, version: tail.version });
    }
  }
  const pgStore = node ? (store as PgHostStore) : null;
  if (node) options = { ...options, labels: { ...options.labels, 'runlog.node': node } };
  const bus = createBus();
  const log = options.log ?? ((m: string) => process.stderr.write(`[runlog] ${m}\n`));
  const faults = options.faults ?? noFaults;
  const parts = discoverParts(options.parts);
  const clock = options.clock ?? systemClock;
  const now = options.now ?? (() => new Date(clock.nowMs()).toISOString());
  const tracing = supervise ? new RunlogTracing(bus, options.tracerProvider) : null;
  // eslint-disable-next-line prefer-const
  let host: ActorHost;
  const hostRef = () => host;
  const timers = new RestartTimers(hostRef, clock);
  // One Docker Engine port for the supervisor (executions, the apps' container runner, the engine watch), made on
  // first use: a runlog that never reaches Docker (inspection, the unit tier) makes none, and making one contacts
  // nothing (the daemon may be down at start).
  let dockerEngine: DockerEngine | null = null;
  const engine = (): DockerEngine => (dockerEngine ??= createDockerEngine({ socketPath: parts.dockerSocket }));
  const instances = new InstanceSupervisor(
    {
      home: paths.home,
      clock,
      parts,
      log,
      ...(options.workspace ? { workspace: options.workspace } : {}),
      ...(options.portRange ? { portRange: options.portRange } : {}),
      ...(options.labels ? { containerLabels: options.labels } : {}),
      ...(options.containerNetwork ? { containerNetwork: options.containerNetwork } : {}),
      ...(options.healthTimeoutMs ? { healthTimeoutMs: options.healthTimeoutMs } : {}),
      ...(options.killGraceMs ? { killGraceMs: options.killGraceMs } : {}),
      ...(options.runners ? { runners: options.runners } : {}),
      engine,
      toolOverrides: (appId: string) => readToolOverrides(store, appId),
    },
    hostRef,
  );
  const executions = new ExecutionSupervisor(
    {
      home: paths.home,
      clock,
      parts,
      log,
      faults,
      engine,
      policy: options.policy ?? loadPolicy(paths.home),
      ...(options.atproto ? { atproto: options.atproto } : {}),
      ...(options.labels ? { labels: options.labels } : {}),
      ...(options.receipts ? { receipts: options.receipts } : {}),
      readFacts: (stream: string) => store.read(stream),
    },
    hostRef,
  );
  const builtIn: AllEffectHandlers = {
    instance: { ...instances.handlers(), ...timers.handlers(), announce: ({ topic: _topic, ...p }) => bus.emit('app:crashed', p) },
    execution: { ...executions.handlers(), announce: ({ topic: _topic, ...p }) => bus.emit('execution:finished', p) },
  };
  // Not supervising: events are recorded, their effects are the supervisor's (none run here).
  const effects: AllEffectHandlers | null = supervise
    ? { instance: { ...builtIn.instance, ...options.effects?.instance }, execution: { ...builtIn.execution, ...options.effects?.execution } }
    : null;
  host = new ActorHost({
    store,
    bus,
    machines,
    effects,
    now,
    faults,
    onEffectError,
    log,
    ...(tracing ? { onCreate: (kind: ActorKind, id: string) => tracing.created(kind, id) } : {}),
    ...(pgStore ? { owns: (stream: string) => pgStore.owns(stream) } : {}),
    // A new actor found committed after its reply was lost is this node's (its lease): picked up at the next beat.
    ...(pgStore?.leases ? { onOrphaned: () => pgStore.pickUpSoon() } : {}),
  });
  // `cap` changes reach the instances this node owns (all of them, on one machine): app-tool-sync.ts.
  const toolSync = new AppToolSync({
    store,
    live: () => host.live(),
    owns: (s) => !pgStore || pgStore.owns(s),
    dispatch: (id, e) => host.dispatch('instance', id, e),
    log,
  });
  /** Passes a spawn's first-event result on, after asking for the `cap` look at it (app-tool-sync.ts spawned). */
  const spawned =
    (instanceId: string) =>
    <R>(r: R): R => {
      void toolSync.spawned(`instance-${instanceId}`).catch((err: unknown) => log(`cap changes for ${instanceId}: ${(err as Error).message}`));
      return r;
    };
  const reconciler = new Reconciler(hostRef, instances, executions, log, { clock, ...(options.orphanPolicy ? { orphanPolicy: options.orphanPolicy } : {}), ...(pgStore ? { owns: (stream: string) => pgStore.owns(stream) } : {}) });
  let heartbeat: HeartbeatHandle | null = null;
  let placement: Placement | null = null;
  let handover: Handover | null = null;
  let stopSelfFence: (() => void) | null = null;
  let follows: { owner: FollowOwner; remote(owner: string, id: string, signal?: AbortSignal): AsyncIterable<LogLine>; close(): void } | null = null;
  let queue: ExecutionQueue | null = null;
  const limiter = new ExecutionLimiter(executions.policy.executions, clock);
  // This supervisor's node name (on SQLite: the host's, the only node there is).
  const selfNode = node ?? options.node ?? hostname();
  /** Where a request for `choice` goes: this node's name, or another live node's (NODE_UNKNOWN, NODE_UNAVAILABLE). */
  const placeOn = async (choice: NodeChoice): Promise<string> => {
    assertNodeChoice(choice);
    if (!pgStore) {
      if (choice === 'any' || choice === selfNode) return selfNode;
      throw new RunlogError('NODE_UNKNOWN', `no node named ${choice}: a SQLite log has one node, this one (${selfNode}); use node 'any' or '${selfNode}'`, { node: choice });
    }
    // This node is live while it answers, whatever its last recorded beat says.
    const loads = (await nodeLoads(pgStore.pg)).map((n) => (n.node === selfNode ? { ...n, live: true } : n));
    if (!loads.some((n) => n.node === selfNode)) loads.push({ node: selfNode, live: true, beatAt: now(), stoppedAt: null, instances: 0, executions: 0 });
    return chooseNode(choice, loads, selfNode);
  };
  const metrics =
    supervise && (options.metrics ?? true)
      ? new RunlogMetrics({ store, host: hostRef, bus, now, lastHeartbeat: () => heartbeat?.lastBeat() ?? null, appWatch: () => instances.appWatchMode(), prestart: () => executions.pool.accounts() })
      : null;
  const reconcile = async (o?: ReconcileOptions): Promise<ReconcileReport> => {
    const report = await reconciler.reconcile(o);
    metrics?.reconciled(report);
    return report;
  };

  if (supervise) {
    heartbeat = startHeartbeat(store, now, options.heartbeatMs, log, node);
    const rehydrated = host.rehydrate();
    await recoverRehydrated(host, rehydrated, log);
    if (pgStore && node) {
      // Leases reclaimed from an earlier run of this node whose actors have ended are given back.
      const liveStreams = new Set(rehydrated.map((a) => a.stream));
      for (const s of pgStore.leases!.held.keys()) if (!liveStreams.has(s)) pgStore.letGo(s);
      pgStore.startLeases(
        clusterListener(hostRef, node, {
          letGo: (s) => pgStore.letGo(s),
          nowMs: () => clock.nowMs(),
          relinquish: (id) => instances.relinquish(id),
          rearm: (actor) => void timers.rearm(actor),
          removeNodesContainers: (id, previous) => instances.removeNodesContainers(id, previous),
          taking: (streams) => handover?.taking(streams),
          tookOver: (streams) => {
            handover?.tookOver(streams);
            // What the dead owner had not applied of the app's `cap` changes is applied here, once.
            void toolSync.syncStreams(streams).catch((err: unknown) => log(`cap changes for taken-over instances: ${(err as Error).message}`));
          },
          // As start-up recovers what it rehydrates: restart timers armed again, then a reconcile observes each
          // actor's sandbox and the reconcile decision says what to record (an interrupted spawn, an execution
          // whose log says how far it got).
          recover: async (actors) => {
            await recoverRehydrated(host, actors, log);
            if (options.reconcile ?? true) await reconcile();
          },
          log,
        }),
      );
      // A node that cannot renew its leases stops its instance sandboxes before they can run elsewhere too.
      stopSelfFence = startSelfFence(pgStore.leases!, renewals, { sandboxed: () => instances.sandboxed(), relinquish: (id) => instances.relinquish(id), resumed: () => void (options.reconcile ?? true ? reconcile() : null)?.catch((err: unknown) => log(`reconcile after the self-fence: ${(err as Error).message}`)), log }, openedAtMs, (t, p) => pgStore.pg.sql(t, p));
      handover = new Handover({
        store,
        node,
        nowMs: () => clock.nowMs(),
        owns: (s) => pgStore.owns(s),
        appendFact: (stream, events) => host.appendFact(stream, events),
        act: (r) => actHere(r),
        log,
      });
      placement = new Placement({
        store,
        node,
        nowMs: () => clock.nowMs(),
        appendFact: (stream, events) => host.appendFact(stream, events),
        spawnHere: (r) => {
          const spec = instances.prepare(r.appDir, r.sandbox, r.instanceId);
          return host.create('instance', spec.instanceId, { type: 'instance.requested', data: { spec } }).then(spawned(spec.instanceId));
        },
        log,
      });
      queue = new ExecutionQueue({
        store,
        node,
        limit: options.execLimit ?? executions.policy.executions.maxRunning,
        headStartMs: QUEUE_HEAD_START_MS,
        nowMs: () => clock.nowMs(),
        running: () => host.live().filter((a) => a.kind === 'execution').length,
        appendFact: (stream, events) => host.appendFact(stream, events),
        cancel: (id) => host.dispatch('execution', id, { type: 'execution.cancel-requested', data: {} }),
        claim: (q) => host.create('execution', q.executionId, { type: 'execution.requested', data: { request: q.request as never, deadline: new Date(clock.nowMs() + q.request.timeoutMs + 120_000).toISOString() } }),
        log,
      });
      // An execution that ended here makes room for a queued one.
      bus.on('actor:transition', (t) => {
        if (t.kind === 'execution' && (t.to === 'succeeded' || t.to === 'failed')) queue?.pump();
      });
      // `logs --follow` across nodes: LISTEN/NOTIFY, outside the log (remote-follow.ts); pg loaded on a cluster only.
      const [{ PgFollowBus, controlChannel }, rf, { splitStoreUrl }] = await Promise.all([import('../store/postgres/pg-follow-channel.ts'), import('./remote-follow.ts'), import('../store/postgres/pg-host-store.ts')]);
      const followBus = new PgFollowBus({ url: splitStoreUrl(pgUrl!).url, sql: (text, params) => pgStore.pg.sql(text, params), log });
      const schema = pgStore.pg.schema;
      const owner = new rf.FollowOwner({
        bus: followBus,
        channel: controlChannel(schema, node),
        node,
        owns: (id) => pgStore.owns(`instance-${id}`),
        open: (id) => instances.logs(live(id, 'instance'), true),
        timers: rf.realTimers,
        log,
      });
      follows = {
        owner,
        remote: (on, id, signal) => rf.followRemote({ bus: followBus, node, timers: rf.realTimers }, on, controlChannel(schema, on), id, signal),
        close: () => {
          owner.stop();
          followBus.close();
        },
      };
    }
    if (options.reconcile ?? true) {
      // Pre-started sandboxes of an earlier supervisor are removed (and recorded) first, but for one a live
      // execution runs in: its actor's recovery (below) decides about that one.
      const inUse = new Set(host.live().flatMap((a) => (a.kind === 'execution' && (a.snapshot.context as ExecutionContext).containerId ? [(a.snapshot.context as ExecutionContext).containerId!] : [])));
      await executions.pool.recover(inUse).catch((err: unknown) => log(`pre-started sandboxes of an earlier run were not all removed: ${(err as Error).message}`));
      const report = await reconcile();
      if (report.actions.length > 0) log(`reconciled ${report.actions.length} actors (${summarizeActions(report)})`);
    }
    // Requests placed on this node, and queued executions, are taken once it has recovered and reconciled.
    placement?.start();
    queue?.start();
    if (options.watchApps ?? true) await instances.startRegistry(options.appWatch).catch((err: unknown) => log(`apps: manifest edits are not followed: ${(err as Error).message}`));
    if (options.receipts) {
      await executions.publishRunnerRecord().catch((err: unknown) => log(`could not publish the runner record: ${(err as Error).message}`));
    }
  }

  // Docker restarting or briefly unreachable: reconnect, resubscribe to engine events, reconcile.
  const engineWatch =
    supervise && (options.engineWatch ?? true)
      ? startEngineWatch({ socketPath: parts.dockerSocket, engine: engine(), home: paths.home, host: hostRef, reconcile: () => reconcile({ reattach: true }), tracks: (id) => instances.tracks(id), log })
      : null;

  const live = (id: string, kind?: ActorKind, request = 'this request'): LiveActor => {
    const ref = resolveActor(store, id);
    if (kind && ref.kind !== kind) throw new ValidationError('WRONG_KIND', `${id} is an ${ref.kind}, not an ${kind}`);
    // It exists but has ended (not rehydrated): a conflict with its state, not "not found". Its row says so without
    // its history (which a PostgreSQL supervisor pages out of memory).
    const row = store.getActor(ref.id);
    if (row?.status === 'terminal') throw new IllegalEventError(ref.id, row.state, request);
    const actor = host.get(ref.kind, ref.id);
    if (!actor) throw new IllegalEventError(ref.id, row?.state ?? inspectActor(store, id).state, request);
    return actor;
  };

  /** Whose lines `logs` reads: the host's instance while it still holds it, ended or not (a just-stopped one's buffer). */
  const logSource = (id: string): LiveActor => {
    const ref = resolveActor(store, id);
    return (ref.kind === 'instance' ? host.get('instance', ref.id) : undefined) ?? live(id, 'instance');
  };

  // Waits for an actor to settle, each with its deadline: ended by close() (settle-waits.ts).
  const waits = new SettleWaits({ bus, store, followLog: pgStore !== null });
  const waitFor = waits.waitFor.bind(waits);

  // A pinned execution's node is watched while it waits to be claimed: NODE_UNAVAILABLE once it is not live (pinned-wait.ts).
  const guardPinned = pgStore && queue ? pinnedWatch({ self: selfNode, pg: pgStore.pg, store, queue, nowMs: () => clock.nowMs(), log }) : null;

  /** inspectActor, for callers that can wait: an ended actor's history paged out of memory (PostgreSQL) is read first. */
  const inspectNow = async (id: string): Promise<ActorView> => {
    if (store.pageIn) {
      let stream: string | null = null;
      try {
        stream = resolveActor(store, id).stream;
      } catch {
        /* inspectActor says what is wrong with the id */
      }
      if (stream) await store.pageIn(stream);
    }
    return inspectActor(store, id);
  };

  const requireSupervisor = (what: string) => {
    if (!supervise) throw new RunlogError('READ_ONLY', `${what} needs a supervising runlog (createRunlog({ supervise: true }))`);
  };

  const changeAppTool = async (appId: string, tool: string, grant: boolean): Promise<AppToolsView> => {
    requireSupervisor(grant ? 'grant' : 'revoke');
    assertToolName(tool);
    if (!isValidAppId(appId)) {
      // The old meaning took an instance id: say what the command takes now, and why.
      let instance: ActorView | null = null;
      try {
        instance = await inspectNow(appId);
      } catch {
        /* not an actor either */
      }
      const app = (instance?.summary as { appId?: string } | undefined)?.appId;
      if (app) throw new ValidationError('CAP_TAKES_APP_ID', `cap ${grant ? 'grant' : 'revoke'} takes an app id, not an instance id: ${appId} is an instance of ${app}; grants apply to every instance of the app (runlog cap ${grant ? 'grant' : 'revoke'} ${app} ${tool})`, [`${appId} is an instance of ${app}`]);
      assertAppId(appId);
    }
    const installed = instances.installedTools(appId);
    const ofApp = () => store.listActors({ kind: 'instance' }).filter((r) => r.summary.appId === appId);
    const known = installed !== null || store.streamVersion(appStream(appId)) > 0 || store.listActors({ kind: 'instance', all: true }).some((r) => r.summary.appId === appId);
    if (!known) throw new NotFoundError('app', `${appId} (spawn it once, or install it into the workspace, before granting it tools)`);
    const event = await recordToolChange(store, appId, tool, grant);
    // This node's instances now; other nodes' owners apply it as they read it (app-tool-sync.ts).
    await toolSync.syncApp(appId);
    await host.idle();
    const toolsOf = (id: string) => (inspectActor(store, id).context as InstanceContext | undefined)?.spec?.tools ?? null;
    const reach = () =>
      capReach(
        ofApp().map((r) => ({ instanceId: r.id, tools: toolsOf(r.id), events: store.read(r.stream), owner: store.placement?.(r.stream).owner ?? null })),
        tool,
        grant,
        event.seq,
        selfNode,
      );
    // What the other owners did is read from the log, for a few seconds at most: the answer says what is pending.
    let r = reach();
    for (const until = clock.nowMs() + CAP_REACH_WAIT_MS; pgStore && r.pending.length > 0 && clock.nowMs() < until; r = reach()) {
      await new Promise<void>((done) => clock.after(100, done));
    }
    const latest = ofApp().at(-1);
    const base = installed ?? (latest ? (toolsOf(latest.id) ?? []) : []);
    return { appId, tool, granted: grant, tools: instances.allowlist(appId, base), instances: r.changed.map((c) => c.instanceId), changed: r.changed, pending: r.pending, seq: event.seq };
  };

  const stopped = byState(instanceStopped);

  // stop and kill on this node; `meta` marks the event with the hand-over request it carries out (handover.ts).
  const stopHere = async (id: string, graceMs: number | null | undefined, meta?: Record<string, unknown>): Promise<ActorView> => {
    const actor = live(id, 'instance', 'instance.stop-requested');
    return waitFor('instance', actor.id, stopped, (graceMs ?? options.killGraceMs ?? 5000) + 30_000, async () => {
      const r = await host.dispatch('instance', actor.id, { type: 'instance.stop-requested', data: { graceMs: graceMs ?? null }, ...(meta ? { meta } : {}) });
      // Stopped meanwhile, or already on its way: the wait resolves when it is stopped.
      if (!r.accepted && !(instanceStopped(r.from) || r.from === 'stopping')) throw new IllegalEventError(actor.id, r.from, 'instance.stop-requested');
    });
  };
  const killHere = async (id: string, meta?: Record<string, unknown>): Promise<ActorView> => {
    const actor = live(id, 'instance', 'instance.kill-requested');
    return waitFor('instance', actor.id, stopped, 30_000, async () => {
      const r = await host.dispatch('instance', actor.id, { type: 'instance.kill-requested', data: {}, ...(meta ? { meta } : {}) });
      if (!r.accepted) throw new IllegalEventError(actor.id, r.from, 'instance.kill-requested');
    });
  };
  const settledLocally = (id: string): Promise<ActorView> => waitFor('instance', id, stopped, 60_000, () => Promise.resolve());
  /** A hand-over request this node holds the lease for, carried out as a call taken here would be. */
  const actHere = async (r: HandoverRequest) => {
    const stream = `instance-${r.instanceId}`;
    await store.pageIn?.(stream); // an instance that has ended: its history may be paged out (PostgreSQL)
    if (r.action === 'logs') {
      const lines = [];
      for await (const l of instances.logs(logSource(r.instanceId), false)) lines.push(l);
      return boundLines(lines);
    }
    const current = inspectActor(store, r.instanceId);
    // Taken already (by this node, or by the owner before it died): only its outcome is left to report.
    const view = actedOn(store.read(stream), r.requestId)
      ? instanceStopped(current.state) ? current : await settledLocally(r.instanceId)
      : r.action === 'stop'
        ? instanceStopped(current.state) ? current : await stopHere(r.instanceId, r.graceMs, { handover: r.requestId })
        : await killHere(r.instanceId, { handover: r.requestId });
    return { state: view.state };
  };
  /** Where an operation on a live instance runs: here, or on the node holding its lease (handover.ts). */
  const ownerOf = async (view: ActorView): Promise<string | null> => {
    if (!pgStore || !handover || view.kind !== 'instance' || view.status === 'terminal' || pgStore.owns(view.stream)) return null;
    const [lease, loads] = await Promise.all([leaseNow(pgStore.pg, view.stream), nodeLoads(pgStore.pg)]);
    const route = routeRequest(view.id, lease, new Set([selfNode, ...loads.filter((n) => n.live).map((n) => n.node)]), selfNode);
    return route.here ? null : route.owner;
  };
  const handoverMs = (graceMs: number) => graceMs + 30_000 + (options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS);

  // Hand-over requests are carried out from here on (actHere needs what is defined above).
  if (supervise) handover?.start();
  if (supervise) await follows?.owner.start();
  if (supervise && pgStore) {
    // Every node follows the `cap` changes any node records; those recorded while this one was down apply now.
    toolSync.start();
    void toolSync.syncAll().catch((err: unknown) => log(`cap changes at start-up: ${(err as Error).message}`));
  }

  return {
    home: paths.home,
    dbPath: pgUrl ? store.file : paths.db,
    store,
    writer,
    host,
    bus,
    metrics,
    supervision: () => supervision(store.readHeartbeat(), now()),
    policy: executions.policy,
    list: (filter) => listActors(store, filter),
    inspect: (id) => inspectActor(store, id),
    async pageIn(id) {
      const { stream } = resolveActor(store, id);
      await store.pageIn?.(stream);
    },
    events: (id, range) => actorEvents(store, id, range),
    replay: (id, o) => replayActor(store, id, o?.to),
    rebuild: () => {
      if (pgUrl) throw new RunlogError('NOT_SUPPORTED', `rebuild works on a SQLite log; on PostgreSQL the store folds the actors projection in every append (${store.file})`);
      return rebuildProjection(store as SqliteEventStore);
    },
    reconcile: (o) => {
      requireSupervisor('reconcile');
      return reconcile(o);
    },
    on: (event, cb) => bus.on(event, cb),
    send: (kind, id, event) => host.dispatch(kind, id, event),
    async spawnApp(o) {
      requireSupervisor('spawnApp');
      const timeoutMs = (options.healthTimeoutMs ?? 30_000) + 30_000;
      const target = o.node === undefined ? selfNode : await placeOn(o.node);
      let view: ActorView;
      if (target !== selfNode) {
        // Another node of the cluster spawns it (handed over through the log): it prepares the app on its host.
        view = await placement!.spawnOn(target, { instanceId: o.instanceId ?? newInstanceId(), appDir: resolve(o.appDir), ...(o.sandbox ? { sandbox: o.sandbox } : {}) }, timeoutMs + 30_000);
      } else {
        const spec = instances.prepare(o.appDir, o.sandbox, o.instanceId);
        view = await waitFor('instance', spec.instanceId, spawnSettled, timeoutMs, () => host.create('instance', spec.instanceId, { type: 'instance.requested', data: { spec } }).then(spawned(spec.instanceId)));
      }
      if (view.state !== 'running') view = (await waits.reread('instance', view.id)) ?? view; // a failure only as the log has it now
      if (view.state !== 'running') {
        const crash = (view.context as InstanceContext).lastCrash;
        throw new RunlogError('SPAWN_FAILED', crash?.message ?? `instance ${view.id} ended ${view.state}`, { instanceId: view.id, state: view.state, reason: crash?.reason ?? null });
      }
      return view;
    },
    async stop(id, o) {
      requireSupervisor('stop');
      // Stopping what has already stopped succeeds (as `docker stop` does): scripts need not check first.
      const current = await inspectNow(id);
      if (current.kind === 'instance' && instanceStopped(current.state)) return current;
      const owner = await ownerOf(current);
      if (owner) {
        await handover!.ask(owner, 'stop', current.id, o?.graceMs ?? null, handoverMs(o?.graceMs ?? options.killGraceMs ?? 5000));
        return inspectNow(current.id); // this copy has read everything up to the owner's answer
      }
      return stopHere(id, o?.graceMs);
    },
    async kill(id) {
      requireSupervisor('kill');
      const current = await inspectNow(id);
      // Ended on a cluster: its lease was given back, so its refusal could not even be recorded (FENCED); say why.
      if (current.kind === 'instance' && current.status === 'terminal' && pgStore && !pgStore.owns(current.stream)) throw new IllegalEventError(current.id, current.state, 'instance.kill-requested');
      const owner = await ownerOf(current);
      if (owner) {
        await handover!.ask(owner, 'kill', current.id, null, handoverMs(0));
        return inspectNow(current.id);
      }
      return killHere(id);
    },
    grant: (appId, tool) => changeAppTool(appId, tool, true),
    revoke: (appId, tool) => changeAppTool(appId, tool, false),
    logs(id, o) {
      if (!handover) return instances.logs(logSource(id), o?.follow ?? false);
      // On a cluster the instance may run on another node's host: its owner reads them there (handover.ts).
      return (async function* () {
        const current = await inspectNow(id);
        const owner = await ownerOf(current);
        if (!owner) {
          yield* instances.logs(logSource(id), o?.follow ?? false);
          return;
        }
        if (o?.follow) {
          // Streamed by the owner over LISTEN/NOTIFY (remote-follow.ts), never through the log.
          yield* follows!.remote(owner, current.id, o.signal);
          return;
        }
        const a = await handover!.ask(owner, 'logs', current.id, null, 30_000);
        yield* a.lines ?? [];
      })();
    },
    async execute(o) {
      requireSupervisor('execute');
      // Everything is checked before anything is appended: a bad request fails alone, with a typed error.
      const fields = checkExecuteRequest(o, executions.policy.input);
      const executionId = newExecutionId();
      const timeoutMs = fields.timeoutMs ?? executions.policy.defaults.timeoutMs;
      const request = { executionId, uri: fields.uri, handler: fields.handler, input: fields.input, callerDid: fields.callerDid, timeoutMs };
      // A named node must be live (or, on SQLite, be this one), unless the caller waits for it (pinned-wait.ts).
      const pinned = await pinnedTarget(o.node, o.nodeWaitMs, placeOn, pgStore !== null);
      const off = typeof o.onProgress === 'function' ? executions.onProgress(executionId, o.onProgress) : () => undefined;
      try {
        if (queue) {
          // In a cluster it is queued in the log and started by a node with room (progress is reported when that is this node).
          const claimBy = clock.nowMs() + QUEUE_CLAIM_MS;
          const ended = () => ['succeeded', 'failed'].includes(inspectActor(store, executionId).state);
          const abort = new AbortController();
          const waiting = awaitQueued(store, executionId, ended, claimBy, QUEUE_CLAIM_MS + timeoutMs + 600_000, () => clock.nowMs(), AbortSignal.any([waits.signal, abort.signal]));
          try {
            await queue.enqueue({ executionId, request, from: selfNode, node: pinned, headStart: o.node === undefined, claimBy: new Date(claimBy).toISOString() });
          } catch (err) {
            waiting.catch(() => undefined);
            throw err;
          }
          await raceGuard(waiting, guardPinned?.(pinned, executionId, o.nodeWaitMs ?? 0, claimBy) ?? null, abort);
        } else {
          // At most policy.executions.maxRunning at once here, the rest in line with their deadline running
          // (execution-limiter.ts). Resolution and pulls count against the deadline only up to a generous bound.
          await limiter.run(clock.nowMs() + timeoutMs, (left) =>
            waitFor('execution', executionId, byState(executionEnded), left + 600_000, () =>
              host.create('execution', executionId, { type: 'execution.requested', data: { request: { ...request, timeoutMs: left }, deadline: new Date(clock.nowMs() + left + 120_000).toISOString() } }),
            ),
          );
        }
        // Answered on the outcome: the used container's removal (the cleanup effect) goes on after this returns,
        // awaited by idle() and close(); a supervisor killed before it is done removes it on restart (reconciler).
        const view = await inspectNow(executionId);
        const c = view.context as ExecutionContext;
        return {
          executionId,
          status: view.state === 'succeeded' ? 'succeeded' : 'failed',
          ...(c.result ? { output: c.result.output } : {}),
          ...(c.failure ? { failure: c.failure } : {}),
          view,
        };
      } finally {
        off();
      }
    },
    async idle() {
      await host.idle();
      await executions.idle(); // the pool's starts and removals, which no actor's effect holds
    },
    async close() {
      stopSelfFence?.();
      placement?.stop();
      handover?.stop();
      follows?.close();
      toolSync.stop();
      queue?.stop();
      await engineWatch?.close();
      await executions.close(); // the pool's removals are recorded: before the host closes
      waits.close();
      if (supervise) await suspendOnStop(host, (id) => instances.tracks(id), log); // before the runners stop the PRoot sandboxes
      host.close();
      timers.close();
      await instances.close();
      // Effects still waiting on something that closing detached (an exit watcher) must not hold the process.
      await Promise.race([host.idle().catch(() => undefined), new Promise((r) => setTimeout(r, 5000).unref())]);
      tracing?.close();
      metrics?.close();
      heartbeat?.stop();
      await store.close();
      writer?.release();
    },
  };
}

function loadPolicy(home: string): OperatorPolicy {
  const file = join(home, 'operator-policy.json');
  return existsSync(file) ? parseOperatorPolicy(readFileSync(file, 'utf8')) : DEFAULT_OPERATOR_POLICY;
}

function summarizeActions(r: ReconcileReport): string {
  const counts = new Map<string, number>();
  for (const a of r.actions) counts.set(a.action, (counts.get(a.action) ?? 0) + 1);
  return [...counts].map(([k, v]) => `${v} ${k}`).join(', ');
}
