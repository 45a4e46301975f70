// How the log is opened: a writer creates it atomically with mode 0600 (and its -wal/-shm inherit that mode);
// an empty file is never taken for a new log; a read-only store never creates or changes a file and refuses
// writes; the writer lock lets exactly one writer in and names it to the next.
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LogMissingError, ReadOnlyLogError, StoreCorruptError, SupervisorRunningError } from '../src/domain/errors.ts';
import { SqliteEventStore } from '../src/store/sqlite-event-store.ts';
import { holderPath, lockPath, readHolder, WriterLock } from '../src/store/writer-lock.ts';
import { tempDir } from './support/tmp.ts';

const e = (type: string, data: Record<string, unknown> = {}) => ({ type, data });
const mode = (p: string) => statSync(p).mode & 0o777;

describe('log files', () => {
  it('a new log is created 0600 in a 0700 directory, with -wal and -shm 0600 too, whatever the umask allows', () => {
    const dir = join(tempDir(), 'new-home');
    const file = join(dir, 'runlog.db');
    const s = new SqliteEventStore(file);
    s.append('instance-a', [e('x.one')], { expectedVersion: 'no-stream' });
    expect(mode(dir)).toBe(0o700);
    expect(mode(file)).toBe(0o600);
    expect(mode(`${file}-wal`)).toBe(0o600);
    expect(mode(`${file}-shm`)).toBe(0o600);
    expect(readdirSync(dir).filter((n) => n.includes('creating'))).toEqual([]); // the temporary file is gone
    s.close();
  });

  it('a writer refuses an empty file (a truncated log) instead of initialising it', () => {
    const file = join(tempDir(), 'runlog.db');
    writeFileSync(file, '');
    expect(() => new SqliteEventStore(file)).toThrow(StoreCorruptError);
    expect(() => new SqliteEventStore(file)).toThrow(/empty \(0 bytes\)/);
    expect(statSync(file).size).toBe(0);
  });
});

describe('read-only store', () => {
  it('refuses a missing file (LOG_MISSING) without creating it or its directory', () => {
    const dir = tempDir();
    const file = join(dir, 'typo', 'runlog.db');
    expect(() => new SqliteEventStore(file, { readOnly: true })).toThrow(LogMissingError);
    expect(() => new SqliteEventStore(file, { readOnly: true })).toThrow(`no log at ${file}`);
    expect(existsSync(join(dir, 'typo'))).toBe(false);
  });

  it('reads a log with no -wal as immutable: no -wal/-shm appear; writes are refused', () => {
    const dir = tempDir();
    const file = join(dir, 'runlog.db');
    const w = new SqliteEventStore(file);
    w.append('instance-a', [e('x.one'), e('x.two')], { expectedVersion: 'no-stream' });
    w.close();
    const before = readdirSync(dir).sort();
    const r = new SqliteEventStore(file, { readOnly: true });
    expect(r.read('instance-a').map((x) => x.type)).toEqual(['x.one', 'x.two']);
    expect(() => r.append('instance-a', [e('x.three')], { expectedVersion: 2 })).toThrow(ReadOnlyLogError);
    expect(() => r.replaceProjection([])).toThrow(ReadOnlyLogError);
    expect(readdirSync(dir).sort()).toEqual(before);
    r.close();
    expect(readdirSync(dir).sort()).toEqual(before);
  });

  it("reads through a live writer's -wal and sees what it appends afterwards", () => {
    const file = join(tempDir(), 'runlog.db');
    const w = new SqliteEventStore(file, { checkpointMs: 60_000 });
    w.append('instance-a', [e('x.one')], { expectedVersion: 'no-stream' });
    const r = new SqliteEventStore(file, { readOnly: true });
    expect(r.lastSeq()).toBe(1);
    w.append('instance-a', [e('x.two')], { expectedVersion: 1 });
    expect(r.read('instance-a').map((x) => x.type)).toEqual(['x.one', 'x.two']);
    r.close();
    w.close();
  });

  it('refuses a SQLite file with no runlog schema rather than initialising it', () => {
    const file = join(tempDir(), 'runlog.db');
    // A bare SQLite header with no tables: not something runlog ever leaves behind (new logs appear initialised).
    writeFileSync(file, Buffer.concat([Buffer.from('SQLite format 3\0', 'latin1'), Buffer.alloc(84)]));
    expect(() => new SqliteEventStore(file, { readOnly: true })).toThrow(StoreCorruptError);
  });
});

describe('writer lock', () => {
  it('lets one writer in; the second is refused naming the first; release lets the next in', () => {
    const dir = tempDir();
    const db = join(dir, 'runlog.db');
    const a = WriterLock.acquire(db, 'runlog serve');
    a.setListen('http://127.0.0.1:7420/');
    expect(mode(lockPath(db))).toBe(0o600);
    expect(mode(holderPath(db))).toBe(0o600);
    let err: unknown;
    try {
      WriterLock.acquire(db, 'runlog reconcile');
    } catch (x) {
      err = x;
    }
    expect(err).toBeInstanceOf(SupervisorRunningError);
    expect(err).toMatchObject({ code: 'SUPERVISOR_RUNNING', holder: { pid: process.pid, command: 'runlog serve', listen: 'http://127.0.0.1:7420/' } });
    expect((err as Error).message).toMatch(new RegExp(`pid ${process.pid} \\(runlog serve, listening on http://127\\.0\\.0\\.1:7420/\\) since \\d{4}-`));
    expect(existsSync(db)).toBe(false); // the lock touches nothing but itself
    a.release();
    expect(existsSync(holderPath(db))).toBe(false);
    expect(readHolder(db)).toBeNull();
    const b = WriterLock.acquire(db, 'runlog reconcile');
    expect(readHolder(db)).toMatchObject({ pid: process.pid, command: 'runlog reconcile', listen: null });
    b.release();
  });

  it('ignores a holder file whose process is gone', () => {
    const dir = tempDir();
    mkdirSync(dir, { recursive: true });
    const db = join(dir, 'runlog.db');
    writeFileSync(holderPath(db), JSON.stringify({ pid: 2 ** 22 + 12345, since: 'then', command: 'runlog serve', listen: null }));
    expect(readHolder(db)).toBeNull();
    const lock = WriterLock.acquire(db, 'x');
    expect(readHolder(db)).toMatchObject({ pid: process.pid });
    lock.release();
  });
});
