// Loading the copy of the log at open, below the recent window: the streams the copy holds (live actors' and every
// stream that is no actor's) read in full, the request streams from their newest requests on, and nothing at all of
// the ended actors, not even their names (log-copy.ts). What the open reads is what the copy will hold, found
// through indexes, so a log with a long history opens as fast as a short one with the same live fleet.
import type { RecordedEvent } from '../../domain/events.ts';
import type { LoadStats } from './host-store-options.ts';
import type { LogCopy } from './log-copy.ts';
import type { PgEventStore } from './event-store.ts';
import { requestStreamBounds, unownedStreams, highestUnheld } from './open-reads.ts';

const PAGE = 1000;

/**
 * Positions 1..pageBelow (all committed before the open read the head, so nothing appears there later): `live`
 * (the actors that have not ended, from their rows) and the streams that are no actor's are read in full, in
 * position order; a request stream from the oldest event that is not older than the copy's tailSince() on (where
 * it began, from its first event). Then the highest position left unread there becomes the copy's floor.
 */
export async function loadBelowWindow(
  pg: PgEventStore,
  copy: LogCopy,
  pageBelow: number,
  live: readonly string[],
  into: { put(e: RecordedEvent): void; loaded: LoadStats },
): Promise<void> {
  const held = [...live];
  const requests: string[] = [];
  for (const stream of await unownedStreams(pg, pageBelow)) (copy.tail(stream) ? requests : held).push(stream);
  // A page of streams at a time; the pages' events are merged into position order before the copy takes them.
  const events: RecordedEvent[] = [];
  for (let i = 0; i < held.length; i += PAGE)
    for (const e of await pg.readStreamsUpTo(held.slice(i, i + PAGE), pageBelow)) events.push(e);
  // Only a copy with request streams has requests (tailSince() is -Infinity without them).
  const newest =
    requests.length > 0 ? await pg.readStreamsSince(requests, pageBelow, new Date(copy.tailSince()).toISOString()) : [];
  for (const e of newest) events.push(e);
  if (held.length > PAGE || requests.length > 0) events.sort((a, b) => a.seq - b.seq);
  for (const e of events) into.put(e);
  into.loaded.eventsRead += events.length;
  // A request stream's paged-out oldest versions: the list of streams still says where it began.
  const first = new Map<string, RecordedEvent>();
  for (const e of newest) if (!first.has(e.stream)) first.set(e.stream, e);
  for (const b of await requestStreamBounds(pg, requests, pageBelow)) {
    const f = first.get(b.stream);
    into.loaded.requestEventsPagedOut += f ? f.version - 1 : b.version;
    if (f && f.version > 1 && b.firstSeq !== null) copy.begins(b.stream, b.firstSeq, b.createdAt!);
  }
  copy.pagedOutUpTo(await highestUnheld(pg, pageBelow, held));
}
