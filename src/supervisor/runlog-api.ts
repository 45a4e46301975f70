// The public face of createRunlog(): its options, the views its calls answer with, and the Runlog it returns.
import type { EgressOptions } from './executions/executions.ts';
import type { JobsOptions } from './jobs/job-intake-wiring.ts';
import type { TracerProvider } from '@opentelemetry/api';
import type { WatchFactory } from '../adapters/apps/app-registry.ts';
import type { AtprotoReaderOptions, Publisher } from '../adapters/atproto/index.ts';
import type { AppSandboxRunner } from '../adapters/sandbox/app-sandbox-runner.ts';
import type { Parts } from '../config/parts.ts';
import type { OperatorPolicy } from '../domain/at-run/operator-policy.ts';
import type { Clock } from '../domain/clock.ts';
import type { ActorKind, KindNewEvent, RecordedEvent } from '../domain/events.ts';
import type { LogLine } from '../domain/log-line.ts';
import type { NodeChoice } from '../domain/placement.ts';
import type { Supervision } from '../domain/supervision.ts';
import type { NodesView } from '../domain/cluster-nodes.ts';
import type { ArchiveOptions, ArchiveResult } from '../store/capabilities.ts';
import type { ActorRow } from '../store/port.ts';
import type { WriterLock } from '../store/sqlite/writer-lock.ts';
import type { DispatchResult, EffectHandlers } from './host/actor-host.ts';
import type { BusEvents } from './host/bus.ts';
import type { FaultHook } from './host/faults.ts';
import type { ActorView, ReplayView } from '../inspect/inspection.ts';
import type { ReconcileOptions } from './recovery/reconciler.ts';
import type { OrphanPolicy, ReconcileReport } from './recovery/reconcile-run.ts';

export type { LogLine };

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
   * `pgKeepRecent` positions (default 10,000): they are read from PostgreSQL when asked (postgres/host-store.ts).
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
   * the log's writer lock (store/sqlite/writer-lock.ts) until close(): a second writer is refused with SUPERVISOR_RUNNING
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
  /**
   * The egress proxy of executions the policy grants network (its `network.destinations`): the resolvers it asks and
   * its way out. Default: the host's resolvers, and a network made for it.
   */
  egress?: EgressOptions;
  /** How to reach the AT Protocol network: PLC directory, strict or cid mode. */
  atproto?: AtprotoReaderOptions;
  /** Writes an execution receipt to this account's repo after each invocation (the runner's own account). */
  receipts?: Publisher;
  /**
   * Takes job records addressed to this runner (the `receipts` account's DID) from a relay's or PDS's repo event
   * stream, and answers each with a receipt (a supervising process only; needs `receipts`).
   */
  jobs?: JobsOptions;
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
  /** Keep Prometheus metrics, served by `runlog serve` at `/metrics` (default true when supervising). */
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
  /** Whether a supervisor (this one or another process) is alive on this log, from its heartbeat. */
  supervision(): Promise<Supervision>;
  /** The supervisors sharing this log, each one's heartbeat and the actors it owns (on SQLite: the one). */
  nodes(): Promise<NodesView>;
  /**
   * Archives the histories of actors that ended before `options.before` into `options.out`, and removes them from
   * the log (what `runlog archive` and `serve --retain` run): for programs that run their own retention.
   */
  archive(options: ArchiveOptions): Promise<ArchiveResult>;
  /** The operator policy executions run under (input limits, ceilings, allow-lists). */
  readonly policy: OperatorPolicy;
  /** Live actors (every one with `all`), read from the log's actors projection. */
  list(filter?: { kind?: ActorKind; all?: boolean }): Promise<ActorRow[]>;
  /** One actor's state and summary, from the log (any actor, live or ended). Unknown id: NOT_FOUND. */
  inspect(id: string): Promise<ActorView>;
  /** One actor's events, versions `from`..`to` inclusive (default: all of them). */
  events(id: string, range?: { from?: number; to?: number }): Promise<RecordedEvent[]>;
  /** One actor's history folded step by step through its machine, up to version `to`. */
  replay(id: string, options?: { to?: number }): Promise<ReplayView>;
  /** Rebuilds the actors projection from the log. */
  rebuild(): Promise<{ actors: number; events: number }>;
  on<K extends keyof BusEvents>(event: K, cb: BusEvents[K]): () => void;
  /** Sends an event to an actor through its machine (advanced; the typed calls below use it). */
  send<K extends ActorKind>(kind: K, id: string, event: KindNewEvent<K>): Promise<DispatchResult>;
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
