// When the pool's next sandbox may be started. A pre-start is speculative work: while a burst of executions waits
// for the daemon and the cores, starting sandboxes for calls that have not come competes with the ones that have.
// So a pre-start asked for while `busy` or more executions are unanswered waits (one per pool key: the newest
// target) and starts once fewer are; one call at a time (or two overlapping) pre-starts at once, as before.

export const PRESTART_BUSY = 2;

export class PrestartGate<T extends { key: string }> {
  /** Executions resolving, materializing or running: requested, not yet answered. */
  readonly #unanswered = new Set<string>();
  readonly #deferred = new Map<string, T>();

  constructor(
    private readonly start: (target: T) => void,
    private readonly busy = PRESTART_BUSY,
  ) {}

  /** Pre-starts waiting for the burst to end. */
  get deferred(): number {
    return this.#deferred.size;
  }

  /** An execution began (its resolution). */
  begin(executionId: string): void {
    this.#unanswered.add(executionId);
  }

  /** An execution answered: the next sandbox for it (if any) starts now, or once the burst ends. */
  answered(executionId: string, target?: T): void {
    this.#unanswered.delete(executionId);
    if (target) this.#deferred.set(target.key, target);
    this.#flush();
  }

  /** An execution ended without answering (failed before its sandbox ran, cancelled): it no longer counts. */
  ended(executionId: string): void {
    if (this.#unanswered.delete(executionId)) this.#flush();
  }

  #flush(): void {
    if (this.#unanswered.size >= this.busy || this.#deferred.size === 0) return;
    const targets = [...this.#deferred.values()];
    this.#deferred.clear();
    for (const target of targets) this.start(target);
  }
}
