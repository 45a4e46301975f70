// `runlog job submit --wait` end to end: alice runs the command in process against a real PDS (in process); the
// runner follows that PDS's repo event stream, runs the job in real Docker, uploads the result as a blob (sealed to
// the key the command made, unless --no-seal-result) and writes the receipt; the command reads the receipt strictly,
// opens the result, checks it against outputSha256 and prints it.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AT_RUN_V2, createAtprotoReader, type StrongRef } from '../../../src/adapters/atproto/index.ts';
import { jobExecutionId } from '../../../src/adapters/ids.ts';
import { main } from '../../../src/cli/main.ts';
import { SEALED_RESULT_MIME_TYPE, openResult } from '../../../src/domain/at-run/sealed-result.ts';
import { X25519PrivateKey } from '../../../src/domain/at-run/x25519-keys.ts';
import { publishCode, publishRuntime } from '../../../src/supervisor/executions/publishing.ts';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import { capture } from '../../support/cli-in-process.ts';
import {
  cleanupTestContainers,
  cleanupTestVolumes,
  imageRef,
  requireDocker,
  requireRegistry,
  TEST_LABELS,
} from '../../support/docker.ts';
import { startTestPds, type TestAccount, type TestPds } from '../../support/pds.ts';

const REPO = resolve(import.meta.dirname, '../../..');
const LABELS = { ...TEST_LABELS, 'runlog.test-run': `job-submit-${process.pid}-${Date.now()}` };
let pds: TestPds;
let rl: Runlog;
let home: string;
let runner: TestAccount;
let alice: TestAccount;
let code: StrongRef;

/** `runlog job submit …` as alice, in process, with her account and the test PLC directory. */
async function submitAsAlice(...argv: string[]) {
  const c = capture();
  const status = await main(
    [
      'job',
      'submit',
      ...argv,
      '--pds',
      pds.pdsUrl,
      '--identifier',
      alice.did,
      '--password',
      alice.password,
      '--plc',
      pds.plcUrl,
    ],
    c.factory,
  );
  return { status, out: c.stdout(), err: c.stderr() };
}

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  pds = await startTestPds();
  const publisherAcct = await pds.createAccount('submit-runtimes.test');
  runner = await pds.createAccount('submit-runner.test');
  alice = await pds.createAccount('submit-alice.test');
  const atproto = { plcUrl: pds.plcUrl };
  const runtime = await publishRuntime(publisherAcct.publisher, {
    dir: join(REPO, 'runtimes/node'),
    image: imageRef('runtime-node'),
  });
  code = await publishCode(alice.publisher, { dir: join(REPO, 'examples/greet-node'), runtime: runtime.uri, atproto });
  home = mkdtempSync(join(tmpdir(), 'runlog-job-submit-'));
  rl = await createRunlog({
    home,
    atproto,
    labels: LABELS,
    receipts: runner.publisher,
    jobs: { from: pds.pdsUrl, cursorEveryMs: 100 },
    log: () => undefined,
  });
}, 240_000);

afterAll(async () => {
  await rl?.close();
  await pds?.close();
  await cleanupTestContainers(LABELS);
  await cleanupTestVolumes(LABELS);
  if (home) rmSync(home, { recursive: true, force: true });
});

const sha256Hex = (b: Uint8Array | string): string => createHash('sha256').update(b).digest('hex');

describe('runlog job submit --wait', () => {
  it("with --no-seal-result, prints the greeting the runner's result blob holds in clear", async () => {
    const r = await submitAsAlice(
      code.uri,
      'greet',
      '--input',
      '{"name":"Ada"}',
      '--runner',
      runner.did,
      '--wait',
      '--no-seal-result',
      '--timeout',
      '90000',
      '--json',
    );
    expect(r.status, r.err).toBe(0);
    const answer = JSON.parse(r.out) as {
      uri: string;
      cid: string;
      executionId: string;
      outcome: string;
      output: Record<string, unknown>;
      outputSha256: string;
      receipt: StrongRef;
      result: { cid: string; size: number; sealed: boolean };
    };
    expect(answer.outcome).toBe('succeeded');
    expect(answer.result.sealed).toBe(false);
    expect(answer.output).toMatchObject({ greeting: 'Hello, Ada!', caller: alice.did });
    expect(answer.uri).toMatch(new RegExp(`^at://${alice.did}/${AT_RUN_V2.job}/`));
    expect(answer.executionId).toBe(jobExecutionId(answer.uri, answer.cid));
    expect(answer.receipt.uri).toBe(`at://${runner.did}/${AT_RUN_V2.execution}/${answer.executionId}`);

    // The receipt, read on its own: it names the job and a result blob whose sha256 is its outputSha256.
    const reader = createAtprotoReader({ plcUrl: pds.plcUrl });
    const receipt = (await reader.fetchRecord(answer.receipt.uri, { mode: 'strict' })).value as unknown as {
      job: StrongRef;
      outputSha256: string;
      result: { $type: string; ref: { $link: string }; mimeType: string; size: number };
    };
    expect(receipt.job).toEqual({ uri: answer.uri, cid: answer.cid });
    expect(receipt.result).toMatchObject({ $type: 'blob', mimeType: 'application/json' });
    const blob = await reader.fetchBlob(runner.did, receipt.result.ref.$link);
    expect(blob.size).toBe(receipt.result.size);
    expect(createHash('sha256').update(blob.bytes).digest('hex')).toBe(receipt.outputSha256);
    expect(receipt.outputSha256).toBe(answer.outputSha256);
    expect(JSON.parse(Buffer.from(blob.bytes).toString('utf8'))).toEqual(answer.output);
  });

  it('by default seals the result to a key only the command holds: the PDS has the envelope, never the result', async () => {
    const r = await submitAsAlice(
      code.uri,
      'greet',
      '--input',
      '{"name":"Sealed Grace"}',
      '--runner',
      runner.did,
      '--wait',
      '--timeout',
      '90000',
      '--json',
    );
    expect(r.status, r.err).toBe(0);
    const answer = JSON.parse(r.out) as {
      uri: string;
      cid: string;
      outcome: string;
      output: Record<string, unknown>;
      outputSha256: string;
      receipt: StrongRef;
      result: { cid: string; size: number; sealed: boolean };
    };
    // The round trip: the runner sealed it, the command checked the envelope against outputSha256 and opened it.
    expect(answer.outcome).toBe('succeeded');
    expect(answer.output).toMatchObject({ greeting: 'Hello, Sealed Grace!', caller: alice.did });
    expect(answer.result.sealed).toBe(true);

    // What anyone can read on the network: the job names a public key, the receipt a sealed blob.
    const reader = createAtprotoReader({ plcUrl: pds.plcUrl });
    const job = (await reader.fetchRecord(answer.uri, { mode: 'strict' })).value as { resultKey?: string };
    expect(job.resultKey).toMatch(/^did:key:z6LS/);
    const receipt = (await reader.fetchRecord(answer.receipt.uri, { mode: 'strict' })).value as unknown as {
      outputSha256: string;
      result: { $type: string; ref: { $link: string }; mimeType: string; size: number };
    };
    expect(receipt.result).toMatchObject({ $type: 'blob', mimeType: SEALED_RESULT_MIME_TYPE });
    expect(receipt.result.ref.$link).toBe(answer.result.cid);
    expect(JSON.stringify(receipt)).not.toContain('Sealed Grace');
    const blob = await reader.fetchBlob(runner.did, receipt.result.ref.$link);
    const text = Buffer.from(blob.bytes).toString('utf8');
    for (const plaintext of ['Sealed Grace', 'greeting', alice.did]) expect(text).not.toContain(plaintext);
    expect(JSON.parse(text)).toMatchObject({ v: 1, alg: 'x25519-xchacha20poly1305', recipientKey: job.resultKey });
    // outputSha256 hashes the envelope, never the plaintext: a public hash of a guessable result would give it away.
    expect(receipt.outputSha256).toBe(answer.outputSha256);
    expect(sha256Hex(blob.bytes)).toBe(receipt.outputSha256);
    expect(JSON.stringify(receipt)).not.toContain(sha256Hex(JSON.stringify(answer.output)));
    // Another key does not open it.
    expect(() => openResult(blob.bytes, X25519PrivateKey.generate(), { uri: answer.uri, cid: answer.cid })).toThrow(
      /sealed result cannot be opened/,
    );
  });

  it('prints the plain output without --json, and exits with the failure of a job refused by the runner', async () => {
    const ok = await submitAsAlice(code.uri, 'greet', '--input', '{"name":"Grace"}', '--runner', runner.did, '--wait');
    expect(ok.status, ok.err).toBe(0);
    expect(JSON.parse(ok.out)).toMatchObject({ greeting: 'Hello, Grace!' });

    const expired = await submitAsAlice(
      code.uri,
      'greet',
      '--runner',
      runner.did,
      '--not-after',
      '2026-01-01T00:00:00Z',
      '--wait',
      '--timeout',
      '60000',
    );
    // JOB_EXPIRED is a timeout in the error table: exit 1.
    expect(expired.status).toBe(1);
    expect(expired.out).toBe('');
    expect(expired.err).toContain('JOB_EXPIRED');
  });

  it('gives up with TIMEOUT when the runner named never answers', async () => {
    const r = await submitAsAlice(code.uri, 'greet', '--runner', alice.did, '--wait', '--timeout', '1500', '--json');
    expect(r.status).toBe(1);
    expect(JSON.parse(r.err)).toMatchObject({ error: { code: 'TIMEOUT' } });
  });
});
