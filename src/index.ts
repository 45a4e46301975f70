// runlog's public API: createRunlog, its options and views, the errors, the machines and `replay` (to fold a
// history offline), and the store port's types (the rows and events the Runlog's reads answer with). Store classes,
// the actor host, the bus and other internals are not exported, nor reachable from a Runlog (its calls are its whole
// face): a program reaches the log through createRunlog. runlog's own code reaches them through
// supervisor/runlog-internals.ts, which is not exported here.
export {
  createRunlog,
  type AppToolsView,
  type ExecuteOptions,
  type ExecutionOutcome,
  type LogLine,
  type Runlog,
  type RunlogOptions,
  type SpawnAppOptions,
} from './supervisor/runlog.ts';
export type { ActorView, ReplayView } from './inspect/inspection.ts';
export type { EgressOptions } from './supervisor/executions/executions.ts';
export type { BusEvents, TransitionNotice } from './supervisor/host/bus.ts';
export {
  collect,
  type ActorFilter,
  type ActorRow,
  type AppendExtras,
  type AppendToStreamOptions,
  type AppendToStreamResult,
  type EventStorePort,
  type ExpectedStreamVersion,
  type Heartbeat,
  type ProjectionReader,
  type ReadAllOptions,
  type ReadStreamOptions,
  type SnapshotRecord,
  type StreamAppend,
  type StreamAppendOutcome,
  type StreamInfo,
  type SubscribeOptions,
  type Subscription,
} from './store/port.ts';
export type { ArchiveOptions, ArchiveResult, Archiving } from './store/capabilities.ts';
export type { NodesView } from './domain/cluster-nodes.ts';
export type { Supervision } from './domain/supervision.ts';
export type { ActorKind, KindNewEvent, NewEvent, RecordedEvent } from './domain/events.ts';
export * from './domain/errors.ts';
export { instanceMachine, type InstanceContext } from './machines/instance.machine.ts';
export { executionMachine, type ExecutionContext } from './machines/execution.machine.ts';
export { replay, replaySteps, stateName } from './machines/runtime.ts';
