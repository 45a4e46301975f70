// The longer cluster chaos run: the chaos-cluster test's harness (test/support/cluster-chaos.ts) for more rounds.
//
//   npm run chaos:cluster -- --rounds 8 [--seed N] [--ttl 2000] [--requests 8] [--kinds kill-node,pg-kill]
//   npm run chaos:cluster -- --replay <kind>:<round seed>      (one round again, as a failure printed it)
//
// --rounds is per fault kind (five kinds: --rounds 8 is 40 rounds, in an order drawn from the seed). It prints each
// round's seed and failures, then a summary table per fault kind (rounds, requests, acknowledged, executions,
// sandbox starts, takeovers, check failures), and exits 1 if any check failed. Needs what the e2e tier needs
// (`npm run setup`: Docker, the registry, PRoot, PostgreSQL 15's binaries); run it alone on the machine (it takes
// the shared lock: flock /tmp/runlog-docker.lock npm run chaos:cluster -- …).
import { parseArgs } from 'node:util';
import { summaryTable } from '../test/support/cluster-chaos-checks.ts';
import {
  CHAOS_FAULT_KINDS,
  describeRound,
  freshSeed,
  parseSeed,
  planRound,
  planRun,
  type ChaosFaultKind,
  type ChaosRoundPlan,
} from '../test/support/cluster-chaos-plan.ts';
import { CHAOS_NODES, roundLine, startChaosHarness, type RoundResult } from '../test/support/cluster-chaos.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '8' },
    seed: { type: 'string' },
    ttl: { type: 'string', default: '2000' },
    requests: { type: 'string', default: '8' },
    kinds: { type: 'string' },
    replay: { type: 'string' },
  },
});

function kindOf(text: string): ChaosFaultKind {
  if (!(CHAOS_FAULT_KINDS as readonly string[]).includes(text))
    throw new Error(`unknown fault kind ${JSON.stringify(text)} (known: ${CHAOS_FAULT_KINDS.join(', ')})`);
  return text as ChaosFaultKind;
}

const seed = values.seed ? parseSeed(values.seed) : freshSeed();
const requests = Number(values.requests);
const ttlMs = Number(values.ttl);
let plans: ChaosRoundPlan[];
if (values.replay) {
  const [kind, roundSeed] = values.replay.split(':');
  plans = [planRound(parseSeed(roundSeed ?? ''), kindOf(kind ?? ''), 0, CHAOS_NODES, requests)];
} else {
  plans = planRun({
    seed,
    roundsPerKind: Number(values.rounds),
    nodes: CHAOS_NODES,
    requestsPerRound: requests,
    ...(values.kinds ? { kinds: values.kinds.split(',').map(kindOf) } : {}),
  });
}

console.log(
  `cluster chaos: ${plans.length} round(s), run seed ${seed} (replay: --seed ${seed}), TTL ${ttlMs} ms, ${requests} requests a round`,
);
const started = Date.now();
const harness = await startChaosHarness({ runSeed: seed, ttlMs });
const results: RoundResult[] = [];
let interrupted = false;
process.once('SIGINT', () => {
  interrupted = true;
  console.log('interrupted: finishing this round, then cleaning up');
});
try {
  for (const plan of plans) {
    if (interrupted) break;
    console.log(`\n${describeRound(plan)}`);
    const r = await harness.runRound(plan);
    results.push(r);
    console.log(`  ${roundLine(r)}`);
    for (const n of r.notes) console.log(`  note: ${n}`);
    for (const f of r.failures) console.log(`  FAILED ${f}`);
  }
} finally {
  await harness.close();
}
console.log(
  `\ncluster chaos, run seed ${seed}, ${Math.round((Date.now() - started) / 1000)} s:\n` +
    `${summaryTable(results.map((r) => ({ kind: r.plan.kind, stats: r.stats })))}`,
);
const failedChecks = new Map<string, number>();
for (const r of results)
  for (const c of r.results)
    if (c.failures.length)
      failedChecks.set(
        `${r.plan.kind} ${c.name}`,
        (failedChecks.get(`${r.plan.kind} ${c.name}`) ?? 0) + c.failures.length,
      );
if (failedChecks.size)
  console.log(
    `\nfailed checks (fault kind, check: failures):\n${[...failedChecks].map(([k, n]) => `  ${k}: ${n}`).join('\n')}`,
  );
process.exit(results.some((r) => r.failures.length > 0) ? 1 : 0);
