// Callers waiting for an actor to settle (a spawn to be running, a stop to be done, an execution to end), each
// with its deadline timer. The wait follows the log, not only this node's bus: in a cluster another node may
// settle the actor (it took the lease over mid-spawn and restarted the instance), and the caller is answered
// with what the log says — a TIMEOUT only when the log, read again at the deadline, says the actor has not
// settled. Closing the supervisor ends every wait still open with HOST_CLOSED: the actors will not move any more
// in this process, and a deadline timer left armed would hold a stopped supervisor alive until it fired (a
// spawn's is a minute).
import { RunlogError } from '../../domain/errors.ts';
import { streamName, type ActorKind } from '../../domain/events.ts';
import type { EventStorePort, Subscription } from '../../store/port.ts';
import type { Bus } from './bus.ts';
import { inspectActor, type ActorView } from '../../inspect/inspection.ts';
import type { SettleRule } from './settle-rules.ts';

export { byState, executionEnded, instanceStopped, spawnSettled, type SettleRule } from './settle-rules.ts';

export interface SettleWaitsDeps {
  bus: Bus;
  store: EventStorePort;
  /**
   * Follow the actor's stream in the log as well as the bus (a cluster's log: other nodes append to it). Off on
   * SQLite, where this supervisor is the only writer and its bus hears every transition.
   */
  followLog: boolean;
}

export class SettleWaits {
  private readonly open = new Set<(err: Error) => void>();
  private readonly closing = new AbortController();
  /** Subscriptions of ended waits still closing (close() waits for them). */
  private readonly unsubscribing = new Set<Promise<void>>();

  constructor(private readonly o: SettleWaitsDeps) {}

  /** Aborted when the supervisor closes (for waits that keep their own timers: a queued execution's). */
  get signal(): AbortSignal {
    return this.closing.signal;
  }

  /**
   * Resolves when the log shows the actor in a state the rule accepts (looked at after every transition here and,
   * on a cluster, every event any node appends to its stream). Armed before the event that starts the wait is
   * sent (so no transition is missed), it MUST be either awaited or cancelled: waitFor does both, so a send that
   * throws never leaves a timer that rejects later with nobody listening (an unhandled rejection ends the process).
   */
  async waitFor<T>(
    kind: ActorKind,
    id: string,
    done: SettleRule,
    timeoutMs: number,
    send: () => Promise<T>,
  ): Promise<ActorView> {
    const { bus, store } = this.o;
    if (this.closing.signal.aborted) throw closed(kind, id);
    const stream = streamName(kind, id);
    // The log's head before anything is sent: the stream is followed from the next position on, so nothing the
    // send (or another node) appends can fall between the read and the subscription.
    const head = this.o.followLog ? await store.lastSeq() : 0;
    if (this.closing.signal.aborted) throw closed(kind, id);
    let cancel = (): void => undefined;
    const settled = new Promise<ActorView>((resolve, reject) => {
      let over = false;
      let sub: Subscription | null = null;
      const finish = () => {
        over = true;
        clearTimeout(timer);
        offBus();
        if (sub) this.unsubscribe(sub);
        sub = null;
        this.open.delete(end);
      };
      const end = (err: Error) => {
        if (over) return;
        finish();
        reject(err);
      };
      const judge = (view: ActorView | undefined) => {
        if (over || !view || !done(view)) return;
        finish();
        resolve(view);
      };
      const timer = setTimeout(() => {
        // The log read once more: a TIMEOUT only for what did not happen.
        void this.reread(kind, id).then(async (view) => {
          judge(view);
          const state = view?.state ?? (await store.getActor(id).catch(() => undefined))?.state ?? '?';
          end(new RunlogError('TIMEOUT', `${kind} ${id} did not settle within ${timeoutMs} ms (state ${state})`));
        });
      }, timeoutMs);
      const offBus = bus.on('actor:transition', (t) => {
        if (t.id === id && t.kind === kind && !over) void this.read(id).then(judge);
      });
      if (this.o.followLog) {
        sub = store.subscribe({ from: head + 1, stream }, async (e) => {
          if (e.stream === stream && !over) judge(await this.read(id));
        });
      }
      this.open.add(end);
      cancel = finish;
    });
    // Closing may end it while `send` is still on its way (and then throws): handled here, still seen by the caller.
    settled.catch(() => undefined);
    try {
      await send();
    } catch (err) {
      cancel(); // `settled` never settles now: nothing holds it, nothing can reject unhandled
      throw err;
    }
    // Settled already (by this node or another): the log says so.
    const now = await this.reread(kind, id);
    if (now && done(now)) {
      cancel();
      return now;
    }
    return settled;
  }

  /** The actor as the log has it now; undefined when it cannot be read (not recorded yet). */
  reread(_kind: ActorKind, id: string): Promise<ActorView | undefined> {
    return this.read(id);
  }

  private async read(id: string): Promise<ActorView | undefined> {
    try {
      return await inspectActor(this.o.store, id);
    } catch {
      return undefined; // not recorded yet, or the store is briefly unreachable (the next look reads it again)
    }
  }

  /** Closes an ended wait's subscription (not awaited by the wait: its handler may be the one ending it). */
  private unsubscribe(sub: Subscription): void {
    const closing: Promise<void> = sub
      .close()
      .catch(() => undefined)
      .finally(() => this.unsubscribing.delete(closing));
    this.unsubscribing.add(closing);
  }

  /** Ends every open wait with HOST_CLOSED, refuses new ones, and resolves once their subscriptions are closed. */
  async close(): Promise<void> {
    this.closing.abort();
    for (const end of [...this.open])
      end(new RunlogError('HOST_CLOSED', 'the supervisor is shutting down: this wait ended before the actor settled'));
    await Promise.all([...this.unsubscribing]);
  }
}

const closed = (kind: ActorKind, id: string) =>
  new RunlogError('HOST_CLOSED', `the supervisor is shutting down: not waiting for ${kind} ${id}`);
