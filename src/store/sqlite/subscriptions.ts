// Subscriptions to a SQLite log: each subscriber drains from its own cursor when woken. This process's commits wake
// them at once; other processes' commits are noticed through PRAGMA data_version, polled while anyone listens.
import type { RecordedEvent } from '../../domain/events.ts';
import type { ReadAllOptions, SubscribeOptions } from './engine-types.ts';
import type { Database } from './driver.ts';

export class SqliteSubscriptions {
  private readonly subscribers = new Set<() => void>();
  private pollTimer: NodeJS.Timeout | undefined;
  private lastDataVersion = 0;

  constructor(
    private readonly dataVersion: Database.Statement<[], { data_version: number }>,
    private readonly readAll: (options: ReadAllOptions) => RecordedEvent[],
    private readonly lastSeq: () => number,
    private readonly isClosed: () => boolean,
  ) {}

  subscribe(options: SubscribeOptions, handler: (event: RecordedEvent) => void): () => void {
    let cursor = options.afterSeq ?? this.lastSeq();
    let draining = false;
    const drain = (): void => {
      if (draining || this.isClosed()) return;
      draining = true;
      try {
        for (;;) {
          const batch = this.readAll({ afterSeq: cursor, limit: 500 });
          if (batch.length === 0) break;
          for (const e of batch) {
            cursor = e.seq;
            if (!options.stream || e.stream === options.stream) handler(e);
          }
        }
      } finally {
        draining = false;
      }
    };
    this.subscribers.add(drain);
    this.ensurePolling(options.pollMs ?? 200);
    queueMicrotask(drain);
    return () => {
      this.subscribers.delete(drain);
      if (this.subscribers.size === 0 && this.pollTimer) {
        clearInterval(this.pollTimer);
        this.pollTimer = undefined;
      }
    };
  }

  /** Other processes' commits are noticed through PRAGMA data_version, which changes only when they write. */
  private ensurePolling(pollMs: number): void {
    if (this.pollTimer) return;
    this.lastDataVersion = this.dataVersion.get()!.data_version;
    this.pollTimer = setInterval(() => {
      if (this.isClosed()) return;
      const v = this.dataVersion.get()!.data_version;
      if (v !== this.lastDataVersion) {
        this.lastDataVersion = v;
        this.notify();
      }
    }, pollMs);
    this.pollTimer.unref();
  }

  notify(): void {
    if (this.subscribers.size === 0) return;
    queueMicrotask(() => {
      for (const s of this.subscribers) s();
    });
  }

  /** Stops polling and forgets every subscriber (the store closes). */
  close(): void {
    if (this.pollTimer) clearInterval(this.pollTimer);
    this.subscribers.clear();
  }
}
