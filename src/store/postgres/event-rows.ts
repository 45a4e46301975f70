// A row of PostgreSQL's events table and the recorded event it becomes (event-store.ts). Every read of events selects
// the same columns and passes each row through the upcasters the same way, so the row's shape lives here once, for the
// store's reads, its appends' outcomes and the projection rebuild alike.
import type { RecordedEvent } from '../../domain/events.ts';
import { upcastRecorded } from '../upcast-recorded.ts';
import type { UpcasterRegistry } from '../upcasters.ts';

/** The events table's columns, in the order every read selects them. */
export const COLUMNS = 'seq, stream, version, type, schema, data, meta, at';

export interface EventRow {
  seq: number;
  stream: string;
  version: number;
  type: string;
  schema: number;
  data: Record<string, unknown>;
  meta: Record<string, unknown>;
  at: string;
}

/** The row as a recorded event, upcast to its type's current schema. */
export function toRecordedEvent(upcasters: UpcasterRegistry, r: EventRow): RecordedEvent {
  return upcastRecorded(upcasters, {
    seq: r.seq,
    stream: r.stream,
    version: r.version,
    type: r.type,
    schema: r.schema,
    data: r.data,
    meta: r.meta,
    at: r.at,
  });
}
