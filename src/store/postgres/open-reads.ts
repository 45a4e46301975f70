// The reads a supervisor's open makes of a PostgreSQL log below its recent window (copy-load.ts, host-store.ts): a
// summary per stream instead of the events of streams it will not hold, every event of the streams it holds, and the
// newest events of request streams. Kept apart from the event store because they serve that one open, with their own
// statements and their own cost (one pass over the events for the summary), not the port's reads.
import type pg from 'pg';
import type { RecordedEvent } from '../../domain/events.ts';
import { COLUMNS, type EventRow } from './event-rows.ts';

/** work_mem for summarizeStreams' hash aggregate (~430 bytes a stream: 64 MB, twice that with the default hash_mem_multiplier, holds ~300,000). */
const SUMMARY_WORK_MEM = '64MB';

/** What summarizeStreams says of one stream's events up to a position (its events are not read). */
export interface StreamSummary {
  stream: string;
  /** How many of its events lie at or below the position. */
  events: number;
  /** The version of the last of them. */
  version: number;
  firstSeq: number;
  lastSeq: number;
  /** `at` of the first and the last of them. */
  createdAt: string;
  updatedAt: string;
  /** meta.node of the last of them that carries a string there (null: none does). */
  node: string | null;
}

/** The store's statement on its pool, and its rows as recorded events. */
export interface RowReader {
  query(sql: string, params: unknown[]): Promise<EventRow[]>;
  toRecorded(r: EventRow): RecordedEvent;
}

/**
 * One row per stream with events at positions <= `upTo` (a supervisor's open, postgres/host-store.ts: what it needs of
 * the streams it will not hold, instead of their events): the number of those events, the last one's version,
 * the first and last one's positions and `at`, and the `meta.node` of the last one that has a string there.
 * One pass over the events (a sequential scan and a hash aggregate: cheaper here than a probe of the
 * (stream, version) index per stream, and no index to maintain on every append). The first/last `at` and node
 * ride on their position: the minimum or maximum of `seq` zero-padded to 19 digits (any bigint) followed by
 * the value, compared byte for byte (COLLATE "C"), is the value at the first or last position.
 *
 * The aggregate holds a group per stream: with the default work_mem (4 MB) 198,069 streams did not fit and
 * PostgreSQL sorted the 1,026,358 events on disk instead (an external merge: 2.0 s, against 1.2 s hashed in
 * memory); SUMMARY_WORK_MEM, for this statement only (SET LOCAL in its own read-only transaction), keeps it in
 * memory (a larger log spills to disk in batches). Rows come as arrays: no object per row to build and drop.
 */
export async function summarizeStreams(client: pg.PoolClient, upTo: number): Promise<StreamSummary[]> {
  await client.query('BEGIN READ ONLY');
  try {
    await client.query(`SET LOCAL work_mem = '${SUMMARY_WORK_MEM}'`);
    // The positions and values are split apart by the server: numbers, and flat strings (a slice of a longer
    // string would keep the whole of it alive in every paged-out stream's stub).
    const { rows } = await client.query<[string, number, number, number, string, number, string, string | null]>({
      text: `SELECT stream, n, version, left(first, 19)::bigint, substr(first, 20), left(last, 19)::bigint, substr(last, 20), substr(node, 20)
         FROM (SELECT stream, count(*)::integer AS n, max(version) AS version,
                      min((lpad(seq::text, 19, '0') || at) COLLATE "C") AS first,
                      max((lpad(seq::text, 19, '0') || at) COLLATE "C") AS last,
                      max((lpad(seq::text, 19, '0') || (meta->>'node')) COLLATE "C") FILTER (WHERE jsonb_typeof(meta->'node') = 'string') AS node
                 FROM events WHERE seq <= $1 GROUP BY stream) s`,
      values: [upTo],
      rowMode: 'array',
    });
    const out: StreamSummary[] = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const [stream, events, version, firstSeq, createdAt, lastSeq, updatedAt, node] = rows[i]!;
      out[i] = { stream, events, version, firstSeq, createdAt, lastSeq, updatedAt, node };
    }
    return out;
  } finally {
    await client.query('COMMIT');
  }
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
