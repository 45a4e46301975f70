// A job's sealed secret end to end: the runner publishes its key in its runner record, alice seals API_TOKEN to it
// for her code and writes a job naming the secrets record; the handler uses the value without returning it (its
// output is the value's SHA-256 and length). Then every place a value could leak to is scanned for the plaintext's
// bytes: every file under the home (the SQLite log with its snapshots, and its WAL), the supervisor's log lines, the
// execution's events and inspect view, its history as `runlog export` writes it and an archive of it, the receipt
// record, traces, metrics, and `docker inspect` of every container the test made.
// Secrets sealed for another code fail the job with SECRETS_CODE_MISMATCH, and no container is ever made for it.
import { runCli } from '../../support/cli-in-process.ts';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AT_RUN_V2, createAtprotoReader, type StrongRef } from '../../../src/adapters/atproto/index.ts';
import { jobExecutionId } from '../../../src/adapters/ids.ts';
import type { ExecutionContext } from '../../../src/machines/execution.machine.ts';
import { publishCode, publishRuntime } from '../../../src/supervisor/executions/publishing.ts';
import { sealSecretsFor } from '../../../src/supervisor/executions/sealed-secrets-records.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';
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
const RUN = `job-secrets-${process.pid}-${Date.now()}`;
const LABELS = { ...TEST_LABELS, 'runlog.test-run': RUN };
/** The secret: 32 random hex characters, so a hit anywhere is this test's value and nothing else. */
const PLAIN = randomBytes(16).toString('hex');
const PLAIN_BYTES = Buffer.from(PLAIN, 'utf8');

let pds: TestPds;
let rl: Runlog;
let home: string;
let runner: TestAccount;
let alice: TestAccount;
let bob: TestAccount;
let code: StrongRef;
const lines: string[] = [];
const exporter = new InMemorySpanExporter();
/** `docker inspect` of every container with this test's labels, taken while they lived. */
const inspected = new Map<string, unknown>();
let watching = true;
let watcher: Promise<void> | null = null;

const reader = () => createAtprotoReader({ plcUrl: pds.plcUrl });

async function submit(
  record: Record<string, unknown>,
  by: TestAccount = alice,
): Promise<StrongRef & { executionId: string }> {
  const job = await by.publisher.putRecord(AT_RUN_V2.job, undefined, {
    code: code.uri,
    handler: 'digest',
    input: { holdMs: 1500 },
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

/** Inspects every container with this test's labels, again and again, until the test stops it. */
async function watchContainers(): Promise<void> {
  const filters = JSON.stringify({ label: [`runlog.test-run=${RUN}`] });
  while (watching) {
    const list = await docker.listContainers({ all: true, filters }).catch(() => []);
    for (const c of list) {
      const info = await docker
        .getContainer(c.Id)
        .inspect()
        .catch(() => null);
      if (info) inspected.set(`${c.Id} ${info.State?.Status ?? ''}`, info);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Every file under `dir`, recursively (the log, its WAL and shared memory, the key ring, anything else). */
function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    const st = statSync(path, { throwIfNoEntry: false });
    if (!st) return [];
    return st.isDirectory() ? filesUnder(path) : st.isFile() ? [path] : [];
  });
}

function readOrEmpty(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch {
    return Buffer.alloc(0);
  }
}

const spanText = (s: ReadableSpan) =>
  JSON.stringify({ name: s.name, attributes: s.attributes, events: s.events, status: s.status, links: s.links });

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  pds = await startTestPds();
  const publisherAcct = await pds.createAccount('secrets-runtimes.test');
  runner = await pds.createAccount('secrets-runner.test');
  alice = await pds.createAccount('secrets-alice.test');
  bob = await pds.createAccount('secrets-bob.test');
  const atproto = { plcUrl: pds.plcUrl };
  const runtime = await publishRuntime(publisherAcct.publisher, {
    dir: join(REPO, 'runtimes/node'),
    image: imageRef('runtime-node'),
  });
  code = await publishCode(alice.publisher, {
    dir: join(REPO, 'test/fixtures/secrets-node'),
    runtime: runtime.uri,
    atproto,
  });
  home = mkdtempSync(join(tmpdir(), 'runlog-job-secrets-'));
  const options: RunlogOptions = {
    home,
    atproto,
    labels: LABELS,
    receipts: runner.publisher,
    jobs: { from: pds.pdsUrl, cursorEveryMs: 100 },
    log: (m) => lines.push(m),
    tracerProvider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
  };
  // Its start publishes the runner record with the key ring's public key (publishRunnerRecord).
  rl = await createRunlog(options);
  watcher = watchContainers();
}, 240_000);

afterAll(async () => {
  watching = false;
  await watcher;
  await rl?.close();
  await pds?.close();
  await cleanupTestContainers(LABELS);
  await cleanupTestVolumes(LABELS);
  if (home) rmSync(home, { recursive: true, force: true });
});

describe("a job's sealed secrets", () => {
  it('reach the handler, which uses the value; the plaintext is nowhere else', async () => {
    const runnerRecord = await reader().fetchRecord(`at://${runner.did}/${AT_RUN_V2.runner}/self`);
    expect(String(runnerRecord.value.encryptionKey)).toMatch(/^did:key:/);
    const secrets = await sealSecretsFor(alice.publisher, {
      runner: runner.did,
      code: code.uri,
      entries: [{ name: 'API_TOKEN', value: PLAIN }],
      atproto: { plcUrl: pds.plcUrl },
    });
    const job = await submit({ secrets: { uri: secrets.uri, cid: secrets.cid } });
    await expect.poll(() => endedState(job.executionId), { timeout: 90_000 }).toBe('succeeded');

    const view = await rl.inspect(job.executionId);
    const ctx = view.context as ExecutionContext;
    expect(ctx.request?.job).toEqual({ uri: job.uri, cid: job.cid, secrets: { uri: secrets.uri, cid: secrets.cid } });
    expect(ctx.result?.output).toEqual({
      sha256: createHash('sha256').update(PLAIN).digest('hex'),
      length: PLAIN.length,
      names: ['API_TOKEN'],
    });
    const events = await rl.events(job.executionId);
    // What may be recorded: the secrets record and its entry names.
    expect(
      events.find((e) => e.type === 'execution.step' && (e.data as { name?: string }).name === 'secrets'),
    ).toMatchObject({ data: { detail: { uri: secrets.uri, cid: secrets.cid, names: ['API_TOKEN'] } } });
    const receipt = await receiptOf(job.executionId);
    expect(receipt).toMatchObject({ job: { uri: job.uri, cid: job.cid }, outcome: 'succeeded' });
    await rl.idle();
    expect(inspected.size).toBeGreaterThan(0); // the handler's container was seen while it ran
    // The execution's history as `runlog export` writes it, and as an archive holds it once it is archived (every
    // ended actor, so it is done last here: later tests use new jobs of their own).
    const exported = await runCli(['export', job.executionId, '--home', home]);
    expect(exported.code, exported.stderr()).toBe(0);
    expect(exported.stdout()).toContain(job.executionId);
    const archived = join(home, `${job.executionId}.archive`);
    const archive = await rl.archive({ before: new Date(Date.now() + 60_000).toISOString(), out: archived });
    expect(archive.actors).toBeGreaterThan(0);

    // The scans: each is a named haystack, so a failure says where the value leaked.
    const haystacks: [string, Buffer][] = [
      ['events', Buffer.from(JSON.stringify(events))],
      ['inspect', Buffer.from(JSON.stringify(view))],
      ['receipt', Buffer.from(JSON.stringify(receipt))],
      ['log lines', Buffer.from(lines.join('\n'))],
      ['traces', Buffer.from(exporter.getFinishedSpans().map(spanText).join('\n'))],
      ['metrics', Buffer.from((await runlogInternals(rl).metrics?.text()) ?? '')],
      ...[...inspected].map(([id, info]): [string, Buffer] => [
        `docker inspect ${id}`,
        Buffer.from(JSON.stringify(info)),
      ]),
      // A file removed between the listing and the read (a WAL checkpointed away) has nothing left to leak. The log
      // file holds the actors' snapshots too.
      ...filesUnder(home).map((f): [string, Buffer] => [f, readOrEmpty(f)]),
      ['runlog export', Buffer.from(exported.stdout())],
      ['runlog archive', readOrEmpty(archived)],
    ];
    expect(haystacks.filter(([, bytes]) => bytes.includes(PLAIN_BYTES)).map(([where]) => where)).toEqual([]);
    // The containers' argv, environment and labels in particular (also covered by the whole inspect above).
    for (const info of inspected.values()) {
      const c = info as {
        Path?: string;
        Args?: string[];
        Config?: { Env?: string[]; Cmd?: string[]; Labels?: object };
      };
      expect(JSON.stringify([c.Path, c.Args, c.Config?.Env, c.Config?.Cmd, c.Config?.Labels])).not.toContain(PLAIN);
    }
  });

  it('sealed for another code: the job fails with SECRETS_CODE_MISMATCH, is answered, and no container is made', async () => {
    const other = `at://${alice.did}/${AT_RUN_V2.code}/another-code`;
    const secrets = await sealSecretsFor(alice.publisher, {
      runner: runner.did,
      code: other,
      entries: [{ name: 'API_TOKEN', value: PLAIN }],
      atproto: { plcUrl: pds.plcUrl },
    });
    const job = await submit({ secrets: { uri: secrets.uri, cid: secrets.cid } });
    await expect.poll(() => endedState(job.executionId), { timeout: 60_000 }).toBe('failed');
    const ctx = (await rl.inspect(job.executionId)).context as ExecutionContext;
    expect(ctx.failure).toMatchObject({ reason: 'validation', code: 'SECRETS_CODE_MISMATCH' });
    expect(JSON.stringify(ctx.failure)).not.toContain(PLAIN);
    const events = await rl.events(job.executionId);
    expect(events.map((e) => e.type)).not.toContain('execution.resolved');
    expect(events.map((e) => e.type)).not.toContain('execution.started');
    expect(await receiptOf(job.executionId)).toMatchObject({
      job: { uri: job.uri, cid: job.cid },
      outcome: 'failed',
      failure: { kind: 'validation', code: 'SECRETS_CODE_MISMATCH' },
    });
    expect(await containersOf(job.executionId)).toBe(0);
  });

  it("naming another account's secrets record: SECRETS_NOT_CALLERS, and no container is made", async () => {
    const secrets = await sealSecretsFor(alice.publisher, {
      runner: runner.did,
      code: code.uri,
      entries: [{ name: 'API_TOKEN', value: PLAIN }],
      atproto: { plcUrl: pds.plcUrl },
    });
    // Bob copies alice's (public) strong ref into his own job for her code.
    const job = await submit({ secrets: { uri: secrets.uri, cid: secrets.cid } }, bob);
    await expect.poll(() => endedState(job.executionId), { timeout: 60_000 }).toBe('failed');
    const ctx = (await rl.inspect(job.executionId)).context as ExecutionContext;
    expect(ctx.failure).toMatchObject({ reason: 'validation', code: 'SECRETS_NOT_CALLERS' });
    expect(ctx.result ?? null).toBeNull();
    expect(await containersOf(job.executionId)).toBe(0);
  });
});
