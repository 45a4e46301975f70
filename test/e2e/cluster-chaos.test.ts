// The cluster under faults (issue 27, "Must hold"): a seeded chaos run on three real supervisors (`runlog serve
// --store postgres://… --node a|b|c`) at lease TTL 2,000 ms, on a throwaway PostgreSQL server of its own, with
// real Docker, PRoot and a PDS (test/support/cluster-chaos.ts). Two rounds of each fault kind — kill -9 of a node,
// SIGSTOP of a node past the TTL, `pg_ctl restart -m fast`, kill -9 of the postmaster, and a node SIGSTOPped while
// it holds the append lock — each with spawns (container and PRoot) and executions sent through random nodes
// meanwhile. After each round: every acknowledged request is in the log once and settled; no execution had two
// sandbox starts (Docker's own events); no container is left without a live actor that owns it (30 s after
// settling); no live node lost a lease; every answer agrees with the log; a persisted timer fires after a takeover.
//
// The run's seed is printed (and each round's); RUNLOG_CHAOS_SEED=<n> replays a run. The longer run is
// `npm run chaos:cluster -- --rounds 8` (scripts/chaos-cluster.ts); by vitest: `npx vitest run test/e2e/cluster-chaos.test.ts`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { summaryTable } from '../support/cluster-chaos-checks.ts';
import { describeRound, freshSeed, parseSeed, planRun } from '../support/cluster-chaos-plan.ts';
import {
  CHAOS_NODES,
  roundLine,
  startChaosHarness,
  type ChaosHarness,
  type RoundResult,
} from '../support/cluster-chaos.ts';

const RUN_SEED = process.env.RUNLOG_CHAOS_SEED ? parseSeed(process.env.RUNLOG_CHAOS_SEED) : freshSeed();
const ROUNDS = planRun({ seed: RUN_SEED, roundsPerKind: 2, nodes: CHAOS_NODES, requestsPerRound: 8 });
console.log(`cluster chaos: run seed ${RUN_SEED} (replay: RUNLOG_CHAOS_SEED=${RUN_SEED})`);

let harness: ChaosHarness | undefined;
const done: RoundResult[] = [];

beforeAll(async () => {
  harness = await startChaosHarness({ runSeed: RUN_SEED, ttlMs: 2000 });
}, 300_000);

afterAll(async () => {
  if (done.length)
    console.log(
      `cluster chaos, run seed ${RUN_SEED}:\n${summaryTable(done.map((r) => ({ kind: r.plan.kind, stats: r.stats })))}`,
    );
  await harness?.close();
}, 180_000);

describe(`the cluster under faults (run seed ${RUN_SEED})`, () => {
  for (const plan of ROUNDS) {
    it(
      `round ${plan.index + 1}, ${plan.kind}${plan.victim ? ` on ${plan.victim}` : ''} ` +
        `(round seed ${plan.seed}): every acknowledged request is in the log once and settled, ` +
        `no execution started twice, no container without an owner, no live node lost a lease, ` +
        `every answer agrees with the log, timers fire after a takeover`,
      { timeout: 300_000 },
      async () => {
        console.log(describeRound(plan));
        const result = await harness!.runRound(plan);
        done.push(result);
        console.log(`${roundLine(result)}${result.notes.length ? `\n  ${result.notes.join('\n  ')}` : ''}`);
        // The diagnosis rides in the message: CI keeps a failure's message, not every line printed.
        expect(result.failures, [...result.failures, result.diagnosis].join('\n')).toEqual([]);
      },
    );
  }
});
