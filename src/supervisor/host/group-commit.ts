// Group commit: every append the actor host decides in the same turn of the event loop goes to the store in one
// call, so N actors reporting at once cost one transaction (one fsync), not N. Kept apart from the host so the
// batching is one small thing: the host asks for an append and awaits it.
import type { AppendToStreamResult, EventStorePort, StreamAppend, StreamAppendOutcome } from '../../store/port.ts';

interface PendingAppend {
  request: StreamAppend;
  resolve: (result: AppendToStreamResult) => void;
  reject: (error: unknown) => void;
}

export class GroupCommit {
  /** Appends decided in this turn of the event loop, committed together (see commit()). */
  private batch: PendingAppend[] = [];

  constructor(private readonly store: EventStorePort) {}

  /**
   * Group commit: every append decided in the same turn of the event loop (events of different actors: one
   * actor's events wait for each other) goes to disk in one transaction, so N actors reporting at once cost
   * one fsync, not N. Rule 1 holds per event: the promise resolves once the transaction is durable, and only
   * then do its effects start. A version conflict fails only its own append.
   */
  commit(request: StreamAppend): Promise<AppendToStreamResult> {
    return new Promise((resolve, reject) => {
      this.batch.push({ request, resolve, reject });
      if (this.batch.length === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const batch = this.batch;
    this.batch = [];
    const settle = (outcomes: StreamAppendOutcome[]): void =>
      outcomes.forEach((o, i) => (o.ok ? batch[i]!.resolve(o.result) : batch[i]!.reject(o.error)));
    let outcomes: Promise<StreamAppendOutcome[]>;
    try {
      outcomes = this.store.appendMany(batch.map((b) => b.request));
    } catch (err) {
      for (const b of batch) b.reject(err);
      return;
    }
    // The next batch may be sent before this one answers (a store across a network): the store orders them.
    outcomes.then(settle, (err: unknown) => batch.forEach((b) => b.reject(err)));
  }
}
