// Receipts: what an execution used and produced, written to the operator's repo before its outcome is recorded, and
// the runner record that advertises this runner's policy.
import { createHash } from 'node:crypto';
import {
  putRunnerRecord,
  writeExecutionReceipt,
  writeNotRunReceipt,
  type BlobRef,
  type ExecutionEgress,
  type Publisher,
} from '../../adapters/atproto/index.ts';
import type { RunnerKeyInfo } from '../../adapters/files/runner-keys.ts';
import { requireImage, type Parts } from '../../config/parts.ts';
import type { OperatorPolicy } from '../../domain/at-run/operator-policy.ts';
import { SEALED_RESULT_MIME_TYPE, sealResult } from '../../domain/at-run/sealed-result.ts';
import type { RunlogError } from '../../domain/errors.ts';
import type { FailedData, Refusal, Resolved } from '../../domain/execution-events.ts';
import type { ExecutionRequest } from '../../machines/execution.machine.ts';
import { sha256, type OutcomeEvent } from './execution-outcomes.ts';

const sha256Bytes = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/**
 * A job's result, uploaded as a blob the receipt references: exactly the bytes outputSha256 hashes (the JSON text
 * outcomeEvent hashed), so the caller can check one against the other. When the job names a resultKey those bytes
 * are sealed to it (sealed-result.ts) and only the envelope is uploaded: the result never reaches the PDS in clear,
 * and the receipt's outputSha256 hashes the envelope, not the plaintext. A public hash of the plaintext would let
 * anyone confirm a guessable result (yes or no, a small number) by hashing guesses; the envelope's AEAD tag already
 * proves the plaintext to the key's holder. Only for a
 * job that succeeded: a local caller has its result from the log. The bytes are bounded already by the frame and
 * stdout limits they came under. A failed seal or upload is the outcome's receiptError; the receipt is still
 * written, without a result, so the caller is answered.
 */
async function uploadResult(
  publisher: Publisher,
  event: OutcomeEvent,
  request: ExecutionRequest,
): Promise<{ ref: BlobRef; sha256: string } | undefined> {
  const job = request.job;
  if (!job || event.type !== 'execution.succeeded' || !event.data.outputHash) return undefined;
  const bytes = Buffer.from(JSON.stringify(event.data.output ?? null), 'utf8');
  if (sha256Bytes(bytes) !== event.data.outputHash) return undefined;
  try {
    if (job.resultKey === undefined)
      return { ref: await publisher.uploadBlob(bytes, 'application/json'), sha256: event.data.outputHash };
    const sealed = sealResult(bytes, job.resultKey, job);
    return { ref: await publisher.uploadBlob(sealed, SEALED_RESULT_MIME_TYPE), sha256: sha256Bytes(sealed) };
  } catch (err) {
    event.data.receiptError = {
      code: (err as RunlogError).code ?? 'RECEIPT_FAILED',
      message: `the result blob: ${(err as Error).message}`,
    };
    return undefined;
  }
}

/** Writes the receipt before the outcome is recorded, so the outcome event names it (or why it failed). */
export async function writeReceiptFor(
  publisher: Publisher,
  parts: Parts,
  event: OutcomeEvent,
  request: ExecutionRequest,
  r: Resolved,
  times: { startedAt: string; finishedAt: () => string; egress?: ExecutionEgress },
): Promise<void> {
  const d = event.data;
  const failed = event.type === 'execution.failed' ? event.data : null;
  const result = await uploadResult(publisher, event, request);
  // The hash of the result blob's bytes when there is one (sealed: the envelope's), else of the output.
  const outputSha256 =
    event.type === 'execution.succeeded' ? (result?.sha256 ?? event.data.outputHash ?? undefined) : undefined;
  try {
    const ref = await writeExecutionReceipt(publisher, {
      executionId: request.executionId,
      code: { uri: r.codeUri, cid: r.codeCid },
      runtime: { uri: r.runtimeUri, cid: r.runtimeCid },
      codeBlobCid: r.blobCid,
      handler: request.handler,
      images: {
        runtime: r.image,
        sandbox: requireImage(parts, 'at-run-sandbox'),
        ...(r.additions.length ? { additions: r.additions } : {}),
      },
      limits: {
        memoryBytes: r.limits.memoryMb * 1024 * 1024,
        pids: r.limits.pids,
        milliCpus: Math.round(r.limits.cpus * 1000),
        timeoutMs: r.limits.timeoutMs,
        network: times.egress ? 'proxy' : 'none',
      },
      ...(times.egress ? { egress: times.egress } : {}),
      inputSha256: d.inputHash ?? sha256('null'),
      ...(outputSha256 ? { outputSha256 } : {}),
      ...(result ? { result: result.ref } : {}),
      outcome: failed ? 'failed' : 'succeeded',
      ...(failed
        ? { failure: { kind: failed.reason, code: failed.code, message: String(failed.message ?? '').slice(0, 1000) } }
        : {}),
      ...(typeof d.exitCode === 'number' ? { exitCode: d.exitCode } : {}),
      ...(request.callerDid ? { callerDid: request.callerDid } : {}),
      ...(request.job ? { job: { uri: request.job.uri, cid: request.job.cid } } : {}),
      startedAt: times.startedAt,
      finishedAt: times.finishedAt(),
    });
    d.receipt = ref;
  } catch (err) {
    d.receiptError = { code: (err as RunlogError).code ?? 'RECEIPT_FAILED', message: (err as Error).message };
  }
}

/**
 * Advertises this runner's policy in its own repo (dev.mainasara.at-run.beta.v2.runner, rkey "self"), with its key
 * ring's current public key and the older keys it still opens secrets with (`keys`, the ring's list), and the network
 * destinations and limits its egress proxy enforces when the policy lists any (not its allowRanges: RunnerEgress).
 */
export async function putRunnerRecordFor(
  publisher: Publisher,
  parts: Parts,
  p: OperatorPolicy,
  platform: { os: string; architecture: string; variant?: string },
  keys: readonly RunnerKeyInfo[] = [],
  now: Date = new Date(),
): Promise<{ uri: string; cid: string }> {
  const current = keys.find((k) => k.current);
  // The lexicon lists at most 16: the newest are kept (the current key is the last).
  const valid = keys.filter((k) => k.retiresAt === undefined || Date.parse(k.retiresAt) > now.getTime()).slice(-16);
  return putRunnerRecord(publisher, {
    protocolVersions: [...p.protocolVersions],
    runtimeKinds: ['language'],
    platforms: [platform],
    isolation: { backend: 'docker', ociRuntime: p.isolation, strong: p.isolation === 'runsc' },
    sandboxImage: requireImage(parts, 'at-run-sandbox'),
    limits: {
      maxMemoryBytes: p.ceilings.memoryMb * 1024 * 1024,
      maxPids: p.ceilings.pids,
      maxMilliCpus: Math.round(p.ceilings.cpus * 1000),
      maxTimeoutMs: p.ceilings.timeoutMs,
      maxCodeBlobBytes: p.archive.maxArchiveBytes,
      maxRuntimeArchiveBytes: p.archive.maxArchiveBytes,
      network: p.network.destinations.length > 0 ? 'proxy' : 'none',
    },
    ...(p.network.destinations.length > 0
      ? {
          egress: {
            destinations: p.network.destinations.map((d) => ({ host: d.host, ports: [...d.ports] })),
            limits: {
              maxBytes: p.network.limits.bytes,
              maxSeconds: p.network.limits.seconds,
              maxConnections: p.network.limits.connections,
            },
          },
        }
      : {}),
    ...(p.publishers.includes('*') ? {} : { publishers: [...p.publishers] }),
    ...(p.registries.includes('*') ? {} : { registries: [...p.registries] }),
    ...(current
      ? {
          encryptionKey: current.publicKey,
          encryptionKeys: valid.map((k) => ({
            publicKey: k.publicKey,
            ...(k.retiresAt !== undefined ? { retiresAt: k.retiresAt } : {}),
          })),
        }
      : {}),
  });
}

/**
 * Answers a job refused at intake, then records it failed: the receipt (when this runner writes receipts) is
 * written first, so the failure names it, and a caller waiting on the network is told why. Written again after a
 * restart, it replaces the same record (its key is the execution id).
 */
export async function answerRefusal(
  publisher: Publisher | undefined,
  request: ExecutionRequest,
  refused: Refusal,
  times: { startedAt: string; finishedAt: () => string },
  dispatch: (failed: { type: 'execution.failed'; data: FailedData }) => Promise<unknown>,
): Promise<void> {
  const data: FailedData = { reason: 'validation', code: refused.code, message: refused.message };
  await dispatch({ type: 'execution.failed', data: await withJobReceipt(publisher, request, data, times) });
}

/**
 * A job's failure before it ran (resolution, materialization, the sandbox's creation, a cancel), with the receipt
 * that answers the job written first: its caller waits for a receipt, not for the runner's log. Anything else (not a
 * job, no receipts here, a receipt already written or tried) is returned as it is.
 */
export async function withJobReceipt(
  publisher: Publisher | undefined,
  request: ExecutionRequest,
  data: FailedData,
  times: { startedAt: string; finishedAt: () => string },
): Promise<FailedData> {
  if (!publisher || !request.job || data.receipt || data.receiptError) return data;
  try {
    const receipt = await writeNotRunReceipt(publisher, {
      executionId: request.executionId,
      job: { uri: request.job.uri, cid: request.job.cid },
      failure: {
        kind: data.reason ?? 'validation',
        code: String(data.code ?? 'FAILED'),
        message: String(data.message ?? '').slice(0, 1000) || 'failed',
      },
      ...(request.callerDid ? { callerDid: request.callerDid } : {}),
      startedAt: times.startedAt,
      finishedAt: times.finishedAt(),
    });
    return { ...data, receipt };
  } catch (err) {
    return {
      ...data,
      receiptError: { code: (err as RunlogError).code ?? 'RECEIPT_FAILED', message: (err as Error).message },
    };
  }
}
