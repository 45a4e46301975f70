// Jobs taken from the network, side by side with the primitive each one builds on, in the same run.
//
//   job.latency  runlog: a job record for the greet-node example, addressed to the runner, committed to the author's
//                repo (timed from putRecord's answer) until its execution's outcome is recorded, which comes after
//                its receipt is written to the runner's repo: job committed → receipt visible. The intake follows
//                the PDS's repo event stream, fetches the job with its proof, records it, and the execution runs as
//                any other. baseline: exec.warm's call, rl.execute() of the same code, on the same supervisor,
//                interleaved. Target: p50 ≤ exec.warm's p50 + 150 ms.
//   job.intake   A burst of job records written by one client as fast as its PDS takes them. baseline: a plain
//                subscriber of the same PDS's repo event stream, from the burst's start until it has seen every
//                one of the burst's job records; runlog: the intake, from the same start until it has recorded every
//                one (fetched with its proof, checked, recorded in the log). The jobs' notAfter has passed, so each is
//                refused and answered with a receipt: the intake's own work, without a container per job. value and
//                baseline are jobs per second over each side's span. Target ≥ 0.9.
// The PDS runs in a child process (exec.bench.ts's fixture). Both benches check that every job was taken once.
import { AT_RUN_V2, openRepoStream, type LocalAccount } from '../src/adapters/atproto/index.ts';
import { jobExecutionId } from '../src/adapters/ids.ts';
import type { ExecutionContext } from '../src/machines/execution.machine.ts';
import { openFixture, runlogOnce, type Fixture } from './exec.bench.ts';
import { median, nowMs, quantile, round, sizes, type Bench, type BenchResult } from './harness.ts';

const NEEDS = 'Docker, the registry at 127.0.0.1:5000, the runtime-node and at-run-sandbox images, @atproto/dev-env';
/** How long a job may take before the bench gives up on it (it is then lost: the bench fails). */
const JOB_WAIT_MS = 60_000;

/** Terminal transitions of executions, by id, with the time they were seen. */
function outcomes(f: Fixture): { at: Map<string, number>; off: () => void } {
  const at = new Map<string, number>();
  const off = f.rl.on('actor:transition', (t) => {
    if (t.kind === 'execution' && (t.to === 'succeeded' || t.to === 'failed') && !at.has(t.id)) at.set(t.id, nowMs());
  });
  return { at, off };
}

async function waitFor<T>(get: () => T | undefined, what: string): Promise<T> {
  const until = nowMs() + JOB_WAIT_MS;
  for (;;) {
    const v = get();
    if (v !== undefined) return v;
    if (nowMs() > until) throw new Error(`${what}: not seen within ${JOB_WAIT_MS} ms`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** One job end to end: committed → its outcome recorded (receipt written first). Returns the milliseconds. */
async function jobOnce(f: Fixture, runnerDid: string, seen: Map<string, number>): Promise<number> {
  const job = await f.author.publisher.putRecord(AT_RUN_V2.job, undefined, {
    code: f.uri,
    handler: 'greet',
    input: { name: 'Ada' },
    runner: runnerDid,
    createdAt: new Date().toISOString(),
  });
  const t0 = nowMs();
  const id = jobExecutionId(job.uri, job.cid);
  const end = await waitFor(() => seen.get(id), `job ${job.uri}`);
  const ctx = (await f.rl.inspect(id)).context as ExecutionContext;
  if ((ctx.result?.output as { greeting?: string } | undefined)?.greeting !== 'Hello, Ada!')
    throw new Error(`job ${job.uri} did not answer: ${JSON.stringify(ctx.failure)}`);
  if (!(ctx as { receipt?: unknown }).receipt && !ctx.outcome) throw new Error(`job ${job.uri}: no outcome`);
  await f.rl.idle();
  return end - t0;
}

async function withRunner<T>(f: Fixture, run: (runner: LocalAccount) => Promise<T>): Promise<T> {
  const runner = await f.network.createAccount(`bench-runner-${process.pid}.test`);
  await f.reopen({ receipts: runner.publisher, jobs: { from: f.network.pdsUrl, cursorEveryMs: 1000 } });
  return run(runner);
}

const jobLatency: Bench = {
  name: 'job.latency',
  needs: NEEDS,
  async run(opts): Promise<BenchResult> {
    const { rounds, log } = opts;
    const PER_ROUND = sizes(opts, { full: 3, smoke: 1 });
    const f = await openFixture(log);
    try {
      return await withRunner(f, async (runner) => {
        const { at, off } = outcomes(f);
        try {
          await runlogOnce(f); // materializes the runtime and code volumes (untimed)
          await jobOnce(f, runner.did, at); // the intake's first fetch of this author's DID document (untimed)
          const jobs: number[] = [];
          const calls: number[] = [];
          for (let r = 0; r < rounds; r++) {
            for (let k = 0; k < PER_ROUND; k++) {
              if ((r + k) % 2) {
                jobs.push(await jobOnce(f, runner.did, at));
                calls.push((await runlogOnce(f)).ms);
              } else {
                calls.push((await runlogOnce(f)).ms);
                jobs.push(await jobOnce(f, runner.did, at));
              }
            }
            log(
              `job.latency round ${r + 1}: job ${jobs.at(-1)!.toFixed(0)} ms, execute ${calls.at(-1)!.toFixed(0)} ms`,
            );
          }
          const v = median(jobs);
          const b = median(calls);
          return {
            name: 'job.latency',
            value: round(v),
            unit: 'ms',
            baseline: round(b),
            ratio: round(v / b),
            also: [
              {
                name: 'job.latency.p95',
                value: round(quantile(jobs, 0.95)),
                unit: 'ms',
                baseline: round(quantile(calls, 0.95)),
                ratio: round(quantile(jobs, 0.95) / quantile(calls, 0.95)),
                notes: { samples: jobs.length },
              },
            ],
            notes: {
              target: 'p50 ≤ exec.warm p50 + 150 ms',
              over_execute_p50_ms: round(v - b),
              over_execute_p95_ms: round(quantile(jobs, 0.95) - quantile(calls, 0.95)),
              samples: jobs.length,
            },
          };
        } finally {
          off();
        }
      });
    } finally {
      await f.close();
    }
  },
};

const jobIntake: Bench = {
  name: 'job.intake',
  needs: NEEDS,
  async run(opts): Promise<BenchResult> {
    const { rounds, log } = opts;
    const N = sizes(opts, { full: 100, smoke: 5 });
    const f = await openFixture(log);
    try {
      return await withRunner(f, async (runner) => {
        const ours: number[] = [];
        const raw: number[] = [];
        const first = new Map<string, number>();
        const off = f.rl.on('actor:transition', (t) => {
          if (t.kind === 'execution' && t.from === 'new' && !first.has(t.id)) first.set(t.id, nowMs());
        });
        try {
          for (let r = 0; r < rounds; r++) {
            const seenRaw = new Map<string, number>();
            const stream = openRepoStream({ service: f.network.pdsUrl });
            const reading = (async () => {
              for await (const m of stream)
                if (m.type === 'commit')
                  for (const op of m.ops)
                    if (op.action === 'create' && op.collection === AT_RUN_V2.job && op.cid)
                      seenRaw.set(jobExecutionId(`at://${m.repo}/${op.collection}/${op.rkey}`, op.cid), nowMs());
            })();
            await new Promise((ok) => setTimeout(ok, 200)); // the plain subscriber is connected before the burst
            const t0 = nowMs();
            const ids: string[] = [];
            for (let i = 0; i < N; i++) {
              const job = await f.author.publisher.putRecord(AT_RUN_V2.job, undefined, {
                code: f.uri,
                handler: 'greet',
                runner: runner.did,
                notAfter: '2026-01-01T00:00:00.000Z',
                createdAt: new Date().toISOString(),
              });
              ids.push(jobExecutionId(job.uri, job.cid));
            }
            const lastOurs = Math.max(...(await Promise.all(ids.map((id) => waitFor(() => first.get(id), id)))));
            const lastRaw = Math.max(...(await Promise.all(ids.map((id) => waitFor(() => seenRaw.get(id), id)))));
            await stream.close();
            await reading;
            ours.push((N / (lastOurs - t0)) * 1000);
            raw.push((N / (lastRaw - t0)) * 1000);
            await f.rl.idle();
            log(
              `job.intake round ${r + 1}: runlog ${ours.at(-1)!.toFixed(1)} jobs/s, stream ${raw.at(-1)!.toFixed(1)}`,
            );
          }
        } finally {
          off();
        }
        const v = median(ours);
        const b = median(raw);
        return {
          name: 'job.intake',
          value: round(v),
          unit: 'jobs/s',
          baseline: round(b),
          ratio: round(v / b),
          notes: { target: '≥ 0.9', jobs_per_round: N, answered: 'refused (notAfter passed), each with a receipt' },
        };
      });
    } finally {
      await f.close();
    }
  },
};

export const jobBenches: Bench[] = [jobLatency, jobIntake];
