// Reading back after a store outage: an append cut off by an unreachable store (PostgreSQL restarting) may have
// committed all the same, so the actor host reads the stream once the store answers and compares what landed with
// what it sent. The reads and the comparison live here; what the host does with the answer stays in the host.
import { RunlogError } from '../../domain/errors.ts';
import type { NewEvent, RecordedEvent } from '../../domain/events.ts';
import type { Reconnecting } from '../../store/capabilities.ts';
import { collect, type EventStorePort } from '../../store/port.ts';

export const isUnavailable = (err: unknown): boolean => err instanceof RunlogError && err.code === 'STORE_UNAVAILABLE';

/** The event an append that was cut off tried to write (same type, time and content) — it committed after all. */
export function sameEvent(recorded: RecordedEvent, sent: NewEvent): boolean {
  return recorded.type === sent.type && recorded.at === sent.at && canonical(recorded.data) === canonical(sent.data);
}

/** JSON with object keys sorted (PostgreSQL's jsonb gives them back in its own order). */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x,
  );
}

/** The stream's events from `from` on; null when the store was unreachable for the read. */
export async function readAfter(store: EventStorePort, stream: string, from: number): Promise<RecordedEvent[] | null> {
  try {
    return await collect(store.readStream(stream, { from }));
  } catch (err) {
    if (isUnavailable(err)) return null;
    throw err;
  }
}

/**
 * The stream's events from `from` on, read once the store answers again (an observed fact's cut-off append):
 * a read cut off again waits for the store again. Rejects when the store is closed.
 */
export async function readBack(
  store: EventStorePort,
  stream: string,
  from: number,
  reconnecting: Reconnecting,
): Promise<RecordedEvent[]> {
  for (;;) {
    await reconnecting.whenAvailable();
    const landed = await readAfter(store, stream, from);
    if (landed !== null) return landed;
  }
}

/**
 * The stream's events from `from` on, looked up until `until` (epoch ms): a read cut off again (the store went
 * away once more) waits again while time is left; any other failure to read leaves it unknown (null).
 */
export async function lookUpAfter(
  store: EventStorePort,
  stream: string,
  from: number,
  reconnecting: Reconnecting,
  until: number,
): Promise<RecordedEvent[] | null> {
  let landed: RecordedEvent[] | null = null;
  while (await reconnecting.whenAvailable(Math.max(0, until - Date.now())).catch(() => false)) {
    try {
      landed = await readAfter(store, stream, from);
    } catch {
      break;
    }
    if (landed !== null || Date.now() >= until) break;
  }
  return landed;
}

/** STORE_UNAVAILABLE for a request that was not found in the log: not recorded (answered), or maybe committed. */
export function notRecordedError(
  err: RunlogError,
  actor: { kind: string; id: string; stream: string },
  sent: NewEvent,
  answered: boolean,
): RunlogError {
  const ref = `${actor.kind} ${actor.id}`;
  return new RunlogError(
    'STORE_UNAVAILABLE',
    answered
      ? `${err.message} — looked up once it answered: ` +
          `this request for ${ref} was not recorded (nothing of it is in the log); send it again`
      : `${err.message} — this request for ${ref} may have committed: ` +
          `\`runlog events ${actor.id}\` says whether (its ${sent.type} event is there or not)`,
    { ...err.details, stream: actor.stream, committed: answered ? false : 'unknown' },
    { cause: err },
  );
}
