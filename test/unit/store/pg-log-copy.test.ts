// The PostgreSQL supervisor's in-memory copy (src/store/postgres/log-copy.ts): ended actors leave memory whole once
// the recent window and every subscriber have passed them; what is held answers exactly as before; a read that
// reaches a paged-out event either answers from a paged-in history or throws PagedOutError (INTERNAL: the store
// reads such history from PostgreSQL) — never a shorter one.
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
  const forgotten: string[] = [];
  const copy = new LogCopy({
    keepRecent,
    ended: (s) => ended.has(s),
    forget: (s) => void forgotten.push(s),
  });
  const all: RecordedEvent[] = [];
  const put = (stream: string) => {
    const e = ev(stream);
    all.push(e);
    copy.put(e);
    return e;
  };
  return { copy, ended, forgotten, all, put };
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

  it('drops an ended actor whole once the recent window has passed it; live and non-actor streams stay whole', () => {
    const { copy, ended, forgotten, all, put } = fixture(10);
    for (let k = 0; k < 5; k++) put('execution-a');
    for (let k = 0; k < 3; k++) put('instance-live');
    ended.add('execution-a');
    copy.markEnded('execution-a');
    // Still within the newest 10 positions: held.
    expect(copy.compact(Number.MAX_SAFE_INTEGER, true)).toBe(0);
    for (let k = 0; k < 12; k++) put('execution-queue');
    expect(forgotten).toEqual([]);
    expect(copy.compact(Number.MAX_SAFE_INTEGER, true)).toBe(5);
    expect(copy.heldEvents).toBe(all.length - 5);
    // Nothing of it stays, not even its version: the store asks PostgreSQL about a stream the copy does not know,
    // and heard that this one went (it drops the row it kept beside it).
    expect(forgotten).toEqual(['execution-a']);
    expect(copy.knows('execution-a')).toBe(false);
    expect(copy.knows('instance-live')).toBe(true);
    expect(copy.streamVersion('execution-a')).toBe(0);
    expect(copy.streams().map((s) => [s.stream, s.version])).toEqual([
      ['instance-live', 3],
      ['execution-queue', 12],
    ]);
    expect(copy.read('instance-live')).toEqual(all.filter((e) => e.stream === 'instance-live'));
    expect(copy.read('execution-queue', 3, 4).map((e) => e.version)).toEqual([3, 4]);
    // The whole log from before the floor is not here either; from after it, it is (and in order).
    expect(copy.floor).toBe(5);
    expect(() => copy.slice(0)).toThrow(PagedOutError);
    expect(() => [...copy.after(4)]).toThrow(PagedOutError);
    expect(copy.slice(5)).toEqual(all.slice(5));
    expect([...copy.after(5, 9)]).toEqual(all.slice(5, 9));
  });

  it('says which versions of an ended stream are paged out, and holds an event appended after its end (a rejected one) past them', () => {
    const { copy, ended, put } = fixture(2);
    for (let k = 0; k < 4; k++) put('instance-x');
    ended.add('instance-x');
    copy.markEnded('instance-x');
    for (let k = 0; k < 4; k++) put('placement-n');
    copy.compact(Number.MAX_SAFE_INTEGER, true);
    expect(copy.knows('instance-x')).toBe(false);
    // e.g. instance.rejected: held (recent), its stream back in the copy from version 5, versions 1..4 paged out.
    const late = put('instance-x');
    expect(copy.knows('instance-x')).toBe(true);
    expect(copy.streamVersion('instance-x')).toBe(5);
    expect(copy.missing('instance-x')).toBe(4);
    expect(copy.read('instance-x', 5)).toEqual([late]);
    // The paged-out history: a typed error, not an empty or shorter list.
    expect(() => copy.read('instance-x')).toThrow(PagedOutError);
    expect(() => copy.read('instance-x', 4)).toThrow(expect.objectContaining({ code: 'INTERNAL' }));
    // Its late event paged out since: the stream is gone whole again.
    copy.markEnded('instance-x');
    for (let k = 0; k < 4; k++) put('placement-n');
    copy.compact(Number.MAX_SAFE_INTEGER, true);
    expect(copy.knows('instance-x')).toBe(false);
    expect(copy.missing('instance-x')).toBe(0);
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

  it('a stream first seen past its first version holds from there; the floor says the log below is not all here', () => {
    const { copy, all } = fixture(3);
    // What the store's open does: the window part of an ended actor (versions 5 on), the rest never read.
    const e = (seq: number, stream: string, version: number): RecordedEvent => ({
      seq,
      stream,
      version,
      type: 't',
      schema: 1,
      at: `2026-12-02T00:00:${String(seq).padStart(2, '0')}.000Z`,
      data: { seq },
      meta: {},
    });
    copy.put(e(2, 'instance-live', 1));
    copy.pagedOutUpTo(6);
    const window = [e(7, 'execution-old', 5), e(8, 'instance-live', 2)];
    for (const x of window) copy.put(x);
    all.push(...window);
    expect(copy.head).toBe(8);
    expect(copy.floor).toBe(6);
    expect(copy.streamVersion('execution-old')).toBe(5);
    expect(copy.missing('execution-old')).toBe(4);
    expect(copy.read('execution-old', 5)).toEqual([window[0]]);
    expect(() => copy.read('execution-old', 4)).toThrow(PagedOutError);
    expect(copy.read('instance-live').map((x) => x.seq)).toEqual([2, 8]);
    expect(() => copy.slice(5)).toThrow(PagedOutError);
    expect(copy.slice(6)).toEqual(window);
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

  it(
    'a copy loaded as the store opens one (held streams below the window, ' +
      'the floor, the window) holds all but the ended actors below it',
    () => {
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
        put(s);
      for (const s of ['execution-cut', 'execution-new', 'sandbox-pool', 'execution-new', 'instance-live']) put(s);
      for (const s of ['execution-old', 'instance-old', 'execution-cut', 'execution-new']) ended.add(s);
      const below = (e: RecordedEvent) => ended.has(e.stream) && e.seq <= pageBelow;

      // Loaded: the held streams' events below, the highest position not read there, then the window.
      const loaded = new LogCopy({ keepRecent: 5, ended: (s) => ended.has(s) });
      for (const e of all.filter((x) => x.seq <= pageBelow && !ended.has(x.stream))) loaded.put(e);
      loaded.pagedOutUpTo(Math.max(...all.filter(below).map((e) => e.seq)));
      for (const e of all.filter((x) => x.seq > pageBelow)) loaded.put(e);
      for (const s of ended) loaded.markEnded(s);
      loaded.compact(Number.MAX_SAFE_INTEGER, true);

      expect(loaded.head).toBe(all.length);
      expect(loaded.floor).toBe(9); // execution-cut's second event (position 9), the last ended one at or below 10
      expect(loaded.heldEvents).toBe(all.filter((e) => !below(e)).length);
      expect(loaded.slice(9)).toEqual(all.slice(9));
      expect(() => loaded.slice(8)).toThrow(PagedOutError);
      // Every version of every stream it knows: the log's event, or PagedOutError exactly where it was not read.
      for (const e of all.filter((x) => loaded.knows(x.stream))) {
        if (below(e)) expect(() => loaded.read(e.stream, e.version, e.version)).toThrow(PagedOutError);
        else expect(loaded.read(e.stream, e.version, e.version)).toEqual([e]);
      }
      // The actors wholly below the window are not there at all; the straddling one holds its window part.
      expect(loaded.knows('execution-old')).toBe(false);
      expect(loaded.knows('instance-old')).toBe(false);
      expect(loaded.streamVersion('execution-cut')).toBe(3);
      expect(loaded.missing('execution-cut')).toBe(2);
      expect(loaded.read('execution-cut', 3)).toEqual(
        all.filter((e) => e.stream === 'execution-cut' && e.version === 3),
      );
      expect(loaded.read('instance-live')).toEqual(all.filter((e) => e.stream === 'instance-live'));
      expect(loaded.read('sandbox-pool')).toEqual(all.filter((e) => e.stream === 'sandbox-pool'));
    },
  );

  it('pagedOutUpTo moves the head when it passes it; a copy that holds everything refuses it; begins needs the stream', () => {
    const { copy } = fixture(3);
    copy.pagedOutUpTo(4);
    expect(copy.head).toBe(4);
    expect(copy.floor).toBe(4);
    expect(copy.heldEvents).toBe(0);
    expect(copy.streams()).toEqual([]);
    expect(() => copy.begins('queue-x', 1, 'c')).toThrow(expect.objectContaining({ code: 'STORE_INPUT' }));
    const holdAll = fixture(null).copy;
    expect(() => holdAll.pagedOutUpTo(1)).toThrow(expect.objectContaining({ code: 'STORE_INPUT' }));
    holdAll.pagedOutUpTo(0); // nothing paged out: nothing to refuse
    expect(holdAll.floor).toBe(0);
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
      tail: { is: (s) => s.startsWith('queue-'), keepMs: HOUR, now: () => now },
    });
    const all: RecordedEvent[] = [];
    const put = (stream: string, atMs: number) => {
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
      copy.put(e);
      return e;
    };
    return { copy, all, put, setNow: (ms: number) => (now = ms) };
  }

  it(
    'pages out a request stream from the front once its events are older than the window and than keepMs; ' +
      'the newest stay, readRecent reads them',
    () => {
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
      // The whole stream is not held: a read of it says so, never a shorter history (the store reads the rest).
      expect(() => copy.read('queue-exec')).toThrow(PagedOutError);
      expect(copy.missing('queue-exec')).toBe(3);
      // The log from before the dropped positions is not complete here either.
      expect(copy.floor).toBe(3);
      expect(() => copy.slice(0)).toThrow(PagedOutError);
      expect(copy.slice(3)).toEqual(all.slice(3));
      // A stream that is not a request stream stays whole, however old.
      setNow(T0 + 100 * HOUR);
      expect(copy.read('instance-live')).toHaveLength(6);
    },
  );

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

  it('at load, its newer events, where it began, and the floor: reads answer as after a compaction', () => {
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
    // What the store does at open (postgres/copy-load.ts): versions 1..3 (positions 1..5 at most) not read, the
    // rest read and put, then where the stream began (its first event) and the highest position not read.
    const newer = [e(6, 4, T0 + 1.5 * HOUR), e(7, 5, T0 + 1.6 * HOUR)];
    for (const x of newer) copy.put(x);
    copy.begins('queue-exec', 1, at(T0));
    copy.pagedOutUpTo(5);
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
