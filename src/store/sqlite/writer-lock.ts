// One writer per log. A supervisor (and any one-shot command that appends or runs effects) holds an exclusive
// OS lock next to the database for its whole life; a second one fails at once, before it opens the log, and
// names the holder.
//
// Why a SQLite file and not flock: Node's standard library has no flock/fcntl, and a pid file is not a lock
// (a dead holder's pid may be reused; two starters can both see "no file"). SQLite's unix VFS takes POSIX
// fcntl locks, which the kernel drops when the process dies however it dies (kill -9 included), and which
// SQLite also enforces between connections of one process. So `<db>.lock` is an empty SQLite database that
// the holder keeps inside `BEGIN IMMEDIATE` (a RESERVED lock) until it closes; a second `BEGIN IMMEDIATE`
// with busy_timeout 0 answers SQLITE_BUSY at once. journal_mode=MEMORY: nothing is ever written, so no
// -journal file appears beside it. Nothing else in runlog opens `<db>.lock` with plain fs calls: closing any
// descriptor of a file drops the process's fcntl locks on it.
//
// The lock itself cannot carry data (a reader cannot read what an open transaction wrote), so the holder
// writes `<db>.lock.json` (pid, command, listen address, since) after it has the lock, atomically (a 0600 temp
// file renamed into place), and removes it when it lets go. Only the lock decides who the writer is: the JSON
// only names the holder in the refusal, and a stale one (its pid gone) is ignored.
import {
  accessSync,
  closeSync,
  constants,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { dirname } from 'node:path';
import { RunlogError, SupervisorRunningError, type WriterHolderInfo } from '../../domain/errors.ts';
import { Database } from './driver.ts';

export const lockPath = (dbFile: string): string => `${dbFile}.lock`;
export const holderPath = (dbFile: string): string => `${dbFile}.lock.json`;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The holder file's content, or null when it is missing, unreadable, torn, or names a dead process. */
export function readHolder(dbFile: string): WriterHolderInfo | null {
  try {
    const h = JSON.parse(readFileSync(holderPath(dbFile), 'utf8')) as Partial<WriterHolderInfo>;
    if (typeof h.pid !== 'number' || !Number.isSafeInteger(h.pid) || h.pid <= 0 || !alive(h.pid)) return null;
    return {
      pid: h.pid,
      since: String(h.since ?? '?'),
      command: String(h.command ?? '?'),
      listen: typeof h.listen === 'string' ? h.listen : null,
    };
  } catch {
    return null;
  }
}

function writeAtomically(path: string, text: string): void {
  const tmp = `${path}.${process.pid}.tmp`;
  rmSync(tmp, { force: true });
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}

/**
 * LOCK_FAILED for a lock that could not be created, opened or taken. A directory that cannot be written (a
 * read-only file system, another user's directory) is said so in words: SQLite's own answer for it
 * ("attempt to write a readonly database") and Node's (EROFS) name neither the home nor what to do.
 */
function lockFailed(file: string, step: 'create' | 'open' | 'take', err: unknown): RunlogError {
  const dir = dirname(file);
  let errno = (err as NodeJS.ErrnoException).code ?? '';
  if (!['EROFS', 'EACCES', 'EPERM'].includes(errno)) {
    try {
      accessSync(dir, constants.W_OK);
    } catch (probe) {
      errno = (probe as NodeJS.ErrnoException).code ?? errno;
    }
  }
  const why =
    errno === 'EROFS'
      ? `${dir} is on a read-only file system`
      : errno === 'EACCES' || errno === 'EPERM'
        ? `${dir} is not writable by this user`
        : null;
  const message = why
    ? `cannot ${step} the writer lock ${file}: ${why} (${errno}). ` +
      'A writer keeps its log, lock and token there: give a writable --home (or $RUNLOG_HOME); ' +
      'ps, inspect, events and replay read a read-only one'
    : `cannot ${step} the writer lock ${file}: ${(err as Error).message}`;
  return new RunlogError(
    'LOCK_FAILED',
    message,
    { file, ...(why ? { dir, errno, readOnly: errno === 'EROFS' } : {}) },
    { cause: err },
  );
}

export class WriterLock {
  private db: InstanceType<typeof Database> | null;
  private info: WriterHolderInfo;

  private constructor(
    readonly dbFile: string,
    db: InstanceType<typeof Database>,
    info: WriterHolderInfo,
  ) {
    this.db = db;
    this.info = info;
  }

  /** Takes the log's writer lock or throws SupervisorRunningError naming the holder. Touches nothing else. */
  static acquire(dbFile: string, command: string): WriterLock {
    const file = lockPath(dbFile);
    try {
      mkdirSync(dirname(dbFile), { recursive: true, mode: 0o700 });
      // Created 0600 before SQLite sees it (an empty file is an empty database). 'wx' fails on an existing
      // file without opening it: a descriptor opened and closed here would drop a lock this process holds.
      closeSync(openSync(file, 'wx', 0o600));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw lockFailed(file, 'create', err);
    }
    let db: InstanceType<typeof Database>;
    try {
      db = new Database(file, { timeout: 0, fileMustExist: true });
    } catch (err) {
      throw lockFailed(file, 'open', err);
    }
    try {
      db.pragma('journal_mode = MEMORY');
      db.exec('BEGIN IMMEDIATE');
    } catch (err) {
      db.close();
      if (String((err as { code?: unknown }).code ?? '').startsWith('SQLITE_BUSY'))
        throw new SupervisorRunningError(dbFile, readHolder(dbFile));
      throw lockFailed(file, 'take', err);
    }
    const lock = new WriterLock(dbFile, db, {
      pid: process.pid,
      since: new Date().toISOString(),
      command,
      listen: null,
    });
    try {
      lock.publish();
    } catch (err) {
      lock.release();
      throw lockFailed(file, 'take', err);
    }
    return lock;
  }

  get holder(): WriterHolderInfo {
    return { ...this.info };
  }

  get held(): boolean {
    return this.db !== null;
  }

  /** Records where this writer listens (runlog serve, once its socket is bound). */
  setListen(listen: string): void {
    this.info = { ...this.info, listen };
    if (this.db) this.publish();
  }

  private publish(): void {
    writeAtomically(holderPath(this.dbFile), `${JSON.stringify(this.info)}\n`);
  }

  /** Lets go: the holder file first (it must never name a process that no longer holds the lock), then the lock. */
  release(): void {
    if (!this.db) return;
    try {
      const cur = JSON.parse(readFileSync(holderPath(this.dbFile), 'utf8')) as { pid?: number };
      if (cur.pid === process.pid) rmSync(holderPath(this.dbFile), { force: true });
    } catch {
      /* already gone */
    }
    try {
      this.db.exec('ROLLBACK');
    } catch {
      /* nothing to roll back */
    }
    this.db.close();
    this.db = null;
  }
}
