// runlog's public API.
export { createRunlog, type AppToolsView, type ExecuteOptions, type ExecutionOutcome, type LogLine, type Runlog, type RunlogOptions, type SpawnAppOptions } from './actors/runlog.ts';
export type { ActorView, ReplayView } from './actors/inspection.ts';
export type { BusEvents, TransitionNotice } from './actors/bus.ts';
export type { ActorRow, EventStore, ExpectedVersion } from './store/event-store.ts';
export { SqliteEventStore, openEventStore } from './store/sqlite-event-store.ts';
export type { ActorKind, KindNewEvent, NewEvent, RecordedEvent } from './domain/events.ts';
export * from './domain/errors.ts';
export { instanceMachine, type InstanceContext } from './machines/instance.machine.ts';
export { executionMachine, type ExecutionContext } from './machines/execution.machine.ts';
export { replay, replaySteps, stateName } from './machines/runtime.ts';
