// The reads a supervisor's open makes of a PostgreSQL log below its recent window (copy-load.ts, host-store.ts): the
// streams that are no actor's, every event of the streams it holds, and the newest events of request streams (with
// where each begins). Ended actors' streams are never named, let alone read, so the open costs what the copy holds,
// not what the log holds. Kept apart from the event store because they serve that one open, not the port's reads.
import type { RecordedEvent } from '../../domain/events.ts';
import { COLUMNS, type EventRow } from './event-rows.ts';
import type { PgEventStore } from './event-store.ts';
import { UNOWNED_EVENTS } from './schema.ts';

/** The store's statement on its pool, and its rows as recorded events. */
export interface RowReader {
  query(sql: string, params: unknown[]): Promise<EventRow[]>;
  toRecorded(r: EventRow): RecordedEvent;
}

/** A request stream below the recent window: its version there, and where it began (null: no first event there). */
export interface RequestStreamBounds {
  stream: string;
  version: number;
  firstSeq: number | null;
  createdAt: string | null;
}

/**
 * The streams that are no actor's (app grants, facts, the request streams) with events at positions <= `upTo`:
 * read through the partial index of migration 10, so the open does not grow with the actors' history.
 */
export async function unownedStreams(pg: PgEventStore, upTo: number): Promise<string[]> {
  const rows = await pg.sql<{ stream: string }>(
    `SELECT DISTINCT stream FROM events
      WHERE ${UNOWNED_EVENTS} AND seq <= $1`,
    [upTo],
  );
  return rows.map((row) => row.stream);
}

/** Each stream's version at positions <= `upTo`, and its first event's position and `at`: index probes, no scan. */
export async function requestStreamBounds(
  pg: PgEventStore,
  streams: readonly string[],
  upTo: number,
): Promise<RequestStreamBounds[]> {
  if (streams.length === 0) return [];
  const rows = await pg.sql<{ stream: string; version: number | null; first_seq: string | null; at: string | null }>(
    `SELECT s.stream, (SELECT max(version) FROM events e WHERE e.stream = s.stream AND e.seq <= $2) AS version,
            f.seq::text AS first_seq, f.at
       FROM unnest($1::text[]) AS s(stream)
       LEFT JOIN events f ON f.stream = s.stream AND f.version = 1 AND f.seq <= $2`,
    [streams, upTo],
  );
  return rows.map((r) => ({
    stream: r.stream,
    version: r.version ?? 0,
    firstSeq: r.first_seq === null ? null : Number(r.first_seq),
    createdAt: r.at,
  }));
}

/**
 * The highest position <= `upTo` of an event not in `held` (an ended actor's, or a request stream's): a walk back
 * from `upTo` along the positions that stops at the first such event, which in a log of ended actors is at once.
 */
export async function highestUnheld(pg: PgEventStore, upTo: number, held: readonly string[]): Promise<number> {
  const [r] = await pg.sql<{ seq: string | null }>(
    'SELECT max(seq)::text AS seq FROM events WHERE seq <= $1 AND stream <> ALL($2::text[])',
    [upTo, held],
  );
  return r?.seq ? Number(r.seq) : 0;
}

/** Every event of these streams at positions <= `upTo`, in position order (a supervisor's open: the streams it holds). */
export async function readStreamsUpTo(
  r: RowReader,
  streams: readonly string[],
  upTo: number,
): Promise<RecordedEvent[]> {
  if (streams.length === 0) return [];
  const rows = await r.query(
    `SELECT ${COLUMNS} FROM events WHERE stream = ANY($1::text[]) AND seq <= $2 ORDER BY seq`,
    [streams, upTo],
  );
  return rows.map((row) => r.toRecorded(row));
}

/**
 * Of each of these streams, its events at positions <= `upTo` from the oldest one whose `at` is not before
 * `since` on (a supervisor's open: request streams, whose older events it does not hold), in position order.
 * The cut is one version per stream, so what comes is the stream's newest events whatever order their writers'
 * clocks put `at` in.
 */
export async function readStreamsSince(
  r: RowReader,
  streams: readonly string[],
  upTo: number,
  since: string,
): Promise<RecordedEvent[]> {
  if (streams.length === 0) return [];
  const rows = await r.query(
    `WITH cut AS (SELECT stream, min(version) AS version FROM events
                     WHERE stream = ANY($1::text[]) AND seq <= $2 AND at COLLATE "C" >= $3 GROUP BY stream)
       SELECT ${COLUMNS.split(', ')
         .map((c) => `e.${c}`)
         .join(', ')} FROM events e JOIN cut ON e.stream = cut.stream AND e.version >= cut.version
        WHERE e.seq <= $2 ORDER BY e.seq`,
    [streams, upTo, since],
  );
  return rows.map((row) => r.toRecorded(row));
}
