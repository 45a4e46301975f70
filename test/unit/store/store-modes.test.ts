// How the log is opened: a writer creates it atomically with mode 0600 (and its -wal/-shm inherit that mode);
// an empty file is never taken for a new log; a read-only store never creates or changes a file and refuses
// writes; the writer lock lets exactly one writer in and names it to the next.
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  ForeignDatabaseError,
  LogMissingError,
  ReadOnlyLogError,
  StoreCorruptError,
  SupervisorRunningError,
} from '../../../src/domain/errors.ts';
import { Database, sqliteUri } from '../../../src/store/sqlite/driver.ts';
import { SqliteEventStore } from '../../../src/store/sqlite/event-store.ts';
import { holderPath, lockPath, readHolder, WriterLock } from '../../../src/store/sqlite/writer-lock.ts';
import { REPO } from '../../support/cli.ts';
import { tempDir } from '../../support/tmp.ts';

const CLI_MANY = join(import.meta.dirname, '../../support', 'cli-many.ts');

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

  it('reads a copied log with its -wal in a read-only directory: every committed event, and no file appears there', () => {
    const dir = tempDir();
    const live = join(dir, 'live.db');
    const w = new SqliteEventStore(live, { checkpointMs: 3_600_000 });
    w.append('instance-a', [e('x.one'), e('x.two')], { expectedVersion: 'no-stream' });
    w.append('instance-b', [e('x.three')], { expectedVersion: 'no-stream' });
    // The copy: the database and its WAL, which holds every commit (no checkpoint has run), no -shm.
    const ro = join(dir, 'ro');
    mkdirSync(ro);
    const file = join(ro, 'runlog.db');
    copyFileSync(live, file);
    copyFileSync(`${live}-wal`, `${file}-wal`);
    w.close();
    // The file alone holds none of them: an immutable open (which ignores the WAL) would show an empty log.
    const peek = new Database(sqliteUri(file, { immutable: '1' }), { readonly: true });
    expect((peek.prepare('SELECT count(*) AS n FROM events').get() as { n: number }).n).toBe(0);
    peek.close();
    chmodSync(ro, 0o555);
    const before = readdirSync(ro).sort();
    expect(before).toEqual(['runlog.db', 'runlog.db-wal']);
    const privateTmp = join(dir, 'tmp');
    mkdirSync(privateTmp);
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = privateTmp; // where the reader's private copy goes, and must be gone from after close
    try {
      const r = new SqliteEventStore(file, { readOnly: true });
      expect(r.read('instance-a').map((x) => x.type)).toEqual(['x.one', 'x.two']);
      expect(r.read('instance-b').map((x) => x.type)).toEqual(['x.three']);
      expect(r.lastSeq()).toBe(3);
      expect(readdirSync(ro).sort()).toEqual(before);
      r.close();
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
    expect(readdirSync(ro).sort()).toEqual(before);
    expect(readdirSync(privateTmp)).toEqual([]);
  });

  it('refuses a SQLite file with no runlog schema rather than initialising it', () => {
    const file = join(tempDir(), 'runlog.db');
    // A bare SQLite header with no tables: not something runlog ever leaves behind (new logs appear initialised).
    writeFileSync(file, Buffer.concat([Buffer.from('SQLite format 3\0', 'latin1'), Buffer.alloc(84)]));
    expect(() => new SqliteEventStore(file, { readOnly: true })).toThrow(StoreCorruptError);
  });

  it('a read-only open checks the header and schema, not every page: truncated and foreign files are still refused', () => {
    const dir = tempDir();
    const file = join(dir, 'runlog.db');
    const w = new SqliteEventStore(file);
    for (let i = 0; i < 300; i++)
      w.append(`instance-${i}`, [e('x.one', { pad: 'x'.repeat(500) })], { expectedVersion: 'no-stream' });
    w.close(); // checkpoints the WAL into the main file

    // Truncated anywhere past the header page: SQLite compares the header's page count with the file's size.
    for (const cut of [4096, Math.floor(statSync(file).size / 2), statSync(file).size - 4096]) {
      const truncated = join(dir, `truncated-${cut}.db`);
      copyFileSync(file, truncated);
      truncateSync(truncated, cut);
      const before = readFileSync(truncated);
      expect(() => new SqliteEventStore(truncated, { readOnly: true }), `cut at ${cut}`).toThrow(StoreCorruptError);
      expect(readFileSync(truncated).equals(before)).toBe(true);
    }

    const foreign = join(dir, 'other.db');
    const raw = new Database(foreign);
    raw.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers (name) VALUES ('ada')");
    raw.close();
    expect(() => new SqliteEventStore(foreign, { readOnly: true })).toThrow(ForeignDatabaseError);

    // A damaged leaf page deep in the file: a writer's open (quick_check) refuses it; a read-only open does not
    // read it, so it opens, and finds the damage as STORE_CORRUPT only when it reads that page.
    const damaged = join(dir, 'damaged.db');
    const bytes = readFileSync(file);
    let off = 0; // the last table leaf page (page size 4096; b-tree page type 0x0d)
    for (let p = 4096; p + 4096 <= bytes.length; p += 4096) if (bytes[p] === 0x0d) off = p;
    expect(off).toBeGreaterThan(4096);
    bytes.fill(0xa5, off + 1, off + 12);
    writeFileSync(damaged, bytes);
    expect(() => new SqliteEventStore(damaged)).toThrow(StoreCorruptError);
    const r = new SqliteEventStore(damaged, { readOnly: true });
    expect(r.listActors()).toEqual([]); // what it reads is sound
    expect(() => [...r.iterateEvents()]).toThrow(/malformed/);
    r.close();
    expect(readFileSync(damaged).equals(bytes)).toBe(true);
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
    expect(err).toMatchObject({
      code: 'SUPERVISOR_RUNNING',
      holder: { pid: process.pid, command: 'runlog serve', listen: 'http://127.0.0.1:7420/' },
    });
    expect((err as Error).message).toMatch(
      new RegExp(`pid ${process.pid} \\(runlog serve, listening on http://127\\.0\\.0\\.1:7420/\\) since \\d{4}-`),
    );
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
    writeFileSync(
      holderPath(db),
      JSON.stringify({ pid: 2 ** 22 + 12345, since: 'then', command: 'runlog serve', listen: null }),
    );
    expect(readHolder(db)).toBeNull();
    const lock = WriterLock.acquire(db, 'x');
    expect(readHolder(db)).toMatchObject({ pid: process.pid });
    lock.release();
  });

  it(
    'a home on a read-only file system: the CLI says LOCK_FAILED and that the home is read-only, new home or not',
    { timeout: 60_000 },
    () => {
      const root = tempDir();
      const fresh = join(root, 'fresh');
      const used = join(root, 'used');
      mkdirSync(fresh);
      mkdirSync(used);
      // Read-only tmpfs mounts in a private mount namespace (nothing outside this process tree sees them): one empty,
      // one that already holds a lock file (a home that was written, then mounted read-only).
      const sh = [
        'set -e',
        `mount -t tmpfs -o ro,mode=0700 tmpfs ${fresh}`,
        `mount -t tmpfs -o mode=0700 tmpfs ${used}`,
        `touch ${used}/runlog.db.lock`,
        `mount -o remount,ro ${used}`,
        'exec "$@"',
      ].join('\n');
      const runs = [
        ['serve', '--listen', '127.0.0.1:0', '--json', '--home', fresh],
        ['rebuild', '--json', '--home', used],
      ];
      const r = spawnSync(
        'unshare',
        [
          '--mount',
          '--propagation',
          'private',
          'sh',
          '-c',
          sh,
          'sh',
          process.execPath,
          '--import',
          'tsx',
          CLI_MANY,
          JSON.stringify(runs),
        ],
        { cwd: REPO, encoding: 'utf8', timeout: 50_000 },
      );
      expect(r.status, r.stderr).toBe(0);
      const results = JSON.parse(r.stdout) as { code: number; stderr: string }[];
      results.forEach((res, i) => {
        const home = i === 0 ? fresh : used;
        expect(res.code, res.stderr).toBe(1);
        const { error } = JSON.parse(res.stderr) as {
          error: { code: string; message: string; details: Record<string, unknown> };
        };
        expect(error.code, res.stderr).toBe('LOCK_FAILED');
        expect(error.message).toContain(`${home} is on a read-only file system (EROFS)`);
        expect(error.details).toMatchObject({ dir: home, errno: 'EROFS', readOnly: true });
      });
    },
  );
});
