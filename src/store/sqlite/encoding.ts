// Encoding an append's events (and its projection row) as JSON text before any transaction starts: a value JSON
// cannot encode fails its own append, and nothing of it is written.
import type { NewEvent } from '../../domain/events.ts';
import { MAX_EVENT_DEPTH, nestedDeeperThan } from '../../domain/json-input.ts';
import { EventEncodingError, ValidationError } from '../../domain/errors.ts';
import { eventTimeProblem, type SnapshotRecord } from '../port.ts';
import type { EngineAppendOptions, EngineAppendRequest } from './engine-types.ts';

/** One request with its events already encoded: encoding happens before any transaction starts. */
export interface EncodedRequest {
  stream: string;
  snapshot?: SnapshotRecord;
  events: { event: NewEvent; data: string; meta: string }[];
  options: EngineAppendOptions;
  summary: string | null;
}

/** One value as JSON text, or an EventEncodingError naming the stream and event type (the memory store uses it too). */
export function encodeJson(value: unknown, stream: string, type: string): string {
  // Bounded here, not by the encoder: Node 26's JSON.stringify encodes any depth, older lines throw at their own.
  if (nestedDeeperThan(value, MAX_EVENT_DEPTH))
    throw new EventEncodingError(stream, type, `nested deeper than ${MAX_EVENT_DEPTH} levels`);
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw new EventEncodingError(stream, type, err instanceof Error ? err.message : String(err), { cause: err });
  }
  if (typeof text !== 'string') throw new EventEncodingError(stream, type, `${typeof value} is not JSON`);
  return text;
}

/** Encodes one request's events and projection, or says why it cannot be. */
export function encodeRequest(r: EngineAppendRequest): EncodedRequest {
  const events = r.events.map((e, j) => ({
    event: checkedTime(e, r.stream, j),
    data: encodeJson(e.data, r.stream, e.type),
    // No meta is `{}`, which encodes to the same text every time.
    meta: e.meta == null ? '{}' : encodeJson(e.meta, r.stream, e.type),
  }));
  const summary = r.options.projection
    ? encodeJson(r.options.projection.summary, r.stream, r.events[0]?.type ?? 'projection')
    : null;
  return {
    stream: r.stream,
    events,
    options: r.options,
    summary,
    ...(r.options.snapshot ? { snapshot: r.options.snapshot } : {}),
  };
}

/** The event, once its `at` is one the log can write and hash as the same text (port.ts eventTimeProblem). */
function checkedTime(e: NewEvent, stream: string, index: number): NewEvent {
  const problem = eventTimeProblem(e.at);
  if (problem)
    throw new ValidationError('STORE_INPUT', 'invalid append', [`stream ${stream} event ${index}: ${problem}`]);
  return e;
}
