// The execution machine's vocabulary: every event it takes, each with its data type (see instance-events.ts
// for why some fields are optional: histories written by older runlogs still replay).
import type { EffectiveLimits } from './at-run/operator-policy.ts';
import type { RuntimePlatform } from './at-run/runtime-record.ts';
import type { RecoveredData } from './instance-events.ts';

export type FailureReason =
  'resolution' | 'validation' | 'materialization' | 'runtime' | 'timeout' | 'cancelled' | 'lost';
export const FAILURE_REASONS: readonly FailureReason[] = [
  'resolution',
  'validation',
  'materialization',
  'runtime',
  'timeout',
  'cancelled',
  'lost',
];

export interface ExecutionRequest {
  executionId: string;
  uri: string;
  handler: string;
  input: unknown;
  callerDid: string | null;
  /** Wall-clock budget for the invocation; the deadline is computed when the execution is requested. */
  timeoutMs: number;
  /** The job record it answers, when it was taken from the network (absent from histories before jobs existed). */
  job?: {
    uri: string;
    cid: string;
    /** The code record must have exactly this CID (the job's codeCid). */
    codeCid?: string;
    /**
     * The secrets record the job names (a strong ref, safe to log: the values are sealed in the record and opened
     * only in memory, for the envelope). Absent from histories before jobs carried secrets.
     */
    secrets?: { uri: string; cid: string };
    /**
     * The caller's X25519 public key (did:key) the result blob is sealed to (a public key, safe to log). Absent: the
     * result is uploaded in clear, as in histories before results could be sealed.
     */
    resultKey?: string;
  };
}

/** Why a job is refused before anything of it runs: a code of the error table and a message for its caller. */
export interface Refusal {
  code: string;
  message: string;
}

/** The resolved facts an execution runs on, as recorded in `execution.resolved`. */
export interface Resolved {
  codeUri: string;
  codeCid: string;
  via: string | null;
  author: string;
  runtimeName: string;
  runtimeUri: string;
  runtimeCid: string;
  blobCid: string;
  entrypoint: string;
  image: string;
  platform: { os: string; architecture: string; variant?: string };
  exportPath: string;
  launcher: RuntimePlatform['launcher'];
  env: { name: string; value: string }[];
  additions: string[];
  limits: EffectiveLimits;
  clamped: string[];
  isolation: string;
  mode: string;
}

/** What `execution.materialized` records: the volumes the sandbox mounts and their digests. */
export interface Materialized {
  runtimeVolume: string;
  runtimeDigest: string;
  additionVolumes: string[];
  codeVolume: string;
  codeDigest: string;
  entries: number;
  cached: { runtime: boolean; code: boolean };
}

type Evidence = Record<string, unknown>;

/**
 * Where an execution's time went (ms), on its outcome event (absent from logs written before it existed, and
 * partial for an execution a restarted supervisor finished). resolve, materialize, create: the effects'
 * durations; create is the pool claim when the sandbox was pre-started. attach; start: the Engine's start (0 when
 * pre-started); adapterReady: from the start request to the envelope on the worker's stdin; firstFrame, result,
 * exit: from the envelope; invoke: the whole invocation.
 */
export interface LatencyProfile {
  resolveMs?: number;
  materializeMs?: number;
  createMs?: number;
  attachMs?: number;
  startMs?: number;
  adapterReadyMs?: number;
  firstFrameMs?: number | null;
  resultMs?: number | null;
  exitMs?: number;
  invokeMs?: number;
  prestarted?: boolean;
  /** How long the pre-started sandbox had waited for this execution. */
  sandboxWaitedMs?: number;
}

/** What an invocation's outcome events share (absent when the outcome was recorded by the reconciler). */
export interface OutcomeData {
  profile?: LatencyProfile;
  exitCode?: number | null;
  stderrTail?: string;
  stdoutBytes?: number;
  timings?: unknown;
  inputHash?: string | null;
  /** The receipt written before the outcome was recorded (or why it could not be). */
  receipt?: { uri: string; cid: string };
  receiptError?: { code: string; message: string };
}

export interface FailedData extends OutcomeData {
  reason?: FailureReason;
  code?: string;
  message?: string;
  detail?: string | null;
  oomKilled?: boolean;
  effect?: string;
  evidence?: Evidence;
}

export interface SucceededData extends OutcomeData {
  output?: unknown;
  outputHash?: string | null;
}

/** Event type → its data. One entry per event the execution machine knows. */
export interface ExecutionEventData {
  /** refused: a job this runner will not run (its checks failed at intake): it is answered, never resolved. */
  'execution.requested': { request: ExecutionRequest; deadline?: string | null; refused?: Refusal };
  'execution.step': { name?: string; detail?: Record<string, unknown> };
  'execution.resolved': Resolved;
  'execution.materialized': Materialized;
  /** prestarted: the sandbox was taken from the pool (started ahead of time). */
  'execution.started': { containerId: string; prestarted?: boolean };
  'execution.adopted': { containerId?: string | null; evidence?: Evidence };
  'execution.succeeded': SucceededData;
  'execution.failed': FailedData;
  'execution.cancel-requested': Record<string, never>;
  /** A supervisor took the actor back after a restart: its state is entered again (see RecoveredData). */
  'execution.recovered': RecoveredData;
}

export type ExecutionEventType = keyof ExecutionEventData;
