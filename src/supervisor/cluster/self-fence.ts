// Self-fencing: a cluster node that cannot renew its leases stops its own instance sandboxes before those leases
// can expire and a survivor starts copies of its own (as Nomad's stop_after_client_disconnect does). A lease whose
// renewal was sent at t lives until t + TTL at least (store/postgres/leases.ts RenewalListener); the node stops
// its sandboxes once SELF_FENCE_FRACTION of the TTL has passed since the later of the last renewal PostgreSQL
// answered and the last renewal the server refused (store/postgres/lease-renewals.ts: refused, it proves the
// server, not the network, down). Time the server is provably down is safe time: nobody can take a lease over
// meanwhile, and a server that starts extends every lease to its start plus the TTL, so a restart of PostgreSQL
// stops nothing if it answers again within the fraction of the TTL after its start. A cut that drops packets
// (timeouts, no answer) proves nothing and fences. The fraction leaves the rest of the TTL for the kills. A node
// frozen as a whole (SIGSTOP, a VM paused) cannot act meanwhile: the first check after it wakes finds the time passed
// and stops them before anything else of it has a turn to use them (README, "Leases and failover").
//
// The sandboxes are killed without a word in the log (the node may not be able to append, and may no longer own
// the instances). Executions are left alone: a survivor never runs one again (it records it failed, lost, after
// the collect grace), so there is no second copy to race with, and a node back in time collects its own.
// When a renewal is answered again (a proof of the server down never lifts a fence) and the node still holds the
// leases, the instances it stopped are running nowhere: a reconcile (`resumed`) records that, and their restart
// policy brings them back. Which leases were taken meanwhile the store's beat finds and reports as lost
// (supervisor/cluster/takeover.ts), before `resumed` runs.
import { performance } from 'node:perf_hooks';
import { provesServerDown } from '../../store/postgres/lease-renewals.ts';
import type { RenewalListener } from '../../store/postgres/leases.ts';

/** After what fraction of the lease TTL without an answered renewal a node stops its own instance sandboxes. */
export const SELF_FENCE_FRACTION = 0.75;

/** How long after the last answered renewal's sending (or the last proof of the server down) a node fences itself. */
export function selfFenceAfterMs(ttlMs: number): number {
  return Math.floor(ttlMs * SELF_FENCE_FRACTION);
}

/** How often the node looks: often enough that the fence lands well inside the margin the fraction leaves. */
export function selfFenceCheckMs(ttlMs: number): number {
  return Math.max(20, Math.min(250, Math.floor(ttlMs / 10)));
}

export type FenceStep = 'none' | 'fence' | 'unfence';

/**
 * What a check does: fence, unfence, or nothing. Pure. `renewedAtMs`: when the last answered renewal was sent;
 * `downAtMs`: when the last renewal whose failure proved the server down was sent (-Infinity: none). The fence
 * falls SELF_FENCE_FRACTION of the TTL after the later of the two; only an answered renewal lifts it (the server
 * seen down says nothing of what happened to the leases while the node was fenced).
 */
export function fenceStep(s: {
  nowMs: number;
  renewedAtMs: number;
  downAtMs?: number;
  ttlMs: number;
  fenced: boolean;
}): FenceStep {
  const after = selfFenceAfterMs(s.ttlMs);
  if (!s.fenced) return s.nowMs - Math.max(s.renewedAtMs, s.downAtMs ?? -Infinity) >= after ? 'fence' : 'none';
  return s.nowMs - s.renewedAtMs < after ? 'unfence' : 'none';
}

export interface SelfFenceDeps {
  ttlMs: number;
  /** A monotonic clock in ms (default performance.now: wall-clock steps neither fence nor unfence). */
  nowMs?: () => number;
  /** Instances with a sandbox on this node (running, or being created). */
  sandboxed(): string[];
  /** Kills the instance's sandbox here, silently (instances.ts relinquish). */
  relinquish(instanceId: string): Promise<void>;
  /** Renewals are answered again: what the fence stopped is recorded (a reconcile). */
  resumed(): void;
  log(message: string): void;
}

export class SelfFence {
  private readonly nowMs: () => number;
  private renewedAtMs: number;
  private downAtMs = -Infinity;
  private fenced = false;
  private timer: NodeJS.Timeout | undefined;
  /** Kills under way (a check while fenced does not ask again). */
  private readonly stopping = new Set<string>();

  /** `since`: when the leases were last set to live a TTL (the store's start), on the same clock. */
  constructor(
    private readonly deps: SelfFenceDeps,
    since?: number,
  ) {
    this.nowMs = deps.nowMs ?? (() => performance.now());
    this.renewedAtMs = since ?? this.nowMs();
  }

  get isFenced(): boolean {
    return this.fenced;
  }

  /** A renewal sent at `sentAtMs` was answered. */
  renewed(sentAtMs: number): void {
    this.renewedAtMs = Math.max(this.renewedAtMs, sentAtMs);
    this.check();
  }

  /** A renewal sent at `sentAtMs` failed with `err`: if that proves the server down, the time counts as safe. */
  renewalFailed(sentAtMs: number, err: unknown): void {
    if (provesServerDown(err)) this.serverDown(sentAtMs);
  }

  /** A renewal sent at `sentAtMs` found the server down. */
  serverDown(sentAtMs: number): void {
    this.downAtMs = Math.max(this.downAtMs, sentAtMs);
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.check(), selfFenceCheckMs(this.deps.ttlMs));
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One look (the timer's; exposed for tests). */
  check(): void {
    const now = this.nowMs();
    const step = fenceStep({
      nowMs: now,
      renewedAtMs: this.renewedAtMs,
      downAtMs: this.downAtMs,
      ttlMs: this.deps.ttlMs,
      fenced: this.fenced,
    });
    if (step === 'fence') {
      this.fenced = true;
      const down =
        this.downAtMs > this.renewedAtMs ? `, PostgreSQL last seen down ${Math.round(now - this.downAtMs)} ms ago` : '';
      this.deps.log(
        `self-fence: no lease renewal answered for ${Math.round(now - this.renewedAtMs)} ms${down} (lease TTL ${this.deps.ttlMs} ms): ` +
          `stopping this node's instance sandboxes before its leases can expire and another node runs them`,
      );
    } else if (step === 'unfence') {
      this.fenced = false;
      this.deps.log('self-fence: lease renewals are answered again: what was stopped is reconciled');
      // After the beat that renewed has reported the leases it found taken (they are let go of, not reconciled).
      setImmediate(() => this.deps.resumed());
    }
    if (!this.fenced) return;
    // Every look while fenced: a sandbox whose spawn ended meanwhile is stopped too.
    for (const id of this.deps.sandboxed()) {
      if (this.stopping.has(id)) continue;
      this.stopping.add(id);
      void this.deps
        .relinquish(id)
        .catch((err: unknown) => this.deps.log(`self-fence: stopping ${id}: ${(err as Error).message}`))
        .finally(() => this.stopping.delete(id));
    }
  }
}

/**
 * Hands a store's renewal reports (given to Leases when the store opens) to the self-fence that starts later,
 * once the node's instances exist. What arrives before is kept: the latest answer and the latest proof of the
 * server down.
 */
export class RenewalRelay implements RenewalListener {
  private target: SelfFence | null = null;
  private answeredAtMs = -Infinity;
  private downAtMs = -Infinity;

  answered(sentAtMs: number): void {
    if (this.target) this.target.renewed(sentAtMs);
    else this.answeredAtMs = Math.max(this.answeredAtMs, sentAtMs);
  }

  failed(sentAtMs: number, err: unknown): void {
    if (this.target) this.target.renewalFailed(sentAtMs, err);
    else if (provesServerDown(err)) this.downAtMs = Math.max(this.downAtMs, sentAtMs);
  }

  /** From now on reports go to `fence` (null: nowhere); what came before is handed over first. */
  connect(fence: SelfFence | null): void {
    this.target = fence;
    if (!fence) return;
    if (this.downAtMs > -Infinity) fence.serverDown(this.downAtMs);
    if (this.answeredAtMs > -Infinity) fence.renewed(this.answeredAtMs);
    this.answeredAtMs = this.downAtMs = -Infinity;
  }
}

/**
 * A cluster node's self-fence, fed by its store's lease renewals (through `renewals`, the listener its leases were
 * given) and started. `ttlMs`: the node's lease TTL. `since`: a time (on performance.now's clock) no later than
 * when the node's leases were last set to live a TTL, e.g. before the store was opened (it reclaims them);
 * `leastLeftMs` asks the server once how long the node's leases have left (null: it holds none), which is closer to
 * the truth (the store's open may take a while), so a slow start does not fence a node whose leases are fresh.
 * Returns its stop.
 */
export function startSelfFence(
  ttlMs: number,
  renewals: RenewalRelay,
  deps: Omit<SelfFenceDeps, 'nowMs' | 'ttlMs'>,
  since: number,
  leastLeftMs?: () => Promise<number | null>,
): () => void {
  const fence = new SelfFence({ ...deps, ttlMs }, since);
  renewals.connect(fence);
  if (leastLeftMs) {
    // Expiring at the server's time of answering plus `left`, so no sooner than the time it was asked plus `left`.
    const askedAt = performance.now();
    void leastLeftMs().then(
      (left) => left !== null && fence.renewed(askedAt + left - ttlMs),
      () => undefined, // unanswered: `since` stands
    );
  }
  fence.start();
  return () => {
    fence.stop();
    renewals.connect(null);
  };
}
