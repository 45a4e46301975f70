// When the pool's next sandbox may be started, and whether it may be at all.
//
// A pre-start is speculative work: while a burst of executions waits for the daemon and the cores, starting
// sandboxes for calls that have not come competes with the ones that have. So a pre-start asked for while `busy`
// or more executions are unanswered waits (one per pool key: the newest target) and starts once fewer are; one
// call at a time (or two overlapping) pre-starts at once, as before.
//
// A pre-started sandbox runs its runtime's launcher before any envelope arrives, and a launcher can load code
// its author chose (`--import=<file in the code>`): that runs while the sandbox idles, charged to no execution.
// So only a runtime whose publisher the operator trusts (policy `prestart.publishers`, empty by default) is
// pre-started; any other target is dropped here and counted in `untrusted`, and its next execution creates and
// starts its own sandbox after the envelope is ready, as without a pool. A trusted runtime is still held to the
// pool's CPU bound while it waits (`prestart.idleCpuMs`, sandbox-pool.ts), and its CPU is accounted there.

export const PRESTART_BUSY = 2;

export interface PrestartGateOptions {
  /** Whether a runtime by this publisher (DID) may be started ahead of a request (operator-policy mayPrestart). */
  trusts(publisher: string): boolean;
  /** Unanswered executions at which pre-starts wait. */
  busy?: number;
}

export class PrestartGate<T extends { key: string; publisher: string }> {
  /** Executions resolving, materializing or running: requested, not yet answered. */
  readonly #unanswered = new Set<string>();
  readonly #deferred = new Map<string, T>();
  readonly #trusts: (publisher: string) => boolean;
  readonly #busy: number;
  #untrusted = 0;

  constructor(
    private readonly start: (target: T) => void,
    opts: PrestartGateOptions,
  ) {
    this.#trusts = opts.trusts;
    this.#busy = opts.busy ?? PRESTART_BUSY;
  }

  /** Pre-starts waiting for the burst to end. */
  get deferred(): number {
    return this.#deferred.size;
  }

  /** Pre-starts refused because the runtime's publisher is not trusted to pre-start. */
  get untrusted(): number {
    return this.#untrusted;
  }

  /** An execution began (its resolution). */
  begin(executionId: string): void {
    this.#unanswered.add(executionId);
  }

  /** An execution answered: the next sandbox for it (if any, and trusted) starts now, or once the burst ends. */
  answered(executionId: string, target?: T): void {
    this.#unanswered.delete(executionId);
    if (target && this.#trusts(target.publisher)) this.#deferred.set(target.key, target);
    else if (target) this.#untrusted += 1;
    this.#flush();
  }

  /** An execution ended without answering (failed before its sandbox ran, cancelled): it no longer counts. */
  ended(executionId: string): void {
    if (this.#unanswered.delete(executionId)) this.#flush();
  }

  #flush(): void {
    if (this.#unanswered.size >= this.#busy || this.#deferred.size === 0) return;
    const targets = [...this.#deferred.values()];
    this.#deferred.clear();
    for (const target of targets) this.start(target);
  }
}
