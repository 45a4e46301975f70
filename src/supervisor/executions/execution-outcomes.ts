// What an execution's invocation runs in and ends with: the hardened container's spec, the outcome event of a
// result, the typed failure of an error, and the envelope lost when a supervisor died delivering it.
import { createHash } from 'node:crypto';
import type { ExecutionContainerSpec } from '../../adapters/docker/execution-container-body.ts';
import type { InvocationResult } from '../../adapters/docker/invocation-result.ts';
import { requireImage, type Parts } from '../../config/parts.ts';
import { categoryOf } from '../../domain/error-codes.ts';
import { RunlogError } from '../../domain/errors.ts';
import type { FailedData, Materialized, Resolved, SucceededData } from '../../domain/execution-events.ts';
import type { FailureReason } from '../../machines/execution.machine.ts';

/** What an invocation ends with (the receipt is written for it before it is recorded). */
export type OutcomeEvent =
  | { type: 'execution.succeeded'; data: SucceededData }
  | { type: 'execution.failed'; data: FailedData & { reason: FailureReason; code: string; message: string } };

/** Which typed failure an error is: a bad record or archive is `validation`, an unreachable network `resolution`. */
export function classify(
  err: unknown,
  during: FailureReason,
): { reason: FailureReason; code: string; message: string } & FailedData {
  const message = err instanceof Error ? err.message : String(err);
  if (!(err instanceof RunlogError))
    return { reason: during, code: (err as { code?: string })?.code ?? 'INTERNAL', message };
  const code = err.code;
  // A read or step cut off by the execution's own deadline (step-deadline.ts): the execution ran out of time.
  if (categoryOf(code) === 'timeout' && err.details?.bound === 'execution') return { reason: 'timeout', code, message };
  // A refused record, archive, envelope or input (its code's category, error-codes.ts) is the author's or the caller's.
  const category = categoryOf(code);
  return { reason: category === 'validation' || category === 'too-large' ? 'validation' : during, code, message };
}

export const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

/**
 * The worker answered without an invocation id and the handler said nothing: it never received a valid envelope.
 * The supervisor always sends one, so after a restart this means the delivery was cut (the handler never ran).
 */
export const envelopeNotReceived = (result: InvocationResult): boolean =>
  result.outcome === 'failed' && result.reason === 'malformed-frame' && result.frames.length === 0;

export function envelopeLost(result: InvocationResult, why: string): OutcomeEvent {
  return {
    type: 'execution.failed',
    data: {
      reason: 'lost',
      code: 'ENVELOPE_NOT_DELIVERED',
      message:
        `${why}; the worker got no envelope, the handler never ran ` +
        `(it answered: ${result.outcome === 'failed' ? result.error.message : 'a result'})`,
      exitCode: result.exitCode,
      stderrTail: result.stderr.slice(-4096),
      stdoutBytes: result.stdoutBytes,
      detail: result.outcome === 'failed' ? result.reason : null,
    },
  };
}

/** The outcome event of an invocation's result, with what it read (inputHash) and wrote (outputHash). */
export function outcomeEvent(result: InvocationResult, inputHash: string | null): OutcomeEvent {
  const common = {
    exitCode: result.exitCode,
    stderrTail: result.stderr.slice(-4096),
    stdoutBytes: result.stdoutBytes,
    timings: result.timings,
    inputHash,
  };
  if (result.outcome === 'succeeded') {
    return {
      type: 'execution.succeeded',
      data: { ...common, output: result.output as unknown, outputHash: sha256(JSON.stringify(result.output ?? null)) },
    };
  }
  return {
    type: 'execution.failed',
    data: {
      ...common,
      reason: result.reason === 'timeout' ? 'timeout' : 'runtime',
      code: result.error.code || result.reason,
      message: result.error.message,
      detail: result.reason,
      oomKilled: result.oomKilled,
    },
  };
}

/** The hardened container an invocation runs in: the sandbox image, the resolved limits and the materialized volumes. */
export function sandboxSpec(
  parts: Parts,
  r: Resolved,
  m: Materialized,
): Omit<ExecutionContainerSpec, 'labels' | 'invocationId' | 'name'> {
  return {
    policy: {
      image: requireImage(parts, 'at-run-sandbox'),
      memoryBytes: r.limits.memoryMb * 1024 * 1024,
      pidsLimit: r.limits.pids,
      nanoCpus: Math.round(r.limits.cpus * 1e9),
      workTmpfsBytes: 64 * 1024 * 1024,
      ...(r.isolation === 'runsc' ? { runtime: 'runsc' } : {}),
    },
    runtimeVolume: m.runtimeVolume,
    codeVolume: m.codeVolume,
    additionVolumes: m.additionVolumes ?? [],
    launcher: r.launcher,
    entrypoint: r.entrypoint,
    env: r.env,
  };
}
