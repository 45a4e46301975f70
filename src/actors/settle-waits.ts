// Callers waiting for an actor to settle (a spawn to be running, a stop to be done, an execution to end), each
// with its deadline timer. Closing the supervisor ends every wait still open with HOST_CLOSED: the actors will
// not move any more in this process, and a deadline timer left armed would hold a stopped supervisor alive
// until it fired (a spawn's is a minute).
import { RunlogError } from '../domain/errors.ts';
import { streamName, type ActorKind } from '../domain/events.ts';
import { stateName } from '../machines/runtime.ts';
import type { HostStore } from '../store/host-store.ts';
import type { ActorHost } from './actor-host.ts';
import type { Bus } from './bus.ts';
import { inspectActor, type ActorView } from './inspection.ts';

export class SettleWaits {
  private readonly open = new Set<(err: Error) => void>();
  private readonly closing = new AbortController();

  constructor(private readonly o: { bus: Bus; host: () => ActorHost; store: HostStore }) {}

  /** Aborted when the supervisor closes (for waits that keep their own timers: a queued execution's). */
  get signal(): AbortSignal {
    return this.closing.signal;
  }

  /**
   * Resolves when the actor reaches a state the predicate accepts (checked after every transition). Armed before
   * the event that starts the wait is sent (so no transition is missed), it MUST be either awaited or cancelled:
   * waitFor does both, so a send that throws never leaves a timer that rejects later with nobody listening (an
   * unhandled rejection ends the process).
   */
  async waitFor<T>(kind: ActorKind, id: string, done: (state: string) => boolean, timeoutMs: number, send: () => Promise<T>): Promise<ActorView> {
    const { bus, store } = this.o;
    if (this.closing.signal.aborted) throw closed(kind, id);
    let cancel = (): void => undefined;
    const settled = new Promise<ActorView>((resolve, reject) => {
      const finish = () => {
        clearTimeout(timer);
        off();
        this.open.delete(end);
      };
      const end = (err: Error) => {
        finish();
        reject(err);
      };
      const timer = setTimeout(() => {
        // Only what is in memory (a timer cannot wait for a paged-out history): the row says an ended one's state.
        const host = this.o.host();
        const a = host.holds(streamName(kind, id)) ? host.get(kind, id) : undefined;
        end(new RunlogError('TIMEOUT', `${kind} ${id} did not settle within ${timeoutMs} ms (state ${a ? stateName(a.snapshot) : (store.getActor(id)?.state ?? '?')})`));
      }, timeoutMs);
      const off = bus.on('actor:transition', (t) => {
        if (t.id !== id || !done(t.to)) return;
        finish();
        resolve(inspectActor(store, id));
      });
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
    const a = await this.o.host().fetch(kind, id);
    // Settled already (an ended actor has left the host: its state is read from the log).
    if (a ? done(stateName(a.snapshot)) : done(inspectActor(store, id).state)) {
      cancel();
      return inspectActor(store, id);
    }
    return settled;
  }

  /** Ends every open wait with HOST_CLOSED and refuses new ones. */
  close(): void {
    this.closing.abort();
    for (const end of [...this.open]) end(new RunlogError('HOST_CLOSED', 'the supervisor is shutting down: this wait ended before the actor settled'));
  }
}

const closed = (kind: ActorKind, id: string) => new RunlogError('HOST_CLOSED', `the supervisor is shutting down: not waiting for ${kind} ${id}`);
