// Detects the one loss WAL mode cannot report by itself: a `-wal` file deleted after an unclean shutdown.
//
// In WAL mode a commit is durable in `<db>-wal` first; it reaches `<db>` only when a checkpoint copies it.
// If a writer dies (SIGKILL, power loss) and someone then deletes `<db>-wal` (a backup that copies only the
// .db file, an operator "cleaning up"), every commit since the last complete checkpoint is gone, and SQLite
// opens the older file without a word.
//
// So each store marks its commits that may exist only in the WAL: before its first commit after a complete
// checkpoint it creates `<db>-uncheckpointed-<pid>-<n>` next to the database, and removes it again once a
// checkpoint has copied everything into the database (periodically while appending, and at close). At open,
// before SQLite touches anything: a marker left by a process that is no longer alive while `<db>-wal` does
// not exist means committed events were lost. The open fails with STORE_WAL_LOST naming the file and the
// markers; nothing is written. An operator who accepts the loss removes the markers and opens again.
import { existsSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { RunlogError } from '../../domain/errors.ts';

/** Committed events were in a write-ahead log that is gone: the database holds only what was checkpointed. */
export class StoreWalLostError extends RunlogError {
  constructor(
    readonly file: string,
    markers: { file: string; pid: number; since: string | null }[],
  ) {
    const who = markers
      .map((m) => `process ${m.pid}${m.since ? ` (uncheckpointed commits since ${m.since})` : ''}`)
      .join(', ');
    super(
      'STORE_WAL_LOST',
      `event log ${file}: its write-ahead log ${file}-wal is missing after an unclean shutdown of ${who}. ` +
        `Events committed after the last checkpoint are lost; the file holds the log as of that checkpoint. ` +
        `It was left untouched. Restore ${basename(file)}-wal from where it went, ` +
        `or accept the loss by removing ${markers.map((m) => basename(m.file)).join(', ')}.`,
      { file, markers: markers.map((m) => m.file) },
    );
  }
}

const PREFIX = (file: string) => `${basename(file)}-uncheckpointed-`;
let instances = 0;

interface Marker {
  file: string;
  pid: number;
  since: string | null;
}

function alive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function markers(file: string): Marker[] {
  const dir = dirname(file);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const prefix = PREFIX(file);
  return names
    .filter((n) => n.startsWith(prefix))
    .map((n) => {
      const path = join(dir, n);
      const pid = Number(n.slice(prefix.length).split('-')[0]);
      let since: string | null = null;
      try {
        since = (JSON.parse(readFileSync(path, 'utf8')) as { since?: string }).since ?? null;
      } catch {
        /* an empty or torn marker still counts */
      }
      return { file: path, pid, since };
    })
    .filter((m) => Number.isSafeInteger(m.pid) && m.pid > 0);
}

export class WalGuard {
  private readonly marker: string;
  private markedAt: string | null = null;

  constructor(private readonly file: string) {
    this.marker = join(dirname(file), `${PREFIX(file)}${process.pid}-${++instances}`);
  }

  /** Before SQLite opens the file. Throws StoreWalLostError; returns the markers of dead processes (the WAL is there). */
  static check(file: string): Marker[] {
    const dead = markers(file).filter((m) => !alive(m.pid));
    if (dead.length > 0 && !existsSync(`${file}-wal`)) throw new StoreWalLostError(file, dead);
    return dead;
  }

  get dirty(): boolean {
    return this.markedAt !== null;
  }

  /** Before a commit that may stay only in the WAL. Throws (e.g. ENOSPC) rather than commit unguarded. */
  markDirty(now: string): void {
    if (this.markedAt) return;
    writeFileSync(this.marker, JSON.stringify({ pid: process.pid, since: now }), { mode: 0o600 });
    this.markedAt = now;
  }

  /** After a complete checkpoint: every commit, ours and dead processes', is in the database file. */
  checkpointed(): void {
    if (this.markedAt) {
      try {
        unlinkSync(this.marker);
      } catch {
        /* already gone */
      }
      this.markedAt = null;
    }
    for (const m of markers(this.file)) {
      if (alive(m.pid)) continue;
      try {
        unlinkSync(m.file);
      } catch {
        /* another process cleared it */
      }
    }
  }
}
