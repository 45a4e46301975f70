// Following a PostgreSQL log: other processes' commits are read into the copy as they are announced (LISTEN/NOTIFY)
// and, as the fallback, at every poll; every eighth poll also reads the nodes' heartbeats and leases again.
import type { PgEventStore } from './event-store.ts';

export class CopyFollower {
  private timer: NodeJS.Timeout | undefined;
  private polling = false;
  private pollAgain = false;
  private unlisten: (() => void) | undefined;
  private polls = 0;

  constructor(
    private readonly pg: PgEventStore,
    /** Reads what other processes committed after the copy's head (in the copy's order of ingestion). */
    private readonly catchUp: () => Promise<void>,
    private readonly refreshNodes: () => Promise<void>,
    private readonly isClosed: () => boolean,
  ) {}

  /** Whether it follows already (a one-shot reader opens without, and starts when it subscribes). */
  get started(): boolean {
    return this.timer !== undefined;
  }

  start(pollMs: number): void {
    this.timer = setInterval(() => void this.poll(), pollMs);
    this.timer.unref();
    this.follow();
  }

  /** Other processes' commits wake the copy at once (LISTEN/NOTIFY); the polling timer stays as the fallback. */
  private follow(): void {
    this.unlisten ??= this.pg.listen(() => {
      if (this.polling)
        this.pollAgain = true; // a commit announced while a look is out: look once more after it
      else void this.poll();
    });
  }

  /** One look at PostgreSQL for other processes' commits (skipped while the last look is still out). */
  async poll(): Promise<void> {
    if (this.polling || this.isClosed()) return;
    this.polling = true;
    try {
      do {
        this.pollAgain = false;
        await this.catchUp();
      } while (this.pollAgain && !this.isClosed());
      if ((this.polls += 1) % 8 === 0) await this.refreshNodes();
    } catch {
      // PostgreSQL briefly unreachable: the next poll tries again (appends report their own errors).
    } finally {
      this.polling = false;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.unlisten?.();
  }
}
