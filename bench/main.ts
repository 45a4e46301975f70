// `npm run bench [-- <prefix>…] [--json] [--smoke | --rounds N]`: runs the side-by-side benchmarks whose name
// starts with <prefix> (bench/runner.ts), prints a table (or one JSON array with --json on stdout; progress on
// stderr). `--smoke`: every benchmark once, on small sizes, failing when one throws or returns no finite figure.
import type { Bench } from './harness.ts';
import { parseBenchArgs, runBenches } from './runner.ts';
import { cliBenches } from './cli.bench.ts';
import { cliPgBenches } from './cli-pg.bench.ts';
import { cliMemoryBenches } from './cli-memory.bench.ts';
import { execBenches } from './exec.bench.ts';
import { jobBenches } from './job.bench.ts';
import { foldBenches } from './fold.bench.ts';
import { heapBenches } from './heap.bench.ts';
import { clusterBenches } from './cluster.bench.ts';
import { clusterPauseBenches } from './cluster-pause.bench.ts';
import { recoveryBenches } from './recovery.bench.ts';
import { replayBenches } from './replay.bench.ts';
import { spawnBenches } from './spawn.bench.ts';
import { startupBenches } from './startup.bench.ts';
import { startupPgBenches } from './startup-pg.bench.ts';
import { execNetBenches } from './exec-net.bench.ts';
import { storeBenches } from './store.bench.ts';
import { storePgBenches } from './store-pg.bench.ts';
import { storePgHeapBenches } from './store-pg-heap.bench.ts';
import { storePgHeapFleetBenches } from './store-pg-heap-fleet.bench.ts';
import { storePgOpenBenches } from './store-pg-open.bench.ts';

const benches: Bench[] = [
  ...storeBenches,
  ...storePgBenches,
  ...storePgHeapBenches,
  ...storePgHeapFleetBenches,
  ...storePgOpenBenches,
  ...spawnBenches,
  ...execBenches,
  ...execNetBenches,
  ...jobBenches,
  ...heapBenches,
  ...recoveryBenches,
  ...cliBenches,
  ...cliMemoryBenches,
  ...cliPgBenches,
  ...clusterBenches,
  ...clusterPauseBenches,
  ...startupBenches,
  ...startupPgBenches,
  ...foldBenches,
  ...replayBenches,
];

const parsed = parseBenchArgs(process.argv.slice(2));
if (!parsed.ok)
  process.stderr.write(`npm run bench -- [<prefix>…] [--json] [--smoke | --rounds N]: ${parsed.message}\n`);
process.exitCode = parsed.ok
  ? await runBenches(benches, parsed.args, { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) })
  : 2;
