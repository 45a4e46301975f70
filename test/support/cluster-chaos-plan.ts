// The cluster chaos harness's plan: which fault each round strikes, on which node, and which requests go through
// which node meanwhile, all drawn from one seed. Pure (no IO, no clock), so a printed seed replays the same rounds
// and the planner has a unit test of its own (test/unit/cluster/cluster-chaos-plan.test.ts). The IO that carries a plan
// out is cluster-chaos.ts; the checks after each round are cluster-chaos-checks.ts.
import { seededRandom } from './seeded-random.ts';

export { seededRandom };

/**
 * The five fault kinds of issue 27:
 *   kill-node           kill -9 of a node, started again (same name, same home) after 2×TTL;
 *   stop-node           SIGSTOP of a node for 2×TTL, then SIGCONT;
 *   pg-restart          `pg_ctl restart -m fast` of the cluster's PostgreSQL server;
 *   pg-kill             kill -9 of the postmaster, then pg_ctl start (crash recovery);
 *   stop-append-locked  a node SIGSTOPs itself while it holds the append lock (RUNLOG_FAULT=append-locked:<n>,
 *                       RUNLOG_FAULT_ACTION=stop), SIGCONT after 2×TTL.
 */
export const CHAOS_FAULT_KINDS = ['kill-node', 'stop-node', 'pg-restart', 'pg-kill', 'stop-append-locked'] as const;
export type ChaosFaultKind = (typeof CHAOS_FAULT_KINDS)[number];

/** The kinds whose fault strikes one node (the others strike the PostgreSQL server). */
export const NODE_FAULTS: ReadonlySet<ChaosFaultKind> = new Set(['kill-node', 'stop-node', 'stop-append-locked']);

export type ChaosRequestKind = 'spawn-container' | 'spawn-proot' | 'exec';

export interface ChaosRequestPlan {
  /** Its position in the round (also part of its tag). */
  i: number;
  kind: ChaosRequestKind;
  /** The node whose API it goes through. */
  via: string;
  /** `node` in the request (placement pinned to that node), or null (the cluster chooses). */
  pin: string | null;
  /** The pause before it is sent (after the one before it was sent; requests overlap). */
  gapMs: number;
  /** An execution's handler sleeps this long (keeps it in flight across the fault). */
  napMs: number;
}

export interface ChaosRoundPlan {
  /** 0-based position in the run. */
  index: number;
  kind: ChaosFaultKind;
  /** The round's own seed: planRound(seed, kind, …) gives this plan again. */
  seed: number;
  /** The node the fault strikes (null for the PostgreSQL faults). */
  victim: string | null;
  requests: ChaosRequestPlan[];
  /** The fault strikes right after the request at this index is sent. */
  faultAfter: number;
  /** stop-append-locked: the n in RUNLOG_FAULT=append-locked:<n>. */
  appendLockedNth: number;
  /**
   * kill-node and stop-node: before the fault, an instance of the victim's is crashed so that its restart timer
   * is pending (crashed.backoff, instance.restart-scheduled appended) when the victim goes: a takeover must fire it.
   */
  timerProbe: boolean;
  /**
   * The probe's restart backoff: 'pending' (2×TTL: the timer comes due after the takeover, which must arm it) or
   * 'overdue' (1 s: due before any takeover can happen, which must fire it at once).
   */
  probeTimer: 'pending' | 'overdue';
}

export interface ChaosPlanOptions {
  /** The run's seed (a 32-bit unsigned integer). */
  seed: number;
  /** Rounds of each fault kind (the e2e test: 2, so 10 rounds). */
  roundsPerKind: number;
  /** The nodes' names (three). */
  nodes: readonly string[];
  /** Requests per round. */
  requestsPerRound: number;
  /** Only these kinds (default: all five). */
  kinds?: readonly ChaosFaultKind[];
}

const pick = <T>(rand: () => number, xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const between = (rand: () => number, min: number, max: number): number => min + Math.floor(rand() * (max - min + 1));

/** A fresh 32-bit seed (for a run that was given none); printed so that the run can be replayed. */
export function freshSeed(): number {
  return Math.floor(Math.random() * 2 ** 32) >>> 0;
}

/** Parses a seed given on a command line or in the environment: a non-negative integer below 2^32. */
export function parseSeed(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(n) || n >= 2 ** 32)
    throw new Error(`a seed is an integer from 0 to ${2 ** 32 - 1}, got ${JSON.stringify(text)}`);
  return n;
}

/** One round's plan, from its own seed alone: the same seed, kind, nodes and size give the same plan. */
export function planRound(
  seed: number,
  kind: ChaosFaultKind,
  index: number,
  nodes: readonly string[],
  requestsPerRound: number,
): ChaosRoundPlan {
  if (nodes.length < 2) throw new Error('a chaos round needs at least two nodes: one to fault, one to survive');
  if (requestsPerRound < 2)
    throw new Error('a chaos round needs at least two requests: one before the fault, one after');
  const rand = seededRandom(seed);
  const victim = NODE_FAULTS.has(kind) ? pick(rand, nodes) : null;
  const kinds: ChaosRequestKind[] = ['spawn-container', 'spawn-proot', 'exec', 'exec'];
  const requests: ChaosRequestPlan[] = [];
  for (let i = 0; i < requestsPerRound; i++) {
    // One in four is pinned to a node (possibly the victim: an answer for a node that is gone is one of the checks).
    const pinned = rand() < 0.25;
    requests.push({
      i,
      kind: pick(rand, kinds),
      via: pick(rand, nodes),
      pin: pinned ? pick(rand, nodes) : null,
      gapMs: between(rand, 150, 900),
      napMs: between(rand, 500, 2500),
    });
  }
  // At least one request before the fault and one after it.
  const faultAfter = between(rand, 0, requestsPerRound - 2);
  const appendLockedNth = between(rand, 1, 3);
  return {
    index,
    kind,
    seed,
    victim,
    requests,
    faultAfter,
    appendLockedNth,
    timerProbe: kind === 'kill-node' || kind === 'stop-node',
    probeTimer: rand() < 0.5 ? 'pending' : 'overdue',
  };
}

/** The run: roundsPerKind rounds of each kind, in an order drawn from the seed, each round with a seed of its own. */
export function planRun(options: ChaosPlanOptions): ChaosRoundPlan[] {
  const kinds = options.kinds ?? CHAOS_FAULT_KINDS;
  if (!Number.isSafeInteger(options.roundsPerKind) || options.roundsPerKind < 1)
    throw new Error(`rounds per fault kind must be a positive integer, got ${options.roundsPerKind}`);
  const rand = seededRandom(options.seed);
  const order: ChaosFaultKind[] = [];
  for (let r = 0; r < options.roundsPerKind; r++) order.push(...kinds);
  // Fisher–Yates, from the seed.
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return order.map((kind, index) =>
    planRound(Math.floor(rand() * 2 ** 32) >>> 0, kind, index, options.nodes, options.requestsPerRound),
  );
}

/** One line that says what a round does, with what replays it. */
export function describeRound(p: ChaosRoundPlan): string {
  const reqs = p.requests.map((r) => `${r.kind}@${r.via}${r.pin ? `→${r.pin}` : ''}`).join(' ');
  return (
    `round ${p.index + 1} ${p.kind}${p.victim ? ` on ${p.victim}` : ''}` +
    `${p.timerProbe ? `, probe timer ${p.probeTimer}` : ''} ` +
    `(round seed ${p.seed}; replay: --replay ${p.kind}:${p.seed}): ${reqs}; fault after request ${p.faultAfter + 1}`
  );
}
