// One in-flight read shared by the executions that ask for the same thing at the same moment (a burst of calls of
// one code each resolve the same code record, runtime record and alias). Strict resolution per run stays the
// contract: a caller joins only a read that STARTED after the caller's own submission, so the answer it
// gets was fetched entirely after it asked — exactly what a read of its own could have returned. A read that
// began before the caller was submitted is never joined (a record changed in between must not be served from it),
// and nothing is kept once a read settles: this is not a cache.
//
// Deadlines: a read runs under its starter's deadline. A caller joins only a read whose deadline is no later than
// its own (it never waits past its own deadline for someone else's read); if that read then fails for want of
// time (`retryable`) while the caller still has time, the caller reads on its own.

export interface FreshFlightOptions {
  /** Failures that belong to the starter's deadline, not to the thing read (a timeout): a joiner reads again. */
  retryable?: (err: unknown) => boolean;
  /** Epoch ms now (the same clock the submission times come from). */
  nowMs?: () => number;
}

interface Flight<T> {
  startedAt: number;
  deadlineAt: number;
  promise: Promise<T>;
}

export class FreshFlight<T> {
  readonly #flights = new Map<string, Flight<T>[]>();
  readonly #retryable: (err: unknown) => boolean;
  readonly #now: () => number;
  /** Reads started and reads joined (for the latency notes and tests). */
  started = 0;
  joined = 0;

  constructor(opts: FreshFlightOptions = {}) {
    this.#retryable = opts.retryable ?? (() => false);
    this.#now = opts.nowMs ?? Date.now;
  }

  /**
   * `read()`'s answer for `key`, from a read started after `submittedAt` (a later epoch ms: both are whole ms, so
   * a read begun in the submission's own millisecond is not joined) whose deadline is no later than
   * `deadlineAt`: one in flight that qualifies, or a new one. `key` must name everything the read depends on.
   */
  async run(key: string, submittedAt: number, deadlineAt: number, read: () => Promise<T>): Promise<T> {
    const joinable = Number.isFinite(submittedAt)
      ? this.#flights.get(key)?.find((f) => f.startedAt > submittedAt && f.deadlineAt <= deadlineAt)
      : undefined;
    if (!joinable) return this.#start(key, deadlineAt, read);
    this.joined += 1;
    try {
      return await joinable.promise;
    } catch (err) {
      if (!this.#retryable(err) || joinable.deadlineAt >= deadlineAt || this.#now() >= deadlineAt) throw err;
      return this.#start(key, deadlineAt, read);
    }
  }

  /** Reads in flight (all keys). */
  get size(): number {
    let n = 0;
    for (const list of this.#flights.values()) n += list.length;
    return n;
  }

  #start(key: string, deadlineAt: number, read: () => Promise<T>): Promise<T> {
    this.started += 1;
    const flight: Flight<T> = { startedAt: this.#now(), deadlineAt, promise: Promise.resolve().then(read) };
    const list = this.#flights.get(key) ?? [];
    list.push(flight);
    this.#flights.set(key, list);
    const forget = () => {
      const now = this.#flights.get(key)?.filter((f) => f !== flight) ?? [];
      if (now.length) this.#flights.set(key, now);
      else this.#flights.delete(key);
    };
    flight.promise.then(forget, forget);
    return flight.promise;
  }
}
