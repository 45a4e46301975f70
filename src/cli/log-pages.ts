// The CLI's streaming reads (events, export, replay): the log or one stream, through the store port, a small page
// at a time, each event handed on as soon as it is read.
import type { RecordedEvent } from '../domain/events.ts';
import type { EventStorePort } from '../index.ts';

/**
 * Events per read when printing a stream of events: a page stays live while its lines are printed, and at the
 * store's own page size (500) the rows surviving each scavenge grow V8's young generation to its largest, which more
 * than doubled `events --all`'s peak resident set against a raw better-sqlite3 reader; 64 keeps it near the raw one.
 */
export const PRINT_PAGE = 64;

/** The whole log from position `from` (up to `to`, inclusive) in position order, read `pageSize` events at a time. */
export async function* logPages(
  store: Pick<EventStorePort, 'readAll'>,
  from: number,
  to: number | undefined,
  pageSize = PRINT_PAGE,
): AsyncGenerator<RecordedEvent> {
  for (let next = from; ;) {
    let n = 0;
    for await (const e of store.readAll({ from: next, limit: pageSize, ...(to !== undefined ? { to } : {}) })) {
      n += 1;
      next = e.seq + 1;
      yield e;
    }
    if (n < pageSize) return;
  }
}

/** One stream's events from version `from` (up to `to`, inclusive), read `pageSize` events at a time. */
export async function* streamPages(
  store: Pick<EventStorePort, 'readStream'>,
  stream: string,
  from: number,
  to: number | undefined,
  pageSize = PRINT_PAGE,
): AsyncGenerator<RecordedEvent> {
  for (let next = from; to === undefined || next <= to;) {
    const last = to === undefined ? next + pageSize - 1 : Math.min(to, next + pageSize - 1);
    let n = 0;
    for await (const e of store.readStream(stream, { from: next, to: last })) {
      n += 1;
      yield e;
    }
    if (n < last - next + 1) return;
    next = last + 1;
  }
}
