// exec.heap: does a supervisor that runs executions for weeks hold on to them? 1,000 executions with 1 MB inputs
// through rl.execute(), with the real SQLite log (every input is appended: 1 GB written), the real actor host,
// the real resolve effect and a real PLC directory (@atproto/dev-env, in process).
//
// What is measured, exactly: each execution names a code record of a DID the PLC directory does not know, so it
// fails at resolution (DID_RESOLUTION_FAILED) after a few milliseconds: no Docker, no container. Everything the
// host and the execution supervisor keep per execution (the actor and its context holding the 1 MB input, the
// listeners execute() arms, the effects' bookkeeping) is kept the same way whether the execution ends after
// resolution or after a container run; a container run adds the sandbox's own bounded buffers, freed when invoke
// returns, which this does not measure.
//
//   value     heap used after the 1,000 executions (MB, after a full collection)
//   baseline  heap used before them, after 20 warm-up executions (MB, after a full collection)
//   ratio     value ÷ baseline: target ≤ 1.10 (before issue #12 the host kept every ended actor: ~1 GB more)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRunlog, type Runlog } from '../src/supervisor/runlog.ts';
import { startLocalNetwork } from '../src/adapters/atproto/index.ts';
import { closeWithin, collector, heapMb, round, sideBySide, sizes, type Bench, type BenchResult } from './harness.ts';
import { runlogInternals } from '../src/supervisor/runlog-internals.ts';

const CONCURRENCY = 4;
const INPUT_BYTES = 1_000_000;

/** A DID the directory has never seen (24 base32 characters), one per run. */
const unknownDid = (): string =>
  `did:plc:${Array.from({ length: 24 }, () => 'abcdefghijklmnopqrstuvwxyz234567'[Math.floor(Math.random() * 32)]).join('')}`;

const execHeap: Bench = {
  name: 'exec.heap',
  needs: '@atproto/dev-env (an in-process PLC directory)',
  async run(opts): Promise<BenchResult> {
    const { log } = opts;
    const { EXECUTIONS, WARMUP } = sizes(opts, {
      full: { EXECUTIONS: 1000, WARMUP: 20 },
      smoke: { EXECUTIONS: 20, WARMUP: 4 },
    });
    const gc = collector();
    const dir = mkdtempSync(join(tmpdir(), 'runlog-bench-heap-'));
    const net = await startLocalNetwork({ dataDir: dir });
    let rl: Runlog | null = null;
    try {
      rl = await createRunlog({
        home: join(dir, 'home'),
        atproto: { plcUrl: net.plcUrl },
        reconcile: false,
        engineWatch: false,
        watchApps: false,
        log: () => undefined,
      });
      const uri = `at://${unknownDid()}/dev.mainasara.at-run.beta.v2.code/heap`;
      const pad = 'x'.repeat(INPUT_BYTES - 40);
      let n = 0;
      const one = async (): Promise<void> => {
        const i = n++;
        // A distinct 1 MB string per execution (nothing shared between inputs).
        const out = await rl!.execute({
          uri,
          handler: 'run',
          input: { i, data: `${i}:${pad}`.slice(0, INPUT_BYTES - 40) },
        });
        if (out.status !== 'failed' || out.failure?.code !== 'DID_RESOLUTION_FAILED')
          throw new Error(`exec.heap: expected a resolution failure, got ${JSON.stringify(out.failure ?? out.status)}`);
      };
      const runMany = async (count: number) => {
        let left = count;
        await Promise.all(
          Array.from({ length: CONCURRENCY }, async () => {
            while (left > 0) {
              left--;
              await one();
            }
          }),
        );
      };
      await runMany(WARMUP);
      const before = heapMb(gc);
      const t0 = Date.now();
      await runMany(EXECUTIONS);
      const after = heapMb(gc);
      const secs = (Date.now() - t0) / 1000;
      log(
        `exec.heap: ${EXECUTIONS} executions in ${secs.toFixed(1)} s; ` +
          `heap ${before.toFixed(1)} → ${after.toFixed(1)} MB; host holds ${runlogInternals(rl).host.size} actors`,
      );
      return sideBySide('exec.heap', 'MB', after, before, {
        executions: EXECUTIONS,
        inputBytes: INPUT_BYTES,
        hostActors: runlogInternals(rl).host.size,
        retainedPerExecutionKB: round(((after - before) * 1024) / EXECUTIONS),
        inputsAppendedMB: round((INPUT_BYTES * (EXECUTIONS + WARMUP)) / 1e6),
        seconds: round(secs),
      });
    } finally {
      await closeWithin(rl);
      await net.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export const heapBenches: Bench[] = [execHeap];
