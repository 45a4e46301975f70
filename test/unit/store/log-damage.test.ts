// One test per kind of damage (issue 15): each is detected with its own code and a message naming the file and
// the first bad position, and the damaged files are left byte for byte as they were.
import {
  copyFileSync,
  existsSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import { verifyLog } from '../../../src/inspect/verify-log.ts';
import { main } from '../../../src/cli/main.ts';
import { StoreCorruptError } from '../../../src/domain/errors.ts';
import type { InstanceSpec } from '../../../src/machines/instance.machine.ts';
import { MIGRATIONS } from '../../../src/store/sqlite/schema.ts';
import { SqliteEventStore } from '../../../src/store/sqlite/event-store.ts';
import { scanWal } from '../../../src/store/sqlite/wal-scan.ts';
import { tempDir } from '../../support/tmp.ts';
import { capture } from '../../support/cli-in-process.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const spec: InstanceSpec = {
  instanceId: 'inst_a',
  appId: 'com.example.hello',
  appDir: '/apps/hello',
  sandbox: 'proot',
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart: { policy: 'never', maxRestarts: 0, backoffMs: 1, maxBackoffMs: 1, resetAfterMs: 1 },
};

/** A log of actors written through the host (so its projection is right), each event carrying a findable marker. */
async function writeLog(home: string, actors = 6): Promise<string> {
  const rl = await createRunlog({ home, supervise: false, readOnly: false });
  for (let i = 0; i < actors; i++) {
    const id = `inst_${i}`;
    await runlogInternals(rl).host.create('instance', id, {
      type: 'instance.requested',
      data: { spec: { ...spec, instanceId: id, appDir: `/apps/needle-${i}` } },
    });
    await rl.send('instance', id, {
      type: 'instance.spawned',
      data: { pid: 100 + i, host: '127.0.0.1', port: 4100 + i },
    });
  }
  await rl.close();
  return rl.dbPath;
}

function opening(file: string, options: ConstructorParameters<typeof SqliteEventStore>[1] = {}): unknown {
  try {
    new SqliteEventStore(file, options).close();
    return null;
  } catch (err) {
    return err;
  }
}

const bytes = (file: string) => (existsSync(file) ? readFileSync(file) : null);

describe('damage is detected, never papered over', () => {
  it('a zero-byte file: STORE_EMPTY, never opened as a new log (writer, reader, supervisor, verify)', async () => {
    const home = tempDir();
    const file = join(home, 'runlog.db');
    writeFileSync(file, '');
    for (const options of [{}, { readOnly: true }]) {
      const err = opening(file, options);
      expect(err).toBeInstanceOf(StoreCorruptError);
      expect(err).toMatchObject({ code: 'STORE_EMPTY' });
      expect((err as Error).message).toContain(file);
    }
    await expect(
      createRunlog({
        home,
        reconcile: false,
        watchApps: false,
        engineWatch: false,
        metrics: false,
        log: () => undefined,
      }),
    ).rejects.toMatchObject({ code: 'STORE_EMPTY' });
    expect((await verifyLog(file)).findings.map((f) => f.code)).toEqual(['STORE_EMPTY']);
    const c = capture();
    expect(await main(['verify', '--db', file], c.factory)).toBe(4);
    expect(c.stdout()).toContain('STORE_EMPTY');
    expect(statSync(file).size).toBe(0);
    expect(existsSync(`${file}-wal`)).toBe(false);
  });

  it('a truncated file: STORE_TRUNCATED (shorter than its header says), untouched', async () => {
    const file = await writeLog(tempDir(), 40);
    const size = statSync(file).size;
    expect(size).toBeGreaterThan(3 * 4096);
    truncateSync(file, Math.floor(size / 2 / 4096) * 4096);
    const before = bytes(file);
    const err = opening(file);
    expect(err).toMatchObject({ code: 'STORE_TRUNCATED' });
    expect((err as Error).message).toMatch(/header says \d+ pages/);
    expect(opening(file, { readOnly: true })).toMatchObject({ code: 'STORE_TRUNCATED' });
    expect((await verifyLog(file)).findings[0]).toMatchObject({ code: 'STORE_TRUNCATED', severity: 'damage' });
    expect(bytes(file)!.equals(before!)).toBe(true);
  });

  it('an older copy restored over the log: STORE_TRUNCATED against the last clean shutdown, untouched', async () => {
    const home = tempDir();
    const file = await writeLog(home, 2);
    const old = join(home, 'old.db');
    copyFileSync(file, old);
    // The log goes on; its clean shutdown records how far it got.
    const s = new SqliteEventStore(file);
    for (let i = 0; i < 200; i++)
      s.append(`instance-more${i}`, [{ type: 'x.happened', data: { pad: 'p'.repeat(300) } }], {
        expectedVersion: 'no-stream',
      });
    s.close();
    const record = JSON.parse(readFileSync(`${file}-shutdown`, 'utf8'));
    expect(record.lastSeq).toBe(204);
    copyFileSync(old, file); // a consistent file, just an old one: its own header cannot tell
    const before = bytes(file);
    const err = opening(file);
    expect(err).toMatchObject({ code: 'STORE_TRUNCATED' });
    expect((err as Error).message).toMatch(/last clean shutdown/);
    expect(bytes(file)!.equals(before!)).toBe(true);
    // Same size, fewer events (the copy was vacuumed into the same pages): the last seq still tells.
    writeFileSync(`${file}-shutdown`, JSON.stringify({ ...record, size: statSync(file).size }));
    expect(opening(file)).toMatchObject({
      code: 'STORE_TRUNCATED',
      message: expect.stringMatching(/ends at event seq 4; .* ended at seq 204/),
    });
  });

  it(
    'a page scribbled over in place after a clean shutdown: ' +
      'STORE_CORRUPT (the structural check is skipped only for a file untouched since)',
    async () => {
      const file = await writeLog(tempDir(), 40);
      expect(JSON.parse(readFileSync(`${file}-shutdown`, 'utf8'))).toMatchObject({
        size: statSync(file).size,
        mtimeMs: statSync(file).mtimeMs,
      });
      new SqliteEventStore(file, { readOnly: true }).close(); // untouched: opens (without walking every page)
      const buf = readFileSync(file);
      let hit = 0;
      for (let off = 4096; off + 4096 <= buf.length; off += 4096) {
        if (buf[off] === 0x0d) {
          buf.fill(0xa5, off + 1, off + 12);
          hit += 1;
        }
      }
      expect(hit).toBeGreaterThan(0);
      writeFileSync(file, buf);
      const before = bytes(file);
      const err = opening(file);
      expect(err).toMatchObject({ code: 'STORE_CORRUPT' });
      expect(bytes(file)!.equals(before!)).toBe(true);
    },
  );

  it('a flipped byte in an event: STORE_CHAIN_BROKEN at that event (verify, the supervisor at start), untouched', async () => {
    const home = tempDir();
    const file = await writeLog(home);
    const buf = readFileSync(file);
    const at = buf.indexOf('needle-3');
    expect(at).toBeGreaterThan(0);
    buf[at] = 'N'.charCodeAt(0); // still valid JSON, still a sound SQLite page: only the chain can tell
    writeFileSync(file, buf);
    const before = bytes(file);

    const report = await verifyLog(file);
    expect(report.ok).toBe(false);
    const broken = report.findings.find((f) => f.code === 'STORE_CHAIN_BROKEN');
    // inst_3's first event: 2 events per actor before it.
    expect(broken).toMatchObject({ severity: 'damage', seq: 7, stream: 'instance-inst_3', version: 1 });
    const c = capture();
    expect(await main(['verify', '--db', file], c.factory)).toBe(4);
    expect(c.stdout()).toMatch(/STORE_CHAIN_BROKEN: hash chain broken at seq 7 \(instance-inst_3 v1\)/);
    const j = capture();
    expect(await main(['verify', '--json', '--db', file], j.factory)).toBe(4);
    expect(JSON.parse(j.stdout())).toMatchObject({
      ok: false,
      findings: [expect.objectContaining({ code: 'STORE_CHAIN_BROKEN', seq: 7 })],
    });

    await expect(
      createRunlog({
        home,
        reconcile: false,
        watchApps: false,
        engineWatch: false,
        metrics: false,
        log: () => undefined,
      }),
    ).rejects.toMatchObject({
      code: 'STORE_CHAIN_BROKEN',
      seq: 7,
    });
    expect(bytes(file)!.equals(before!)).toBe(true);
  });

  it('events cut from the end of the log: the chain head says so', async () => {
    const file = await writeLog(tempDir());
    const raw = new Database(file);
    raw.prepare('DELETE FROM events WHERE seq > 10').run();
    raw.close();
    // The last clean shutdown recorded seq 12 ...
    expect((await verifyLog(file)).findings).toEqual([
      expect.objectContaining({
        code: 'STORE_TRUNCATED',
        message: expect.stringMatching(/ends at event seq 10; .* ended at seq 12/),
      }),
    ]);
    // ... and without that record (lost with the directory), the chain's head inside the file still tells.
    rmSync(`${file}-shutdown`);
    const r = await verifyLog(file);
    expect(r.findings.find((f) => f.code === 'STORE_CHAIN_BROKEN')).toMatchObject({
      seq: 11,
      message: expect.stringMatching(/head is at seq 12 but the log ends at seq 10/),
    });
  });

  it('a projection that disagrees with the events: PROJECTION_MISMATCH naming the actor', async () => {
    const file = await writeLog(tempDir(), 3);
    const raw = new Database(file);
    raw.prepare("UPDATE actors SET state = 'running' WHERE id = 'inst_1'").run();
    raw.close();
    const r = await verifyLog(file);
    expect(r.ok).toBe(false);
    expect(r.findings).toEqual([
      expect.objectContaining({
        code: 'PROJECTION_MISMATCH',
        stream: 'instance-inst_1',
        message: expect.stringMatching(/says running \(active\) at v2, its events say spawning \(active\) at v2/),
      }),
    ]);
  });

  it('a sound log: verify says ok, exit 0', async () => {
    const file = await writeLog(tempDir(), 3);
    const c = capture();
    expect(await main(['verify', '--db', file], c.factory)).toBe(0);
    expect(c.stdout()).toMatch(/^ok: 6 events, 3 actors; the chain ends at seq 6 \([0-9a-f]{16}…\)$/);
  });

  it('a damaged WAL frame: STORE_WAL_DAMAGED with the last good position, WAL and file untouched', async () => {
    const dir = tempDir();
    const live = join(dir, 'live.db');
    const s = new SqliteEventStore(live, { checkpointMs: 3_600_000 });
    for (let i = 0; i < 40; i++)
      s.append(`instance-w${i}`, [{ type: 'x.happened', data: { i } }], { expectedVersion: 'no-stream' });
    // A crash image: the database and its WAL as a writer that died now would leave them.
    const file = join(dir, 'runlog.db');
    copyFileSync(live, file);
    copyFileSync(`${live}-wal`, `${file}-wal`);
    s.close();
    const clean = scanWal(`${file}-wal`)!;
    expect(clean.damagedFrame).toBeNull();
    expect(clean.validFrames).toBeGreaterThan(20);
    const wal = readFileSync(`${file}-wal`);
    const frame = Math.floor(clean.validFrames / 2); // 1-based frame number
    const off = 32 + (frame - 1) * (24 + 4096) + 24 + 2000;
    wal[off] = wal[off]! ^ 0x40;
    writeFileSync(`${file}-wal`, wal);
    const before = { db: bytes(file)!, wal: bytes(`${file}-wal`)! };

    // What SQLite alone would do: open it and show fewer events, without a word.
    const peek = new Database(file, { readonly: true });
    const seen = (peek.prepare('SELECT count(*) AS n FROM events').get() as { n: number }).n;
    peek.close();
    expect(seen).toBeLessThan(40);

    const err = opening(file);
    expect(err).toMatchObject({ code: 'STORE_WAL_DAMAGED', frame, lastGoodSeq: seen });
    expect((err as Error).message).toMatch(
      new RegExp(`damaged frame \\(${frame}\\).*last good position is frame \\d+ \\(event seq ${seen}\\)`),
    );
    expect((await verifyLog(file)).findings[0]).toMatchObject({ code: 'STORE_WAL_DAMAGED', seq: seen });
    expect(bytes(file)!.equals(before.db)).toBe(true);
    expect(bytes(`${file}-wal`)!.equals(before.wal)).toBe(true);
  });

  it('verify of a copied log whose WAL has a damaged frame writes nothing beside it: no -shm appears', async () => {
    const dir = tempDir();
    const live = join(dir, 'live.db');
    const s = new SqliteEventStore(live, { checkpointMs: 3_600_000 });
    for (let i = 0; i < 40; i++)
      s.append(`instance-w${i}`, [{ type: 'x.happened', data: { i } }], { expectedVersion: 'no-stream' });
    const copied = tempDir();
    const file = join(copied, 'runlog.db');
    copyFileSync(live, file);
    copyFileSync(`${live}-wal`, `${file}-wal`);
    s.close();
    const wal = readFileSync(`${file}-wal`);
    const off = 32 + (Math.floor(scanWal(`${file}-wal`)!.validFrames / 2) - 1) * (24 + 4096) + 24 + 2000;
    wal[off] = wal[off]! ^ 0x40;
    writeFileSync(`${file}-wal`, wal);

    expect((await verifyLog(file)).findings[0]).toMatchObject({ code: 'STORE_WAL_DAMAGED', seq: expect.any(Number) });
    const c = capture();
    expect(await main(['verify', '--db', file], c.factory)).toBe(4);
    expect(readdirSync(copied).sort()).toEqual(['runlog.db', 'runlog.db-wal']);
  });

  it('a torn last frame (a commit cut short by power loss, never acknowledged) is not damage', () => {
    const dir = tempDir();
    const live = join(dir, 'live.db');
    const s = new SqliteEventStore(live, { checkpointMs: 3_600_000 });
    for (let i = 0; i < 10; i++)
      s.append(`instance-w${i}`, [{ type: 'x.happened', data: { i } }], { expectedVersion: 'no-stream' });
    const file = join(dir, 'runlog.db');
    copyFileSync(live, file);
    copyFileSync(`${live}-wal`, `${file}-wal`);
    s.close();
    const wal = readFileSync(`${file}-wal`);
    wal[wal.length - 100] = wal[wal.length - 100]! ^ 0xff;
    writeFileSync(`${file}-wal`, wal);
    expect(scanWal(`${file}-wal`)!.damagedFrame).toBeNull();
    const store = new SqliteEventStore(file);
    expect(store.lastSeq()).toBe(9);
    store.close();
  });

  it('a log from before the chain gets it computed as it is migrated; verify then finds it sound', () => {
    const file = join(tempDir(), 'runlog.db');
    const raw = new Database(file);
    for (const m of MIGRATIONS.slice(0, 3)) raw.exec(m);
    const ins = raw.prepare(
      "INSERT INTO events (stream, version, type, data, at) VALUES (?, ?, 'x.happened', ?, '2026-01-01T00:00:00.000Z')",
    );
    for (let i = 1; i <= 50; i++) ins.run(`instance-old${i % 5}`, Math.ceil(i / 5), JSON.stringify({ i }));
    raw.pragma('application_id = 0x524c4f47');
    raw.pragma('user_version = 3');
    raw.close();
    const s = new SqliteEventStore(file);
    expect(s.verifyChain()).toMatchObject({ ok: true, events: 50, lastSeq: 50 });
    s.append('instance-old1', [{ type: 'x.happened', data: {} }], { expectedVersion: 10 });
    expect(s.verifyChain()).toMatchObject({ ok: true, events: 51, lastSeq: 51 });
    s.close();
  });
});
