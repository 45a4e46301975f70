// Jobs taken from the network by a cluster: two `runlog serve --jobs` nodes on one PostgreSQL log follow the same
// PDS's repo event stream, so each sees every job. A job is recorded as its execution's first event, under an id
// derived from the job, in a fenced append that claims the execution's lease (decision 11): whichever node records
// it first runs it, the other finds it taken. A burst of jobs then has exactly one execution each in the log, one
// receipt each in the runner's repo, and one sandbox started each in Docker's own events.
import { join, resolve } from 'node:path';
import { mkdirSync, writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { AT_RUN_V2, type StrongRef } from '../../../src/adapters/atproto/index.ts';
import { jobExecutionId } from '../../../src/adapters/ids.ts';
import { publishCode } from '../../../src/supervisor/executions/publishing.ts';
import { cleanupClusters, createCluster } from '../../support/cluster-fixture.ts';
import { requireRegistry, watchContainerEvents } from '../../support/docker.ts';
import { listReceipts, publishNodeRuntime, startTestPds, type TestPds } from '../../support/pds.ts';

const REPO = resolve(import.meta.dirname, '../../..');
const JOBS = 30;
let pds: TestPds | undefined;

afterAll(async () => {
  await cleanupClusters();
  await pds?.close();
});

describe('jobs taken by a cluster', () => {
  it(`two nodes following one stream run each of ${JOBS} jobs once: one execution, one receipt, one sandbox each`, async () => {
    await requireRegistry();
    pds = await startTestPds();
    const runner = await pds.createAccount('cluster-runner.test');
    const alice = await pds.createAccount('cluster-alice.test');
    const code = await publishCode(alice.publisher, {
      dir: join(REPO, 'examples/greet-node'),
      runtime: await publishNodeRuntime(pds, 'cluster-runtimes.test'),
      atproto: { plcUrl: pds.plcUrl },
    });
    const cluster = await createCluster({ tag: 'jobs', ttlMs: 5000 });
    const flags = [
      '--plc',
      pds.plcUrl,
      '--jobs',
      '--jobs-from',
      pds.pdsUrl,
      '--pds',
      pds.pdsUrl,
      '--identifier',
      runner.handle,
      '--password',
      runner.password,
    ];
    const homes: string[] = [];
    for (const name of ['a', 'b']) {
      // One repo writes every job at once: its rate is the operator's to raise, above the default of 60 a minute.
      const home = join(cluster.root, name);
      mkdirSync(home, { recursive: true, mode: 0o700 });
      writeFileSync(join(home, 'operator-policy.json'), JSON.stringify({ jobs: { perRepoPerMinute: 1000 } }));
      homes.push(home);
    }
    const watch = await watchContainerEvents();
    const nodes = [await cluster.startNode('a', flags), await cluster.startNode('b', flags)];
    try {
      const jobs: (StrongRef & { executionId: string })[] = [];
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
      const receipts = () => listReceipts(pds!, runner.did);
      try {
        await expect.poll(async () => (await receipts()).length, { timeout: 240_000, interval: 1000 }).toBe(JOBS);
      } catch (err) {
        throw new Error(
          `${(err as Error).message}\n--- a:\n${nodes[0]!.stderr().slice(-3000)}\n--- b:\n${nodes[1]!.stderr().slice(-3000)}`,
        );
      }
      // One receipt per job, each succeeded.
      const all = await receipts();
      expect(new Set(all.map((r) => r.value.job?.uri))).toEqual(new Set(jobs.map((j) => j.uri)));
      expect(all.every((r) => r.value.outcome === 'succeeded')).toBe(true);
      // One execution per job in the log: one execution.requested, one outcome.
      const events = cluster.allEvents();
      for (const job of jobs) {
        const mine = events.filter((e) => e.stream === `execution-${job.executionId}`);
        expect(
          mine.filter((e) => e.type === 'execution.requested'),
          job.uri,
        ).toHaveLength(1);
        expect(
          mine.filter((e) => e.type === 'execution.succeeded'),
          job.uri,
        ).toHaveLength(1);
      }
      // One sandbox started per job, on either node, in Docker's own events.
      await watch.settled();
      const starts = homes.flatMap((home) =>
        watch.events({ 'runlog.home': home, 'runlog.kind': 'execution' }).filter((e) => e.action === 'start'),
      );
      const perStream = new Map<string, number>();
      for (const s of starts) {
        const stream = s.labels['runlog.stream'] ?? '';
        perStream.set(stream, (perStream.get(stream) ?? 0) + 1);
      }
      expect(new Set(perStream.keys())).toEqual(new Set(jobs.map((j) => `execution-${j.executionId}`)));
      expect(
        [...perStream.values()].every((n) => n === 1),
        JSON.stringify([...perStream]),
      ).toBe(true);
      expect(nodes.every((n) => n.alive())).toBe(true);
    } finally {
      watch.stop();
    }
  }, 600_000);
});
