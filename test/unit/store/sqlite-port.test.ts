// What only the SQLite store does behind the port (the contract in test/contract/store/ covers the port itself):
// its capabilities (appends metered, size on disk, the hash chain checked, ended actors archived), a read-only
// open, and long reads that yield to the event loop between pages and stop once the store is closed.
import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { NewEvent } from '../../../src/domain/events.ts';
import { collect, type ActorRow } from '../../../src/store/port.ts';
import { SqlitePortStore } from '../../../src/store/sqlite/port-adapter.ts';
import { tempDir } from '../../support/tmp.ts';

const ticks = (n: number): NewEvent[] => Array.from({ length: n }, (_, i) => ({ type: 'tick', data: { i } }));

/** An execution's row once it ended (what the host writes with its last event). */
const ended = (id: string, at: string): ActorRow => ({
  id,
  kind: 'execution',
  stream: `execution-${id}`,
  state: 'failed',
  status: 'terminal',
  version: 2,
  createdAt: at,
  updatedAt: at,
  summary: {},
});

describe('the SQLite store behind the port', () => {
  it('tells the append observer about every durable append, and reports its size on disk', async () => {
    const store = new SqlitePortStore(join(tempDir(), 'log.db'));
    try {
      const seen: [number, number][] = [];
      store.observeAppends((seconds, events) => seen.push([seconds, events]));
      await store.appendToStream('order-1', ticks(3), { expectedVersion: 'no-stream' });
      await store.appendMany([
        { stream: 'order-1', events: ticks(1), expectedVersion: 3 },
        { stream: 'order-2', events: ticks(2), expectedVersion: 'no-stream' },
        { stream: 'order-3', events: ticks(1), expectedVersion: 7 }, // a conflict: not counted
      ]);
      expect(seen.map(([, n]) => n)).toEqual([3, 3]);
      expect(seen.every(([s]) => s >= 0)).toBe(true);
      store.observeAppends(undefined);
      await store.appendToStream('order-1', ticks(1), { expectedVersion: 4 });
      expect(seen).toHaveLength(2);
      expect(await store.sizeBytes()).toBeGreaterThan(0);
    } finally {
      await store.close();
    }
  });

  it('checks its hash chain: sound, then broken at the event changed behind its back', async () => {
    const file = join(tempDir(), 'log.db');
    const store = new SqlitePortStore(file);
    await store.appendToStream('order-1', ticks(5), { expectedVersion: 'no-stream' });
    expect(await store.verifyChain()).toMatchObject({ ok: true });
    await store.close();
    const raw = new Database(file);
    raw.prepare('UPDATE events SET data = \'{"i":99}\' WHERE seq = 3').run();
    raw.close();
    const again = new SqlitePortStore(file);
    try {
      expect(await again.verifyChain()).toMatchObject({ ok: false, seq: 3 });
      expect(await again.verifyChain({ afterSeq: 3 })).toMatchObject({ ok: true });
    } finally {
      await again.close();
    }
  });

  it('archives the actors that ended before a time: their events leave, their rows stay marked archived', async () => {
    const dir = tempDir();
    const store = new SqlitePortStore(join(dir, 'log.db'));
    try {
      const t = '2026-09-01T00:00:00.000Z';
      await store.appendToStream(
        'execution-exec_old',
        [
          { type: 'execution.requested', data: {}, at: t },
          { type: 'execution.failed', data: {}, at: t },
        ],
        { expectedVersion: 'no-stream', row: ended('exec_old', t) },
      );
      await store.appendToStream('execution-exec_new', ticks(2), {
        expectedVersion: 'no-stream',
        row: ended('exec_new', '2026-12-01T00:00:00.000Z'),
      });
      const out = join(dir, 'a.jsonl.gz');
      const steps: string[] = [];
      const r = await store.archiveEnded({
        before: '2026-10-01T00:00:00.000Z',
        out,
        onStep: (s) => void steps.push(s),
      });
      expect(r).toMatchObject({ file: out, actors: 1, events: 2 });
      expect(steps).toEqual(['planned', 'file-written', 'file-linked', 'removing', 'committed', 'vacuumed']);
      expect(existsSync(out)).toBe(true);
      expect(await collect(store.readStream('execution-exec_old'))).toEqual([]);
      expect(await store.getActor('exec_old')).toMatchObject({ status: 'terminal', archived: { file: out } });
      expect(await store.streamVersion('execution-exec_new')).toBe(2);
      expect(await store.verifyChain()).toMatchObject({ ok: true });
    } finally {
      await store.close();
    }
  });

  it('opened read-only it reads everything and refuses to append', async () => {
    const file = join(tempDir(), 'log.db');
    const writer = new SqlitePortStore(file);
    await writer.appendToStream('order-1', ticks(2), { expectedVersion: 'no-stream' });
    await writer.writeHeartbeat({ node: 'n', pid: 1, startedAt: 'a', beatAt: 'b', intervalMs: 1000, stoppedAt: 'c' });
    await writer.close();
    const reader = new SqlitePortStore(file, { readOnly: true });
    try {
      expect((await collect(reader.readAll())).map((e) => e.seq)).toEqual([1, 2]);
      expect(await reader.readHeartbeat()).toMatchObject({ node: 'n', stoppedAt: 'c' });
      await expect(reader.appendToStream('order-1', ticks(1), { expectedVersion: 2 })).rejects.toMatchObject({
        code: 'READ_ONLY',
      });
    } finally {
      await reader.close();
    }
  });

  it('a long read yields to the event loop between pages, and a store closed meanwhile ends it with STORE_CLOSED', async () => {
    const store = new SqlitePortStore(join(tempDir(), 'log.db'), { synchronous: 'NORMAL' });
    await store.appendToStream('order-1', ticks(2000), { expectedVersion: 'no-stream' });
    let fired = -1;
    let read = 0;
    setImmediate(() => (fired = read));
    for await (const e of store.readAll()) read = e.seq;
    expect(read).toBe(2000);
    expect(fired).toBeGreaterThan(0); // the timer ran while the read was under way, not after it
    expect(fired).toBeLessThan(2000);
    const pages = store.readStream('order-1')[Symbol.asyncIterator]();
    expect((await pages.next()).value).toMatchObject({ version: 1 });
    await store.close();
    let err: unknown;
    try {
      for (;;) if ((await pages.next()).done) break;
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'STORE_CLOSED' });
  });
});
