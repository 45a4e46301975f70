// The shapes of what the log holds. Event types are namespaced by actor kind ("instance.spawned",
// "execution.materialized"); `schema` versions each type's data so old logs replay via upcasters.
import type { ExecutionEventData } from './execution-events.ts';
import type { InstanceEventData } from './instance-events.ts';

export type ActorKind = 'instance' | 'execution';
/** Every kind, once (the record's keys make a kind added to the union without it here a compile error). */
export const ACTOR_KINDS = Object.keys({ instance: true, execution: true } satisfies Record<
  ActorKind,
  true
>) as readonly ActorKind[];

/** An event as the caller proposes it. `at` is stamped by the host's clock when omitted. */
export interface NewEvent<T extends string = string, D = Record<string, unknown>> {
  type: T;
  data: D;
  schema?: number;
  meta?: Record<string, unknown>;
  at?: string;
}

/** An event as the log holds it. `seq` orders the whole log; `version` orders one stream (1-based). */
export interface RecordedEvent<T extends string = string, D = Record<string, unknown>> {
  seq: number;
  stream: string;
  version: number;
  type: T;
  schema: number;
  data: D;
  meta: Record<string, unknown>;
  at: string;
}

/** What a machine consumes: the event's type and data plus when it happened. */
export interface MachineEvent {
  type: string;
  at: string;
  data: Record<string, unknown>;
}

/** Each actor kind's events: event type → data type (instance-events.ts, execution-events.ts). */
export interface EventDataByKind {
  instance: InstanceEventData;
  execution: ExecutionEventData;
}

/** One of a kind's events as its machine consumes it: a discriminated union on `type`, each with its data. */
export type KindEvent<K extends ActorKind> = K extends ActorKind
  ? {
      [T in keyof EventDataByKind[K] & string]: { type: T; at: string; data: EventDataByKind[K][T] };
    }[keyof EventDataByKind[K] & string]
  : never;

/** One of a kind's events as a caller proposes it (what `ActorHost.dispatch` takes). */
export type KindNewEvent<K extends ActorKind> = K extends ActorKind
  ? { [T in keyof EventDataByKind[K] & string]: NewEvent<T, EventDataByKind[K][T]> }[keyof EventDataByKind[K] & string]
  : never;

export type InstanceEvent = KindEvent<'instance'>;
export type ExecutionEvent = KindEvent<'execution'>;

/** What replaying the whole log needs of an event: where it belongs (stream, version) and the machine event itself. */
export interface ReplayEvent extends MachineEvent {
  stream: string;
  version: number;
}

export function toMachineEvent(e: Pick<RecordedEvent, 'type' | 'at' | 'data'>): MachineEvent {
  return { type: e.type, at: e.at, data: e.data };
}

export const streamName = (kind: ActorKind, id: string): string => `${kind}-${id}`;

export function parseStreamName(stream: string): { kind: ActorKind; id: string } | null {
  const m = /^(instance|execution)-(.+)$/.exec(stream);
  return m ? { kind: m[1] as ActorKind, id: m[2]! } : null;
}

/** An event the current state cannot accept is recorded under this type, with the original inside. */
export const rejectedType = (kind: ActorKind): string => `${kind}.rejected`;
