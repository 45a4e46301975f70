// The PostgreSQL supervisor's in-memory copy (src/store/postgres/log-copy.ts): ended actors' events leave memory
// once the recent window and every subscriber have passed them; what is held answers exactly as before; a read
// that reaches a paged-out event either answers from a paged-in history or throws PagedOutError (INTERNAL: the store reads such history from PostgreSQL) — never a shorter one.
import { describe, expect, it } from 'vitest';
import type { RecordedEvent } from '../../../src/domain/events.ts';
import { LogCopy, PagedOutError } from '../../../src/store/postgres/log-copy.ts';

let seq = 0;
const versions = new Map<string, number>();
function ev(stream: string): RecordedEvent {
  const version = (versions.get(stream) ?? 0) + 1;
  versions.set(stream, version);
  seq += 1;
  const e: RecordedEvent = {
    seq,
    stream,
    version,
    type: 't',
    schema: 1,
    at: `2026-12-02T00:00:${String(seq % 60).padStart(2, '0')}.000Z`,
    data: { n: seq },
    meta: {},
  };
  return e;
}

function fixture(keepRecent: number | null) {
  seq = 0;
  versions.clear();
  const ended = new Set<string>();
  const copy = new LogCopy({ keepRecent, ended: (s) => ended.has(s), pagedInStreams: 2 });
  const all: RecordedEvent[] = [];
  const put = (stream: string, pageBelow = 0) => {
    const e = ev(stream);
    all.push(e);
    copy.put(e, pageBelow);
    return e;
  };
  return { copy, ended, all, put };
}

describe('LogCopy', () => {
  it('holds everything when not paging out (keepRecent null), however many actors ended', () => {
    const { copy, ended, all, put } = fixture(null);
    for (let i = 0; i < 50; i++) for (let k = 0; k < 4; k++) put(`execution-${i}`);
    for (let i = 0; i < 50; i++) {
      ended.add(`execution-${i}`);
      copy.markEnded(`execution-${i}`);
    }
    expect(copy.compact(Number.MAX_SAFE_INTEGER, true)).toBe(0);
    expect(copy.heldEvents).toBe(200);
    expect(copy.slice(0)).toEqual(all);
  });

  it('pages out an ended actor once the recent window has passed it; live and non-actor streams stay whole', () => {
    const { copy, ended, all, put } = fixture(10);
    for (let k = 0; k < 5; k++) put('execution-a');
    for (let k = 0; k < 3; k++) put('instance-live');
    ended.add('execution-a');
    copy.markEnded('execution-a');
    // Still within the newest 10 positions: held.
    expect(copy.compact(Number.MAX_SAFE_INTEGER, true)).toBe(0);
    for (let k = 0; k < 12; k++) put('execution-queue');
    expect(copy.compact(Number.MAX_SAFE_INTEGER, true)).toBe(5);
    expect(copy.heldEvents).toBe(all.length - 5);
    expect(copy.streamVersion('execution-a')).toBe(5);
    expect(copy.streams().map((s) => [s.stream, s.version])).toEqual([
      ['execution-a', 5],
      ['instance-live', 3],
      ['execution-queue', 12],
    ]);
    expect(copy.read('instance-live')).toEqual(all.filter((e) => e.stream === 'instance-live'));
    expect(copy.read('execution-queue', 3, 4).map((e) => e.version)).toEqual([3, 4]);
    // The paged-out history: a typed error, not an empty or shorter list.
    expect(() => copy.read('execution-a')).toThrow(PagedOutError);
    expect(() => copy.read('execution-a', 5)).toThrow(expect.objectContaining({ code: 'INTERNAL' }));
    // The whole log from before the floor is not here either; from after it, it is (and in order).
    expect(copy.floor).toBe(5);
    expect(() => copy.slice(0)).toThrow(PagedOutError);
    expect(() => [...copy.after(4)]).toThrow(PagedOutError);
    expect(copy.slice(5)).toEqual(all.slice(5));
    expect([...copy.after(5, 9)]).toEqual(all.slice(5, 9));
  });

  it('answers a paged-in history exactly, with events appended after the end (a rejected one) held after it', () => {
    const { copy, ended, all, put } = fixture(2);
    for (let k = 0; k < 4; k++) put('instance-x');
    ended.add('instance-x');
    copy.markEnded('instance-x');
    for (let k = 0; k < 4; k++) put('placement-n');
    copy.compact(Number.MAX_SAFE_INTEGER, true);
    expect(copy.missing('instance-x')).toBe(4);
    const late = put('instance-x'); // e.g. instance.rejected: held (recent), after the paged-out versions
    expect(copy.read('instance-x', 5)).toEqual([late]);
    expect(() => copy.read('instance-x')).toThrow(PagedOutError);
    copy.cache(
      'instance-x',
      all.filter((e) => e.stream === 'instance-x' && e.version <= 4),
    );
    expect(copy.missing('instance-x')).toBe(0);
    expect(copy.read('instance-x')).toEqual(all.filter((e) => e.stream === 'instance-x'));
    expect(copy.read('instance-x', 3, 5).map((e) => e.version)).toEqual([3, 4, 5]);
    // The paged-in cache keeps the most recently read streams only (2 here).
    for (const s of ['instance-y', 'instance-z']) {
      for (let k = 0; k < 2; k++) put(s);
      ended.add(s);
      copy.markEnded(s);
    }
    for (let k = 0; k < 4; k++) put('placement-n');
    copy.compact(Number.MAX_SAFE_INTEGER, true);
    copy.cache(
      'instance-y',
      all.filter((e) => e.stream === 'instance-y'),
    );
    copy.cache(
      'instance-z',
      all.filter((e) => e.stream === 'instance-z'),
    );
    // Out of the cache, and its late event paged out since: all 5 are missing again.
    expect(copy.missing('instance-x')).toBe(5);
    expect(() => copy.read('instance-x')).toThrow(PagedOutError);
    expect(copy.read('instance-z')).toHaveLength(2);
  });

  it('never drops what a subscriber has yet to see (minCursor), nor a stream that is not ended', () => {
    const { copy, ended, put } = fixture(1);
    for (let k = 0; k < 3; k++) put('execution-a');
    for (let k = 0; k < 3; k++) put('execution-b');
    ended.add('execution-a');
    copy.markEnded('execution-a');
    copy.markEnded('execution-b'); // not ended (its row is active): marking does nothing
    for (let k = 0; k < 5; k++) put('execution-queue');
    expect(copy.compact(2, true)).toBe(0); // a subscriber is at position 2: execution-a's events 3.. are unseen
    expect(copy.read('execution-a')).toHaveLength(3);
    expect(copy.compact(3, true)).toBe(3);
    expect(copy.read('execution-b')).toHaveLength(3);
  });

  it('at load, an ended stream below the page-out position is never held', () => {
    const { copy, ended, all, put } = fixture(3);
    ended.add('execution-old');
    for (let k = 0; k < 4; k++) put('execution-old', 6);
    for (let k = 0; k < 2; k++) put('instance-live', 6);
    put('execution-old', 6); // position 7: above the page-out position, held
    expect(copy.heldEvents).toBe(3);
    expect(copy.floor).toBe(4);
    expect(copy.streamVersion('execution-old')).toBe(5);
    expect(copy.read('execution-old', 5)).toEqual([all[6]]);
    expect(() => copy.read('execution-old', 4)).toThrow(PagedOutError);
    expect(copy.slice(4)).toEqual(all.slice(4));
  });

  it('compacts only every so often unless forced (the held list is filtered in one pass)', () => {
    const { copy, ended, put } = fixture(100);
    put('execution-a');
    ended.add('execution-a');
    copy.markEnded('execution-a');
    for (let k = 0; k < 60; k++) put('execution-queue');
    expect(copy.compact(Number.MAX_SAFE_INTEGER, true)).toBe(0); // within the newest 100 positions
    for (let k = 0; k < 50; k++) put('execution-queue');
    expect(copy.compact()).toBe(0); // past the window now, but only 50 positions since the last compaction
    expect(copy.read('execution-a')).toHaveLength(1);
    for (let k = 0; k < 14; k++) put('execution-queue');
    expect(copy.compact()).toBe(1);
    expect(copy.heldEvents).toBe(124);
  });

  it('a stub from a summary (stub) answers every read as put() does when it drops the same events at load', () => {
    // The log: ended actors wholly below the page-out position (10), one straddling it, a live actor and a
    // non-actor stream with old events, an ended actor wholly above it.
    const { ended, all, put } = fixture(5);
    const pageBelow = 10;
    for (const s of [
      'execution-old',
      'instance-old',
      'execution-old',
      'instance-live',
      'execution-old',
      'sandbox-pool',
      'instance-old',
      'execution-cut',
      'execution-cut',
      'instance-live',
    ])
      put(s, pageBelow);
    for (const s of ['execution-cut', 'execution-new', 'sandbox-pool', 'execution-new', 'instance-live'])
      put(s, pageBelow);
    for (const s of ['execution-old', 'instance-old', 'execution-cut', 'execution-new']) ended.add(s);
    // The events ended streams have at or below 10 were dropped, never held.
    const below = (e: RecordedEvent) => ended.has(e.stream) && e.seq <= pageBelow;
    // Fed again with the ended set known from the start, as load does (its rows are read first).
    const whole = new LogCopy({ keepRecent: 5, ended: (s) => ended.has(s), pagedInStreams: 2 });
    for (const e of all) whole.put(e, pageBelow);
    expect(whole.heldEvents).toBe(all.filter((e) => !below(e)).length);

    // The same from summaries: the held streams' events below, then a stub per ended stream, then the window.
    const stubbed = new LogCopy({ keepRecent: 5, ended: (s) => ended.has(s), pagedInStreams: 2 });
    for (const e of all.filter((x) => x.seq <= pageBelow && !ended.has(x.stream))) stubbed.put(e, pageBelow);
    for (const stream of ['execution-old', 'instance-old', 'execution-cut']) {
      const mine = all.filter((e) => e.stream === stream && e.seq <= pageBelow);
      stubbed.stub({
        stream,
        version: mine.at(-1)!.version,
        firstSeq: mine[0]!.seq,
        lastSeq: mine.at(-1)!.seq,
        createdAt: mine[0]!.at,
        updatedAt: mine.at(-1)!.at,
      });
    }
    for (const e of all.filter((x) => x.seq > pageBelow)) stubbed.put(e, pageBelow);

    for (const c of [whole, stubbed]) c.compact(Number.MAX_SAFE_INTEGER, true);
    expect(stubbed.head).toBe(whole.head);
    expect(stubbed.floor).toBe(whole.floor);
    expect(stubbed.floor).toBe(9); // execution-cut's second event (position 9), the last ended one at or below 10
    expect(stubbed.heldEvents).toBe(whole.heldEvents);
    expect(stubbed.streams()).toEqual(whole.streams());
    expect(stubbed.slice(whole.floor)).toEqual(whole.slice(whole.floor));
    expect(() => stubbed.slice(whole.floor - 1)).toThrow(PagedOutError);
    for (const s of new Set(all.map((e) => e.stream))) {
      expect(stubbed.streamVersion(s)).toBe(whole.streamVersion(s));
      expect(stubbed.missing(s)).toBe(whole.missing(s));
      const read = (c: LogCopy, from?: number) => {
        try {
          return c.read(s, from);
        } catch (err) {
          return (err as PagedOutError).code;
        }
      };
      for (let v = 1; v <= whole.streamVersion(s); v++) expect(read(stubbed, v)).toEqual(read(whole, v));
    }
    expect(() => stubbed.read('execution-old')).toThrow(PagedOutError);
    expect(stubbed.read('execution-cut', 3)).toEqual(
      all.filter((e) => e.stream === 'execution-cut' && e.version === 3),
    );
    expect(stubbed.read('instance-live')).toEqual(all.filter((e) => e.stream === 'instance-live'));
    // Paged in, the history answers whole.
    stubbed.cache(
      'execution-old',
      all.filter((e) => e.stream === 'execution-old'),
    );
    expect(stubbed.read('execution-old')).toEqual(all.filter((e) => e.stream === 'execution-old'));
  });

  it('a stub for the head itself moves the head; a stub is refused by a copy that holds everything, twice, or when malformed', () => {
    const { copy, ended } = fixture(3);
    ended.add('execution-a');
    copy.stub({ stream: 'execution-a', version: 4, firstSeq: 1, lastSeq: 4, createdAt: 'c', updatedAt: 'u' });
    expect(copy.head).toBe(4);
    expect(copy.floor).toBe(4);
    expect(copy.heldEvents).toBe(0);
    expect(copy.streams()).toEqual([
      { stream: 'execution-a', kind: 'execution', version: 4, createdAt: 'c', updatedAt: 'u' },
    ]);
    expect(copy.missing('execution-a')).toBe(4);
    expect(() =>
      copy.stub({ stream: 'execution-a', version: 4, firstSeq: 1, lastSeq: 4, createdAt: 'c', updatedAt: 'u' }),
    ).toThrow(expect.objectContaining({ code: 'STORE_INPUT' }));
    expect(() =>
      copy.stub({ stream: 'execution-b', version: 0, firstSeq: 5, lastSeq: 5, createdAt: 'c', updatedAt: 'u' }),
    ).toThrow(expect.objectContaining({ code: 'STORE_INPUT' }));
    const holdAll = fixture(null).copy;
    expect(() =>
      holdAll.stub({ stream: 'execution-a', version: 1, firstSeq: 1, lastSeq: 1, createdAt: 'c', updatedAt: 'u' }),
    ).toThrow(expect.objectContaining({ code: 'STORE_INPUT' }));
    expect(holdAll.streams()).toEqual([]);
  });
});

describe('LogCopy: request streams (the execution queue, placement)', () => {
  const HOUR = 3600_000;
  const T0 = Date.parse('2026-12-02T00:00:00.000Z');
  /** A copy whose clock the test sets; request streams are `queue-*`; events carry the `at` they are given. */
  function requests(keepRecent: number | null) {
    let now = T0;
    let n = 0;
    const versionOf = new Map<string, number>();
    const copy = new LogCopy({
      keepRecent,
      ended: () => false,
      pagedInStreams: 2,
      tail: { is: (s) => s.startsWith('queue-'), keepMs: HOUR, now: () => now },
    });
    const all: RecordedEvent[] = [];
    const put = (stream: string, atMs: number, pageBelow = 0) => {
      const version = (versionOf.get(stream) ?? 0) + 1;
      versionOf.set(stream, version);
      n += 1;
      const e: RecordedEvent = {
        seq: n,
        stream,
        version,
        type: 'q',
        schema: 1,
        at: new Date(atMs).toISOString(),
        data: { n },
        meta: {},
      };
      all.push(e);
      copy.put(e, pageBelow);
      return e;
    };
    return { copy, all, put, setNow: (ms: number) => (now = ms) };
  }

  it('pages out a request stream from the front once its events are older than the window and than keepMs; the newest stay, readRecent reads them', () => {
    const { copy, all, put, setNow } = requests(5);
    for (let k = 0; k < 6; k++) put('queue-exec', T0 + k * 60_000); // minutes 0..5
    for (let k = 0; k < 6; k++) put('instance-live', T0 + 10 * 60_000);
    // An hour has not passed: inside keepMs, so held although below the window.
    setNow(T0 + 50 * 60_000);
    expect(copy.compact(Number.MAX_SAFE_INTEGER, true)).toBe(0);
    expect(copy.readRecent('queue-exec')).toEqual(all.slice(0, 6));
    // 62.5 minutes on: minutes 0, 1 and 2 are older than an hour, 3..5 are not.
    setNow(T0 + 62.5 * 60_000);
    expect(copy.compact(Number.MAX_SAFE_INTEGER, true)).toBe(3);
    expect(copy.readRecent('queue-exec')).toEqual(all.slice(3, 6));
    expect(copy.streamVersion('queue-exec')).toBe(6);
    expect(copy.read('queue-exec', 4)).toEqual(all.slice(3, 6));
    // The whole stream is not held: a read of it says so, never a shorter history; a paged-in copy answers it.
    expect(() => copy.read('queue-exec')).toThrow(PagedOutError);
    expect(copy.missing('queue-exec')).toBe(3);
    copy.cache('queue-exec', all.slice(0, 3));
    expect(copy.read('queue-exec')).toEqual(all.slice(0, 6));
    // The log from before the dropped positions is not complete here either.
    expect(copy.floor).toBe(3);
    expect(() => copy.slice(0)).toThrow(PagedOutError);
    expect(copy.slice(3)).toEqual(all.slice(3));
    // A stream that is not a request stream stays whole, however old.
    setNow(T0 + 100 * HOUR);
    expect(copy.read('instance-live')).toHaveLength(6);
  });

  it('keeps what is inside the window or unseen by a subscriber, however old', () => {
    const { copy, put, setNow } = requests(4);
    for (let k = 0; k < 4; k++) put('queue-exec', T0);
    setNow(T0 + 10 * HOUR);
    expect(copy.compact(Number.MAX_SAFE_INTEGER, true)).toBe(0); // positions 1..4 are the newest 4
    for (let k = 0; k < 4; k++) put('other', T0);
    expect(copy.compact(2, true)).toBe(2); // a subscriber is at position 2: 3 and 4 are unseen
    expect(copy.readRecent('queue-exec').map((e) => e.version)).toEqual([3, 4]);
    expect(copy.compact(Number.MAX_SAFE_INTEGER, true)).toBe(2);
    expect(copy.readRecent('queue-exec')).toEqual([]);
    // The stream goes on: its next request is held.
    const next = put('queue-exec', T0 + 10 * HOUR);
    expect(copy.readRecent('queue-exec')).toEqual([next]);
    expect(copy.streamVersion('queue-exec')).toBe(5);
  });

  it('cuts at one version: an old event after a recent one (a writer whose clock is behind) stays', () => {
    const { copy, put, setNow } = requests(1);
    put('queue-exec', T0); // old
    put('queue-exec', T0 + 5 * HOUR); // recent
    put('queue-exec', T0); // old again, after it: kept, the newest events of a stream stay contiguous
    for (let k = 0; k < 3; k++) put('other', T0 + 5 * HOUR);
    setNow(T0 + 5.5 * HOUR);
    expect(copy.compact(Number.MAX_SAFE_INTEGER, true)).toBe(1);
    expect(copy.readRecent('queue-exec').map((e) => e.version)).toEqual([2, 3]);
  });

  it('does nothing in a copy that holds everything', () => {
    const { copy, all, put, setNow } = requests(null);
    for (let k = 0; k < 5; k++) put('queue-exec', T0);
    setNow(T0 + 100 * HOUR);
    expect(copy.tail('queue-exec')).toBe(false);
    expect(copy.compact(Number.MAX_SAFE_INTEGER, true)).toBe(0);
    expect(copy.read('queue-exec')).toEqual(all);
  });

  it('at load, a stub for its oldest versions, then its newer events: reads answer as after a compaction', () => {
    const copy = new LogCopy({
      keepRecent: 2,
      ended: () => false,
      tail: { is: (s) => s.startsWith('queue-'), keepMs: HOUR, now: () => T0 + 2 * HOUR },
    });
    const at = (ms: number) => new Date(ms).toISOString();
    const e = (seq: number, version: number, atMs: number): RecordedEvent => ({
      seq,
      stream: 'queue-exec',
      version,
      type: 'q',
      schema: 1,
      at: at(atMs),
      data: { seq },
      meta: {},
    });
    // What the store does at open (postgres/host-store.ts loadBelow): versions 1..3 (positions 1..5 at most) summarised,
    // the rest read and put.
    copy.stub({ stream: 'queue-exec', version: 3, firstSeq: 1, lastSeq: 5, createdAt: at(T0), updatedAt: at(T0) });
    const newer = [e(6, 4, T0 + 1.5 * HOUR), e(7, 5, T0 + 1.6 * HOUR)];
    for (const x of newer) copy.put(x);
    expect(copy.readRecent('queue-exec')).toEqual(newer);
    expect(copy.streamVersion('queue-exec')).toBe(5);
    expect(copy.read('queue-exec', 4)).toEqual(newer);
    expect(() => copy.read('queue-exec')).toThrow(PagedOutError);
    expect(copy.missing('queue-exec')).toBe(3);
    expect(copy.streams()).toEqual([
      { stream: 'queue-exec', kind: 'queue', version: 5, createdAt: at(T0), updatedAt: newer[1]!.at },
    ]);
    expect(copy.floor).toBe(5);
    expect(copy.slice(5)).toEqual(newer);
  });
});
