// A job's sealed secrets reach the handler's envelope and nothing else: resolution opens them to check them and
// records at most the secrets record and its entry names; the invoke step opens them again for context.secrets. A
// check that fails is a typed failure whose message carries no value; a job without secrets is as before.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as dagCbor from '@ipld/dag-cbor';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AtprotoReader, FetchedRecord } from '../../../src/adapters/atproto/index.ts';
import type { DockerEngine } from '../../../src/adapters/docker/docker-port.ts';
import type { ExecutionSandbox, InvocationEnvelope } from '../../../src/adapters/docker/execution-sandbox.ts';
import { openRunnerKeyRing } from '../../../src/adapters/files/runner-keys.ts';
import type { Parts } from '../../../src/config/parts.ts';
import { CODE_RECORD_NSID } from '../../../src/domain/at-run/code-record.ts';
import { DEFAULT_OPERATOR_POLICY, type OperatorPolicy } from '../../../src/domain/at-run/operator-policy.ts';
import { RUNTIME_RECORD_NSID } from '../../../src/domain/at-run/runtime-record.ts';
import { SECRETS_NSID, sealEntries } from '../../../src/domain/at-run/sealed-secrets.ts';
import type { Resolved } from '../../../src/domain/execution-events.ts';
import type { ExecutionRequest } from '../../../src/machines/execution.machine.ts';
import type { CodePreparation } from '../../../src/supervisor/executions/code-preparation.ts';
import { ExecutionEgressSteps } from '../../../src/supervisor/executions/execution-egress.ts';
import { ExecutionInvoker } from '../../../src/supervisor/executions/execution-invoke.ts';
import { LatencyProfiles } from '../../../src/supervisor/executions/execution-profiles.ts';
import type {
  ExecutionEffectContext,
  ExecutionProgress,
} from '../../../src/supervisor/executions/execution-progress.ts';
import { ExecutionResolver } from '../../../src/supervisor/executions/execution-resolver.ts';
import { checkEnvelope, envelopeOf } from '../../../src/supervisor/executions/invocation-envelope.ts';
import { JobSecrets } from '../../../src/supervisor/executions/job-secrets.ts';
import type { PrestartGate } from '../../../src/supervisor/executions/pool/prestart-gate.ts';
import type { PoolTarget, SandboxPool } from '../../../src/supervisor/executions/pool/sandbox-pool.ts';
import type { DispatchResult } from '../../../src/supervisor/host/actor-host.ts';
import { partial } from '../../support/partial.ts';

const RUNNER = 'did:plc:runnerrunnerrunnerrunner';
const ALICE = 'did:plc:alicealicealicealicealic';
const CODE_URI = `at://${ALICE}/${CODE_RECORD_NSID}/greet`;
const OTHER_CODE_URI = `at://${ALICE}/${CODE_RECORD_NSID}/other`;
const RUNTIME_URI = `at://did:plc:runtimepublisher000000/${RUNTIME_RECORD_NSID}/node`;
const PLAIN = 'tok_' + 'f00dfeed'.repeat(4);

let home: string;
let otherHome: string;
let runtimeCid: string;
const records = new Map<string, { cid: string; value: unknown }>();
const cidOf = async (value: unknown) =>
  CID.create(1, dagCbor.code, await sha256.digest(dagCbor.encode(value))).toString();

/** Seals PLAIN as API_TOKEN to `home`'s ring under `rkey`, and serves the record; answers its strong ref. */
async function sealed(rkey: string, opts: { code?: string; ring?: string } = {}) {
  const uri = `at://${ALICE}/${SECRETS_NSID}/${rkey}`;
  const value = sealEntries({
    recordUri: uri,
    runner: RUNNER,
    recipientKey: openRunnerKeyRing(opts.ring ?? home).current().publicKey,
    ...(opts.code ? { code: opts.code } : {}),
    entries: [{ name: 'API_TOKEN', value: PLAIN }],
  });
  const cid = await cidOf(value);
  records.set(uri, { cid, value });
  return { uri, cid };
}

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'runlog-job-secrets-'));
  otherHome = mkdtempSync(join(tmpdir(), 'runlog-job-secrets-other-'));
  const runtime = {
    $type: RUNTIME_RECORD_NSID,
    name: 'node',
    protocolVersion: 1,
    kind: 'language',
    platforms: [
      {
        os: 'linux',
        architecture: 'amd64',
        image: `localhost:5000/runtimes/node@sha256:${'a'.repeat(64)}`,
        exportPath: '/at-run/runtime',
        launcher: { path: 'bin/node', args: ['/opt/at-run/runtime/adapter/worker.mjs', '{entrypoint}'] },
      },
    ],
    createdAt: '2026-08-18T16:00:00.000Z',
  };
  runtimeCid = await cidOf(runtime);
  records.set(RUNTIME_URI, { cid: runtimeCid, value: runtime });
  const blobCid = CID.create(1, 0x55, await sha256.digest(new TextEncoder().encode('a tar archive'))).toString();
  const code = {
    $type: CODE_RECORD_NSID,
    runtime: 'node',
    runtimeRecord: { uri: RUNTIME_URI, cid: runtimeCid },
    blob: { $type: 'blob', ref: { $link: blobCid }, mimeType: `application/${runtimeCid}`, size: 10240 },
    entrypoint: 'index.mjs',
    handlers: ['greet'],
    createdAt: '2026-08-18T16:00:00.000Z',
  };
  records.set(CODE_URI, { cid: await cidOf(code), value: code });
});

afterAll(() => {
  rmSync(home, { recursive: true, force: true });
  rmSync(otherHome, { recursive: true, force: true });
});

/** A reader over `records`, counting the reads of each URI. */
function fakeReader(reads: string[]): AtprotoReader {
  return partial<AtprotoReader>({
    resolveCodeUri: async (uri: string) => ({ codeUri: uri }),
    fetchRecord: async (uri: string, opts?: { expectCid?: string }) => {
      reads.push(uri);
      const got = records.get(uri);
      if (!got) throw new Error(`no record ${uri}`);
      if (opts?.expectCid && opts.expectCid !== got.cid) throw new Error(`cid mismatch for ${uri}`);
      return partial<FetchedRecord>({ uri, cid: got.cid, value: got.value as FetchedRecord['value'], mode: 'strict' });
    },
  });
}

const jobSecrets = (reader: AtprotoReader, ringHome = home) =>
  new JobSecrets({ reader, ring: () => openRunnerKeyRing(ringHome), runnerDid: () => RUNNER, nowMs: () => Date.now() });

const requestWith = (secrets?: { uri: string; cid: string }): ExecutionRequest => ({
  executionId: 'exec_1',
  uri: CODE_URI,
  handler: 'greet',
  input: { name: 'Ada' },
  callerDid: ALICE,
  timeoutMs: 30_000,
  job: { uri: `at://${ALICE}/dev.mainasara.at-run.beta.v2.job/j1`, cid: 'bafyjob', ...(secrets ? { secrets } : {}) },
});

/** Runs the resolve effect; answers every event it dispatched and every step it recorded. */
async function resolveWith(request: ExecutionRequest, ringHome = home) {
  const reads: string[] = [];
  const reader = fakeReader(reads);
  const events: { type: string; data: unknown }[] = [];
  const steps: { name: string; detail: unknown }[] = [];
  const resolver = new ExecutionResolver({
    policy: DEFAULT_OPERATOR_POLICY,
    reader,
    engine: () => partial<DockerEngine>({ platform: async () => ({ os: 'linux', architecture: 'amd64' }) }),
    code: partial<CodePreparation>({ start: () => undefined, drop: () => undefined }),
    gate: partial<PrestartGate<PoolTarget>>({ begin: () => undefined }),
    profiles: new LatencyProfiles(),
    progress: partial<ExecutionProgress>({
      step: async (_ctx: ExecutionEffectContext, name: string, detail: Record<string, unknown>) => {
        steps.push({ name, detail });
      },
    }),
    secrets: jobSecrets(reader, ringHome),
    nowMs: () => Date.now(),
  });
  const ctx = partial<ExecutionEffectContext>({
    actor: partial<ExecutionEffectContext['actor']>({
      id: 'exec_1',
      stream: 'execution-exec_1',
      snapshot: { context: { requestedAt: new Date().toISOString() } } as ExecutionEffectContext['actor']['snapshot'],
    }),
    dispatch: async (e) => {
      events.push(e as { type: string; data: unknown });
      return partial<DispatchResult>({ accepted: true });
    },
  });
  await resolver.resolve(request, ctx);
  return { events, steps, reads };
}

describe("a job's secrets at resolution", () => {
  it('are opened to check them; the resolved facts and steps name the record and the entry names, never a value', async () => {
    const ref = await sealed('s-ok', { code: CODE_URI });
    const { events, steps, reads } = await resolveWith(requestWith(ref));
    expect(events.map((e) => e.type)).toEqual(['execution.resolved']);
    expect(reads).toContain(ref.uri);
    expect(steps.find((s) => s.name === 'secrets')?.detail).toEqual({ ...ref, names: ['API_TOKEN'] });
    expect(JSON.stringify({ events, steps })).not.toContain(PLAIN);
    expect(JSON.stringify(events[0]!.data)).not.toContain('API_TOKEN');
  });

  it('sealed for another code: the execution fails with SECRETS_CODE_MISMATCH, and the message carries no value', async () => {
    const ref = await sealed('s-other-code', { code: OTHER_CODE_URI });
    const { events } = await resolveWith(requestWith(ref));
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      type: 'execution.failed',
      data: { reason: 'validation', code: 'SECRETS_CODE_MISMATCH' },
    });
    expect(JSON.stringify(events)).not.toContain(PLAIN);
  });

  it('sealed to a key this runner does not hold: SECRETS_KEY_UNKNOWN, before anything is resolved', async () => {
    const ref = await sealed('s-other-key', { ring: otherHome });
    const { events } = await resolveWith(requestWith(ref));
    expect(events).toMatchObject([{ type: 'execution.failed', data: { code: 'SECRETS_KEY_UNKNOWN' } }]);
    expect(JSON.stringify(events)).not.toContain(PLAIN);
  });

  it("naming another account's secrets record: SECRETS_NOT_CALLERS, and the record is not even read", async () => {
    const ref = await sealed('s-not-mine', { code: CODE_URI });
    const { events, reads } = await resolveWith({ ...requestWith(ref), callerDid: 'did:plc:mallorymallorymallorymal' });
    expect(events).toMatchObject([{ type: 'execution.failed', data: { code: 'SECRETS_NOT_CALLERS' } }]);
    expect(reads).not.toContain(ref.uri);
  });

  it('a job that names no secrets resolves as before: no secrets read, no secrets step', async () => {
    const { events, steps, reads } = await resolveWith(requestWith());
    expect(events.map((e) => e.type)).toEqual(['execution.resolved']);
    expect(steps.map((s) => s.name)).not.toContain('secrets');
    expect(reads.some((u) => u.includes(SECRETS_NSID))).toBe(false);
  });
});

describe("a job's secrets in the envelope", () => {
  const resolved = partial<Resolved>({
    codeUri: CODE_URI,
    codeCid: 'bafycode',
    via: null,
    limits: partial<Resolved['limits']>({ timeoutMs: 10_000, frameBytes: 1024, stdoutBytes: 1024, stderrBytes: 1024 }),
  });

  /** Runs the invoke effect; answers the envelope the sandbox was handed and the events dispatched. */
  async function invokeWith(request: ExecutionRequest, resumed = false) {
    const sent: InvocationEnvelope[] = [];
    const events: unknown[] = [];
    const invoker = new ExecutionInvoker({
      parts: partial<Parts>({}),
      policy: DEFAULT_OPERATOR_POLICY,
      pool: () => partial<SandboxPool>({}),
      sandbox: () =>
        partial<ExecutionSandbox>({
          invoke: async (_id: string, envelope: InvocationEnvelope) => {
            sent.push(envelope);
            throw new Error('the fake sandbox stops here');
          },
        }),
      gate: partial<PrestartGate<PoolTarget>>({ answered: () => undefined }),
      profiles: new LatencyProfiles(),
      labels: (extra) => extra,
      nowMs: () => Date.now(),
      secrets: jobSecrets(fakeReader([])),
      egress: new ExecutionEgressSteps(() => null),
    });
    const ctx = partial<ExecutionEffectContext>({
      dispatch: async (e) => {
        events.push(e);
        return partial<DispatchResult>({ accepted: true });
      },
    });
    const deadline = new Date(Date.now() + 20_000).toISOString();
    await invoker.invoke(request, 'c1', deadline, resolved, ctx, resumed);
    return { sent, events };
  }

  it('carries them as context.secrets, opened again at invoke; the events do not', async () => {
    const ref = await sealed('s-invoke', { code: CODE_URI });
    const { sent, events } = await invokeWith(requestWith(ref));
    expect(sent).toHaveLength(1);
    expect(sent[0]!.context.secrets).toEqual({ API_TOKEN: PLAIN });
    expect(JSON.stringify(events)).not.toContain(PLAIN);
  });

  it('are opened again the same way when the invoke is resumed after a restart', async () => {
    const ref = await sealed('s-resumed', { code: CODE_URI });
    const { sent, events } = await invokeWith(requestWith(ref), true);
    expect(sent[0]!.context.secrets).toEqual({ API_TOKEN: PLAIN });
    expect(JSON.stringify(events)).not.toContain(PLAIN);
  });

  it('without secrets the envelope has no secrets key', async () => {
    const { sent } = await invokeWith(requestWith());
    expect(sent[0]!.context).not.toHaveProperty('secrets');
    expect(envelopeOf(requestWith(), resolved, 'd').context).toEqual({ callerDid: ALICE, deadline: 'd' });
  });

  it('a check that fails at invoke (the record now sealed elsewhere) fails the execution and sends nothing', async () => {
    const ref = await sealed('s-invoke-other', { code: OTHER_CODE_URI });
    const { sent, events } = await invokeWith(requestWith(ref));
    expect(sent).toHaveLength(0);
    expect(events).toMatchObject([{ type: 'execution.failed', data: { code: 'SECRETS_CODE_MISMATCH' } }]);
  });

  it('are counted by the envelope size check, whose message gives sizes only', () => {
    const policy = partial<OperatorPolicy>({
      ...DEFAULT_OPERATOR_POLICY,
      input: { ...DEFAULT_OPERATOR_POLICY.input, maxBytes: 0 },
    });
    const big = 'x'.repeat(66_000) + PLAIN;
    expect(() => checkEnvelope(policy, requestWith(), resolved)).not.toThrow();
    let message = '';
    try {
      checkEnvelope(policy, requestWith(), resolved, { API_TOKEN: big });
    } catch (err) {
      message = (err as Error).message;
      expect((err as { code?: string }).code).toBe('ENVELOPE_TOO_LARGE');
    }
    expect(message).toMatch(/bytes/);
    expect(message).not.toContain(PLAIN);
  });
});
