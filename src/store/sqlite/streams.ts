// The streams of a SQLite log as the events table knows them: each stream's version and first and last times. A
// stream's kind is its name's prefix before the first '-' ("instance-…").
import type { StreamInfo } from '../port.ts';
import type { Database } from './driver.ts';

/**
 * Every stream (of one kind), in order of its first event or of its name. A kind is read through the (stream,
 * version) index as the range of names that start with `kind-` (plus a stream named exactly `kind`).
 */
export function streamInfos(
  db: Database.Database,
  kind: string | undefined,
  order: 'first-event' | 'name',
): StreamInfo[] {
  const where = kind ? 'WHERE stream = ? OR (stream >= ? AND stream < ?)' : '';
  // '-' is U+002D: every name that starts with `kind-` sorts at or after `kind-` and before `kind.` (U+002E).
  const args = kind ? [kind, `${kind}-`, `${kind}.`] : [];
  const rows = db
    .prepare(
      'SELECT stream, max(version) AS version, min(seq) AS first, min(at) AS created_at, max(at) AS updated_at ' +
        `FROM events ${where} GROUP BY stream ORDER BY ${order === 'name' ? 'stream' : 'first'}`,
    )
    .all(...args) as { stream: string; version: number; created_at: string; updated_at: string }[];
  return rows
    .map((r) => ({
      stream: r.stream,
      kind: r.stream.split('-')[0]!,
      version: r.version,
      createdAt: r.created_at,
      updatedAt: r.updated_at,
    }))
    .filter((r) => !kind || r.kind === kind);
}
