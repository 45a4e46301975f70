// The per-event bookkeeping both stores' archivers share (src/store/archive/archive-ledger.ts): links checked, `prev`
// chosen, the holes a run leaves and the recorded ones it swallows. The stores' own behaviour is the retention
// contract's (test/contract/retention/); this pins the decisions on small logs drawn by hand.
import { describe, expect, it } from 'vitest';
import { ArchiveLedger, type EventSurroundings } from '../../../src/store/archive/archive-ledger.ts';
import { GENESIS } from '../../../src/store/chain.ts';

const h = (n: number) => Buffer.from([n]);
/** A "hash" that is the link before it plus one: event n's hash is h(n) when the chain is whole. */
const hashFrom = (prev: Buffer) => h(prev.equals(GENESIS) ? 1 : prev[0]! + 1);

/** A log of seq → stream; the ledger archives `archived`'s events; gaps: recorded holes (end → from). */
function run(
  log: Record<number, string>,
  archived: string[],
  opts: { gaps?: Record<number, number>; head?: number } = {},
) {
  const seqs = Object.keys(log).map(Number);
  const head = opts.head ?? Math.max(...seqs);
  const ledger = new ArchiveLedger('test-log', new Set(archived), head);
  const gaps = opts.gaps ?? {};
  const lines: { seq: number; prev: number | 'genesis' | null }[] = [];
  for (const stream of archived) {
    ledger.beginActor(stream);
    const own = seqs.filter((s) => log[s] === stream).sort((a, b) => a - b);
    for (const [i, seq] of own.entries()) {
      const near = (s: number) => (log[s] ? { stream: log[s]!, hash: h(s) } : undefined);
      const around: EventSurroundings = {
        before: near(seq - 1),
        gapBefore: gaps[seq - 1] !== undefined ? h(seq - 1) : undefined,
        next: near(seq + 1),
      };
      const e = ledger.event({ seq, version: i + 1, hash: h(seq) }, around, hashFrom);
      lines.push({ seq, prev: e.prev === undefined ? null : e.prev.equals(GENESIS) ? 'genesis' : e.prev[0]! });
      if (e.needsGapAfter) {
        const end = Object.keys(gaps)
          .map(Number)
          .sort((a, b) => a - b)
          .find((g) => g > seq);
        ledger.gapAfter(seq, end === undefined ? undefined : { seq: end, from: gaps[end]!, hash: h(end) });
      }
    }
    ledger.endActor(own.length);
  }
  const holes = ledger.holes();
  return { ledger, lines, swallowed: [...holes.swallowed], ends: [...holes.ends.keys()].sort((a, b) => a - b) };
}

describe('ArchiveLedger', () => {
  it('events between kept ones leave one hole each, ending at their last event; prev only where the event before stays', () => {
    // 1a 2b 3a 4a 5b: archiving a leaves holes 1..1 and 3..4.
    const r = run({ 1: 'a', 2: 'b', 3: 'a', 4: 'a', 5: 'b' }, ['a']);
    expect(r.ends).toEqual([1, 4]);
    expect(r.swallowed).toEqual([]);
    expect(r.lines).toEqual([
      { seq: 1, prev: 'genesis' },
      { seq: 3, prev: 2 },
      { seq: 4, prev: null }, // the event before it is in this archive
    ]);
    expect(r.ledger.ranges.get('a')).toEqual({ first: 1, last: 4, events: 3 });
    expect({ events: r.ledger.events, lastSeq: r.ledger.lastSeq, lastHash: r.ledger.lastHash }).toEqual({
      events: 3,
      lastSeq: 4,
      lastHash: h(4),
    });
  });

  it('the head archived ends a hole at the head', () => {
    expect(run({ 1: 'b', 2: 'a', 3: 'a' }, ['a']).ends).toEqual([3]);
  });

  it('a hole recorded before is swallowed when the run reaches it from both sides, and the new hole ends further on', () => {
    // 1a [2..3 archived earlier] 4a 5b: the old hole ending at 3 is swallowed into one ending at 4.
    const r = run({ 1: 'a', 4: 'a', 5: 'b' }, ['a'], { gaps: { 3: 2 } });
    expect(r.swallowed).toEqual([3]);
    expect(r.ends).toEqual([4]);
    expect(r.lines.find((l) => l.seq === 4)).toEqual({ seq: 4, prev: 3 }); // the link kept by the old hole
  });

  it('an event just before a recorded hole ends that hole (it starts it now)', () => {
    // 1b 2a [3..4 archived earlier] 5b: archiving a extends the old hole backwards; it is recorded again from 2.
    const r = run({ 1: 'b', 2: 'a', 5: 'b' }, ['a'], { gaps: { 4: 3 } });
    expect(r.ends).toEqual([4]);
    expect(r.swallowed).toEqual([]);
  });

  it('refuses a version jump, an event without hash, a missing link and bytes that do not match, naming the seq', () => {
    const l = new ArchiveLedger('test-log', new Set(['a']), 9);
    l.beginActor('a');
    const none: EventSurroundings = { before: undefined, gapBefore: undefined, next: undefined };
    expect(() => l.event({ seq: 3, version: 2, hash: h(3) }, none, hashFrom)).toThrow(/a jumps from v0 to v2/);
    expect(() => l.event({ seq: 3, version: 1, hash: null }, none, hashFrom)).toThrow(/no hash/);
    expect(() => l.event({ seq: 3, version: 1, hash: h(3) }, none, hashFrom)).toThrow(/the event before it is missing/);
    expect(() =>
      l.event({ seq: 3, version: 1, hash: h(3) }, { ...none, before: { stream: 'x', hash: h(7) } }, hashFrom),
    ).toThrow(/do not match its hash/);
    const err = (() => {
      try {
        l.event({ seq: 3, version: 1, hash: h(3) }, none, hashFrom);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toMatchObject({ code: 'STORE_CHAIN_BROKEN' });
  });

  it('an actor with fewer events than its projection says is refused', () => {
    const l = new ArchiveLedger('test-log', new Set(['a']), 1);
    l.beginActor('a');
    l.event({ seq: 1, version: 1, hash: h(1) }, { before: undefined, gapBefore: undefined, next: undefined }, hashFrom);
    expect(() => l.endActor(2)).toThrow(/a has 1 events but its projection says v2/);
  });
});
