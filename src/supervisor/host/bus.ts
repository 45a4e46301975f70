// The in-process bus: what happened, for subscribers in this process (CLI follow, server SSE, tests).
// Facts only; the log stays the record.
import { createNanoEvents, type Emitter } from 'nanoevents';
import type { ActorKind, RecordedEvent } from '../../domain/events.ts';

export interface TransitionNotice {
  id: string;
  kind: ActorKind;
  from: string;
  to: string;
  event: RecordedEvent;
  accepted: boolean;
}

export interface BusEvents {
  'actor:transition': (t: TransitionNotice) => void;
  'app:crashed': (p: { instanceId: string; appId: string | null; crash: unknown }) => void;
  'execution:finished': (p: { executionId: string; status: 'succeeded' | 'failed'; failure?: unknown }) => void;
  'effect:error': (p: { id: string; kind: ActorKind; effect: string; error: string }) => void;
}

export type Bus = Emitter<BusEvents>;
export const createBus = (): Bus => createNanoEvents<BusEvents>();
