// Re-exports only, while callers outside the store move onto the port (port.ts): the synchronous engine interface
// and its types live in sqlite/engine-types.ts; ActorRow, Heartbeat, SnapshotRecord and StreamInfo come from
// port.ts, AppendObserver from capabilities.ts. New code imports from those, never from here.
export type { ActorRow, Heartbeat, SnapshotRecord, StreamInfo } from './port.ts';
export type { AppendObserver } from './capabilities.ts';
export type {
  AppendOptions,
  AppendOutcome,
  AppendRequest,
  AppendResult,
  EventStore,
  ExpectedVersion,
  IterateEventsOptions,
  ReadAllOptions,
  ReadOptions,
  SnapshotRow,
  SubscribeOptions,
} from './sqlite/engine-types.ts';
export { toSnapshot } from './sqlite/engine-types.ts';
