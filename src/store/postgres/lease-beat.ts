// A cluster node's beat (every ttl/3): renew its leases, give back ended actors', take over expired ones once the
// copy of the log has caught up, and adopt leases it holds but does not run (a claim whose reply was lost).
import { FencedError } from '../../domain/errors.ts';
import type { LeaseListener } from '../capabilities.ts';
import type { StreamAppend, StreamAppendOutcome } from '../port.ts';
import { leasesToPickUp } from './lease-pickup.ts';
import type { Leases } from './leases.ts';

/** The streams that are actors' (leased to one node at a time). */
export const ACTOR_STREAM = /^(instance|execution)-/;

/** Every how many beats (a beat is ttl/3) the node looks for leases it holds but does not run. */
const PICKUP_EVERY_BEATS = 3;

export class LeaseBeat {
  /** Ended actors' streams whose leases go back at the next beat. */
  readonly ending = new Set<string>();
  /** Streams whose claim (a new actor's lease, in its first event's transaction) is on its way to PostgreSQL. */
  readonly claiming = new Set<string>();
  /** Look for leases held but not run at the next beat (PostgreSQL answered again, or a lost reply was found committed). */
  pickupDue = false;
  private timer: NodeJS.Timeout | undefined;
  private listener: LeaseListener | undefined;
  private beating = false;
  private beats = 0;

  constructor(
    readonly leases: Leases,
    /** Reads what other nodes committed into the copy (before a taken or adopted lease's actor is run). */
    private readonly catchUp: () => Promise<void>,
    private readonly isClosed: () => boolean,
  ) {}

  /** Starts beating: renew this node's leases, give back ended actors', take over expired ones (every ttl/3). */
  start(listener: LeaseListener): void {
    if (this.timer) return;
    this.listener = listener;
    this.timer = setInterval(() => void this.beat(), Math.max(50, Math.floor(this.leases.ttlMs / 3)));
    this.timer.unref();
  }

  /** One beat now (the timer's, or a caller's). */
  async beat(): Promise<void> {
    const leases = this.leases;
    if (this.beating || this.isClosed()) return;
    this.beating = true;
    try {
      const lost = await leases.renew();
      if (lost.length > 0) this.listener?.lost(lost);
      if (this.ending.size > 0) {
        const done = [...this.ending];
        this.ending.clear();
        await leases.release(done);
      }
      const taken = await leases.takeExpired();
      if (taken.length > 0) {
        // What the previous owner committed is read before the new owner decides anything.
        await this.catchUp();
        this.listener?.taken(taken);
      }
      if (this.pickupDue || (this.beats += 1) % PICKUP_EVERY_BEATS === 0) await this.pickUp();
    } catch {
      // PostgreSQL unreachable: the next beat tries again (a lease not renewed in time is lost, and fenced), and
      // looks for claims whose reply was lost as soon as it answers.
      this.pickupDue = true;
    } finally {
      this.beating = false;
    }
  }

  /**
   * Leases this node holds in PostgreSQL whose actors its host does not run (lease-pickup.ts) are adopted, the
   * copy catches up (their first events), and the listener rehydrates them as start-up does.
   */
  private async pickUp(): Promise<void> {
    const leases = this.leases;
    const running = this.listener?.running?.bind(this.listener);
    if (!running || !this.listener?.pickUp) return;
    this.pickupDue = false;
    const orphans = leasesToPickUp({
      leased: await leases.mine(),
      held: leases.held,
      claiming: this.claiming,
      ending: this.ending,
      running,
    });
    if (orphans.length === 0) return;
    const adopted = await leases.adopt(orphans);
    await this.catchUp();
    // A claim answered meanwhile put its actor in the host: that one is running after all.
    const picked = adopted.filter((s) => !this.claiming.has(s) && !running(s));
    if (picked.length > 0) this.listener.pickUp(picked);
  }

  /**
   * Which requests may be sent: a new actor's lease is claimed in its first append's own transaction (lease and
   * first event commit together, so its stream is returned as a claim); a stream whose lease this node does not
   * hold is refused here (its outcome set FENCED); one it holds is checked again in the append's transaction.
   */
  gate(requests: readonly StreamAppend[], outcomes: (StreamAppendOutcome | null)[]): Set<string> {
    const claim = new Set<string>();
    for (const [i, r] of requests.entries()) {
      if (outcomes[i] !== null || !ACTOR_STREAM.test(r.stream) || this.leases.owns(r.stream)) continue;
      const fresh = r.expectedVersion === 'no-stream' || r.expectedVersion === 0;
      if (fresh) claim.add(r.stream);
      else outcomes[i] = { ok: false, error: new FencedError(r.stream, this.leases.node) };
    }
    return claim;
  }

  /** Tells the listener, after the current turn, of leases found taken at append time (it lets go of them). */
  lost(streams: string[]): void {
    queueMicrotask(() => this.listener?.lost(streams));
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }
}
