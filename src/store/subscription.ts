// A subscription over any store that reads by global position: deliver, in order, every event from `from`
// on, exactly once. It only ever asks for positions after the last one delivered, so it is exactly-once as long
// as the store never makes an event visible at a position below one it has already shown (every store here
// guarantees that: SQLite and memory have one writer; PostgreSQL serialises position assignment, see
// postgres/event-store.ts). A handler that throws stops the subscription at that event. A read cut off because the
// store is unreachable (STORE_UNAVAILABLE: PostgreSQL restarting) is tried again from the same position, after a
// pause that grows to RETRY_MAX_MS: long-lived followers (a cluster node's execution queue) must outlive an outage,
// and stopping one silently left its node deaf to the log. With a `stream`, only that stream's events reach the
// handler, and the position still moves past the others (a resumed subscription does not read them again).
import { RunlogError } from '../domain/errors.ts';
import type { RecordedEvent } from '../domain/events.ts';
import type { SubscribeOptions, Subscription } from './port.ts';

export type ReadPage = (from: number, limit: number) => Promise<RecordedEvent[]>;

/** Lets a store wake its subscriptions at once when it commits (otherwise they notice within pollMs). */
export class Wakeups {
  private readonly waiters = new Set<() => void>();
  on(fn: () => void): () => void {
    this.waiters.add(fn);
    return () => this.waiters.delete(fn);
  }
  wake(): void {
    for (const w of [...this.waiters]) w();
  }
}

const PAGE = 500;
/** The longest pause between two reads cut off by an unreachable store. */
export const RETRY_MAX_MS = 2000;

/** Whether a failed read is the store being briefly unreachable (read again), not a fault of the read. */
const unreachable = (err: unknown): boolean => err instanceof RunlogError && err.code === 'STORE_UNAVAILABLE';

export function pollingSubscription(
  read: ReadPage,
  wakeups: Wakeups,
  options: SubscribeOptions,
  handler: (event: RecordedEvent) => void | Promise<void>,
): Subscription {
  let position = (options.from ?? 1) - 1;
  let closed = false;
  let wake: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  const pollMs = options.pollMs ?? 100;
  const stream = options.stream;
  // A commit noticed while the handler is busy is remembered, so the next read is not put off by a poll interval.
  let missed = false;
  const off = wakeups.on(() => (wake ? wake() : (missed = true)));

  /** Waits `ms`, woken early by a commit or by close. */
  const pause = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      wake = () => {
        wake = undefined;
        clearTimeout(timer);
        resolve();
      };
      timer = setTimeout(() => wake?.(), ms);
    });

  /** Waits for the next poll, or not at all when a commit was noticed while the handler was busy. */
  const idle = (): Promise<void> => {
    if (!missed) return pause(pollMs);
    missed = false;
    return Promise.resolve();
  };

  /** The next page; a read cut off by an unreachable store is tried again (null: closed meanwhile). */
  const nextPage = async (): Promise<RecordedEvent[] | null> => {
    for (let failures = 0; ; failures += 1) {
      try {
        return await read(position + 1, PAGE);
      } catch (err) {
        if (!unreachable(err) || closed) throw err;
        await pause(Math.min(RETRY_MAX_MS, Math.max(pollMs, 50) * 2 ** Math.min(failures, 10)));
        if (closed) return null;
      }
    }
  };

  const loop = async (): Promise<void> => {
    while (!closed) {
      missed = false;
      const page = await nextPage();
      if (page === null) return;
      for (const e of page) {
        if (closed) return;
        if (stream === undefined || e.stream === stream) await handler(e);
        position = e.seq;
      }
      if (page.length < PAGE && !closed) await idle();
    }
  };
  const done = loop().catch((err: unknown) => {
    off();
    if (closed) return;
    if (options.onError) options.onError(err);
    else
      process.emitWarning(
        `event-store subscription stopped at position ${position + 1}: ${err instanceof Error ? err.message : String(err)}`,
      );
  });

  return {
    get position() {
      return position;
    },
    async close() {
      closed = true;
      off();
      wake?.();
      await done;
    },
  };
}

/**
 * A store's subscription, held in `open` until closed: a store that closes ends the ones still open, so none of
 * them reads a closed handle. `onClose` runs first (PostgreSQL stops listening for its wake-ups).
 */
export function trackedSubscription(inner: Subscription, open: Set<Subscription>, onClose?: () => void): Subscription {
  const tracked: Subscription = {
    get position() {
      return inner.position;
    },
    close: async () => {
      onClose?.();
      open.delete(tracked);
      await inner.close();
    },
  };
  open.add(tracked);
  return tracked;
}
