// runlog's public API.
export { createRunlog, type AppToolsView, type ExecuteOptions, type ExecutionOutcome, type LogLine, type Runlog, type RunlogOptions, type SpawnAppOptions } from './supervisor/runlog.ts';
export type { ActorView, ReplayView } from './inspect/inspection.ts';
export type { BusEvents, TransitionNotice } from './supervisor/host/bus.ts';
export type { ActorRow, EventStore, ExpectedVersion } from './store/event-store.ts';
export { SqliteEventStore, openEventStore } from './store/sqlite/event-store.ts';
export type { ActorKind, KindNewEvent, NewEvent, RecordedEvent } from './domain/events.ts';
export * from './domain/errors.ts';
export { instanceMachine, type InstanceContext } from './machines/instance.machine.ts';
export { executionMachine, type ExecutionContext } from './machines/execution.machine.ts';
export { replay, replaySteps, stateName } from './machines/runtime.ts';
