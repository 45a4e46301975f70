// What the last clean shutdown of a writer left: the file's size and the last event's position and hash, in
// `<db>-shutdown` next to the log. A log found shorter than that at the next open (a file cut short, an old copy
// restored over it) is refused with STORE_TRUNCATED instead of being opened as if nothing were missing. A crash
// leaves the previous record, which only ever understates the log, so a log that grew since is never refused.
// Operations that shrink the log on purpose (archive, vacuum) rewrite it before they shrink anything.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';

export interface ShutdownRecord {
  size: number;
  /** The file's modification time at that shutdown: unchanged since, it needs no new structural check. */
  mtimeMs?: number;
  lastSeq: number;
  hash: string;
  at: string;
}

export const shutdownRecordFile = (file: string): string => `${file}-shutdown`;

/** null when there is none, or it cannot be read (a record is a safeguard: a torn one is no evidence). */
export function readShutdownRecord(file: string): ShutdownRecord | null {
  try {
    const r = JSON.parse(readFileSync(shutdownRecordFile(file), 'utf8')) as Partial<ShutdownRecord>;
    if (typeof r.size !== 'number' || typeof r.lastSeq !== 'number') return null;
    return {
      size: r.size,
      ...(typeof r.mtimeMs === 'number' ? { mtimeMs: r.mtimeMs } : {}),
      lastSeq: r.lastSeq,
      hash: typeof r.hash === 'string' ? r.hash : '',
      at: typeof r.at === 'string' ? r.at : '',
    };
  } catch {
    return null;
  }
}

/** Written whole or not at all (temp file, then rename). */
export function writeShutdownRecord(file: string, record: ShutdownRecord): void {
  const target = shutdownRecordFile(file);
  const tmp = `${target}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(record)}\n`, { mode: 0o600 });
  renameSync(tmp, target);
}
