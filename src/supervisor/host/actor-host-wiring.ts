// The actor host and the supervisors whose effects it runs (instances, executions, restart timers), built together:
// their effect handlers need the host, and the host needs their handlers, so they reach it through `hostRef`,
// which answers once the host is built (before any effect can run).
import { createDockerEngine } from '../../adapters/docker/dockerode-engine.ts';
import type { DockerEngine } from '../../adapters/docker/docker-port.ts';
import { readTextIfPresent } from '../../adapters/files/local-files.ts';
import type { Parts } from '../../config/parts.ts';
import {
  DEFAULT_OPERATOR_POLICY,
  parseOperatorPolicy,
  type OperatorPolicy,
} from '../../domain/at-run/operator-policy.ts';
import type { Clock } from '../../domain/clock.ts';
import { RunlogError } from '../../domain/errors.ts';
import type { ActorKind } from '../../domain/events.ts';
import { machines } from '../../machines/runtime.ts';
import type { Leasing, Reconnecting } from '../../store/capabilities.ts';
import { collect, type EventStorePort } from '../../store/port.ts';
import { join } from 'node:path';
import { ActorHost, type AllEffectHandlers } from './actor-host.ts';
import { readToolOverrides } from '../instances/app-grants.ts';
import type { Bus } from './bus.ts';
import { onEffectError } from './effect-errors.ts';
import { ExecutionSupervisor } from '../executions/executions.ts';
import type { FaultHook } from './faults.ts';
import { InstanceSupervisor } from '../instances/instances.ts';
import type { RunlogOptions } from '../runlog-api.ts';
import { RestartTimers } from './timers.ts';
import type { RunlogTracing } from '../observability/tracing.ts';

export interface HostInputs {
  options: RunlogOptions;
  home: string;
  store: EventStorePort;
  /** A store that can be briefly unreachable (PostgreSQL); null for a file. */
  reconnecting: Reconnecting | null;
  /** The cluster node's leases (null: not a cluster node). */
  leasing: Leasing | null;
  supervise: boolean;
  bus: Bus;
  log: (msg: string) => void;
  faults: FaultHook;
  parts: Parts;
  clock: Clock;
  now: () => string;
  tracing: RunlogTracing | null;
}

export interface HostServices {
  host: ActorHost;
  hostRef: () => ActorHost;
  timers: RestartTimers;
  instances: InstanceSupervisor;
  executions: ExecutionSupervisor;
  /** The supervisor's one Docker Engine port, made on first use. */
  engine: () => DockerEngine;
}

export function buildHost(i: HostInputs): HostServices {
  const { options, store, leasing, bus, log, parts, clock } = i;
  const built: { host?: ActorHost } = {};
  const hostRef = (): ActorHost => {
    if (!built.host) throw new RunlogError('INTERNAL', 'the actor host was used before it was built');
    return built.host;
  };
  const timers = new RestartTimers(hostRef, clock);
  // One Docker Engine port for the supervisor (executions, the apps' container runner, the engine watch), made on
  // first use: a runlog that never reaches Docker (inspection, the unit tier) makes none, and making one contacts
  // nothing (the daemon may be down at start).
  let dockerEngine: DockerEngine | null = null;
  const engine = (): DockerEngine => (dockerEngine ??= createDockerEngine({ socketPath: parts.dockerSocket }));
  const instances = new InstanceSupervisor(
    {
      home: i.home,
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
      home: i.home,
      clock,
      parts,
      log,
      faults: i.faults,
      engine,
      policy: options.policy ?? loadPolicy(i.home),
      ...(options.atproto ? { atproto: options.atproto } : {}),
      ...(options.labels ? { labels: options.labels } : {}),
      ...(options.receipts ? { receipts: options.receipts } : {}),
      ...(options.egress ? { egress: options.egress } : {}),
      readFacts: (stream: string) => collect(store.readStream(stream)),
    },
    hostRef,
  );
  const builtIn: AllEffectHandlers = {
    instance: {
      ...instances.handlers(),
      ...timers.handlers(),
      announce: ({ topic: _topic, ...p }) => bus.emit('app:crashed', p),
    },
    execution: { ...executions.handlers(), announce: ({ topic: _topic, ...p }) => bus.emit('execution:finished', p) },
  };
  // Not supervising: events are recorded, their effects are the supervisor's (none run here).
  const effects: AllEffectHandlers | null = i.supervise
    ? {
        instance: { ...builtIn.instance, ...options.effects?.instance },
        execution: { ...builtIn.execution, ...options.effects?.execution },
      }
    : null;
  const tracing = i.tracing;
  const host = new ActorHost({
    store,
    reconnecting: i.reconnecting,
    bus,
    machines,
    effects,
    now: i.now,
    faults: i.faults,
    onEffectError,
    log,
    ...(tracing ? { onCreate: (kind: ActorKind, id: string) => tracing.created(kind, id) } : {}),
    ...(leasing ? { owns: (stream: string) => leasing.owns(stream) } : {}),
    // A new actor found committed after its reply was lost is this node's (its lease): picked up at the next beat.
    ...(leasing ? { onOrphaned: () => leasing.pickUpSoon() } : {}),
  });
  built.host = host;
  return { host, hostRef, timers, instances, executions, engine };
}

function loadPolicy(home: string): OperatorPolicy {
  const file = join(home, 'operator-policy.json');
  const text = readTextIfPresent(file);
  return text === null ? DEFAULT_OPERATOR_POLICY : parseOperatorPolicy(text);
}
