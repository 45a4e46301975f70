// `runlog events --all` on a store that does not hold the whole log (a PostgreSQL copy that pages ended actors'
// events out): logAfter reads the part the copy lacks from the database a page at a time, then what it holds, each
// event once and in position order, and stops at --to. A store holding everything is read as it is held.
import { describe, expect, it } from 'vitest';
import { logAfter } from '../../../src/cli/commands/inspect-commands.ts';
import type { RecordedEvent } from '../../../src/domain/events.ts';
import type { ReadAllOptions } from '../../../src/store/event-store.ts';
import type { IterateEventsOptions } from '../../../src/store/sqlite/event-store.ts';

const log: RecordedEvent[] = Array.from({ length: 25 }, (_, i) => ({ seq: i + 1, stream: `s-${i % 3}`, version: Math.floor(i / 3) + 1, type: 't', schema: 1, data: { i }, meta: {}, at: '2026-01-01T00:00:00.000Z' }));

/** Holds the events after `floor`; the database has all of them. Records the pages asked for. */
function copy(floor: number, paging = true) {
  const pages: ReadAllOptions[] = [];
  const store = {
    holdsAfter: (after: number) => after >= floor,
    iterateEvents(o: IterateEventsOptions = {}): IterableIterator<RecordedEvent> {
      if ((o.afterSeq ?? 0) < floor) throw Object.assign(new Error('paged out'), { code: 'PAGED_OUT' });
      return log.filter((e) => e.seq > (o.afterSeq ?? 0) && (o.toSeq === undefined || e.seq <= o.toSeq))[Symbol.iterator]();
    },
    ...(paging
      ? {
          async readAllAsync(o: ReadAllOptions = {}): Promise<RecordedEvent[]> {
            pages.push(o);
            return log.filter((e) => e.seq > (o.afterSeq ?? 0)).slice(0, o.limit);
          },
        }
      : {}),
  };
  return { store, pages };
}

async function collect(rows: Iterable<RecordedEvent> | AsyncIterable<RecordedEvent>): Promise<number[]> {
  const seqs: number[] = [];
  for await (const e of rows) seqs.push(e.seq);
  return seqs;
}

describe('logAfter: the whole log, a page at a time where the copy lacks it', () => {
  it('reads the paged-out part from the database in pages, then the held part: every event once, in order', async () => {
    const { store, pages } = copy(18);
    const rows = logAfter(store, 0, undefined, 4);
    expect(Symbol.asyncIterator in rows).toBe(true);
    expect(await collect(rows)).toEqual(log.map((e) => e.seq));
    // Pages of 4 until the position the copy holds from (18 falls inside the fifth page), then the held events.
    expect(pages.map((p) => p.afterSeq)).toEqual([0, 4, 8, 12, 16]);
    expect(pages.every((p) => p.limit === 4)).toBe(true);
  });

  it('starts after --from and stops at --to, in the paged-out part and in the held part', async () => {
    expect(await collect(logAfter(copy(18).store, 5, 10, 4))).toEqual([6, 7, 8, 9, 10]);
    expect(await collect(logAfter(copy(18).store, 5, 22, 4))).toEqual(Array.from({ length: 17 }, (_, i) => i + 6));
  });

  it('a store that holds what is asked for (or everything, SQLite) is read as held, with no await per row', async () => {
    const held = logAfter(copy(18).store, 18, undefined, 4);
    expect(Symbol.asyncIterator in held).toBe(false);
    expect(await collect(held)).toEqual([19, 20, 21, 22, 23, 24, 25]);
    const sqlite = logAfter(copy(0, false).store, 0, 3, 4);
    expect(Symbol.asyncIterator in sqlite).toBe(false);
    expect(await collect(sqlite)).toEqual([1, 2, 3]);
  });

  it('ends when the database has nothing more (the copy head was reached), without asking again', async () => {
    const { store, pages } = copy(100);
    expect(await collect(logAfter(store, 20, undefined, 4))).toEqual([21, 22, 23, 24, 25]);
    expect(pages.map((p) => p.afterSeq)).toEqual([20, 24, 25]);
  });
});
