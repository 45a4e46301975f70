// `kill -9` of a supervisor in the middle of a burst of 100 jobs, then a new supervisor on the same home: every job
// is answered by exactly one receipt, and Docker's own events show exactly one sandbox started per job.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AT_RUN_V2, type StrongRef } from '../../src/adapters/atproto/index.ts';
import { jobExecutionId } from '../../src/adapters/ids.ts';
import { DEFAULT_OPERATOR_POLICY } from '../../src/domain/at-run/operator-policy.ts';
import { publishCode, publishRuntime } from '../../src/supervisor/executions/publishing.ts';
import { homeWithPolicy, startChild, type ChildConfig, type ChildSupervisor } from '../support/child-supervisor.ts';
import {
  cleanupTestContainers,
  cleanupTestVolumes,
  docker,
  imageRef,
  requireDocker,
  requireRegistry,
  TEST_LABELS,
} from '../support/docker.ts';
import { listReceipts, startTestPds, type TestAccount, type TestPds } from '../support/pds.ts';

const REPO = resolve(import.meta.dirname, '../..');
const JOBS = 100;
const LABELS = { ...TEST_LABELS, 'runlog.test-run': `jobs-kill-${process.pid}-${Date.now()}` };
let pds: TestPds;
let root: string;
let runner: TestAccount;
let alice: TestAccount;
let code: StrongRef;
let child: ChildSupervisor | null = null;

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  pds = await startTestPds();
  const publisherAcct = await pds.createAccount('kill-runtimes.test');
  runner = await pds.createAccount('kill-runner.test');
  alice = await pds.createAccount('kill-alice.test');
  const runtime = await publishRuntime(publisherAcct.publisher, {
    dir: join(REPO, 'runtimes/node'),
    image: imageRef('runtime-node'),
  });
  code = await publishCode(alice.publisher, {
    dir: join(REPO, 'examples/greet-node'),
    runtime: runtime.uri,
    atproto: { plcUrl: pds.plcUrl },
  });
  root = mkdtempSync(join(tmpdir(), 'runlog-jobs-kill-'));
}, 240_000);

afterAll(async () => {
  await child?.sigkill().catch(() => undefined);
  await pds?.close();
  await cleanupTestContainers(LABELS);
  await cleanupTestVolumes(LABELS);
  if (root) rmSync(root, { recursive: true, force: true });
});

/** Every receipt in the runner's repo. */
const receipts = () => listReceipts(pds, runner.did);

describe('a supervisor killed in the middle of a burst of jobs', () => {
  it(`answers each of ${JOBS} jobs with exactly one receipt and starts exactly one sandbox for each`, async () => {
    const config: ChildConfig = {
      // One repo writes all 100 jobs at once: its rate is the operator's to raise, above the default of 60 a minute.
      home: homeWithPolicy(root, 'home', JSON.stringify({ jobs: { perRepoPerMinute: 1000 } })),
      labels: LABELS,
      plcUrl: pds.plcUrl,
      jobs: { from: pds.pdsUrl, pdsUrl: pds.pdsUrl, identifier: runner.handle, password: runner.password },
    };
    // Docker's own record of every container started for this run's executions.
    const starts: string[] = [];
    const events = await docker.getEvents({
      filters: JSON.stringify({
        type: ['container'],
        event: ['start'],
        label: [`runlog.test-run=${LABELS['runlog.test-run']}`],
      }),
    });
    events.on('data', (b: Buffer) => {
      for (const line of b.toString().split('\n').filter(Boolean)) {
        const e = JSON.parse(line) as { Actor?: { Attributes?: Record<string, string> } };
        const stream = e.Actor?.Attributes?.['runlog.stream'];
        if (stream) starts.push(stream);
      }
    });
    try {
      child = startChild(config);
      expect(await child.ready).toBe(true);
      const jobs: (StrongRef & { executionId: string })[] = [];
      const writing = (async () => {
        for (let i = 0; i < JOBS; i++) {
          const job = await alice.publisher.putRecord(AT_RUN_V2.job, undefined, {
            code: code.uri,
            handler: 'greet',
            input: { name: `n${i}` },
            runner: runner.did,
            createdAt: new Date().toISOString(),
          });
          jobs.push({ ...job, executionId: jobExecutionId(job.uri, job.cid) });
        }
      })();
      // Killed once some jobs are recorded and some have run: others are running, and the rest not read yet.
      await expect
        .poll(() => child!.committed.filter((c) => c.eventType === 'execution.succeeded').length, { timeout: 60_000 })
        .toBeGreaterThanOrEqual(5);
      await child.sigkill();
      // Mid-burst: some jobs were taken (recorded), not all of them.
      const taken = new Set(child.committed.filter((c) => c.eventType === 'execution.requested').map((c) => c.stream));
      child = startChild(config);
      expect(await child.ready).toBe(true);
      await writing;
      expect(taken.size, 'the kill came before every job was taken').toBeLessThan(JOBS);
      try {
        await expect.poll(async () => (await receipts()).length, { timeout: 240_000, interval: 1000 }).toBe(JOBS);
      } catch (err) {
        // Say why: the restarted supervisor's own account of what it did.
        throw new Error(
          `${(err as Error).message}\n--- the restarted supervisor's log:\n${child.stderr().slice(-4000)}`,
        );
      }
      const all = await receipts();
      // One receipt per job, each naming its own job, and every job answered with its result.
      const byJob = new Map(all.map((r) => [r.value.job?.uri, r]));
      expect(byJob.size).toBe(JOBS);
      for (const job of jobs) {
        const r = byJob.get(job.uri);
        expect(r?.uri, job.uri).toBe(`at://${runner.did}/${AT_RUN_V2.execution}/${job.executionId}`);
        expect(r?.value.job?.cid).toBe(job.cid);
      }
      // Those the kill cut short while they ran are answered too, failed as lost; the rest succeeded.
      const failed = all.filter((r) => r.value.outcome !== 'succeeded');
      expect(failed.map((r) => [r.value.outcome, r.value.failure?.kind, r.value.failure?.code])).toEqual(
        failed.map(() => ['failed', 'lost', expect.any(String)]),
      );
      expect(failed.length).toBeLessThanOrEqual(DEFAULT_OPERATOR_POLICY.executions.maxRunning);
      // Exactly one sandbox started per job, before and after the kill together.
      await new Promise((r) => setTimeout(r, 1000)); // the last start events reach us
      const perStream = new Map<string, number>();
      for (const s of starts) perStream.set(s, (perStream.get(s) ?? 0) + 1);
      expect(new Set(jobs.map((j) => `execution-${j.executionId}`))).toEqual(new Set(perStream.keys()));
      expect(
        [...perStream.values()].every((n) => n === 1),
        JSON.stringify([...perStream]),
      ).toBe(true);
    } finally {
      (events as unknown as { destroy(): void }).destroy();
    }
  }, 420_000);
});
