import { copyFileSync, existsSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import {
  ConcurrencyError,
  ForeignDatabaseError,
  ReplayError,
  StoreCorruptError,
  StoreVersionError,
} from '../../../src/domain/errors.ts';
import { SqliteEventStore } from '../../../src/store/sqlite/event-store.ts';
import { UpcasterRegistry } from '../../../src/store/upcasters.ts';
import { tempDir } from '../../support/tmp.ts';

const e = (type: string, data: Record<string, unknown> = {}) => ({ type, data });

describe('SqliteEventStore', () => {
  it('appends and reads a stream in version order with seq across the log', () => {
    const s = new SqliteEventStore(join(tempDir(), 'log.db'));
    const r1 = s.append('instance-a', [e('x.one', { n: 1 }), e('x.two', { n: 2 })], { expectedVersion: 'no-stream' });
    const r2 = s.append('instance-b', [e('x.one')], { expectedVersion: 'no-stream' });
    const r3 = s.append('instance-a', [e('x.three', { n: 3 })], { expectedVersion: 2 });
    expect(r1.version).toBe(2);
    expect(r3.version).toBe(3);
    expect(s.read('instance-a').map((x) => [x.version, x.type, x.data])).toEqual([
      [1, 'x.one', { n: 1 }],
      [2, 'x.two', { n: 2 }],
      [3, 'x.three', { n: 3 }],
    ]);
    expect(s.read('instance-a', { from: 2, to: 2 }).map((x) => x.type)).toEqual(['x.two']);
    expect(s.readAll().map((x) => x.seq)).toEqual([1, 2, 3, 4]);
    expect(s.readAll({ afterSeq: r2.lastSeq }).map((x) => x.stream)).toEqual(['instance-a']);
    expect(s.streams().map((x) => [x.stream, x.kind, x.version])).toEqual([
      ['instance-a', 'instance', 3],
      ['instance-b', 'instance', 1],
    ]);
    s.close();
  });

  it('rejects a stale expectedVersion with ConcurrencyError and writes nothing', () => {
    const s = new SqliteEventStore(join(tempDir(), 'log.db'));
    s.append('instance-a', [e('x.one')], { expectedVersion: 'no-stream' });
    expect(() => s.append('instance-a', [e('x.two'), e('x.three')], { expectedVersion: 0 })).toThrow(ConcurrencyError);
    expect(() => s.append('instance-a', [e('x.two')], { expectedVersion: 'no-stream' })).toThrow(ConcurrencyError);
    try {
      s.append('instance-a', [e('x.two')], { expectedVersion: 5 });
    } catch (err) {
      expect(err).toMatchObject({ code: 'CONCURRENCY', expected: 5, actual: 1 });
    }
    expect(s.read('instance-a')).toHaveLength(1);
    expect(s.readAll()).toHaveLength(1);
    s.close();
  });

  it('appendMany writes many streams in one transaction; a conflict keeps only its own request out', () => {
    const s = new SqliteEventStore(join(tempDir(), 'log.db'));
    s.append('instance-a', [e('x.one')], { expectedVersion: 'no-stream' });
    const before = s.readAll().length;
    const outcomes = s.appendMany([
      { stream: 'instance-a', events: [e('x.two', { n: 2 })], options: { expectedVersion: 1 } },
      { stream: 'instance-b', events: [e('x.one')], options: { expectedVersion: 1 } }, // stale: b does not exist
      { stream: 'instance-c', events: [e('x.one'), e('x.two')], options: { expectedVersion: 'no-stream' } },
      // The same stream twice in one batch: the second sees the first's events.
      { stream: 'instance-a', events: [e('x.three')], options: { expectedVersion: 2 } },
    ]);
    expect(outcomes.map((o) => o.ok)).toEqual([true, false, true, true]);
    expect(outcomes[1]).toMatchObject({ ok: false, error: { code: 'CONCURRENCY', expected: 1, actual: 0 } });
    expect(outcomes[1]!.ok ? null : outcomes[1]!.error).toBeInstanceOf(ConcurrencyError);
    expect(outcomes[3]).toMatchObject({ ok: true, result: { version: 3 } });
    expect(s.read('instance-a').map((x) => x.type)).toEqual(['x.one', 'x.two', 'x.three']);
    expect(s.streamVersion('instance-b')).toBe(0);
    expect(s.read('instance-c')).toHaveLength(2);
    // seq follows request order: the log reads back in the order the batch was decided.
    expect(s.readAll({ afterSeq: before }).map((x) => `${x.stream}:${x.type}`)).toEqual([
      'instance-a:x.two',
      'instance-c:x.one',
      'instance-c:x.two',
      'instance-a:x.three',
    ]);
    s.close();
  });

  it('appendMany keeps projection rows in the same transaction as their events', () => {
    const s = new SqliteEventStore(join(tempDir(), 'log.db'));
    const row = (id: string, version: number) => ({
      id,
      kind: 'instance',
      stream: `instance-${id}`,
      state: 'spawning',
      status: 'active' as const,
      version,
      createdAt: 't',
      updatedAt: 't',
      summary: {},
    });
    s.appendMany([
      {
        stream: 'instance-p',
        events: [e('x.one')],
        options: { expectedVersion: 'no-stream', projection: row('p', 1) },
      },
      { stream: 'instance-q', events: [e('x.one')], options: { expectedVersion: 3, projection: row('q', 4) } },
    ]);
    expect(s.listActors().map((r) => [r.id, r.version])).toEqual([['p', 1]]);
    s.close();
  });

  it('two handles on one file: one writer wins, the other gets ConcurrencyError, nothing is lost', () => {
    const file = join(tempDir(), 'log.db');
    const a = new SqliteEventStore(file);
    const b = new SqliteEventStore(file);
    a.append('execution-x', [e('x.one')], { expectedVersion: 'no-stream' });
    expect(b.streamVersion('execution-x')).toBe(1);
    a.append('execution-x', [e('a.wins')], { expectedVersion: 1 });
    expect(() => b.append('execution-x', [e('b.loses')], { expectedVersion: 1 })).toThrow(ConcurrencyError);
    b.append('execution-x', [e('b.retries')], { expectedVersion: 2 });
    expect(a.read('execution-x').map((x) => x.type)).toEqual(['x.one', 'a.wins', 'b.retries']);
    a.close();
    b.close();
  });

  it('writes the projection row in the same transaction as the events', () => {
    const s = new SqliteEventStore(join(tempDir(), 'log.db'));
    const row = {
      id: 'a',
      kind: 'instance',
      stream: 'instance-a',
      state: 'spawning',
      status: 'active' as const,
      version: 1,
      createdAt: 't0',
      updatedAt: 't0',
      summary: { appId: 'x' },
    };
    s.append('instance-a', [e('x.one')], { expectedVersion: 'no-stream', projection: row });
    expect(s.getActor('a')).toEqual(row);
    // a failed append must not move the projection either
    expect(() =>
      s.append('instance-a', [e('x.two')], { expectedVersion: 0, projection: { ...row, state: 'running' } }),
    ).toThrow(ConcurrencyError);
    expect(s.getActor('a')!.state).toBe('spawning');
    s.replaceProjection([]);
    expect(s.listActors({ all: true })).toEqual([]);
    s.close();
  });

  it('upcasts old events at read time, step by step', () => {
    const file = join(tempDir(), 'log.db');
    const old = new SqliteEventStore(file);
    old.append('instance-a', [{ type: 'x.renamed', data: { name: 'n' }, schema: 1 }], { expectedVersion: 'no-stream' });
    old.close();
    const up = new UpcasterRegistry()
      .register({ type: 'x.renamed', fromSchema: 1, up: (d) => ({ title: d.name }) })
      .register({ type: 'x.renamed', fromSchema: 2, up: (d) => ({ ...d, v3: true }) });
    const s = new SqliteEventStore(file, { upcasters: up });
    expect(s.read('instance-a')[0]).toMatchObject({ schema: 3, data: { title: 'n', v3: true } });
    s.append('instance-a', [e('x.renamed', { title: 't', v3: true })], { expectedVersion: 1 });
    expect(s.read('instance-a')[1]!.schema).toBe(3);
    s.close();
  });

  it('names the first event it cannot upcast', () => {
    const file = join(tempDir(), 'log.db');
    const s = new SqliteEventStore(file);
    s.append('instance-a', [{ type: 'x.future', data: {}, schema: 9 }], { expectedVersion: 'no-stream' });
    expect(() => s.read('instance-a')).toThrow(ReplayError);
    expect(() => s.read('instance-a')).toThrow(/x\.future has schema 9/);
    s.close();
  });

  it('iterateReplay reads the whole log in seq order across pages, as readAll does, upcasting only old data', () => {
    const file = join(tempDir(), 'log.db');
    const old = new SqliteEventStore(file);
    old.append('instance-a', [{ type: 'x.renamed', data: { name: 'n' }, schema: 1 }, e('x.other', { k: 1 })], {
      expectedVersion: 'no-stream',
    });
    old.append('execution-b', [e('x.other', { k: 2 })], { expectedVersion: 'no-stream' });
    old.close();
    const up = new UpcasterRegistry().register({ type: 'x.renamed', fromSchema: 1, up: (d) => ({ title: d.name }) });
    const s = new SqliteEventStore(file, { upcasters: up });
    s.append('instance-a', [{ ...e('x.renamed', { title: 't' }), meta: { source: 'test' } }], { expectedVersion: 2 });
    const replayed = [...s.iterateReplay(0, 2)]; // pages of two rows: the cursor crosses a page boundary
    expect(replayed.map((r) => [r.stream, r.version, r.type, r.data])).toEqual([
      ['instance-a', 1, 'x.renamed', { title: 'n' }],
      ['instance-a', 2, 'x.other', { k: 1 }],
      ['execution-b', 1, 'x.other', { k: 2 }],
      ['instance-a', 3, 'x.renamed', { title: 't' }],
    ]);
    expect(replayed).toEqual(
      s.readAll().map(({ stream, version, type, at, data }) => ({ stream, version, type, at, data })),
    );
    expect([...s.iterateReplay(3)].map((r) => r.version)).toEqual([3]);
    s.append('instance-c', [{ type: 'x.future', data: {}, schema: 9 }], { expectedVersion: 'no-stream' });
    expect(() => [...s.iterateReplay()]).toThrow(/x\.future has schema 9/);
    s.close();
  });

  it('uses WAL and synchronous=FULL by default; NORMAL only when asked', () => {
    const file = join(tempDir(), 'log.db');
    const s = new SqliteEventStore(file);
    s.close();
    const raw = new Database(file, { readonly: true });
    expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
    raw.close();
    const s2 = new SqliteEventStore(file, { synchronous: 'NORMAL' });
    expect((s2 as any).db.pragma('synchronous', { simple: true })).toBe(1);
    s2.close();
    const s3 = new SqliteEventStore(file);
    expect((s3 as any).db.pragma('synchronous', { simple: true })).toBe(2);
    s3.close();
  });

  it('refuses a non-SQLite file, naming it, and leaves it untouched', () => {
    const file = join(tempDir(), 'notes.db');
    writeFileSync(file, 'these are my notes, not a database\n'.repeat(10));
    const before = readFileSync(file);
    expect(() => new SqliteEventStore(file)).toThrow(StoreCorruptError);
    expect(() => new SqliteEventStore(file)).toThrow(file);
    expect(readFileSync(file).equals(before)).toBe(true);
    expect(existsSync(`${file}-wal`)).toBe(false);
  });

  it('refuses a foreign SQLite database and leaves it untouched', () => {
    const file = join(tempDir(), 'other.db');
    const raw = new Database(file);
    raw.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers (name) VALUES ('ada')");
    raw.close();
    const before = readFileSync(file);
    const err = (() => {
      try {
        new SqliteEventStore(file);
      } catch (x) {
        return x;
      }
    })();
    expect(err).toBeInstanceOf(ForeignDatabaseError);
    expect((err as ForeignDatabaseError).message).toContain(file);
    expect(readFileSync(file).equals(before)).toBe(true);
  });

  it('refuses a log written by a newer runlog', () => {
    const file = join(tempDir(), 'log.db');
    new SqliteEventStore(file).close();
    const raw = new Database(file);
    raw.pragma('user_version = 99');
    raw.close();
    expect(() => new SqliteEventStore(file)).toThrow(StoreVersionError);
  });

  it('detects a truncated file and a corrupted page, never overwriting them', () => {
    const dir = tempDir();
    const file = join(dir, 'log.db');
    const s = new SqliteEventStore(file);
    for (let i = 0; i < 300; i++)
      s.append(`instance-${i}`, [e('x.one', { pad: 'x'.repeat(500) })], { expectedVersion: 'no-stream' });
    s.close(); // checkpoints the WAL into the main file

    const truncated = join(dir, 'truncated.db');
    copyFileSync(file, truncated);
    truncateSync(truncated, Math.floor(statSync(truncated).size / 2));
    const tBefore = readFileSync(truncated);
    expect(() => new SqliteEventStore(truncated)).toThrow(StoreCorruptError);
    expect(readFileSync(truncated).equals(tBefore)).toBe(true);

    const corrupt = join(dir, 'corrupt.db');
    const bytes = readFileSync(file);
    // Scribble over the headers of the table's leaf b-tree pages (page size 4096; type byte 0x0d).
    let hit = 0;
    for (let off = 4096; off + 4096 <= bytes.length; off += 4096) {
      if (bytes[off] === 0x0d) {
        bytes.fill(0xa5, off + 1, off + 12);
        hit += 1;
      }
    }
    expect(hit).toBeGreaterThan(0);
    writeFileSync(corrupt, bytes);
    const cBefore = readFileSync(corrupt);
    expect(() => new SqliteEventStore(corrupt)).toThrow(StoreCorruptError);
    expect(readFileSync(corrupt).equals(cBefore)).toBe(true);
  });

  it('subscribe delivers appends from this handle and from another process-like handle', async () => {
    const file = join(tempDir(), 'log.db');
    const a = new SqliteEventStore(file);
    const b = new SqliteEventStore(file);
    a.append('instance-a', [e('x.before')], { expectedVersion: 'no-stream' });
    const seen: string[] = [];
    const off = a.subscribe({ pollMs: 20 }, (x) => seen.push(`${x.stream}:${x.type}`));
    a.append('instance-a', [e('x.local')], { expectedVersion: 1 });
    b.append('instance-b', [e('x.remote')], { expectedVersion: 'no-stream' });
    await new Promise((r) => setTimeout(r, 150));
    expect(seen).toEqual(['instance-a:x.local', 'instance-b:x.remote']);
    const onlyA: string[] = [];
    const off2 = a.subscribe({ afterSeq: 0, stream: 'instance-a' }, (x) => onlyA.push(x.type));
    await new Promise((r) => setTimeout(r, 20));
    expect(onlyA).toEqual(['x.before', 'x.local']);
    off();
    off2();
    a.close();
    b.close();
  });
});
