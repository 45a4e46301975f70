// What the Runlog facade's calls are made of: the services the composition root (runlog.ts openRunlog) built, each
// a typed value. One shape shared by the facade and its call groups (instances/instance-calls.ts,
// executions/execute-call.ts), so a call reaches what it needs without the wiring that made it.
import type { Clock } from '../domain/clock.ts';
import type { NodeChoice } from '../domain/placement.ts';
import type { Leasing } from '../store/capabilities.ts';
import type { EventStorePort } from '../store/port.ts';
import type { WriterLock } from '../store/sqlite/writer-lock.ts';
import type { ClusterServices } from './cluster/cluster-services.ts';
import type { pinnedWatch } from './cluster/pinned-wait.ts';
import type { ExecutionLimiter } from './executions/execution-limiter.ts';
import type { HostServices } from './host/actor-host-wiring.ts';
import type { Bus } from './host/bus.ts';
import type { HeartbeatHandle } from './host/heartbeat.ts';
import type { SettleWaits } from './host/settle-waits.ts';
import type { AppToolSync } from './instances/app-tool-sync.ts';
import type { InstanceOperations } from './instances/instance-operations.ts';
import type { JobIntakeHandle } from './jobs/job-intake-wiring.ts';
import type { RunlogMetrics } from './observability/metrics.ts';
import type { RunlogTracing } from './observability/tracing.ts';
import type { OpenedLog } from './open-log.ts';
import type { ReconcileOptions } from './recovery/reconciler.ts';
import type { ReconcileReport } from './recovery/reconcile-run.ts';
import type { RunlogOptions } from './runlog-api.ts';

/** What the facade's calls are made of: the services openRunlog composed, each a typed value. */
export interface Composed {
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
  /** Jobs taken from the network (null: not asked for, RunlogOptions.jobs). */
  jobs: JobIntakeHandle | null;
  placeOn(choice: NodeChoice): Promise<string>;
}
