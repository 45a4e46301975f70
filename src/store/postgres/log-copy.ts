// The PostgreSQL supervisor's in-memory copy of the log (postgres/host-store.ts), with ended actors paged out.
//
// The actor host reads a live actor's history often (rehydrate, every transition's decision), so the supervisor
// keeps what it reads most: every stream that is not an ended actor's (live actors, app streams, facts; request
// streams from their newest requests on, below) in full, and the most recent `keepRecent` positions of the log
// whatever their stream (followers and subscribers read from there). An ended actor whose events are all older
// than that window is dropped whole (paged out): nothing of it stays, not even a stub, so the copy's size follows
// the live fleet and the window, never the history. A stream the copy does not know may therefore be an ended
// actor's, and the store asks PostgreSQL about it (copy-reads.ts, unheld-reads.ts); a stream whose first event
// seen here is not its first holds versions from there on, the rest being paged out. A read of this copy that
// reaches a paged-out event throws PagedOutError, an internal guard the store never lets reach a caller: never a
// shorter history than the log holds.
//
// Request streams (`tail`: the execution queue, placement and hand-over requests) never end, and grow with every
// execution and placement the cluster ever ran. Their readers want only the requests whose deadlines have not
// passed, so their oldest events are paged out from the front once they are older than the window and than
// `keepMs` (longer than any request's deadline): the stream keeps its newest events, readRecent() reads those,
// and a read of the whole stream reads the rest from PostgreSQL like an ended actor's.
//
// No IO here: the store decides what has ended (its actors projection rows) and feeds the events in position order.
import type { RecordedEvent } from '../../domain/events.ts';
import { RunlogError } from '../../domain/errors.ts';
import type { StreamInfo } from '../port.ts';

/**
 * A read of the copy reached events it does not hold (an ended actor's, paged out). The store asks the copy only
 * for what it holds and reads the rest from PostgreSQL, so this is a guard against a shorter answer: INTERNAL.
 */
export class PagedOutError extends RunlogError {
  constructor(what: { stream: string } | { afterSeq: number; floor: number }) {
    super(
      'INTERNAL',
      'stream' in what
        ? `${what.stream} has ended and its events are not held in this supervisor's memory (read them from the store, not the copy)`
        : `positions after ${what.afterSeq} up to ${what.floor} include ended actors' events, ` +
            `not held in this supervisor's memory (read them from the store, not the copy)`,
      what,
    );
  }
}

interface StreamCopy {
  stream: string;
  /** The stream's version (its last event's). */
  version: number;
  firstSeq: number;
  createdAt: string;
  updatedAt: string;
  /** Versions 1..dropped are paged out; held[i] is version dropped + 1 + i. */
  dropped: number;
  held: RecordedEvent[];
}

export interface LogCopyOptions {
  /** How many of the newest positions are held whatever their stream; null: hold everything (nothing is paged out). */
  keepRecent: number | null;
  /** Whether the stream is an ended actor's (its actors row is terminal): only those are paged out. */
  ended(stream: string): boolean;
  /** Request streams, whose events older than the window and than `keepMs` before `now()` are paged out from the front. */
  tail?: TailStreams;
  /** Hears of each ended stream the copy has dropped whole (the store forgets what it kept beside it). */
  forget?(stream: string): void;
}

/** Which streams are request streams, and how long their events are held whatever the window (log-copy.ts). */
export interface TailStreams {
  is(stream: string): boolean;
  /** Longer than the deadline of any request such a stream carries. */
  keepMs: number;
  now(): number;
}

export class LogCopy {
  /** Held events in position order (positions have holes: archived events, paged-out ones). */
  private events: RecordedEvent[] = [];
  private readonly byStream = new Map<string, StreamCopy>();
  /** Ended streams that still hold events (candidates for the next compaction). */
  private readonly endedHeld = new Set<string>();
  /** Request streams that hold events (their oldest may be paged out at the next compaction). */
  private readonly tailHeld = new Set<string>();
  private headSeq = 0;
  /** The highest position paged out: a read of the whole log after a position below it is not complete here. */
  private floorSeq = 0;
  private lastCompaction = 0;

  constructor(private readonly options: LogCopyOptions) {}

  get head(): number {
    return this.headSeq;
  }

  get floor(): number {
    return this.floorSeq;
  }

  /** How many events are held (the measure of this copy's memory). */
  get heldEvents(): number {
    return this.events.length;
  }

  /** How many streams the copy knows (an ended actor dropped whole is not among them). */
  get heldStreams(): number {
    return this.byStream.size;
  }

  get pagingOut(): boolean {
    return this.options.keepRecent !== null;
  }

  /** Whether the stream's events below the window are paged out (an ended actor's, in a paging-out copy). */
  ended(stream: string): boolean {
    return this.pagingOut && this.options.ended(stream);
  }

  /** Whether the stream is a request stream whose oldest events are paged out (in a paging-out copy). */
  tail(stream: string): boolean {
    return this.pagingOut && this.options.tail !== undefined && this.options.tail.is(stream);
  }

  /** The time before which a request stream's events may be paged out (when also older than the window). */
  tailSince(): number {
    return this.options.tail ? this.options.tail.now() - this.options.tail.keepMs : Number.NEGATIVE_INFINITY;
  }

  /**
   * Adds the next event (positions ascending). A stream first seen at a version past 1 (an ended actor's event
   * after it was dropped, or the window's part of one at load) holds from there: its earlier versions are paged out.
   */
  put(e: RecordedEvent): void {
    this.headSeq = e.seq;
    let c = this.byStream.get(e.stream);
    if (!c)
      this.byStream.set(
        e.stream,
        (c = {
          stream: e.stream,
          version: e.version - 1,
          firstSeq: e.seq,
          createdAt: e.at,
          updatedAt: e.at,
          dropped: e.version - 1,
          held: [],
        }),
      );
    c.version = e.version;
    c.updatedAt = e.at;
    c.held.push(e);
    this.events.push(e);
    if (this.ended(e.stream)) this.endedHeld.add(e.stream);
    else if (this.tail(e.stream)) this.tailHeld.add(e.stream);
  }

  /**
   * At load, where a stream whose oldest events are not held began (a request stream's first event), so that the
   * list of streams says when it was created. Only for a stream already put.
   */
  begins(stream: string, firstSeq: number, createdAt: string): void {
    const c = this.byStream.get(stream);
    if (!c)
      throw new RunlogError('STORE_INPUT', `${stream} is not in the copy: where it begins follows its events`, {
        stream,
      });
    c.firstSeq = firstSeq;
    c.createdAt = createdAt;
  }

  /**
   * At load, the highest position below the recent window that the copy does not hold (an ended actor's event
   * there, never read): a read of the whole log from at or below it goes to the store.
   */
  pagedOutUpTo(seq: number): void {
    if (!this.pagingOut && seq > 0)
      throw new RunlogError(
        'STORE_INPUT',
        `a copy that holds every event cannot have positions up to ${seq} paged out (keepRecent is null)`,
        { seq },
      );
    this.floorSeq = Math.max(this.floorSeq, seq);
    this.headSeq = Math.max(this.headSeq, seq);
  }

  /** Whether the copy holds the stream (some of its events; the rest, if any, are paged out). */
  knows(stream: string): boolean {
    return this.byStream.has(stream);
  }

  /** The store learned that this stream's actor ended (its row turned terminal): its events may be paged out. */
  markEnded(stream: string): void {
    if (this.pagingOut && (this.byStream.get(stream)?.held.length ?? 0) > 0) this.endedHeld.add(stream);
  }

  /**
   * Pages out ended streams whose held events are all older than the newest `keepRecent` positions (and than
   * `minCursor`, the oldest position a subscriber has yet to see). Filters the held events only when enough has
   * happened since the last time (amortized), or when `force`. Returns how many events were dropped.
   */
  compact(minCursor = Number.MAX_SAFE_INTEGER, force = false): number {
    const keep = this.options.keepRecent;
    if (keep === null || (this.endedHeld.size === 0 && this.tailHeld.size === 0)) return 0;
    if (!force && this.headSeq - this.lastCompaction < Math.max(64, keep >> 2)) return 0;
    this.lastCompaction = this.headSeq;
    const horizon = Math.min(this.headSeq - keep, minCursor);
    let dropped = this.compactTails(horizon);
    const gone: string[] = [];
    for (const stream of this.endedHeld) {
      const c = this.byStream.get(stream)!;
      const last = c.held.at(-1);
      if (!last || !this.options.ended(stream)) {
        this.endedHeld.delete(stream);
        continue;
      }
      if (last.seq > horizon) continue;
      dropped += c.held.length;
      this.floorSeq = Math.max(this.floorSeq, last.seq);
      c.dropped = c.version;
      c.held = [];
      this.endedHeld.delete(stream);
      gone.push(stream);
    }
    if (dropped > 0) this.events = this.events.filter((e) => e.version > this.byStream.get(e.stream)!.dropped);
    // Only now, once the held events are filtered by their stream's entry: nothing of a dropped stream stays.
    for (const stream of gone) {
      this.byStream.delete(stream);
      this.options.forget?.(stream);
    }
    return dropped;
  }

  /**
   * A request stream's oldest held events, up to the first one that is inside the window or newer than
   * tailSince(): the cut is one version, so what stays is the stream's newest events, whatever order their
   * writers' clocks put `at` in. Returns how many were dropped (compact() filters them out of the log's events).
   */
  private compactTails(horizon: number): number {
    const since = this.tailSince();
    let dropped = 0;
    for (const stream of this.tailHeld) {
      const c = this.byStream.get(stream)!;
      let n = 0;
      while (n < c.held.length && c.held[n]!.seq <= horizon && Date.parse(c.held[n]!.at) < since) n++;
      if (n === 0) continue;
      this.floorSeq = Math.max(this.floorSeq, c.held[n - 1]!.seq);
      c.dropped += n;
      c.held = c.held.slice(n);
      if (c.held.length === 0) this.tailHeld.delete(stream);
      dropped += n;
    }
    return dropped;
  }

  /** The versions of the stream not held (1..n; the store reads those from the database), or 0 when all are here. */
  missing(stream: string): number {
    return this.byStream.get(stream)?.dropped ?? 0;
  }

  /** Versions from..to (inclusive) of the stream; throws PagedOutError when one of them is not held. */
  read(stream: string, from = 1, to?: number): RecordedEvent[] {
    const c = this.byStream.get(stream);
    if (!c) return [];
    const last = Math.min(to ?? c.version, c.version);
    const first = Math.max(1, from);
    if (first > last) return [];
    if (first <= c.dropped) throw new PagedOutError({ stream });
    const out: RecordedEvent[] = [];
    for (let v = first; v <= last; v++) out.push(c.held[v - c.dropped - 1]!);
    return out;
  }

  /**
   * The stream's events this copy holds, oldest first: all of them, except a request stream's paged-out oldest
   * ones (its readers want only the requests whose deadlines have not passed, all among these).
   */
  readRecent(stream: string): RecordedEvent[] {
    return [...(this.byStream.get(stream)?.held ?? [])];
  }

  streamVersion(stream: string): number {
    return this.byStream.get(stream)?.version ?? 0;
  }

  streams(kind?: string): StreamInfo[] {
    return [...this.byStream.values()]
      .sort((a, b) => a.firstSeq - b.firstSeq)
      .map((c) => ({
        stream: c.stream,
        kind: c.stream.split('-')[0]!,
        version: c.version,
        createdAt: c.createdAt,
        updatedAt: c.updatedAt,
      }))
      .filter((r) => !kind || r.kind === kind);
  }

  /** The index in the held events of the first one after position `seq`. */
  private indexAfter(seq: number): number {
    let lo = 0;
    let hi = this.events.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.events[mid]!.seq <= seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Whether every event after `afterSeq` is held (a read of the whole log from there is complete). */
  holdsAfter(afterSeq: number): boolean {
    return afterSeq >= this.floorSeq;
  }

  /** Held events after `afterSeq` up to `toSeq`, in position order; throws PagedOutError when some were paged out. */
  *after(afterSeq: number, toSeq = Number.MAX_SAFE_INTEGER): IterableIterator<RecordedEvent> {
    if (!this.holdsAfter(afterSeq)) throw new PagedOutError({ afterSeq, floor: this.floorSeq });
    for (let i = this.indexAfter(afterSeq); i < this.events.length && this.events[i]!.seq <= toSeq; i++)
      yield this.events[i]!;
  }

  /** Up to `limit` held events after `afterSeq` (see after()). */
  slice(afterSeq: number, limit?: number): RecordedEvent[] {
    if (!this.holdsAfter(afterSeq)) throw new PagedOutError({ afterSeq, floor: this.floorSeq });
    const from = this.indexAfter(afterSeq);
    return this.events.slice(from, limit !== undefined && limit >= 0 ? from + limit : undefined);
  }
}
