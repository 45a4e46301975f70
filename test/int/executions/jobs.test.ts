// Jobs from the network end to end: an account writes a job record in its own repo on a real PDS (in process), the
// runner follows that PDS's repo event stream, runs the job in real Docker and writes a receipt naming the job.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AT_RUN_V2,
  cidForRecordJson,
  createAtprotoReader,
  type StrongRef,
} from '../../../src/adapters/atproto/index.ts';
import { jobExecutionId } from '../../../src/adapters/ids.ts';
import type { ExecutionContext } from '../../../src/machines/execution.machine.ts';
import { publishCode, publishRuntime } from '../../../src/supervisor/executions/publishing.ts';
import { createRunlog, type Runlog, type RunlogOptions } from '../../../src/supervisor/runlog.ts';
import {
  cleanupTestContainers,
  cleanupTestVolumes,
  docker,
  imageRef,
  requireDocker,
  requireRegistry,
  TEST_LABELS,
} from '../../support/docker.ts';
import { startTestPds, type TestAccount, type TestPds } from '../../support/pds.ts';

const REPO = resolve(import.meta.dirname, '../../..');
const LABELS = { ...TEST_LABELS, 'runlog.test-run': `jobs-${process.pid}-${Date.now()}` };
let pds: TestPds;
let rl: Runlog;
let home: string;
let runner: TestAccount;
let alice: TestAccount;
let code: StrongRef;
let options: RunlogOptions;

const reader = () => createAtprotoReader({ plcUrl: pds.plcUrl });

async function submit(record: Record<string, unknown>): Promise<StrongRef & { executionId: string }> {
  const job = await alice.publisher.putRecord(AT_RUN_V2.job, undefined, {
    code: code.uri,
    handler: 'greet',
    input: { name: 'Ada' },
    runner: runner.did,
    createdAt: new Date().toISOString(),
    ...record,
  });
  return { ...job, executionId: jobExecutionId(job.uri, job.cid) };
}

async function endedState(executionId: string): Promise<string | null> {
  try {
    const state = (await rl.inspect(executionId)).state;
    return state === 'succeeded' || state === 'failed' ? state : null;
  } catch {
    return null;
  }
}

async function receiptOf(executionId: string): Promise<Record<string, unknown>> {
  const got = await reader().fetchRecord(`at://${runner.did}/${AT_RUN_V2.execution}/${executionId}`);
  return got.value as Record<string, unknown>;
}

const containersOf = async (executionId: string) =>
  (
    await docker.listContainers({
      all: true,
      filters: JSON.stringify({ label: [`runlog.stream=execution-${executionId}`] }),
    })
  ).length;

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  pds = await startTestPds();
  const publisherAcct = await pds.createAccount('jobs-runtimes.test');
  runner = await pds.createAccount('runner.test');
  alice = await pds.createAccount('jobs-alice.test');
  const atproto = { plcUrl: pds.plcUrl };
  const runtime = await publishRuntime(publisherAcct.publisher, {
    dir: join(REPO, 'runtimes/node'),
    image: imageRef('runtime-node'),
  });
  code = await publishCode(alice.publisher, { dir: join(REPO, 'examples/greet-node'), runtime: runtime.uri, atproto });
  home = mkdtempSync(join(tmpdir(), 'runlog-jobs-'));
  options = {
    home,
    atproto,
    labels: LABELS,
    receipts: runner.publisher,
    jobs: { from: pds.pdsUrl, cursorEveryMs: 100 },
    log: () => undefined,
  };
  rl = await createRunlog(options);
}, 240_000);

afterAll(async () => {
  await rl?.close();
  await pds?.close();
  await cleanupTestContainers(LABELS);
  await cleanupTestVolumes(LABELS);
  if (home) rmSync(home, { recursive: true, force: true });
});

describe('jobs taken from the repo event stream', () => {
  it('a job one account writes runs on the runner it names, and the receipt names the job and its result', async () => {
    const job = await submit({});
    await expect.poll(() => endedState(job.executionId), { timeout: 90_000 }).toBe('succeeded');
    const ctx = (await rl.inspect(job.executionId)).context as ExecutionContext;
    expect(ctx.request?.job).toEqual({ uri: job.uri, cid: job.cid });
    expect(ctx.request?.callerDid).toBe(alice.did);
    expect(ctx.result?.output).toMatchObject({ greeting: 'Hello, Ada!', caller: alice.did });
    const receipt = await receiptOf(job.executionId);
    expect(receipt).toMatchObject({
      job: { uri: job.uri, cid: job.cid },
      outcome: 'succeeded',
      code: { uri: code.uri, cid: code.cid },
      outputSha256: ctx.result?.outputHash,
    });
  });

  it('refuses an expired job and a job pinned to another code version, each with a receipt that says why, and runs neither', async () => {
    const expired = await submit({ notAfter: '2026-01-01T00:00:00.000Z' });
    const pinned = await submit({ codeCid: cidForRecordJson({ another: 'version' }) });
    await expect.poll(() => endedState(expired.executionId), { timeout: 60_000 }).toBe('failed');
    await expect.poll(() => endedState(pinned.executionId), { timeout: 60_000 }).toBe('failed');
    expect(((await rl.inspect(expired.executionId)).context as ExecutionContext).failure).toMatchObject({
      reason: 'validation',
      code: 'JOB_EXPIRED',
    });
    expect(((await rl.inspect(pinned.executionId)).context as ExecutionContext).failure).toMatchObject({
      code: 'RECORD_CID_MISMATCH',
    });
    expect(await receiptOf(expired.executionId)).toMatchObject({
      job: { uri: expired.uri, cid: expired.cid },
      outcome: 'failed',
      failure: { kind: 'validation', code: 'JOB_EXPIRED' },
    });
    // Failed while resolving, not refused at intake: answered all the same, with the failure as recorded.
    expect(await receiptOf(pinned.executionId)).toMatchObject({
      job: { uri: pinned.uri, cid: pinned.cid },
      outcome: 'failed',
      failure: { kind: 'validation', code: 'RECORD_CID_MISMATCH' },
    });
    expect(await containersOf(expired.executionId)).toBe(0);
    expect(await containersOf(pinned.executionId)).toBe(0);
  });

  it('leaves a job for another runner alone: no execution, no receipt', async () => {
    const other = await submit({ runner: alice.did });
    const marker = await submit({});
    // Jobs are taken in the stream's order: once the later one is taken, the earlier one was seen.
    await expect.poll(() => endedState(marker.executionId), { timeout: 90_000 }).toBe('succeeded');
    await expect(rl.inspect(other.executionId)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(receiptOf(other.executionId)).rejects.toMatchObject({ code: 'RECORD_NOT_FOUND' });
  });

  it('after a restart, takes the jobs written while it was down once, and runs none of the earlier ones again', async () => {
    const before = await submit({});
    await expect.poll(() => endedState(before.executionId), { timeout: 90_000 }).toBe('succeeded');
    const eventsBefore = (await rl.events(before.executionId)).length;
    await rl.close();
    const whileDown = await submit({ input: { name: 'Grace' } });
    rl = await createRunlog(options);
    await expect.poll(() => endedState(whileDown.executionId), { timeout: 90_000 }).toBe('succeeded');
    expect(((await rl.inspect(whileDown.executionId)).context as ExecutionContext).result?.output).toMatchObject({
      greeting: 'Hello, Grace!',
    });
    expect((await rl.events(before.executionId)).length).toBe(eventsBefore);
  });
});
