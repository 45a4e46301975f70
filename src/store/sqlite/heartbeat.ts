// The supervisor's heartbeat in a SQLite log: one row, replaced at each beat, read by the next supervisor to tell
// a clean stop from a crash.
import type { Heartbeat } from '../port.ts';
import type { Database } from './driver.ts';

/** Writes the heartbeat row (the caller translates a failure and keeps it out of the WAL guard). */
export function writeHeartbeatRow(db: Database.Database, h: Heartbeat): void {
  db.prepare(
    `INSERT INTO supervisor_heartbeat (id, node, pid, started_at, beat_at, interval_ms, stopped_at) VALUES (1, ?, ?, ?, ?, ?, ?)
     ON CONFLICT(id) DO UPDATE SET node = excluded.node, pid = excluded.pid, started_at = excluded.started_at,
       beat_at = excluded.beat_at, interval_ms = excluded.interval_ms, stopped_at = excluded.stopped_at`,
  ).run(h.node, h.pid, h.startedAt, h.beatAt, h.intervalMs, h.stoppedAt);
}

/** The last heartbeat, or null when no supervisor ever ran on this log (or the file predates migration 3). */
export function readHeartbeatRow(db: Database.Database): Heartbeat | null {
  let r:
    | { node: string; pid: number; started_at: string; beat_at: string; interval_ms: number; stopped_at: string | null }
    | undefined;
  try {
    r = db.prepare('SELECT * FROM supervisor_heartbeat WHERE id = 1').get() as typeof r;
  } catch {
    return null; // opened without migrating (read-only): no table, no heartbeat
  }
  return r
    ? {
        node: r.node,
        pid: r.pid,
        startedAt: r.started_at,
        beatAt: r.beat_at,
        intervalMs: r.interval_ms,
        stoppedAt: r.stopped_at,
      }
    : null;
}
