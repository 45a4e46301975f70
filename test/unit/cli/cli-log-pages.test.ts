// `runlog events` (--all and one actor), `export` and `replay` read through the store port a small page at a time
// (log-pages.ts): every event once and in position order, from --from up to --to, each page asked for only once the
// one before it has been handed on, and no read past the end.
import { describe, expect, it } from 'vitest';
import { logPages, PRINT_PAGE, streamPages } from '../../../src/cli/log-pages.ts';
import type { RecordedEvent } from '../../../src/domain/events.ts';
import type { ReadAllOptions, ReadStreamOptions } from '../../../src/store/port.ts';

const log: RecordedEvent[] = Array.from({ length: 25 }, (_, i) => ({
  seq: i + 1,
  stream: `s-${i % 3}`,
  version: Math.floor(i / 3) + 1,
  type: 't',
  schema: 1,
  data: { i },
  meta: {},
  at: '2026-01-01T00:00:00.000Z',
}));

/** The port's two paged reads over `log`, recording what each read asked for. */
function store() {
  const asked: { all: ReadAllOptions[]; stream: ReadStreamOptions[] } = { all: [], stream: [] };
  return {
    asked,
    async *readAll(o: ReadAllOptions = {}): AsyncIterable<RecordedEvent> {
      asked.all.push(o);
      yield* log.filter((e) => e.seq >= (o.from ?? 1) && (o.to === undefined || e.seq <= o.to)).slice(0, o.limit);
    },
    async *readStream(stream: string, o: ReadStreamOptions = {}): AsyncIterable<RecordedEvent> {
      asked.stream.push(o);
      yield* log.filter(
        (e) => e.stream === stream && e.version >= (o.from ?? 1) && (o.to === undefined || e.version <= o.to),
      );
    },
  };
}

async function seqs(rows: AsyncIterable<RecordedEvent>): Promise<number[]> {
  const out: number[] = [];
  for await (const e of rows) out.push(e.seq);
  return out;
}

describe('logPages: the whole log through readAll, a page at a time', () => {
  it('gives every event once and in order, asking for pages of the size from where the last one ended', async () => {
    const s = store();
    expect(await seqs(logPages(s, 1, undefined, 4))).toEqual(log.map((e) => e.seq));
    expect(s.asked.all.map((o) => o.from)).toEqual([1, 5, 9, 13, 17, 21, 25]);
    expect(s.asked.all.every((o) => o.limit === 4)).toBe(true);
  });

  it('starts at --from and stops at --to, asking no further once a page comes back short', async () => {
    const s = store();
    expect(await seqs(logPages(s, 6, 10, 4))).toEqual([6, 7, 8, 9, 10]);
    expect(s.asked.all.map((o) => [o.from, o.to])).toEqual([
      [6, 10],
      [10, 10],
    ]);
    expect(await seqs(logPages(store(), 30, undefined, 4))).toEqual([]);
  });

  it('reads a page of PRINT_PAGE events by default', async () => {
    const s = store();
    await seqs(logPages(s, 1, undefined));
    expect(s.asked.all).toEqual([{ from: 1, limit: PRINT_PAGE }]);
  });
});

describe("streamPages: one stream's versions through readStream, a page at a time", () => {
  it('gives the stream whole, in version order, each page a bounded range', async () => {
    const s = store();
    const events = [];
    for await (const e of streamPages(s, 's-1', 1, undefined, 3)) events.push(e.version);
    expect(events).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(s.asked.stream).toEqual([
      { from: 1, to: 3 },
      { from: 4, to: 6 },
      { from: 7, to: 9 },
    ]);
  });

  it('keeps to --from and --to, and ends at --to without asking past it', async () => {
    const s = store();
    const events = [];
    for await (const e of streamPages(s, 's-0', 2, 7, 3)) events.push(e.version);
    expect(events).toEqual([2, 3, 4, 5, 6, 7]);
    expect(s.asked.stream).toEqual([
      { from: 2, to: 4 },
      { from: 5, to: 7 },
    ]);
  });
});
