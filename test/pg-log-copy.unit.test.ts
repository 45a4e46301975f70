// The PostgreSQL supervisor's in-memory copy (src/store/postgres/log-copy.ts): ended actors' events leave memory
// once the recent window and every subscriber have passed them; what is held answers exactly as before; a read
// that reaches a paged-out event either answers from a paged-in history or throws PAGED_OUT — never a shorter one.
import { describe, expect, it } from 'vitest';
import type { RecordedEvent } from '../src/domain/events.ts';
import { LogCopy, PagedOutError } from '../src/store/postgres/log-copy.ts';

let seq = 0;
const versions = new Map<string, number>();
function ev(stream: string): RecordedEvent {
  const version = (versions.get(stream) ?? 0) + 1;
  versions.set(stream, version);
  seq += 1;
  const e: RecordedEvent = { seq, stream, version, type: 't', schema: 1, at: `2026-12-02T00:00:${String(seq % 60).padStart(2, '0')}.000Z`, data: { n: seq }, meta: {} };
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
    expect(() => copy.read('execution-a', 5)).toThrow(expect.objectContaining({ code: 'PAGED_OUT' }));
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
    copy.cache('instance-x', all.filter((e) => e.stream === 'instance-x' && e.version <= 4));
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
    copy.cache('instance-y', all.filter((e) => e.stream === 'instance-y'));
    copy.cache('instance-z', all.filter((e) => e.stream === 'instance-z'));
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
});
