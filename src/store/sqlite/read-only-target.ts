// What a read-only (inspection) open hands SQLite, so that it writes nothing beside the log and still sees every
// committed event. SQLite reads a WAL database through a `-shm` index it creates next to the file when there is
// none, which fails in a directory the reader cannot write (SQLITE_CANTOPEN) and adds a file where it can.
//   - no `-wal` (or an empty one) and no `-shm`: nothing committed outside the file; `immutable=1` reads it alone.
//   - a `-wal` with frames and no `-shm`: a copied log, or one whose writer closed it without checkpointing. No
//     writer is running (a live one keeps its `-shm`). Its commits are in the WAL, which `immutable=1` ignores, and
//     `nolock=1` turns WAL reading off altogether: the database and its WAL are copied into a private temporary
//     directory and read there, where SQLite may create its `-shm`; the directory is removed when the store closes.
//   - a `-shm` beside it: a writer is (or was) running; reading through its WAL index sees its latest commits.
import { constants, copyFileSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LogUnreadableError } from '../../domain/errors.ts';
import { sqliteUri } from './driver.ts';

export interface ReadOnlyTarget {
  /** The path or `file:` URI to open read-only. */
  target: string;
  /** Removes the private copy, if one was made (idempotent). */
  release(): void;
}

function size(path: string): number | null {
  try {
    return statSync(path).size;
  } catch {
    return null;
  }
}

/** `followsWriters`: the reader tails the log (`events --follow`) and must see later commits: opened in place. */
export function readOnlyTarget(file: string, followsWriters: boolean): ReadOnlyTarget {
  const none = { target: file, release: () => undefined };
  if (followsWriters) return none;
  const wal = size(`${file}-wal`);
  const shm = size(`${file}-shm`) !== null;
  if (shm) return wal === null ? { target: sqliteUri(file, { immutable: '1' }), release: none.release } : none;
  if (!wal) return { target: sqliteUri(file, { immutable: '1' }), release: none.release };
  const dir = mkdtempSync(join(tmpdir(), 'runlog-read-'));
  const release = () => rmSync(dir, { recursive: true, force: true });
  try {
    const copy = join(dir, 'log.db');
    // A reflink where the file system has them (no bytes copied), else a plain copy.
    copyFileSync(file, copy, constants.COPYFILE_FICLONE);
    copyFileSync(`${file}-wal`, `${copy}-wal`, constants.COPYFILE_FICLONE);
    return { target: copy, release };
  } catch (err) {
    release();
    const code = (err as NodeJS.ErrnoException).code ?? '';
    throw new LogUnreadableError(
      file,
      code === 'EACCES' || code === 'EPERM'
        ? `its write-ahead log ${file}-wal is not readable (${code})`
        : `could not copy it with its write-ahead log to read it without writing beside it: ${(err as Error).message}`,
    );
  }
}
