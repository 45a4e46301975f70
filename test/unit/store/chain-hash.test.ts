// The hash chain's links (src/store/chain.ts) stay byte for byte what they have always been: logs already written,
// the archives made from them and PostgreSQL's append_events (which computes the same link in SQL) must all keep
// verifying. The link is checked against its definition (sha256 of the previous hash, then the JSON header and the
// two JSON texts) and against values pinned when it was defined; SQLite's batched appends against the same definition.
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { NewEvent } from '../../../src/domain/events.ts';
import { CHAIN_COLUMNS, GENESIS, eventHash, type ChainRow } from '../../../src/store/chain.ts';
import { SqliteEventStore } from '../../../src/store/sqlite/event-store.ts';
import { UpcasterRegistry } from '../../../src/store/upcasters.ts';
import { tempDir } from '../../support/tmp.ts';

type Link = [
  seq: number,
  stream: string,
  version: number,
  type: string,
  schema: number,
  at: string,
  data: string,
  meta: string,
];

/** The link as chain.ts defines it, in its plainest form. */
const definition = (prev: Uint8Array, [seq, stream, version, type, schema, at, data, meta]: Link): Buffer =>
  createHash('sha256')
    .update(prev)
    .update(`${JSON.stringify([seq, stream, version, type, schema, at, data.length])}\n${data}\n${meta}`)
    .digest();

const AT = '2026-01-01T00:00:00.000Z';
const PINNED: [Link, string][] = [
  [
    [1, 'instance-a', 1, 'instance.spawned', 1, AT, '{"pid":4242}', '{}'],
    'c06ace2ce8be41692e69373c788187a5daf8619156ad7a6f870a2816398d9373',
  ],
  [
    [2, 'stréam-ü', 7, 'type "quoted"\\', 3, 'at\n', '{"x":"é€😀"}', '{"by":"ü"}'],
    'ba80c8ed74a04f83568b68c50ad4296e47add1bc7ebe55e8e7ee338cfbc2fe5a',
  ],
  [
    [3, 'lone\ud800x', 2, 'tab\t', 1, 'z', '"\ud800"', '{}'],
    'ba4aa15971b5f69a1e66915668917d472b2ca8b4ab8e059e888b1d09f7d1050a',
  ],
  [
    [4, 's', 1, 't', 1, 'a', JSON.stringify({ big: 'x€'.repeat(50_000) }), '{}'],
    '5d72eedb04d70b59696468d37ca76ffa724082f61ac3b5f6f546f5dfd3f6b96e',
  ],
  [[5, 's', 1, 't', 1, 'a', '', ''], '84784613b3f034d810116dae2d1e42f09609e0e9f9527cfa60bad3fda1cb5463'],
];

describe('eventHash', () => {
  it('gives the links pinned when the chain was defined', () => {
    let prev: Buffer = GENESIS;
    for (const [link, hex] of PINNED) {
      prev = eventHash(prev, ...link);
      expect(prev.toString('hex')).toBe(hex);
    }
  });

  it('is its definition for any event, in any order of calls, at any size', () => {
    const streams = ['instance-a', 'instance-b', 'ex"ec\\-é', 'lone\udc00', ''];
    const types = ['instance.spawned', 'x.y', 'ünï', '\u0001ctl'];
    const ats = [AT, '2026-01-01T00:00:00.001Z', 'not a time', ''];
    const texts = [
      '{}',
      '{"pid":4242,"host":"127.0.0.1"}',
      JSON.stringify({ s: 'é€😀\u2028' }),
      '"\ud800"',
      JSON.stringify({ big: 'y'.repeat(21_800) }), // around where the reused buffer gives way
      JSON.stringify({ big: '€'.repeat(21_800) }),
      JSON.stringify({ big: 'z'.repeat(200_000) }),
    ];
    let ours: Buffer = GENESIS;
    let theirs: Buffer = GENESIS;
    for (let i = 0; i < 400; i++) {
      const link: Link = [
        i + 1,
        streams[(i * 7) % streams.length]!,
        (i % 13) + 1,
        types[i % types.length]!,
        (i % 3) + 1,
        ats[(i >> 2) % ats.length]!,
        texts[(i * 5) % texts.length]!,
        texts[(i * 3) % 4]!,
      ];
      ours = eventHash(ours, ...link);
      theirs = definition(theirs, link);
      expect(ours.equals(theirs), `link ${i}`).toBe(true);
    }
  });

  it('encodes header values of another type as JSON.stringify does (a damaged row holds anything)', () => {
    const odd: Link[] = [
      [1, 's', 1, 't', Number.NaN, AT, '{}', '{}'],
      [Number.POSITIVE_INFINITY, 's', -0, 't', 1.5, AT, '{}', '{}'],
      [1, 's', 1, 't', '2' as unknown as number, AT, '{}', '{}'],
      [1, 's', 1, 't', 1, null as unknown as string, '{}', '{}'],
      [1, 's', 1, 't', 1, 12 as unknown as string, '{}', '{}'],
      [1, 7 as unknown as string, 1, 't', 1, AT, '{}', '{}'],
    ];
    for (const link of odd) expect(eventHash(GENESIS, ...link).equals(definition(GENESIS, link))).toBe(true);
    const short = Buffer.from([1, 2, 3]);
    expect(eventHash(short, ...PINNED[0]![0]).equals(definition(short, PINNED[0]![0]))).toBe(true);
  });
});

describe('SQLite appends, several rows to an INSERT', () => {
  // instance.spawned is at schema 2: events written at 1 are upcast when read, and stored as written.
  const upcasters = () => new UpcasterRegistry().register({ type: 'instance.spawned', fromSchema: 1, up: (d) => d });
  // Runs of events alike (one statement binds their type, schema, meta and time once) broken by events that differ.
  const event = (i: number): NewEvent => ({
    type: i % 37 === 5 ? 'instance.healthy' : 'instance.spawned',
    ...(i % 41 === 7 ? { schema: 1 } : {}),
    data: { i, host: 'h€' },
    ...(i % 29 === 3 ? { meta: { by: 'ü' } } : {}),
    at: i % 31 === 11 ? '2026-01-01T00:00:01.000Z' : AT,
  });
  /** The row an event is stored as: stream, version, type, schema, data, meta, at. */
  const row = (stream: string, version: number, e: NewEvent) => [
    stream,
    version,
    e.type,
    e.schema ?? (e.type === 'instance.spawned' ? 2 : 1),
    JSON.stringify(e.data),
    JSON.stringify(e.meta ?? {}),
    e.at,
  ];

  /** The stored rows in seq order, every link against its definition and chain_head against the last one. */
  function stored(file: string): unknown[][] {
    const db = new Database(file, { readonly: true });
    try {
      const rows = db.prepare(`SELECT ${CHAIN_COLUMNS} FROM events ORDER BY seq`).raw().all() as ChainRow[];
      let prev: Buffer = GENESIS;
      rows.forEach((r, i) => {
        expect(r[0]).toBe(i + 1);
        prev = definition(prev, [r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]]);
        expect(r[8]!.equals(prev), `seq ${r[0]}`).toBe(true);
      });
      const head = db.prepare('SELECT seq, hash FROM chain_head').get() as { seq: number; hash: Buffer };
      expect(head.seq).toBe(rows.length);
      expect(head.hash.equals(prev)).toBe(true);
      return rows.map((r) => [r[1], r[2], r[3], r[4], r[6], r[7], r[5]]);
    } finally {
      db.close();
    }
  }

  it('writes every batch size as rows one by one would: seqs, versions, columns, links and the events handed back', () => {
    const file = join(tempDir(), 'log.db');
    const s = new SqliteEventStore(file, { upcasters: upcasters() });
    const want: unknown[][] = [];
    const versions = new Map<string, number>();
    for (const [n, stream] of [
      [1, 'a'],
      [2, 'a'],
      [31, 'b'],
      [32, 'a'],
      [33, 'b'],
      [64, 'c'],
      [100, 'a'],
      [7, 'c'],
    ] as const) {
      const from = versions.get(stream) ?? 0;
      const events = Array.from({ length: n }, (_, i) => event(want.length + i));
      const r = s.append(stream, events, { expectedVersion: from === 0 ? 'no-stream' : from });
      expect(r.events.map((e) => [e.seq, e.version, e.type, e.data, e.meta, e.at])).toEqual(
        events.map((e, i) => [want.length + i + 1, from + i + 1, e.type, e.data, e.meta ?? {}, e.at]),
      );
      want.push(...events.map((e, i) => row(stream, from + i + 1, e)));
      versions.set(stream, from + n);
    }
    // Several requests in one transaction, one of them a conflict that fails alone.
    const requests = [
      { stream: 'a', events: Array.from({ length: 40 }, (_, i) => event(1000 + i)), expected: 135 },
      { stream: 'b', events: [event(2000)], expected: 1 },
      { stream: 'd', events: Array.from({ length: 3 }, (_, i) => event(3000 + i)), expected: 0 },
    ];
    const outcomes = s.appendMany(
      requests.map((r) => ({ stream: r.stream, events: r.events, options: { expectedVersion: r.expected } })),
    );
    expect(outcomes.map((o) => o.ok)).toEqual([true, false, true]);
    for (const r of [requests[0]!, requests[2]!])
      want.push(...r.events.map((e, i) => row(r.stream, r.expected + i + 1, e)));
    expect(s.verifyChain()).toMatchObject({ ok: true, events: want.length, lastSeq: want.length });
    s.close();
    expect(stored(file)).toEqual(want);
  });

  it('an append that fails part-way writes none of its rows, and the next append chains on as before', () => {
    const file = join(tempDir(), 'log.db');
    const s = new SqliteEventStore(file, { upcasters: upcasters(), upcastAppended: true });
    const plain = (i: number): NewEvent => ({ type: 'instance.spawned', data: { i }, at: AT });
    s.append('p', [plain(0)], { expectedVersion: 'no-stream' });
    // Forty rows are held when the event at schema 3 (newer than the current 2) fails to upcast.
    const events = [
      ...Array.from({ length: 40 }, (_, i) => plain(i + 1)),
      { type: 'instance.spawned', schema: 1, data: { old: true }, at: AT },
      { type: 'instance.spawned', schema: 3, data: { new: true }, at: AT },
      plain(99),
    ];
    expect(() => s.append('p', events, { expectedVersion: 1 })).toThrow(/schema 3, newer than this runlog knows/);
    expect(s.lastSeq()).toBe(1);
    const r = s.append('p', events.slice(0, 41), { expectedVersion: 1 });
    expect(r.events.at(-1)).toMatchObject({ seq: 42, version: 42, schema: 2, data: { old: true } });
    expect(s.verifyChain()).toMatchObject({ ok: true, events: 42 });
    s.close();
    expect(stored(file)).toHaveLength(42);
  });
});
