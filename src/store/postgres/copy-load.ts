// Loading the copy of the log at open, below the recent window: held streams read in full, ended actors' and old
// requests' events summarised into stubs instead of read (log-copy.ts).
import type { RecordedEvent } from '../../domain/events.ts';
import type { LoadStats } from './host-store-options.ts';
import type { LogCopy } from './log-copy.ts';
import type { PgEventStore } from './event-store.ts';
import type { StreamSummary } from './open-reads.ts';

const PAGE = 1000;

/**
 * Positions 1..pageBelow (all committed before the open read the head, so nothing appears there later): the
 * streams the copy holds are read in full, in position order; each ended actor's events there become a stub
 * (log-copy.ts), exactly what put() leaves when it drops them, and its node (placement) from the summary.
 * Whether a stream has ended is the rows' word, read before, as put() asks it.
 */
export async function loadBelowWindow(
  pg: PgEventStore,
  copy: LogCopy,
  pageBelow: number,
  summaries: readonly StreamSummary[],
  into: { put(e: RecordedEvent, pageBelow: number): void; lastNode: Map<string, string>; loaded: LoadStats },
): Promise<void> {
  const paged: StreamSummary[] = [];
  const held: string[] = [];
  const requests: StreamSummary[] = [];
  for (const s of summaries) {
    if (copy.ended(s.stream)) paged.push(s);
    else if (copy.tail(s.stream)) requests.push(s);
    else held.push(s.stream);
  }
  // A page of streams at a time; the pages' events are merged into position order before the copy takes them.
  const events: RecordedEvent[] = [];
  for (let i = 0; i < held.length; i += PAGE)
    for (const e of await pg.readStreamsUpTo(held.slice(i, i + PAGE), pageBelow)) events.push(e);
  if (requests.length > 0) {
    // A request stream's events from the oldest one that is not older than the copy's tailSince() (all of them
    // below the window here): its older ones become a stub, as an ended actor's do, before its newer ones.
    const newest = await pg.readStreamsSince(
      requests.map((s) => s.stream),
      pageBelow,
      new Date(copy.tailSince()).toISOString(),
    );
    const first = new Map<string, RecordedEvent>();
    for (const e of newest) if (!first.has(e.stream)) first.set(e.stream, e);
    for (const s of requests) {
      const f = first.get(s.stream);
      if (f && f.version === 1) continue;
      copy.stub(f ? { ...s, version: f.version - 1, lastSeq: f.seq - 1 } : s);
      into.loaded.requestEventsPagedOut += f ? f.version - 1 : s.events;
    }
    for (const e of newest) events.push(e);
  }
  if (held.length > PAGE || requests.length > 0) events.sort((a, b) => a.seq - b.seq);
  for (const e of events) into.put(e, pageBelow);
  into.loaded.eventsRead += events.length;
  // After the held events (the copy's head is the highest position it has seen), before the window's.
  for (const s of paged) {
    copy.stub(s);
    if (s.node !== null) into.lastNode.set(s.stream, s.node);
    into.loaded.streamsSummarised += 1;
    into.loaded.eventsSummarised += s.events;
  }
}
