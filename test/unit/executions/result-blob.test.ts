// A job's result goes back to the network: the exact JSON bytes outputSha256 hashes are uploaded as a blob the
// receipt references, sealed to the job's resultKey when it names one. Only for a job that succeeded; a failed seal
// or upload is the outcome's receiptError, never its end.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  AT_RUN_V2,
  AtprotoError,
  cidForBlobBytes,
  cidForRecordJson,
  type BlobRef,
  type Publisher,
} from '../../../src/adapters/atproto/index.ts';
import type { Parts } from '../../../src/config/parts.ts';
import { openResult, SEALED_RESULT_MIME_TYPE } from '../../../src/domain/at-run/sealed-result.ts';
import { encodeX25519DidKey, X25519PrivateKey } from '../../../src/domain/at-run/x25519-keys.ts';
import type { ExecutionRequest, Resolved } from '../../../src/domain/execution-events.ts';
import { outcomeEvent, type OutcomeEvent } from '../../../src/supervisor/executions/execution-outcomes.ts';
import { writeReceiptFor } from '../../../src/supervisor/executions/execution-receipts.ts';
import type { InvocationResult } from '../../../src/adapters/docker/invocation-result.ts';
import { partial } from '../../support/partial.ts';

const DID = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa';
const sha = (c: string) => c.repeat(64);
const JOB = { uri: `at://${DID}/${AT_RUN_V2.job}/3kabcdefgh2aa`, cid: cidForRecordJson({ $type: AT_RUN_V2.job }) };
const request: ExecutionRequest = {
  executionId: 'exec_Q2ZJ8W0R5X1M3K7T9B4N6P8H2C',
  uri: `at://${DID}/${AT_RUN_V2.code}/greet`,
  handler: 'greet',
  input: { name: 'Ada' },
  callerDid: DID,
  timeoutMs: 1000,
  job: JOB,
};
const resolved = partial<Resolved>({
  codeUri: `at://${DID}/${AT_RUN_V2.code}/greet`,
  codeCid: cidForRecordJson({ code: 1 }),
  runtimeUri: `at://${DID}/${AT_RUN_V2.runtime}/node`,
  runtimeCid: cidForRecordJson({ runtime: 1 }),
  blobCid: cidForBlobBytes(new Uint8Array([1, 2, 3])),
  image: `localhost:5000/runtime-node@sha256:${sha('a')}`,
  additions: [],
  limits: partial<Resolved['limits']>({ memoryMb: 256, pids: 64, cpus: 0.5, timeoutMs: 30_000 }),
});
const parts = partial<Parts>({ images: { 'at-run-sandbox': `localhost:5000/sandbox@sha256:${sha('b')}` } });
const times = { startedAt: '2026-01-02T00:00:00.000Z', finishedAt: () => '2026-01-02T00:00:01.000Z' };

type Succeeded = Extract<OutcomeEvent, { type: 'execution.succeeded' }>;

function succeeded(output: unknown): Succeeded {
  return outcomeEvent(
    partial<InvocationResult>({
      outcome: 'succeeded',
      output,
      exitCode: 0,
      stderr: '',
      stdoutBytes: 10,
      timings: partial<InvocationResult['timings']>({}),
    }),
    sha('c'),
  ) as Succeeded;
}

function fakePublisher(opts: { uploadFails?: boolean } = {}) {
  const uploads: { bytes: Uint8Array; mimeType: string }[] = [];
  const records: Record<string, unknown>[] = [];
  const publisher = partial<Publisher>({
    uploadBlob: async (bytes: Uint8Array, mimeType: string): Promise<BlobRef> => {
      if (opts.uploadFails) throw new AtprotoError('PDS_UNREACHABLE', 'the PDS did not answer');
      uploads.push({ bytes, mimeType });
      return { $type: 'blob', ref: { $link: cidForBlobBytes(bytes) }, mimeType, size: bytes.byteLength };
    },
    putRecord: async (collection: string, rkey: string, record: Record<string, unknown>) => {
      records.push(record);
      return { uri: `at://did:plc:runner/${collection}/${rkey}`, cid: cidForRecordJson(record as never) };
    },
  });
  return { publisher, uploads, records };
}

describe('the result of a job on the network', () => {
  it('uploads the bytes outputSha256 hashes as application/json and references them from the receipt', async () => {
    const { publisher, uploads, records } = fakePublisher();
    const event = succeeded({ greeting: 'Hello, Ada!', n: [1, 2] });
    await writeReceiptFor(publisher, parts, event, request, resolved, times);
    expect(uploads).toHaveLength(1);
    const { bytes, mimeType } = uploads[0]!;
    expect(mimeType).toBe('application/json');
    expect(Buffer.from(bytes).toString('utf8')).toBe('{"greeting":"Hello, Ada!","n":[1,2]}');
    const outputSha256 = createHash('sha256').update(bytes).digest('hex');
    expect(records[0]).toMatchObject({
      outputSha256,
      result: { $type: 'blob', ref: { $link: cidForBlobBytes(bytes) }, mimeType: 'application/json', size: 36 },
      job: JOB,
    });
    expect(event.data.outputHash).toBe(outputSha256);
    expect(event.data.receipt?.uri).toContain(request.executionId);
    expect(event.data.receiptError).toBeUndefined();
  });

  it('uploads a null result as the bytes "null"', async () => {
    const { publisher, uploads, records } = fakePublisher();
    await writeReceiptFor(publisher, parts, succeeded(undefined), request, resolved, times);
    expect(Buffer.from(uploads[0]!.bytes).toString('utf8')).toBe('null');
    expect(records[0]).toMatchObject({ result: { size: 4 } });
  });

  it('uploads nothing for an execution that was not a job, or that failed', async () => {
    const { job: _job, ...local } = request;
    const { publisher, uploads, records } = fakePublisher();
    await writeReceiptFor(publisher, parts, succeeded({ ok: true }), local, resolved, times);
    const failed: OutcomeEvent = {
      type: 'execution.failed',
      data: { reason: 'runtime', code: 'HANDLER_THREW', message: 'boom', inputHash: sha('c') },
    };
    await writeReceiptFor(publisher, parts, failed, request, resolved, times);
    expect(uploads).toEqual([]);
    expect(records).toHaveLength(2);
    for (const r of records) expect(r).not.toHaveProperty('result');
  });

  it('records a failed upload as the receiptError and still writes the receipt, without a result', async () => {
    const { publisher, records } = fakePublisher({ uploadFails: true });
    const event = succeeded({ greeting: 'Hello, Ada!' });
    await writeReceiptFor(publisher, parts, event, request, resolved, times);
    expect(records).toHaveLength(1);
    expect(records[0]).not.toHaveProperty('result');
    expect(records[0]).toMatchObject({ outcome: 'succeeded', outputSha256: event.data.outputHash });
    expect(event.data.receipt).toBeDefined();
    expect(event.data.receiptError).toEqual({
      code: 'PDS_UNREACHABLE',
      message: 'the result blob: the PDS did not answer',
    });
  });

  it(
    "seals the result to the job's resultKey: the blob holds no plaintext, " +
      'and outputSha256 hashes the envelope, not the plaintext',
    async () => {
      const key = X25519PrivateKey.generate();
      const sealedJob = { ...request, job: { ...JOB, resultKey: key.publicKey } };
      const { publisher, uploads, records } = fakePublisher();
      const event = succeeded({ greeting: 'Hello, Ada!', token: 'only-for-the-caller' });
      await writeReceiptFor(publisher, parts, event, sealedJob, resolved, times);
      expect(uploads).toHaveLength(1);
      const { bytes, mimeType } = uploads[0]!;
      expect(mimeType).toBe(SEALED_RESULT_MIME_TYPE);
      for (const needle of ['only-for-the-caller', 'Hello', 'greeting'])
        expect(Buffer.from(bytes).includes(needle), needle).toBe(false);
      const plaintext = openResult(bytes, key, JOB);
      expect(Buffer.from(plaintext).toString('utf8')).toBe('{"greeting":"Hello, Ada!","token":"only-for-the-caller"}');
      // The log keeps the plaintext's hash (it is not public); the receipt has the envelope's, so a guessable result
      // cannot be confirmed by hashing guesses.
      expect(event.data.outputHash).toBe(createHash('sha256').update(plaintext).digest('hex'));
      const outputSha256 = createHash('sha256').update(bytes).digest('hex');
      expect(records[0]).toMatchObject({
        outputSha256,
        result: { $type: 'blob', ref: { $link: cidForBlobBytes(bytes) }, mimeType: SEALED_RESULT_MIME_TYPE },
        job: JOB,
      });
      expect(JSON.stringify(records[0])).not.toContain('only-for-the-caller');
      expect(JSON.stringify(records[0])).not.toContain(event.data.outputHash!);
      expect(event.data.receiptError).toBeUndefined();
    },
  );

  it('uploads nothing in clear when the result cannot be sealed: the receipt has no result, the error says why', async () => {
    const lowOrder = encodeX25519DidKey(new Uint8Array(32));
    const { publisher, uploads, records } = fakePublisher();
    const event = succeeded({ greeting: 'Hello, Ada!' });
    await writeReceiptFor(
      publisher,
      parts,
      event,
      { ...request, job: { ...JOB, resultKey: lowOrder } },
      resolved,
      times,
    );
    expect(uploads).toEqual([]);
    expect(records).toHaveLength(1);
    expect(records[0]).not.toHaveProperty('result');
    expect(event.data.receiptError).toMatchObject({ code: 'ENCRYPTION_KEY_INVALID' });
    expect(event.data.receiptError?.message).toContain('the result blob: ');
  });
});
