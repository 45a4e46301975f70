// `npm run bench [-- <prefix>] [--json] [--rounds N]`: runs the side-by-side benchmarks whose name
// starts with <prefix>, prints a table (or one JSON array with --json on stdout; progress on stderr).
import type { Bench, BenchResult } from './harness.ts';
import { cliBenches } from './cli.bench.ts';
import { cliPgBenches } from './cli-pg.bench.ts';
import { cliMemoryBenches } from './cli-memory.bench.ts';
import { execBenches } from './exec.bench.ts';
import { foldBenches } from './fold.bench.ts';
import { heapBenches } from './heap.bench.ts';
import { clusterBenches } from './cluster.bench.ts';
import { recoveryBenches } from './recovery.bench.ts';
import { replayBenches } from './replay.bench.ts';
import { spawnBenches } from './spawn.bench.ts';
import { startupBenches } from './startup.bench.ts';
import { storeBenches } from './store.bench.ts';
import { storePgBenches } from './store-pg.bench.ts';
import { storePgHeapBenches } from './store-pg-heap.bench.ts';
import { storePgOpenBenches } from './store-pg-open.bench.ts';

const benches: Bench[] = [...storeBenches, ...storePgBenches, ...storePgHeapBenches, ...storePgOpenBenches, ...spawnBenches, ...execBenches, ...heapBenches, ...recoveryBenches, ...cliBenches, ...cliMemoryBenches, ...cliPgBenches, ...clusterBenches, ...startupBenches, ...foldBenches, ...replayBenches];

async function main(argv: string[]): Promise<number> {
  const json = argv.includes('--json');
  const roundsArg = argv.indexOf('--rounds');
  const rounds = roundsArg >= 0 ? Number(argv[roundsArg + 1]) : 5;
  const prefixes = argv.filter((a, i) => !a.startsWith('--') && argv[i - 1] !== '--rounds');
  const chosen = benches.filter((b) => prefixes.length === 0 || prefixes.some((p) => b.name.startsWith(p)));
  if (chosen.length === 0) {
    process.stderr.write(`no benchmark matches ${prefixes.join(', ')}; known: ${benches.map((b) => b.name).join(', ')}\n`);
    return 2;
  }
  const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
  const results: BenchResult[] = [];
  let failed = false;
  for (const b of chosen) {
    log(`${b.name} (${rounds} rounds)…`);
    try {
      const first = await b.run({ rounds, log });
      for (const r of [first, ...(first.also ?? [])]) {
        results.push(r);
        if (!json) {
          const notes = r.notes ? `  ${Object.entries(r.notes).map(([k, v]) => `${k}=${v}`).join(' ')}` : '';
          process.stdout.write(`${r.name.padEnd(20)} ${String(r.value).padStart(12)} ${r.unit.padEnd(9)} raw ${String(r.baseline).padStart(12)}  ratio ${r.ratio}${notes}\n`);
        }
      }
    } catch (err) {
      failed = true;
      log(`${b.name} failed: ${err instanceof Error ? err.message : String(err)}${b.needs ? ` (needs ${b.needs}; run npm run setup)` : ''}`);
    }
  }
  if (json) process.stdout.write(`${JSON.stringify(results.map(({ name, value, unit, baseline, ratio }) => ({ name, value, unit, baseline, ratio })))}\n`);
  return failed ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
