// The PostgreSQL supervisor's reads (postgres/host-store.ts), always complete: what its copy of the log holds
// (log-copy.ts) comes from memory, what the copy has paged out (an ended actor's history, a request stream's
// oldest events, positions below the copy's floor; a stream it does not know) from PostgreSQL, a page at a time.
// Each page is decided on its own, as it is read: the copy may page more out between two pages (never what a
// subscriber has yet to see), and the next page then comes from PostgreSQL. Reads are bounded by what the copy has
// seen (its head, the stream's version there), so they never answer ahead of this store's streamVersion and lastSeq.
import type { RecordedEvent } from '../../domain/events.ts';
import { collect, type ReadAllOptions, type ReadStreamOptions } from '../port.ts';
import type { PgEventStore } from './event-store.ts';
import type { LogCopy } from './log-copy.ts';
import { versionUpTo } from './unheld-reads.ts';

const PAGE = 1000;

/**
 * The stream's version as this store has seen it: the copy's, or, for a stream a paging-out copy does not know (an
 * ended actor dropped whole, or none at all), PostgreSQL's up to the copy's head.
 */
export async function streamVersionComplete(copy: LogCopy, pg: PgEventStore, stream: string): Promise<number> {
  if (copy.knows(stream) || !copy.pagingOut) return copy.streamVersion(stream);
  return versionUpTo(pg, stream, copy.head);
}

/** One stream's events in version order (inclusive `from`/`to`), up to its version in the copy. */
export async function* readStreamComplete(
  copy: LogCopy,
  pg: PgEventStore,
  stream: string,
  options: ReadStreamOptions = {},
): AsyncIterable<RecordedEvent> {
  const version = await streamVersionComplete(copy, pg, stream);
  const last = Math.min(options.to ?? Number.MAX_SAFE_INTEGER, version);
  for (let v = Math.max(1, options.from ?? 1); v <= last; v += PAGE) {
    const end = Math.min(last, v + PAGE - 1);
    // Versions 1..missing are not in memory: such a page is read whole from PostgreSQL (its held part is there too).
    // An archived stream's events are gone from PostgreSQL as well: the read gives what the log still holds.
    // A stream the copy does not know (or no longer does, between two pages) is read from PostgreSQL.
    const page =
      !copy.knows(stream) || v <= copy.missing(stream)
        ? await collect(pg.readStream(stream, { from: v, to: end }))
        : copy.read(stream, v, end);
    yield* page;
  }
}

/** The log by global position (inclusive `from`/`to`, `limit`), up to the copy's head as it moves. */
export async function* readLogComplete(
  copy: LogCopy,
  pg: PgEventStore,
  options: ReadAllOptions = {},
): AsyncIterable<RecordedEvent> {
  let after = Math.max(1, options.from ?? 1) - 1;
  let left = options.limit !== undefined && options.limit >= 0 ? options.limit : Number.MAX_SAFE_INTEGER;
  while (left > 0) {
    const page = await logPage(copy, pg, after, Math.min(PAGE, left), options.to);
    if (page.length === 0) return;
    yield* page;
    left -= page.length;
    after = page.at(-1)!.seq;
  }
}

/** Up to `limit` events after position `after`, up to `to` and the copy's head: from memory when it holds them all. */
export async function logPage(
  copy: LogCopy,
  pg: PgEventStore,
  after: number,
  limit: number,
  to = Number.MAX_SAFE_INTEGER,
): Promise<RecordedEvent[]> {
  const upTo = Math.min(to, copy.head);
  if (after >= upTo || limit <= 0) return [];
  if (!copy.holdsAfter(after)) return collect(pg.readAll({ from: after + 1, to: upTo, limit }));
  // Taken in one turn: a compaction between two events of a page cannot move what this page holds.
  const page: RecordedEvent[] = [];
  for (const e of copy.after(after, upTo)) {
    page.push(e);
    if (page.length >= limit) break;
  }
  return page;
}
