// Event-log faults with real files, real processes and a real (tiny) filesystem:
//   - a truncated or corrupt database file: a clear STORE_CORRUPT error naming it, the supervisor does not start,
//     the file is byte-for-byte untouched;
//   - a deleted -wal after a SIGKILL: commits not yet checkpointed are gone with it (that is what WAL means) —
//     the store notices (its uncheckpointed-commit marker outlived the writer) and refuses to open with
//     STORE_WAL_LOST instead of silently serving the older file; with the WAL kept, nothing is lost; after a
//     clean close the .db alone holds everything;
//   - a full disk (a 2 MiB tmpfs): STORE_WRITE, nothing from the failed append, every acknowledged event intact,
//     and appends work again once there is room.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import { StoreCorruptError, StoreWriteError } from '../../../src/domain/errors.ts';
import { SqliteEventStore } from '../../../src/store/sqlite/event-store.ts';
import { StoreWalLostError } from '../../../src/store/sqlite/wal-guard.ts';

const STORE_MODULE = resolve(import.meta.dirname, '../../../src/store/sqlite/event-store.ts');
let root: string;

const sha = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');
const markers = (dir: string) => readdirSync(dir).filter((n) => n.includes('-uncheckpointed-'));

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'runlog-store-faults-'));
});
afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

/** A log of `n` events over 8 streams, cleanly closed (so the .db file holds all of it). */
function buildLog(file: string, n: number): void {
  const store = new SqliteEventStore(file);
  for (let i = 0; i < n; i++)
    store.append(`instance-s${i % 8}`, [{ type: 'test.appended', data: { i, pad: 'x'.repeat(200 + (i % 300)) } }], {
      expectedVersion: 'any',
    });
  store.close();
}

describe('a damaged database file', () => {
  let pristine: string;
  beforeAll(() => {
    pristine = join(root, 'pristine.db');
    buildLog(pristine, 3000);
    expect(existsSync(`${pristine}-wal`)).toBe(false); // a clean close leaves one self-contained file
  });

  const cuts: [string, (size: number) => number][] = [
    ['at a page boundary, half way', (size) => Math.floor(size / 2 / 4096) * 4096],
    ['in the middle of a page', (size) => Math.floor(size / 3) + 123],
    ['to its first page', () => 4096],
    ['inside the header', () => 60],
  ];
  it.each(cuts)(
    'truncated %s: STORE_TRUNCATED (a kind of STORE_CORRUPT) naming the file, left untouched, the supervisor does not start',
    async (_name, at) => {
      const dir = mkdtempSync(join(root, 'trunc-'));
      const file = join(dir, 'runlog.db');
      copyFileSync(pristine, file);
      truncateSync(file, at(statSync(file).size));
      const before = sha(file);
      let err: unknown;
      try {
        new SqliteEventStore(file).close();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(StoreCorruptError);
      expect(err).toMatchObject({ code: 'STORE_TRUNCATED' });
      expect((err as Error).message).toContain(file);
      expect((err as Error).message).toMatch(/left untouched/);
      await expect(
        createRunlog({ home: dir, reconcile: false, watchApps: false, log: () => undefined }),
      ).rejects.toMatchObject({ code: 'STORE_TRUNCATED' });
      expect(sha(file)).toBe(before);
      expect(markers(dir)).toEqual([]);
    },
  );

  it('a page overwritten with garbage: STORE_CORRUPT, untouched', () => {
    const file = join(mkdtempSync(join(root, 'corrupt-')), 'runlog.db');
    copyFileSync(pristine, file);
    const bytes = readFileSync(file);
    const pages = bytes.length / 4096;
    for (const p of [Math.floor(pages / 2), pages - 2]) {
      for (let i = 0; i < 4096; i++) bytes[p * 4096 + i] = (i * 131 + 7) & 0xff;
    }
    writeFileSync(file, bytes);
    const before = sha(file);
    expect(() => new SqliteEventStore(file)).toThrow(StoreCorruptError);
    expect(sha(file)).toBe(before);
  });
});

/** A writer in its own process: phase 1, idle (the periodic checkpoint runs), phase 2, then waits to be killed. */
const WRITER = `
import { readdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { SqliteEventStore } from ${JSON.stringify(STORE_MODULE)};
const [file, mode] = process.argv.slice(2);
const store = new SqliteEventStore(file, { checkpointMs: 200 });
const say = (s) => process.stdout.write(s + '\\n');
const markers = () => readdirSync(dirname(file)).filter((n) => n.includes('-uncheckpointed-')).length;
for (let i = 0; i < 50; i++) {
  store.append('instance-a', [{ type: 'test.appended', data: { phase: 1, i } }], { expectedVersion: 'any' });
  say('ack 1 ' + i);
}
await new Promise((r) => setTimeout(r, 1000));
say('idle markers=' + markers());
for (let i = 0; i < 30; i++) {
  store.append('instance-a', [{ type: 'test.appended', data: { phase: 2, i } }], { expectedVersion: 'any' });
  say('ack 2 ' + i);
}
say('phase2 markers=' + markers());
if (mode === 'close') { store.close(); say('closed'); process.exit(0); }
setInterval(() => {}, 1e9);
`;

function runWriter(file: string, mode: 'kill' | 'close'): Promise<string[]> {
  const script = join(root, 'writer.mjs');
  writeFileSync(script, WRITER);
  return new Promise((resolveRun, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, file, mode], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (mode === 'kill' && out.includes('phase2 markers=')) child.kill('SIGKILL');
    });
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    child.on('exit', (code, signal) => {
      if (mode === 'kill' && signal !== 'SIGKILL') return reject(new Error(`writer ended ${code ?? signal}: ${err}`));
      if (mode === 'close' && code !== 0) return reject(new Error(`writer failed: ${err}`));
      resolveRun(out.split('\n').filter((l) => l !== ''));
    });
  });
}

describe('the write-ahead log after a SIGKILL', () => {
  it('kept: every acknowledged event is there', async () => {
    const dir = mkdtempSync(join(root, 'wal-kept-'));
    const file = join(dir, 'runlog.db');
    const lines = await runWriter(file, 'kill');
    expect(lines).toContain('idle markers=0'); // the periodic checkpoint copied phase 1 into the file
    expect(lines).toContain('phase2 markers=1'); // phase 2 lives only in the WAL, and says so
    expect(existsSync(`${file}-wal`)).toBe(true);
    const store = new SqliteEventStore(file);
    expect(store.read('instance-a').map((e) => `${(e.data as any).phase} ${(e.data as any).i}`)).toEqual(
      lines.filter((l) => l.startsWith('ack ')).map((l) => l.slice(4)),
    );
    store.close();
    expect(markers(dir)).toEqual([]); // checkpointed at open, then at close: the dead writer's marker is cleared
  });

  it('deleted: the store refuses to open with STORE_WAL_LOST; the file holds exactly what was checkpointed', async () => {
    const dir = mkdtempSync(join(root, 'wal-lost-'));
    const file = join(dir, 'runlog.db');
    const lines = await runWriter(file, 'kill');
    expect(lines.filter((l) => l.startsWith('ack ')).length).toBe(80);
    rmSync(`${file}-wal`);
    rmSync(`${file}-shm`, { force: true });
    const before = sha(file);
    let err: unknown;
    try {
      new SqliteEventStore(file);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(StoreWalLostError);
    expect(err).toMatchObject({ code: 'STORE_WAL_LOST' });
    expect((err as Error).message).toContain(`${file}-wal is missing`);
    await expect(
      createRunlog({ home: dir, reconcile: false, watchApps: false, log: () => undefined }),
    ).rejects.toMatchObject({ code: 'STORE_WAL_LOST' });
    expect(sha(file)).toBe(before);
    expect(existsSync(`${file}-wal`)).toBe(false);

    // The operator accepts the loss: what remains is exactly phase 1 (checkpointed); phase 2 was only in the WAL.
    for (const m of markers(dir)) unlinkSync(join(dir, m));
    const store = new SqliteEventStore(file);
    const kept = store.read('instance-a').map((e) => e.data as { phase: number; i: number });
    expect(kept).toEqual(Array.from({ length: 50 }, (_, i) => ({ phase: 1, i })));
    store.close();
    console.log(
      `[store-faults] -wal deleted after SIGKILL: 80 acknowledged, ` +
        `50 checkpointed and kept, 30 lost with the WAL — reported as STORE_WAL_LOST`,
    );
  });

  it('after a clean close the .db file alone holds everything', async () => {
    const dir = mkdtempSync(join(root, 'wal-clean-'));
    const file = join(dir, 'runlog.db');
    const lines = await runWriter(file, 'close');
    expect(lines.at(-1)).toBe('closed');
    rmSync(`${file}-wal`, { force: true });
    rmSync(`${file}-shm`, { force: true });
    expect(markers(dir)).toEqual([]);
    const store = new SqliteEventStore(file);
    expect(store.read('instance-a')).toHaveLength(80);
    store.close();
  });
});

describe('a full disk', () => {
  let mnt: string;
  beforeAll(() => {
    mnt = join(root, 'tiny-fs');
    mkdirSync(mnt);
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', mnt]);
    } catch (e) {
      throw new Error(`cannot mount a 2 MiB tmpfs at ${mnt} (this test needs root): ${(e as Error).message}`);
    }
  });
  afterAll(() => {
    if (!mnt) return;
    try {
      execFileSync('umount', [mnt], { stdio: 'pipe' });
    } catch {
      execFileSync('umount', ['-l', mnt], { stdio: 'pipe' });
    }
  });

  it('STORE_WRITE at SQLITE_FULL; acknowledged events intact, no partial batch; appends work again after freeing space', () => {
    const filler = join(mnt, 'filler');
    // Freed later: it must leave room for the 20 appends below (each grows the WAL by ~20 KiB until a checkpoint).
    writeFileSync(filler, Buffer.alloc(512 * 1024, 1));
    const file = join(mnt, 'runlog.db');
    const store = new SqliteEventStore(file);
    onTestFinished(() => store.close());
    const acked: string[] = [];
    let failure: unknown;
    for (let n = 0; n < 10_000 && failure === undefined; n++) {
      const batch = `b${n}`;
      try {
        store.append(
          `instance-s${n % 4}`,
          [0, 1, 2].map((i) => ({ type: 'test.appended', data: { batch, i, pad: 'y'.repeat(1500) } })),
          { expectedVersion: 'any' },
        );
        acked.push(batch);
      } catch (e) {
        failure = e;
      }
    }
    expect(failure, 'the disk never filled up').toBeInstanceOf(StoreWriteError);
    expect(failure).toMatchObject({ code: 'STORE_WRITE' });
    expect((failure as Error).message).toMatch(/disk full|SQLITE_FULL|SQLITE_IOERR/);
    expect(acked.length).toBeGreaterThan(10);

    const batches = () => {
      const seen = new Map<string, number[]>();
      for (const e of store.readAll()) {
        const d = e.data as { batch: string; i: number };
        seen.set(d.batch, [...(seen.get(d.batch) ?? []), d.i]);
      }
      return seen;
    };
    const seen = batches();
    expect([...seen.keys()]).toEqual(acked); // every acknowledged batch, and not the failed one
    for (const [b, is] of seen) expect(is, `batch ${b}`).toEqual([0, 1, 2]);

    unlinkSync(filler);
    const big = (batch: string) =>
      [0, 1, 2].map((i) => ({ type: 'test.appended', data: { batch, i, pad: 'y'.repeat(1500) } }));
    for (let k = 0; k < 10; k++) {
      // Each append adds ~5 WAL frames (~20 KiB: no checkpoint runs inside this synchronous loop); 10 fit in the
      // 384 KiB the filler frees, and none fitted before (the loop above ended on SQLITE_FULL).
      store.append('instance-s0', big(`after${k}`), { expectedVersion: 'any' });
      acked.push(`after${k}`);
    }
    store.close();

    const reopened = new SqliteEventStore(file); // quick_check passes: the file was never damaged
    const all = new Map<string, number>();
    for (const e of reopened.readAll())
      all.set((e.data as { batch: string }).batch, (all.get((e.data as { batch: string }).batch) ?? 0) + 1);
    expect([...all.keys()]).toEqual(acked);
    expect([...all.values()].every((n) => n === 3)).toBe(true);
    reopened.close();
    console.log(
      `[store-faults] full disk: ${acked.length - 10} batches acknowledged before SQLITE_FULL, all intact; ` +
        `appends resumed after freeing space`,
    );
  });
});
