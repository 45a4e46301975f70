// A bounded pipeline that prepares items side by side and commits them one at a time, in the order they came.
//
// The job intake's shape: a job's record is fetched with its proof (slow, network) and then recorded (fast, ordered:
// the log, the counters and the rate limiter see the stream's order). Up to `limit` items are held between push()
// and the end of their commit; push() waits while that many are, so the producer stops reading and the lookahead
// stays bounded. A commit that returns false, or stop(), freezes the pipeline: nothing more is committed and the
// items left are abandoned where they stand (their prepares are still waited for, never committed). A prepare that
// rejects fails the pipeline when its item's turn comes, as a throwing commit does, never earlier: what came before
// it is committed first.

export interface OrderedPipelineOptions<T, P> {
  /** At most this many items between push() and the end of their commit (so at most this many prepares at once). */
  limit: number;
  /** Runs as soon as the item is pushed, beside the others. */
  prepare(item: T): Promise<P>;
  /** Runs in push order, one at a time, once the item's prepare is done; false: not committed, stop here. */
  commit(item: T, prepared: P): Promise<boolean>;
  /** Runs after a committed item left the pipeline, before the next commit (the head has moved on). */
  committed?(): Promise<void>;
  /** Called once, when a prepare or a commit threw: the pipeline commits nothing more. */
  failed?(err: unknown): void;
}

interface Slot<T, P> {
  item: T;
  prepared: Promise<P>;
}

export class OrderedPipeline<T, P> {
  private readonly slots: Slot<T, P>[] = [];
  private state: 'open' | 'stopped' | 'failed' = 'open';
  private loop: Promise<void> = Promise.resolve();
  private looping = false;
  private waiters: (() => void)[] = [];

  constructor(private readonly options: OrderedPipelineOptions<T, P>) {
    if (!Number.isSafeInteger(options.limit) || options.limit < 1)
      throw new RangeError(`an ordered pipeline's limit must be a positive integer, not ${options.limit}`);
  }

  /** The items pushed and not yet committed (the one being committed included). */
  get size(): number {
    return this.slots.length;
  }

  /** Whether items are still taken and committed (neither stopped nor failed). */
  get open(): boolean {
    return this.state === 'open';
  }

  /** The oldest item not yet committed. */
  head(): T | undefined {
    return this.slots[0]?.item;
  }

  /** Starts preparing `item` once there is room for it; false when the pipeline stopped or failed meanwhile. */
  async push(item: T): Promise<boolean> {
    while (this.state === 'open' && this.slots.length >= this.options.limit) await this.change();
    if (this.state !== 'open') return false;
    const prepared = Promise.resolve().then(() => this.options.prepare(item));
    prepared.catch(() => undefined); // surfaced when the item's turn comes; abandoned ones are never unhandled
    this.slots.push({ item, prepared });
    if (!this.looping) {
      this.looping = true;
      this.loop = this.commitAll();
    }
    return true;
  }

  /** Resolves once every item pushed is committed, or the pipeline stopped or failed. */
  async drain(): Promise<void> {
    while (this.state === 'open' && this.slots.length > 0) await this.change();
  }

  /** Commits nothing more; resolves once the commit under way and every prepare started have ended. */
  async stop(): Promise<void> {
    if (this.state === 'open') this.state = 'stopped';
    this.wake();
    await this.loop;
    await Promise.allSettled(this.slots.map((s) => s.prepared));
  }

  private async commitAll(): Promise<void> {
    try {
      while (this.state === 'open' && this.slots.length > 0) {
        const { item, prepared } = this.slots[0]!;
        let done: boolean;
        try {
          const value = await prepared;
          if (this.state !== 'open') return;
          done = await this.options.commit(item, value);
        } catch (err) {
          return this.fail(err);
        }
        // Stopped meanwhile, or not committed: the item stays where it is and nothing moves past it.
        if (!done || this.state !== 'open') {
          if (this.state === 'open') this.state = 'stopped';
          this.wake();
          return;
        }
        this.slots.shift();
        this.wake();
        try {
          await this.options.committed?.();
        } catch (err) {
          return this.fail(err);
        }
      }
    } finally {
      this.looping = false;
    }
  }

  private fail(err: unknown): void {
    if (this.state !== 'open') return;
    this.state = 'failed';
    this.wake();
    this.options.failed?.(err);
  }

  /** Resolves at the next change of the slots or the state. */
  private change(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
