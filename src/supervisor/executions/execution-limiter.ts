// How many executions run at once on this host: the operator policy's `executions.maxRunning`. One over it waits
// in line (first come, first served) with its deadline running, and is refused when the line is full
// (EXECUTION_QUEUE_FULL) or when its deadline passes before a place frees (EXECUTION_QUEUE_TIMEOUT). Nothing is
// appended for a refused one: it never became an execution. Without the bound 24 concurrent calls made 24 sandboxes
// at once, each with the memory and pids its limits reserve.
import type { Clock } from '../../domain/clock.ts';
import { RunlogError } from '../../domain/errors.ts';

export interface ExecutionLimits {
  /** Executions running at once (from `execution.requested` to their outcome). */
  maxRunning: number;
  /** Executions waiting for a place; one more is refused at once. */
  maxQueued: number;
}

/** The line of executions waiting for a place is full: nothing was started (HTTP 503; retry later). */
export class ExecutionQueueFullError extends RunlogError {
  constructor(limits: ExecutionLimits) {
    super(
      'EXECUTION_QUEUE_FULL',
      `${limits.maxRunning} executions are running and ${limits.maxQueued} waiting ` +
        `(the operator policy's executions.maxRunning and maxQueued); retry later`,
      { ...limits },
    );
  }
}

/** The execution's deadline passed while it waited for a place: it never started (HTTP 504). */
export class ExecutionQueueTimeoutError extends RunlogError {
  constructor(waitedMs: number, maxRunning: number) {
    super(
      'EXECUTION_QUEUE_TIMEOUT',
      `the execution's deadline passed after ${waitedMs} ms waiting for one of the ${maxRunning} places ` +
        '(executions.maxRunning); it never started',
      { waitedMs, maxRunning },
    );
  }
}

interface Waiter {
  /** Takes the place handed over. */
  admit(): void;
}

export class ExecutionLimiter {
  private active = 0;
  private readonly line: Waiter[] = [];

  constructor(
    private readonly limits: ExecutionLimits,
    private readonly clock: Clock,
  ) {}

  /** Executions holding a place now. */
  get running(): number {
    return this.active;
  }

  /** Executions waiting for one. */
  get queued(): number {
    return this.line.length;
  }

  /**
   * Runs `fn` once a place is free, before `deadlineMs` (epoch ms on the limiter's clock), and frees the place when
   * it settles. `fn` is given the ms left until the deadline. Throws ExecutionQueueFullError at once when the line
   * is full, ExecutionQueueTimeoutError when the deadline passes first (fn is then never called).
   */
  async run<T>(deadlineMs: number, fn: (leftMs: number) => Promise<T>): Promise<T> {
    await this.acquire(deadlineMs);
    try {
      return await fn(Math.max(1, deadlineMs - this.clock.nowMs()));
    } finally {
      this.release();
    }
  }

  private acquire(deadlineMs: number): Promise<void> {
    if (this.active < this.limits.maxRunning && this.line.length === 0) {
      this.active += 1;
      return Promise.resolve();
    }
    if (this.line.length >= this.limits.maxQueued) return Promise.reject(new ExecutionQueueFullError(this.limits));
    const since = this.clock.nowMs();
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        admit: () => {
          cancel();
          resolve();
        },
      };
      // Left in line past its deadline: taken out, refused; the place it would have had goes to the next one.
      const cancel = this.clock.after(Math.max(0, deadlineMs - since), () => {
        const at = this.line.indexOf(waiter);
        if (at < 0) return;
        this.line.splice(at, 1);
        reject(new ExecutionQueueTimeoutError(this.clock.nowMs() - since, this.limits.maxRunning));
      });
      this.line.push(waiter);
    });
  }

  /** A place freed: handed straight to the first in line (so `running` never exceeds the bound), else given back. */
  private release(): void {
    const next = this.line.shift();
    if (next) next.admit();
    else this.active -= 1;
  }
}
