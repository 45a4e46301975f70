// Executions in a cluster are queued as events and started by whichever live node has room. The node that takes
// the API call appends `execution.queued` to the shared stream `queue-executions`; every node follows that stream
// (its copy of the log) and, while it runs fewer executions than its limit (`runlog serve --exec-limit`), claims
// the oldest one nobody started yet by creating the execution: the execution's lease is taken in the transaction
// of its first event (the PostgreSQL store's claim), so of two nodes claiming it exactly one appends `execution.requested`
// and the other is refused (FENCED) and moves on. The node that took the call gets a head start (it claims at
// once, others only after `headStartMs`), so an execution runs where it was asked for unless that node is full;
// `node: 'any'` gives none, `node: '<name>'` lets only that node claim it. An entry not claimed by its `claimBy`
// time is left alone for good (its caller has answered PLACEMENT_TIMEOUT). An entry its caller withdrew
// (`execution.withdrawn`: it was pinned to a node that is not live, pinned-wait.ts) is not claimed; a claim that
// lands after the withdrawal in log order (its node had not read it yet) is cancelled before it runs.
import { FencedError, RunlogError } from '../../domain/errors.ts';
import type { RecordedEvent } from '../../domain/events.ts';
import type { EventStorePort, Subscription } from '../../store/port.ts';
import { EXECUTION_QUEUE } from '../cluster/request-streams.ts';

export { EXECUTION_QUEUE };
/** How soon a claim that found the store unreachable is tried again. */
const STORE_RETRY_MS = 1000;
export const EXECUTION_QUEUED = 'execution.queued';
export const EXECUTION_WITHDRAWN = 'execution.withdrawn';

/** A withdrawal's data: which entry, why, and until when it could have been claimed (when it may be forgotten). */
export interface WithdrawnExecution {
  executionId: string;
  reason: string;
  claimBy: string;
}

export interface QueuedExecution {
  executionId: string;
  /** The checked request (execution.requested's `request`). */
  request: Record<string, unknown> & { timeoutMs: number };
  /** The node that took the call (its head start). */
  from: string;
  /** Only this node may claim it (null: any node). */
  node: string | null;
  /** Whether the accepting node gets a head start (false for `node: 'any'`). */
  headStart: boolean;
  /** After this time nobody claims it. */
  claimBy: string;
}

export interface ExecutionQueueDeps {
  store: Pick<EventStorePort, 'lastSeq' | 'readRecent' | 'streamVersion' | 'subscribe'>;
  node: string;
  /** How many executions this node runs at once. */
  limit: number;
  headStartMs: number;
  nowMs(): number;
  /** How many executions this node runs now (live ones it holds). */
  running(): number;
  appendFact(stream: string, events: { type: string; data: Record<string, unknown> }[]): Promise<unknown>;
  /** Starts it here: creates the execution (its first event and its lease in one transaction). */
  claim(q: QueuedExecution): Promise<unknown>;
  /** Cancels an execution claimed here after its caller withdrew it (before it runs); absent: never withdrawn. */
  cancel?(executionId: string): Promise<unknown>;
  log(message: string): void;
}

export class ExecutionQueue {
  /** Entries nobody claimed yet, in log order. */
  private readonly pending = new Map<string, QueuedExecution & { queuedAtMs: number }>();
  /** Entries withdrawn by their callers, until their claim-by time has passed. */
  private readonly withdrawn = new Map<string, { claimByMs: number }>();
  private pumping = false;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private sub: Subscription | null = null;
  private stopped = false;

  constructor(private readonly deps: ExecutionQueueDeps) {}

  async enqueue(q: QueuedExecution): Promise<void> {
    await this.deps.appendFact(EXECUTION_QUEUE, [{ type: EXECUTION_QUEUED, data: { ...q } }]);
  }

  /** Withdraws an unclaimed entry (its caller gives up on it): once this resolves, no claim after it runs it. */
  async withdraw(w: WithdrawnExecution): Promise<void> {
    await this.deps.appendFact(EXECUTION_QUEUE, [{ type: EXECUTION_WITHDRAWN, data: { ...w } }]);
  }

  /**
   * Takes the entries still open up to the log's head, then follows the log from the next position on (nothing
   * falls between the two). Resolves once it follows.
   */
  async start(): Promise<void> {
    const { store } = this.deps;
    const head = await store.lastSeq();
    for (const e of await store.readRecent(EXECUTION_QUEUE)) if (e.seq <= head) await this.add(e);
    if (this.stopped) return;
    this.follow(head + 1);
    this.pump();
  }

  /**
   * Follows the log from `from` on. Should the subscription stop (a failure it does not retry), the queue follows
   * again from the event it stopped at, after a pause, and says so: a node that stops following the queue claims
   * nothing more, while its heartbeat still says it is live.
   */
  private follow(from: number): void {
    const sub: Subscription = this.deps.store.subscribe(
      {
        from,
        onError: (err) => {
          if (this.stopped || this.sub !== sub) return;
          const at = sub.position + 1;
          this.deps.log(
            `execution queue: following the log stopped at ${at} (${(err as Error).message}); again in a while`,
          );
          setTimeout(() => {
            if (!this.stopped && this.sub === sub) this.follow(at);
          }, STORE_RETRY_MS).unref();
        },
      },
      async (e) => {
        if (e.stream === EXECUTION_QUEUE) {
          await this.add(e);
          this.pump();
        } else if (e.stream.startsWith('execution-')) this.pending.delete(e.stream.slice('execution-'.length)); // claimed (by anyone)
      },
    );
    this.sub = sub;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    const sub = this.sub;
    this.sub = null;
    await sub?.close();
  }

  /** Claims what fits under the limit (called when something is queued and when an execution here ends). */
  pump(): void {
    if (this.stopped) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    void this.claimWhatFits().finally(() => {
      this.pumping = false;
      if (this.again) {
        this.again = false;
        this.pump();
      }
    });
  }

  private async add(e: RecordedEvent): Promise<void> {
    if (e.type === EXECUTION_WITHDRAWN) {
      // why: events of this type are only ever appended by withdraw() with this shape
      const w = e.data as unknown as WithdrawnExecution;
      this.pending.delete(w.executionId);
      this.withdrawn.set(w.executionId, { claimByMs: Date.parse(w.claimBy) });
      return;
    }
    if (e.type !== EXECUTION_QUEUED) return;
    // why: events of this type are only ever appended by enqueue() with this shape
    const q = e.data as unknown as QueuedExecution;
    if (q.node !== null && q.node !== this.deps.node) return;
    if (!(Date.parse(q.claimBy) > this.deps.nowMs()) || this.withdrawn.has(q.executionId)) return;
    // Claimed already (its stream has events)? Unknown while the store is unreachable: kept, since the claim loop
    // looks again before claiming. Thrown, it would stop this node's subscription to the queue for good.
    const claimed = await this.deps.store.streamVersion(`execution-${q.executionId}`).then(
      (v) => v > 0,
      () => false,
    );
    if (claimed) return;
    // Withdrawn while its stream was looked at (a withdrawal is only ever added by this queue's own handler, but
    // start-up and the claim loop run beside it).
    if (this.withdrawn.has(q.executionId)) return;
    this.pending.set(q.executionId, { ...q, queuedAtMs: Date.parse(e.at) });
  }

  private async claimWhatFits(): Promise<void> {
    try {
      await this.claimLoop();
    } catch (err) {
      // A read of the log failed (the store unreachable): the entries stay queued, looked at again in a while.
      this.deps.log(`execution queue: ${(err as Error).message}`);
      this.wakeIn(STORE_RETRY_MS);
    }
  }

  private wakeIn(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.stopped) return;
    this.timer = setTimeout(() => this.pump(), Math.max(10, ms));
    this.timer.unref();
  }

  private async claimLoop(): Promise<void> {
    const { store, node } = this.deps;
    let wake = Number.POSITIVE_INFINITY;
    for (const [id, w] of this.withdrawn) if (!(w.claimByMs > this.deps.nowMs())) this.withdrawn.delete(id);
    while (!this.stopped && this.deps.running() < this.deps.limit) {
      const now = this.deps.nowMs();
      let next: (QueuedExecution & { queuedAtMs: number }) | undefined;
      for (const q of this.pending.values()) {
        if (!(Date.parse(q.claimBy) > now) || (await store.streamVersion(`execution-${q.executionId}`)) > 0) {
          this.pending.delete(q.executionId);
          continue;
        }
        const opensAt = q.headStart && q.from !== node ? q.queuedAtMs + this.deps.headStartMs : 0;
        if (opensAt <= now) {
          next = q;
          break;
        }
        wake = Math.min(wake, opensAt - now);
      }
      if (!next) break;
      this.pending.delete(next.executionId);
      try {
        const claimed = (await this.deps.claim(next)) as { event?: { seq?: number } } | undefined;
        const seq = claimed?.event?.seq;
        if (seq !== undefined) await this.cancelIfWithdrawn(next.executionId, seq);
      } catch (err) {
        // Another node claimed it first (its lease or its first event is there): that is the queue working.
        const code = err instanceof RunlogError ? err.code : '';
        if (code === 'STORE_UNAVAILABLE') {
          // PostgreSQL restarting: the entry is still queued and its caller still waits; try again in a while
          // (dropping it here left it to no node once every node had tried during the outage).
          this.pending.set(next.executionId, next);
          wake = Math.min(wake, STORE_RETRY_MS);
          break;
        }
        if (!(err instanceof FencedError) && code !== 'ACTOR_EXISTS' && code !== 'CONCURRENCY')
          this.deps.log(`could not start queued execution ${next.executionId}: ${(err as Error).message}`);
      }
    }
    if (Number.isFinite(wake)) this.wakeIn(wake);
    else if (this.timer) clearTimeout(this.timer);
  }

  /**
   * A claim that landed after its caller's withdrawal in log order is cancelled before it runs. The queue is read
   * after the claim committed, so it holds everything before it; a read cut off (the store away) is tried again.
   */
  private async cancelIfWithdrawn(executionId: string, seq: number): Promise<void> {
    if (!this.deps.cancel) return;
    for (let attempt = 0; ; attempt++) {
      let queue: RecordedEvent[];
      try {
        queue = await this.deps.store.readRecent(EXECUTION_QUEUE);
      } catch (err) {
        if (this.stopped || attempt >= 30) throw err;
        await new Promise((r) => setTimeout(r, STORE_RETRY_MS));
        continue;
      }
      if (!withdrawnBefore(queue, executionId, seq)) return;
      this.deps.log(`execution ${executionId} was withdrawn by its caller before this node claimed it: cancelled`);
      await this.deps.cancel(executionId);
      return;
    }
  }
}

/** Whether the queue holds a withdrawal of this execution at a position before `seq` (its claim's). */
export function withdrawnBefore(queue: readonly RecordedEvent[], executionId: string, seq: number): boolean {
  return queue.some(
    (e) =>
      e.type === EXECUTION_WITHDRAWN &&
      e.seq < seq &&
      (e.data as { executionId?: unknown }).executionId === executionId,
  );
}

/**
 * Resolves when the queued execution has ended, followed in the log (whichever node runs it): the log's head is
 * read first and the execution's stream followed from the next position on, then looked at once, so nothing falls
 * between. PLACEMENT_TIMEOUT when no node claimed it by `claimByMs` (a few seconds' slack for a claim already on
 * its way); TIMEOUT when it did not end within `timeoutMs`; HOST_CLOSED when `closing` aborts first (the supervisor
 * stops). A read that fails (the store briefly unreachable) decides nothing: the next event, or the deadline, looks
 * again; the head unread, it is read again until the wait is over.
 */
export function awaitQueued(
  store: Pick<EventStorePort, 'lastSeq' | 'streamVersion' | 'subscribe'>,
  executionId: string,
  ended: () => Promise<boolean>,
  claimByMs: number,
  timeoutMs: number,
  nowMs: () => number,
  closing?: AbortSignal,
): Promise<void> {
  const stream = `execution-${executionId}`;
  return new Promise<void>((resolve, reject) => {
    let over = false;
    let sub: Subscription | null = null;
    const finish = (err?: Error): void => {
      if (over) return;
      over = true;
      clearTimeout(deadline);
      clearTimeout(claimCheck);
      void sub?.close().catch(() => undefined);
      closing?.removeEventListener('abort', onClose);
      if (err) reject(err);
      else resolve();
    };
    const isEnded = async (): Promise<boolean> => (await store.streamVersion(stream)) > 0 && (await ended());
    const check = async (): Promise<void> => {
      if (!over && (await isEnded().catch(() => false))) finish();
    };
    // At the deadline the log is read once more: TIMEOUT only when it says the execution has not ended.
    const deadline = setTimeout(() => {
      void isEnded()
        .catch(() => false)
        .then((done) =>
          finish(
            done
              ? undefined
              : new RunlogError('TIMEOUT', `execution ${executionId} did not end within ${timeoutMs} ms`, {
                  executionId,
                }),
          ),
        );
    }, timeoutMs);
    const claimCheck = setTimeout(
      () => {
        void store.streamVersion(stream).then(
          (v) =>
            v === 0 &&
            finish(
              new RunlogError(
                'PLACEMENT_TIMEOUT',
                `no node with room claimed execution ${executionId} in time (it is not started later)`,
                { executionId },
              ),
            ),
          () => undefined,
        );
      },
      Math.max(0, claimByMs - nowMs()) + 5000,
    );
    const onClose = () =>
      finish(
        new RunlogError('HOST_CLOSED', `the supervisor is shutting down: not waiting for execution ${executionId}`, {
          executionId,
        }),
      );
    if (closing?.aborted) onClose();
    else closing?.addEventListener('abort', onClose, { once: true });
    // The head unread (the store unreachable): read again in a while, as the execution may still end. Following
    // it failing (the store closed meanwhile) is left to the deadline, as no rejection may go unhandled.
    const follow = (): void => {
      void store
        .lastSeq()
        .then(
          async (head) => {
            if (over) return;
            sub = store.subscribe({ from: head + 1, stream }, async (e) => {
              if (e.stream === stream) await check();
            });
            await check();
          },
          () => {
            if (!over) setTimeout(follow, STORE_RETRY_MS).unref();
          },
        )
        .catch(() => undefined);
    };
    follow();
  });
}
