// A batch of appends as PostgreSQL takes it, and its outcomes as the port gives them (event-store.ts): the requests
// encoded into append_events' arrays, the prepared statement that sends them, and each request's outcome built back
// from the rows the append returned. Kept apart from the store because encoding touches no connection: everything is
// serialised before the database is, the same for the one-statement append and the fenced or projected transaction.
import type pg from 'pg';
import type { RecordedEvent } from '../../domain/events.ts';
import { conflictOutcome } from '../expected-version.ts';
import { toJson, type StreamAppend, type StreamAppendOutcome } from '../port.ts';
import type { ProjectionSet } from '../projection-set.ts';
import type { UpcasterRegistry } from '../upcasters.ts';
import type { AppendRow, Encoded } from './append.ts';
import type { EventRow } from './event-rows.ts';

// pg_notify wakes the log's listeners in other processes when the append commits (a notification is sent at
// commit, never for a rollback; the same one twice in a transaction is sent once). No migration: it rides on the call.
const APPEND_SQL =
  "SELECT o_ok, o_actual, o_version, o_first, pg_notify($9, '') AS notified FROM append_events($1, $2, $3, $4, $5, $6, $7, $8)";
// One event to one stream (migration 7): scalar arguments, none of append_events' arrays to build and parse.
const APPEND_EVENT_SQL =
  "SELECT o_ok, o_actual, o_version, o_first, pg_notify($8, '') AS notified FROM append_event($1, $2, $3, $4, $5, $6, $7)";

/** What encoding needs of its store. */
export interface EncodingContext {
  projections: ProjectionSet;
  /** Event types some projection reads (null: one reads every type). An append touching none skips the transaction. */
  projectedTypes: Set<string> | null;
  upcasters: UpcasterRegistry;
  now(): string;
}

/**
 * The append as a named prepared statement: each connection parses and plans it once, not on every append (node-
 * postgres sends an unnamed statement through Parse each time). A pooler in transaction mode must pass protocol-
 * level prepared statements through (PgBouncer 1.21+ with max_prepared_statements).
 */
export function appendQuery(b: Encoded, channel: string): pg.QueryConfig {
  if (b.streams.length === 1 && b.types.length === 1) {
    return {
      name: 'runlog_append_event',
      text: APPEND_EVENT_SQL,
      values: [b.streams[0], b.expected[0], b.types[0], b.schemas[0], b.data[0], b.meta[0], b.at[0], channel],
    };
  }
  return {
    name: 'runlog_append',
    text: APPEND_SQL,
    values: [b.streams, b.expected, b.counts, b.types, b.schemas, b.data, b.meta, b.at, channel],
  };
}

export function encodeAppends(requests: readonly StreamAppend[], c: EncodingContext): Encoded {
  const now = c.now();
  const streams: string[] = [];
  const expected: string[] = [];
  const counts: number[] = [];
  const types: string[] = [];
  const schemas: number[] = [];
  const data: string[] = [];
  const meta: string[] = [];
  const at: string[] = [];
  let projected = false;
  for (const r of requests) {
    streams.push(r.stream);
    expected.push(String(r.expectedVersion));
    counts.push(r.events.length);
    r.events.forEach((e, j) => {
      types.push(e.type);
      schemas.push(e.schema ?? c.upcasters.currentSchema(e.type));
      data.push(toJson(e.data, `${r.stream} event ${j} data`));
      meta.push(toJson(e.meta ?? {}, `${r.stream} event ${j} meta`));
      at.push(e.at ?? now);
      if (c.projections.size > 0 && (c.projectedTypes === null || c.projectedTypes.has(e.type))) projected = true;
    });
  }
  return { streams, expected, counts, types, schemas, data, meta, at, projected };
}

/** Each request's outcome from the row the append returned for it: a conflict, or its events as recorded. */
export function appendOutcomes(
  requests: readonly StreamAppend[],
  rows: AppendRow[],
  { data, meta, at, schemas }: Encoded,
  toRecorded: (r: EventRow) => RecordedEvent,
): StreamAppendOutcome[] {
  let e = 0;
  return requests.map((r, i): StreamAppendOutcome => {
    const row = rows[i]!;
    const start = e;
    e += r.events.length;
    const conflict = conflictOutcome(r, row.o_actual, row.o_ok);
    if (conflict) return conflict;
    const events = r.events.map((ev, k) =>
      toRecorded({
        seq: row.o_first + k,
        stream: r.stream,
        version: row.o_actual + k + 1,
        type: ev.type,
        schema: schemas[start + k]!,
        data: JSON.parse(data[start + k]!),
        meta: JSON.parse(meta[start + k]!),
        at: at[start + k]!,
      }),
    );
    return { ok: true, result: { version: row.o_version, lastSeq: events.at(-1)?.seq ?? 0, events } };
  });
}
