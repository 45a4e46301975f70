// What a PostgreSQL supervisor's store reads from the database because its copy of the log does not hold it
// (host-store.ts): an ended actor's stream is not in memory at all once paged out, not even as a stub, so its
// version, the node that last wrote to it and the list of every stream come from here. Each read is bounded by the
// copy's head, so the store never answers ahead of what it has seen (its lastSeq and its reads agree).
import type { StreamInfo } from '../port.ts';
import type { PgEventStore } from './event-store.ts';
import { ACTOR_STREAM } from './lease-beat.ts';
import { UNOWNED_EVENTS } from './schema.ts';

/** The stream's version among the events at positions <= `head` (0: none; an archived stream's are gone). */
export async function versionUpTo(pg: PgEventStore, stream: string, head: number): Promise<number> {
  const [r] = await pg.sql<{ v: number }>(
    'SELECT coalesce(max(version), 0)::integer AS v FROM events WHERE stream = $1 AND seq <= $2',
    [stream, head],
  );
  return r!.v;
}

/**
 * Of each stream, meta.node of its last event at a position <= `head` that carries a string there (a stream none
 * of whose events does is not in the map). One statement for any number of streams: `ps --all` asks for every one.
 */
export async function lastNodesUpTo(
  pg: PgEventStore,
  streams: readonly string[],
  head: number,
): Promise<Map<string, string>> {
  const rows = await pg.sql<{ stream: string; node: string }>(
    `SELECT DISTINCT ON (stream) stream, meta->>'node' AS node FROM events
      WHERE stream = ANY($1::text[]) AND seq <= $2 AND jsonb_typeof(meta->'node') = 'string'
      ORDER BY stream, version DESC`,
    [streams, head],
  );
  return new Map(rows.map((r) => [r.stream, r.node]));
}

/**
 * Every stream with events at positions <= `head` (of one kind: the name up to its first `-`), in name order code
 * unit by code unit (COLLATE "C", as the copy sorts). One pass over those events: a list of every stream is as
 * long as the log's streams, whoever asks. A kind that is no actor's reads only the events that are no actor's
 * (the partial index of postgres/schema.ts migration 10), so listing the placement streams does not scan history.
 */
export async function streamsUpTo(pg: PgEventStore, head: number, kind?: string): Promise<StreamInfo[]> {
  const unowned = kind !== undefined && !ACTOR_STREAM.test(`${kind}-`) ? `AND ${UNOWNED_EVENTS}` : '';
  const rows = await pg.sql<{ stream: string; version: number; created_at: string; updated_at: string }>(
    `SELECT g.stream, g.version, f.at AS created_at, l.at AS updated_at
       FROM (SELECT stream, min(version) AS first, max(version) AS version FROM events
              WHERE seq <= $1 AND ($2::text IS NULL OR split_part(stream, '-', 1) = $2) ${unowned}
              GROUP BY stream) g
       JOIN events f ON f.stream = g.stream AND f.version = g.first
       JOIN events l ON l.stream = g.stream AND l.version = g.version
      ORDER BY g.stream COLLATE "C"`,
    [head, kind ?? null],
  );
  return rows.map((r) => ({
    stream: r.stream,
    kind: r.stream.split('-')[0]!,
    version: r.version,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  }));
}
