// Read-side upcasting for the port's stores: a row as written becomes the event as the current runlog reads it.
import type { RecordedEvent } from '../domain/events.ts';
import type { UpcasterRegistry } from './upcasters.ts';

export function upcastRecorded(upcasters: UpcasterRegistry, e: RecordedEvent): RecordedEvent {
  if (upcasters.isCurrent(e.type, e.schema)) return e;
  const { schema, data } = upcasters.upcast(e.type, e.schema, e.data);
  return { ...e, schema, data };
}
