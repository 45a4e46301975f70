// The bookkeeping of one archive run, event by event, the same on every store (sqlite/archive.ts,
// postgres/archive.ts): each archived event's link to the one before it is checked before anything moves, the
// `prev` hash its archive line needs is chosen, and the chain's holes the run will leave are worked out — which
// hole each event ends or extends, and which recorded holes it swallows — with the per-actor seq ranges the
// tombstones keep and the link the archive ends on. Pure: the store reads the neighbours of an event (the events at
// seq - 1 and seq + 1, a recorded hole ending at seq - 1, the next recorded hole) and hands them in.
import { StoreChainError } from '../../domain/errors.ts';
import { GENESIS } from '../chain.ts';

/** An event of the log next to an archived one: its stream (is it archived too?) and its chain hash. */
export interface Neighbour {
  stream: string;
  hash: Buffer;
}

/** What the log holds around an archived event at `seq`. */
export interface EventSurroundings {
  /** The event at seq - 1, if it is in the log. */
  before: Neighbour | undefined;
  /** The hash a recorded hole ending at seq - 1 keeps, if there is one. */
  gapBefore: Buffer | undefined;
  /** The event at seq + 1, if it is in the log. */
  next: Neighbour | undefined;
}

/** A recorded hole (chain_gaps): it runs from `from` to `seq` and keeps the hash of the event at `seq`. */
export interface RecordedGap {
  seq: number;
  from: number;
  hash: Buffer;
}

export interface LedgerEntry {
  /** The link before the event, written on its archive line when that event is not in this archive. */
  prev: Buffer | undefined;
  /**
   * Nothing follows the event in the log and it is not the head: the caller reads the first recorded hole after
   * `seq` and hands it to `gapAfter` (the event may start it).
   */
  needsGapAfter: boolean;
}

export interface ActorRange {
  first: number;
  last: number;
  events: number;
}

export class ArchiveLedger {
  /** The holes this run leaves (their last seq → that event's hash). */
  readonly #holeEnds = new Map<number, Buffer>();
  /** Recorded holes this run swallows (their last seq). */
  readonly #swallowed: number[] = [];
  readonly ranges = new Map<string, ActorRange>();
  events = 0;
  lastSeq = 0;
  lastHash: Buffer = GENESIS;
  #stream = '';
  #version = 0;
  #range: ActorRange = { first: Number.MAX_SAFE_INTEGER, last: 0, events: 0 };

  /**
   * @param where the log, as errors name it
   * @param streams every stream this run archives
   * @param headSeq the log's chain head when the run was planned
   */
  constructor(
    private readonly where: string,
    private readonly streams: ReadonlySet<string>,
    private readonly headSeq: number,
  ) {}

  /** The actor whose events come next, in version order. */
  beginActor(stream: string): void {
    this.#stream = stream;
    this.#version = 0;
    this.#range = { first: Number.MAX_SAFE_INTEGER, last: 0, events: 0 };
  }

  /** The version the next event must follow (the store reads the actor's events from there). */
  get version(): number {
    return this.#version;
  }

  /**
   * One event of the current actor. `hashFrom(prev)` is the event's chain hash recomputed over its stored bytes
   * from the link before it. Throws StoreChainError when the actor skips a version, the event has no hash, the
   * link before it is missing, or its bytes do not match its hash.
   */
  event(
    e: { seq: number; version: number; hash: Buffer | null | undefined },
    around: EventSurroundings,
    hashFrom: (prev: Buffer) => Buffer,
  ): LedgerEntry {
    const stream = this.#stream;
    if (e.version !== this.#version + 1)
      throw new StoreChainError(this.where, e.seq, `${stream} jumps from v${this.#version} to v${e.version}`, {
        stream,
        version: e.version,
      });
    if (!e.hash) throw new StoreChainError(this.where, e.seq, 'the event has no hash', { stream, version: e.version });
    // The link before this event: in the log, in a recorded hole, or genesis. Checked before anything moves.
    const before = e.seq > 1 ? around.before : undefined;
    const prev = e.seq === 1 ? GENESIS : (before?.hash ?? around.gapBefore);
    if (!prev || !hashFrom(prev).equals(e.hash)) {
      throw new StoreChainError(
        this.where,
        e.seq,
        prev ? 'its bytes do not match its hash' : 'the event before it is missing',
        { stream, version: e.version },
      );
    }
    const inArchive = before !== undefined && this.streams.has(before.stream);
    // Which hole this event ends (or extends): the next seq stays in the log, or is the head, or starts an old hole.
    if (around.gapBefore) this.#swallowed.push(e.seq - 1);
    const next = around.next;
    let needsGapAfter = false;
    if (next ? !this.streams.has(next.stream) : e.seq === this.headSeq) this.#holeEnds.set(e.seq, e.hash);
    else if (!next) needsGapAfter = true;
    if (e.seq > this.lastSeq) {
      this.lastSeq = e.seq;
      this.lastHash = e.hash;
    }
    this.#range.first = Math.min(this.#range.first, e.seq);
    this.#range.last = Math.max(this.#range.last, e.seq);
    this.#range.events += 1;
    this.#version = e.version;
    return { prev: inArchive ? undefined : prev, needsGapAfter };
  }

  /** The first recorded hole after an event that asked for it (`needsGapAfter`): the event may start it. */
  gapAfter(seq: number, gap: RecordedGap | undefined): void {
    if (gap && gap.from === seq + 1) this.#holeEnds.set(gap.seq, gap.hash);
  }

  /** The current actor's events are all read: as many as its projection says. */
  endActor(projectedVersion: number): void {
    if (this.#version !== projectedVersion) {
      throw new StoreChainError(
        this.where,
        0,
        `${this.#stream} has ${this.#version} events but its projection says v${projectedVersion}`,
        { stream: this.#stream },
      );
    }
    this.ranges.set(this.#stream, this.#range);
    this.events += this.#range.events;
  }

  /**
   * The chain_gaps changes the removing transaction makes: the recorded holes to delete, and the holes to record
   * (their last seq → its hash; each runs from just after the last event still in the log before its end). A hole
   * this run extended at both ends is deleted and not recorded at its old end: it ends further on now.
   */
  holes(): { swallowed: readonly number[]; ends: ReadonlyMap<number, Buffer> } {
    const ends = new Map(this.#holeEnds);
    for (const g of this.#swallowed) ends.delete(g);
    return { swallowed: [...this.#swallowed], ends };
  }
}
