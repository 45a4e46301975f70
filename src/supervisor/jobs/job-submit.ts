// A job from the caller's side (`runlog job submit`): the job record written in the caller's repo, and, when asked,
// its answer awaited: the runner's receipt at the URI the job's execution id names, read strictly (its proof and
// the runner's signature checked), then the result blob it references, opened with the caller's key when the job
// asked for it sealed (its resultKey), and checked against its outputSha256.
//
// The receipt is awaited by polling, not by following the runner's PDS repo event stream: its URI is known in
// advance (jobExecutionId), so one strict read says whether it is there, against whichever PDS the runner's DID
// document names. The stream would mean finding that PDS, reading every commit of every repo it hosts, and still a
// strict read at the end to check the proof; a backoff bounded at MAX_POLL_MS costs at most that much latency.

import { createHash } from 'node:crypto';
import {
  AT_RUN_V2,
  createAtprotoReader,
  formatAtUri,
  type AtprotoReader,
  type AtprotoReaderOptions,
  type JsonObject,
  type Publisher,
  type StrongRef,
} from '../../adapters/atproto/index.ts';
import { jobExecutionId } from '../../adapters/ids.ts';
import { assertJobRecord } from '../../domain/at-run/job-record.ts';
import { DEFAULT_OPERATOR_POLICY } from '../../domain/at-run/operator-policy.ts';
import { SEALED_RESULT_MIME_TYPE, openResult } from '../../domain/at-run/sealed-result.ts';
import type { X25519PrivateKey } from '../../domain/at-run/x25519-keys.ts';
import { categoryOf, isErrorCode } from '../../domain/error-codes.ts';
import { RunlogError } from '../../domain/errors.ts';

export type { AtprotoReader, Publisher };

/** The reader a caller waits with; awaitJobAnswer reads the receipt strictly whatever its default mode. */
export const callerReader = (opts: AtprotoReaderOptions): AtprotoReader => createAtprotoReader(opts);

/** The first wait between two reads of a receipt that is not there yet; it doubles up to MAX_POLL_MS. */
const FIRST_POLL_MS = 250;
const MAX_POLL_MS = 2000;
/** The largest result blob read back: the runner bounds results by its frame limit, far below this. */
const MAX_RESULT_BYTES = 64 * 1024 * 1024;

/** What the caller asks a runner to run (the job record's fields; createdAt is added when it is written). */
export interface JobSubmission {
  /** A code or alias record's at-uri. */
  code: string;
  handler: string;
  input?: unknown;
  /** The runner's DID; absent, any runner whose policy takes unaddressed jobs may run it. */
  runner?: string;
  /** The code record's CID the job insists on. */
  codeCid?: string;
  /** A secrets record sealed to the runner. */
  secrets?: StrongRef;
  /** An X25519 public key (did:key): the runner seals the result to it, and only its holder can read it. */
  resultKey?: string;
  /** RFC 3339: the job must not start after it. */
  notAfter?: string;
}

/** The job record written, and the execution id every runner gives it. */
export interface SubmittedJob extends StrongRef {
  executionId: string;
}

/** A receipt read and checked: the output of a job that succeeded, or why it failed. */
export type JobAnswer =
  | { outcome: 'succeeded'; receipt: StrongRef; output: unknown; outputSha256: string; result: ResultBlob }
  | { outcome: 'failed'; receipt: StrongRef; failure: { kind?: string; code?: string; message?: string } };

/** The result blob a receipt references: its CID (raw, sha256), its size, and whether it was sealed. */
export interface ResultBlob {
  cid: string;
  size: number;
  /** The blob was the sealed envelope (the output was opened with the caller's key), not the result in clear. */
  sealed: boolean;
}

/** Validates the job record (every violation listed, RecordValidationError) and writes it in the caller's repo. */
export async function writeJob(publisher: Publisher, s: JobSubmission, now: Date = new Date()): Promise<SubmittedJob> {
  // The input is held to the default policy's bounds here; the runner holds it to its own.
  const record = assertJobRecord(
    {
      $type: AT_RUN_V2.job,
      code: s.code,
      ...(s.codeCid !== undefined ? { codeCid: s.codeCid } : {}),
      handler: s.handler,
      ...(s.input !== undefined ? { input: s.input } : {}),
      ...(s.runner !== undefined ? { runner: s.runner } : {}),
      ...(s.secrets !== undefined ? { secrets: { uri: s.secrets.uri, cid: s.secrets.cid } } : {}),
      ...(s.resultKey !== undefined ? { resultKey: s.resultKey } : {}),
      ...(s.notAfter !== undefined ? { notAfter: s.notAfter } : {}),
      createdAt: now.toISOString(),
    },
    DEFAULT_OPERATOR_POLICY,
  );
  // why: assertJobRecord checked every field, and its input is a plain JSON copy: the record is atproto JSON.
  const ref = await publisher.putRecord(AT_RUN_V2.job, undefined, record as unknown as JsonObject);
  return { ...ref, executionId: jobExecutionId(ref.uri, ref.cid) };
}

/** Where the runner writes the receipt of a job: its repo, the execution collection, the job's execution id. */
export const receiptUriOf = (runnerDid: string, job: SubmittedJob): string =>
  formatAtUri(runnerDid, AT_RUN_V2.execution, job.executionId);

export interface AwaitJobOptions {
  runnerDid: string;
  /** How long to wait for the receipt and read the result; past it: TIMEOUT. */
  timeoutMs: number;
  /**
   * The private key of the job's resultKey: a sealed result is opened with it, and a result in clear is refused
   * (RESULT_UNSEALABLE). Absent: the job asked for its result in clear, and a sealed one cannot be opened.
   */
  resultKey?: X25519PrivateKey;
  nowMs?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

/** A read that may succeed later: the receipt is not written yet, or the PDS did not answer this time. */
function worthRetrying(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  if (code === 'RECORD_NOT_FOUND') return true;
  return isErrorCode(code) && (categoryOf(code) === 'unavailable' || categoryOf(code) === 'timeout');
}

/**
 * Waits for the job's receipt in the runner's repo and checks it: it must answer this job (its strong ref), and a
 * success must reference a result whose bytes (opened with `resultKey` when sealed) hash to its outputSha256. A
 * receipt that fails its proof or signature, or a result that does not open, is an error at once, not something to
 * wait out. TIMEOUT when none is there within `timeoutMs`.
 */
export async function awaitJobAnswer(
  reader: AtprotoReader,
  job: SubmittedJob,
  opts: AwaitJobOptions,
): Promise<JobAnswer> {
  const nowMs = opts.nowMs ?? Date.now;
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const deadlineAt = nowMs() + opts.timeoutMs;
  const uri = receiptUriOf(opts.runnerDid, job);
  let wait = FIRST_POLL_MS;
  let last: unknown;
  for (;;) {
    try {
      const got = await reader.fetchRecord(uri, { mode: 'strict', deadlineAt });
      return await checkAnswer(reader, job, { uri: got.uri, cid: got.cid }, got.value, {
        runnerDid: opts.runnerDid,
        deadlineAt,
        ...(opts.resultKey ? { resultKey: opts.resultKey } : {}),
      });
    } catch (err) {
      if (!worthRetrying(err)) throw err;
      last = err;
    }
    const left = deadlineAt - nowMs();
    if (left <= 0)
      throw new RunlogError('TIMEOUT', `no answer to ${job.uri} at ${uri} within ${opts.timeoutMs} ms`, {
        job: job.uri,
        receipt: uri,
        timeoutMs: opts.timeoutMs,
        lastError: (last as Error)?.message ?? null,
      });
    await sleep(Math.min(wait, left));
    wait = Math.min(wait * 2, MAX_POLL_MS);
  }
}

const sha256Hex = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

/** How a receipt is checked: whose repo it is in, until when, and the key that opens a sealed result. */
export interface CheckAnswerOptions {
  runnerDid: string;
  deadlineAt?: number;
  resultKey?: X25519PrivateKey;
}

/**
 * The result's bytes in clear: the blob itself, or the envelope opened with the caller's key. RESULT_UNSEALABLE
 * when the result is sealed and no key (or another key) was given; a result in clear when the job asked for it
 * sealed is refused before it is read.
 */
function resultBytes(
  blob: Uint8Array,
  sealed: boolean,
  job: SubmittedJob,
  where: { receipt: string; blob: string },
  key: X25519PrivateKey | undefined,
): Uint8Array {
  if (!sealed) return blob;
  if (!key)
    throw new RunlogError(
      'RESULT_UNSEALABLE',
      `the result of ${where.receipt} is sealed, and no key was given to open it (the job's resultKey is held elsewhere)`,
      where,
    );
  try {
    return openResult(blob, key, job);
  } catch (err) {
    if (!(err instanceof RunlogError)) throw err;
    throw new RunlogError('RESULT_UNSEALABLE', `the result of ${where.receipt}: ${err.message}`, {
      ...where,
      ...err.details,
    });
  }
}

/**
 * The answer a verified receipt gives: its failure, or its result read back, opened when it is sealed, and checked
 * against outputSha256.
 */
export async function checkAnswer(
  reader: Pick<AtprotoReader, 'fetchBlob'>,
  job: SubmittedJob,
  receipt: StrongRef,
  value: JsonObject,
  opts: CheckAnswerOptions,
): Promise<JobAnswer> {
  const answers = isObject(value.job) ? value.job : {};
  if (answers.uri !== job.uri || answers.cid !== job.cid)
    throw new RunlogError('RECORD_INVALID', `${receipt.uri} does not answer ${job.uri} (${job.cid})`, {
      receipt: receipt.uri,
      job: job.uri,
      answers: answers.uri ?? null,
    });
  if (value.outcome !== 'succeeded') {
    const f = isObject(value.failure) ? value.failure : {};
    const failure: { kind?: string; code?: string; message?: string } = {};
    for (const k of ['kind', 'code', 'message'] as const) if (typeof f[k] === 'string') failure[k] = f[k];
    return { outcome: 'failed', receipt, failure };
  }
  const outputSha256 = value.outputSha256;
  const result = isObject(value.result) ? value.result : null;
  const cid = isObject(result?.ref) ? result.ref.$link : undefined;
  if (typeof outputSha256 !== 'string' || typeof cid !== 'string')
    throw new RunlogError(
      'RESULT_MISSING',
      `${receipt.uri} says the job succeeded but references no result (the runner could not upload it, or writes none)`,
      { receipt: receipt.uri },
    );
  const sealed = result?.mimeType === SEALED_RESULT_MIME_TYPE;
  if (!sealed && opts.resultKey)
    throw new RunlogError(
      'RESULT_UNSEALABLE',
      `${receipt.uri} holds its result in clear (${String(result?.mimeType)}), ` +
        `though the job asked for it sealed to ${opts.resultKey.publicKey}`,
      { receipt: receipt.uri, blob: cid, mimeType: result?.mimeType ?? null },
    );
  const blob = await reader.fetchBlob(opts.runnerDid, cid, {
    maxBytes: MAX_RESULT_BYTES,
    ...(opts.deadlineAt !== undefined ? { deadlineAt: opts.deadlineAt } : {}),
  });
  // A sealed result's receipt hashes the envelope (a hash of the plaintext would be public): checked before it is
  // opened, and the envelope's AEAD tag proves the plaintext.
  const computed = sha256Hex(blob.bytes);
  const bytes = resultBytes(blob.bytes, sealed, job, { receipt: receipt.uri, blob: cid }, opts.resultKey);
  if (computed !== outputSha256)
    throw new RunlogError(
      'RESULT_HASH_MISMATCH',
      `the result of ${receipt.uri} hashes to ${computed}, its receipt says ${outputSha256}`,
      { receipt: receipt.uri, blob: cid, computed, outputSha256 },
    );
  let output: unknown;
  try {
    output = JSON.parse(Buffer.from(bytes).toString('utf8')) as unknown;
  } catch (err) {
    throw new RunlogError('RECORD_INVALID', `the result of ${receipt.uri} is not JSON: ${(err as Error).message}`, {
      receipt: receipt.uri,
      blob: cid,
    });
  }
  return { outcome: 'succeeded', receipt, output, outputSha256, result: { cid, size: blob.size, sealed } };
}
