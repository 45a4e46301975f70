// The verdict of one invocation: the result it answers and how a worker's run ending is classified.
//
// An invocation and a collected (adopted) container end the same way: what the frames said, what the Engine
// recorded (exit code, OOM) and why runlog killed it decide the outcome, so both paths share these types and
// this one classification.
import type { ContainerInfo } from './docker-port.ts';
import {
  DEFAULT_OUTPUT_LIMITS,
  type CollectedOutput,
  type Frame,
  type OutputLimits,
  type OutputViolation,
  type ProtocolError,
} from './frames.ts';

export type InvocationFailureReason =
  | 'handler-error'
  | 'timeout'
  | 'output-limit'
  | 'frame-too-large'
  | 'frame-too-deep'
  | 'malformed-frame'
  | 'no-result'
  | 'oom'
  | 'exit-nonzero'
  | 'start-failed';

/** What a result keeps of the collected output: the same for an invocation and a collected (adopted) container. */
export function keptOutput(
  out: CollectedOutput,
): Pick<ResultCommon, 'frames' | 'stdoutBytes' | 'stderrBytes' | 'stderr' | 'stderrTruncated'> {
  return {
    frames: out.frames,
    stdoutBytes: out.stdoutBytes,
    stderrBytes: out.stderrBytes,
    stderr: out.stderr,
    stderrTruncated: out.stderrTruncated,
  };
}

export interface ResultCommon {
  containerId: string;
  invocationId: string;
  exitCode: number | null;
  oomKilled: boolean;
  /** Log and progress frames seen before the verdict (the first maxKeptFrames). */
  frames: Extract<Frame, { type: 'log' | 'progress' }>[];
  stdoutBytes: number;
  stderrBytes: number;
  /** The last maxStderrBytes of stderr. */
  stderr: string;
  stderrTruncated: boolean;
  /**
   * Where the time went, in ms. attach: inspect + attach + registering the exit wait; start: the Engine's start
   * (0 for a pre-started sandbox: it was started ahead of time); adapterReady: from the start request to the
   * envelope handed to the worker's stdin; firstFrame / result: from the envelope to the first / the terminal
   * frame; run: from the envelope to the exit; total: the whole invoke. prestarted: the sandbox was pre-started.
   */
  timings: {
    attachMs: number;
    startMs: number;
    adapterReadyMs?: number;
    firstFrameMs: number | null;
    resultMs?: number | null;
    runMs: number;
    totalMs: number;
    prestarted?: boolean;
  };
}

export type InvocationResult =
  | (ResultCommon & { outcome: 'succeeded'; output: unknown })
  | (ResultCommon & { outcome: 'failed'; reason: InvocationFailureReason; error: ProtocolError });

/** The output bounds of an invocation: each one the caller left out takes its default. */
export function limitsOf(opts: Partial<OutputLimits>): OutputLimits {
  return {
    maxFrameBytes: opts.maxFrameBytes ?? DEFAULT_OUTPUT_LIMITS.maxFrameBytes,
    maxFrameDepth: opts.maxFrameDepth ?? DEFAULT_OUTPUT_LIMITS.maxFrameDepth,
    maxStdoutBytes: opts.maxStdoutBytes ?? DEFAULT_OUTPUT_LIMITS.maxStdoutBytes,
    maxStderrBytes: opts.maxStderrBytes ?? DEFAULT_OUTPUT_LIMITS.maxStderrBytes,
    maxKeptFrames: opts.maxKeptFrames ?? DEFAULT_OUTPUT_LIMITS.maxKeptFrames,
  };
}

const REASON_CODES: Record<InvocationFailureReason, string> = {
  'handler-error': 'HANDLER_ERROR',
  timeout: 'DEADLINE_EXCEEDED',
  'output-limit': 'OUTPUT_LIMIT',
  'frame-too-large': 'FRAME_TOO_LARGE',
  'frame-too-deep': 'FRAME_TOO_DEEP',
  'malformed-frame': 'MALFORMED_FRAME',
  'no-result': 'NO_RESULT',
  oom: 'OUT_OF_MEMORY',
  'exit-nonzero': 'EXIT_NONZERO',
  'start-failed': 'START_FAILED',
};

/** How a run ended, as far as runlog saw it: why it killed the worker, a failed start, the Engine's record. */
export interface Verdict {
  killedFor: 'timeout' | OutputViolation | null;
  startError: string | null;
  state: ContainerInfo['state'] | null;
  waitStatus: number | null;
}

/** The outcome of a run from its collected output and how it ended: a terminal frame before any kill wins. */
export function classify(
  out: CollectedOutput,
  v: Verdict,
):
  | { outcome: 'succeeded'; output: unknown }
  | { outcome: 'failed'; reason: InvocationFailureReason; error: ProtocolError } {
  const fail = (
    reason: InvocationFailureReason,
    message: string,
  ): { outcome: 'failed'; reason: InvocationFailureReason; error: ProtocolError } => ({
    outcome: 'failed',
    reason,
    error: { code: REASON_CODES[reason], message },
  });
  if (v.startError !== null) return fail('start-failed', v.startError);
  // A terminal frame that arrived before any kill is the worker's answer.
  if (out.terminal?.type === 'result') return { outcome: 'succeeded', output: out.terminal.output };
  if (out.terminal?.type === 'error') return { outcome: 'failed', reason: 'handler-error', error: out.terminal.error };
  if (v.killedFor === 'timeout')
    return fail('timeout', 'the invocation did not finish before its deadline; the container was killed');
  if (out.violation) return fail(out.violation.kind, out.violation.message);
  const exitCode = v.state?.exitCode ?? v.waitStatus;
  if (v.state?.oomKilled) return fail('oom', `the worker exceeded its memory limit and was killed (exit ${exitCode})`);
  if (exitCode !== null && exitCode !== 0)
    return fail('exit-nonzero', `the worker exited with status ${exitCode} without a result`);
  return fail('no-result', 'the worker exited without a result or error frame');
}
