// Snapshots in a SQLite log: the newest per stream (snapshots), the ones they replaced (snapshot_history, kept for
// `replay --to`), and the version each actor's row records. Written in the append's transaction
// (sqlite/event-store.ts); read here.
import type { SnapshotRecord } from '../port.ts';
import { toSnapshot, type SnapshotRow } from './engine-types.ts';
import type { Database } from './driver.ts';

export function snapshotAtOrBefore(db: Database.Database, stream: string, version: number): SnapshotRecord | undefined {
  const r = db
    .prepare(
      'SELECT * FROM (SELECT * FROM snapshots WHERE stream = ? AND version <= ? UNION ALL ' +
        'SELECT * FROM snapshot_history WHERE stream = ? AND version <= ?) ORDER BY version DESC LIMIT 1',
    )
    .get(stream, version, stream, version) as SnapshotRow | undefined;
  return r ? toSnapshot(r) : undefined;
}

/** Every stored snapshot (`runlog verify`), a page at a time. */
export function* iterateSnapshots(db: Database.Database, pageSize = 256): IterableIterator<SnapshotRecord> {
  const page = db.prepare('SELECT * FROM snapshots WHERE stream > ? ORDER BY stream LIMIT ?') as Database.Statement<
    [string, number],
    SnapshotRow
  >;
  let cursor = '';
  for (;;) {
    const rows = page.all(cursor, pageSize);
    for (const r of rows) yield toSnapshot(r);
    if (rows.length < pageSize) return;
    cursor = rows[rows.length - 1]!.stream;
  }
}

/** Every older snapshot kept for `replay --to` (snapshot_history; `runlog verify`), a page at a time. */
export function* iterateSnapshotHistory(db: Database.Database, pageSize = 256): IterableIterator<SnapshotRecord> {
  const page = db.prepare(
    'SELECT * FROM snapshot_history WHERE (stream, version) > (?, ?) ORDER BY stream, version LIMIT ?',
  ) as Database.Statement<[string, number, number], SnapshotRow>;
  let cursor: [string, number] = ['', -1];
  for (;;) {
    const rows = page.all(cursor[0], cursor[1], pageSize);
    for (const r of rows) yield toSnapshot(r);
    if (rows.length < pageSize) return;
    cursor = [rows[rows.length - 1]!.stream, rows[rows.length - 1]!.version];
  }
}

/** Replaces every snapshot in the caller's transaction with `records`, each written by `put`; how many. */
export function replaceSnapshotRows(
  db: Database.Database,
  records: Iterable<SnapshotRecord>,
  put: (r: SnapshotRecord) => void,
): number {
  db.prepare('DELETE FROM snapshots').run();
  db.prepare('DELETE FROM snapshot_history').run();
  db.prepare('UPDATE actors SET snapshot_version = NULL').run();
  let n = 0;
  for (const r of records) {
    put(r);
    n += 1;
  }
  return n;
}

/** Which version each stream's snapshot stands at, as the actors projection recorded it when it was written. */
export function snapshotVersions(db: Database.Database): Map<string, number> {
  const rows = db
    .prepare('SELECT stream, snapshot_version AS v FROM actors WHERE snapshot_version IS NOT NULL')
    .all() as { stream: string; v: number }[];
  return new Map(rows.map((r) => [r.stream, r.v]));
}
