// The hardened main container of an at-run execution, and one invocation over worker protocol v1.
//
// createExecutionContainer: the runner-owned sandbox image (digest-pinned), created STOPPED, with the runtime,
//   addition and code volumes read-only, a size-bounded tmpfs work dir, read-only rootfs, non-root user, all
//   capabilities dropped, no-new-privileges, Docker's default seccomp profile, no network, bounded memory
//   (no swap), PIDs and CPU, no health check, only the runtime record's environment, stdin open for exactly
//   one attach, optionally under gVisor (runtime `runsc`). Never AutoRemove: the result stays collectable.
// invoke: attach → wait(next-exit) → start → one NDJSON envelope line on stdin → close stdin → frames from
//   stdout (bounded), stderr kept bounded; the deadline is enforced here by killing the container.
// collectResult: the same verdict for a container that already ran (after a supervisor restart), from logs.
import { ValidationError } from '../../domain/errors.ts';
import { isDigestReference } from '../../domain/at-run/oci-reference.ts';
import type { ContainerCreateBody, ContainerInfo, DockerEngine, MountSpec } from './docker-port.ts';
import { ContainerStateError } from './errors.ts';
import { LABEL_VOLUME_KIND, SEAL_SUFFIX } from './materializer.ts';
import {
  DEFAULT_OUTPUT_LIMITS,
  FrameCollector,
  StreamDemuxer,
  type CollectedOutput,
  type Frame,
  type OutputLimits,
  type OutputViolation,
  type ProtocolError,
} from './frames.ts';
import {
  ADDITIONS_MOUNT,
  APP_MOUNT,
  RUNTIME_MOUNT,
  WORK_MOUNT,
  envProblems,
  sandboxCommand,
  type Launcher,
} from './layout.ts';

export const INVOCATION_LABEL = 'runlog.invocation';
/** Marks a pre-started sandbox (its value: the pool's id for it). Such a container is running, waiting for its one envelope. */
export const PRESTART_LABEL = 'runlog.prestart';
export const PROTOCOL_VERSION = 1;

/** Operator-owned policy: which image, which user, which limits, which isolation backend. */
export interface SandboxPolicy {
  /** The runner-owned sandbox image, `repository@sha256:…` (at-run-sandbox). */
  image: string;
  /** `uid:gid`, numeric, never 0. Default 65532:65532. */
  user?: string;
  memoryBytes: number;
  pidsLimit: number;
  /** CPU in units of 1e-9 CPUs (1 CPU = 1e9). */
  nanoCpus: number;
  /** Size of the writable /opt/at-run/work tmpfs. */
  workTmpfsBytes: number;
  /** OCI runtime: undefined/'runc' for the daemon default, 'runsc' for gVisor. */
  runtime?: string;
  /** Bound of what the json-file log driver keeps on disk (collectResult reads it). Default 32 MiB. */
  logMaxBytes?: number;
}

export const DEFAULT_SANDBOX_USER = '65532:65532';

export interface ExecutionContainerSpec {
  policy: SandboxPolicy;
  runtimeVolume: string;
  codeVolume: string;
  /** Mounted read-only at /opt/at-run/additions/<index>. */
  additionVolumes?: readonly string[];
  /** From the selected runtime platform entry. */
  launcher: Launcher;
  /** From the code record: relative to the code root (/opt/at-run/app). */
  entrypoint: string;
  /** The runtime record's env: the container gets this and nothing inherited. */
  env?: readonly { name: string; value: string }[] | Readonly<Record<string, string>>;
  /** Caller's labels (runlog.stream, runlog.kind, runlog.home, …). */
  labels: Readonly<Record<string, string>>;
  /**
   * The envelope id this container will run; recorded as a label so collectResult can check frames. null for a
   * pre-started sandbox: its envelope (and so its id) is not known when it is created.
   */
  invocationId: string | null;
  name?: string;
}

export interface InvocationEnvelope {
  version: 1;
  id: string;
  type: 'invoke';
  code: { uri: string; cid: string };
  handler: string;
  input: unknown;
  context: { callerDid: string | null; deadline: string };
}

export interface InvokeOptions extends Partial<OutputLimits> {
  /** Budget from the invoke call to a verdict; on expiry the container is killed → `timeout`. */
  deadlineMs: number;
  /** After a result/error frame, how long the worker may take to exit before it is killed. Default 2000. */
  exitGraceMs?: number;
  /**
   * Answer once a terminal (result or error) frame has arrived, without waiting for the worker's exit: the verdict
   * no longer depends on it. The exit is waited for this long at most (default: not at all); the result then has
   * exitCode null unless the exit came first, and the caller removes the container (which ends the worker).
   */
  answerOnTerminal?: { exitWaitMs?: number };
  maxEnvelopeBytes?: number;
  onFrame?: (frame: Frame) => void;
  /**
   * What an inspect of this container answered moments ago (a pre-started sandbox the pool just checked): used
   * for the checks below instead of asking the Engine again. Its state and labels are checked all the same.
   */
  inspected?: ContainerInfo;
}

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
function keptOutput(
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

interface ResultCommon {
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

export interface CollectOptions extends Partial<OutputLimits> {
  /** Absolute deadline (epoch ms) for a container that is still running; it is killed then → `timeout`. */
  deadlineAt?: number;
  /** Defaults to the container's runlog.invocation label. */
  invocationId?: string;
}

export interface ExecutionSandbox {
  createExecutionContainer(spec: ExecutionContainerSpec): Promise<{ containerId: string; command: string[] }>;
  invoke(containerId: string, envelope: InvocationEnvelope, opts: InvokeOptions): Promise<InvocationResult>;
  collectResult(containerId: string, opts?: CollectOptions): Promise<InvocationResult>;
  removeContainer(containerId: string): Promise<void>;
}

const VOLUME_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/;
const UID_GID = /^(\d{1,10}):(\d{1,10})$/;

function envList(env: ExecutionContainerSpec['env']): Record<string, string> {
  if (!env) return {};
  if (Array.isArray(env))
    return Object.fromEntries((env as { name: string; value: string }[]).map((e) => [e.name, e.value]));
  return { ...(env as Record<string, string>) };
}

/** Validates the spec (every problem) and builds the create body. Pure: exported for inspection and tests. */
export function executionContainerBody(spec: ExecutionContainerSpec): { body: ContainerCreateBody; command: string[] } {
  const p = spec.policy;
  const problems: string[] = [];
  if (!isDigestReference(p.image))
    problems.push(`policy.image must be a repository@sha256:<digest> reference, got ${JSON.stringify(p.image)}`);
  const user = p.user ?? DEFAULT_SANDBOX_USER;
  const ids = UID_GID.exec(user);
  if (!ids) problems.push(`policy.user must be numeric uid:gid, got ${JSON.stringify(user)}`);
  else if (Number(ids[1]) === 0 || Number(ids[2]) === 0) problems.push('policy.user must not be root (uid or gid 0)');
  const positive = (name: string, v: number, min = 1) => {
    if (!Number.isSafeInteger(v) || v < min) problems.push(`policy.${name} must be an integer >= ${min}, got ${v}`);
  };
  positive('memoryBytes', p.memoryBytes, 6 * 1024 * 1024);
  positive('pidsLimit', p.pidsLimit);
  positive('nanoCpus', p.nanoCpus, 10_000_000);
  positive('workTmpfsBytes', p.workTmpfsBytes, 4096);
  if (p.runtime !== undefined && !/^[a-z0-9][a-z0-9._-]*$/.test(p.runtime))
    problems.push(`policy.runtime ${JSON.stringify(p.runtime)} is not a runtime name`);
  const volumes = [spec.runtimeVolume, spec.codeVolume, ...(spec.additionVolumes ?? [])];
  for (const v of volumes)
    if (typeof v !== 'string' || !VOLUME_NAME.test(v)) problems.push(`volume name ${JSON.stringify(v)} is invalid`);
  if (spec.invocationId !== null && (typeof spec.invocationId !== 'string' || spec.invocationId.length === 0))
    problems.push('invocationId must be a non-empty string (or null for a pre-started sandbox)');
  if (spec.invocationId === null && spec.labels[PRESTART_LABEL] === undefined)
    problems.push(`a sandbox without an invocationId must be labelled ${PRESTART_LABEL} (pre-started)`);
  const env = envList(spec.env);
  problems.push(...envProblems(env));
  let command: string[] = [];
  try {
    command = sandboxCommand(spec.launcher, spec.entrypoint);
  } catch (err) {
    problems.push(...((err as ValidationError).issues ?? [String(err)]));
  }
  if (problems.length > 0)
    throw new ValidationError('SANDBOX_SPEC_INVALID', 'cannot create the execution container', problems);

  const [, uid, gid] = ids!;
  const ro = (source: string, target: string): MountSpec => ({
    Type: 'volume',
    Source: source,
    Target: target,
    ReadOnly: true,
    VolumeOptions: { NoCopy: true },
  });
  const mounts: MountSpec[] = [
    ro(spec.runtimeVolume, RUNTIME_MOUNT),
    ro(spec.codeVolume, APP_MOUNT),
    ...(spec.additionVolumes ?? []).map((v, i) => ro(v, `${ADDITIONS_MOUNT}/${i}`)),
  ];
  const logMax = p.logMaxBytes ?? 32 * 1024 * 1024;
  const body: ContainerCreateBody = {
    Image: p.image,
    // The image's ENTRYPOINT/CMD are both replaced: argv is exactly the computed command.
    Entrypoint: [command[0]!],
    Cmd: command.slice(1),
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    User: user,
    WorkingDir: WORK_MOUNT,
    Labels: { ...spec.labels, ...(spec.invocationId !== null ? { [INVOCATION_LABEL]: spec.invocationId } : {}) },
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    OpenStdin: true,
    StdinOnce: true,
    Tty: false,
    NetworkDisabled: true,
    Healthcheck: { Test: ['NONE'] },
    HostConfig: {
      Mounts: mounts,
      Tmpfs: { [WORK_MOUNT]: `rw,nosuid,nodev,size=${p.workTmpfsBytes},uid=${uid},gid=${gid},mode=0700` },
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true'],
      NetworkMode: 'none',
      Memory: p.memoryBytes,
      MemorySwap: p.memoryBytes,
      PidsLimit: p.pidsLimit,
      NanoCpus: p.nanoCpus,
      IpcMode: 'private',
      Privileged: false,
      AutoRemove: false,
      RestartPolicy: { Name: 'no' },
      Init: false,
      Ulimits: [{ Name: 'core', Soft: 0, Hard: 0 }],
      LogConfig: { Type: 'json-file', Config: { 'max-size': String(logMax), 'max-file': '1' } },
      ...(p.runtime && p.runtime !== 'runc' ? { Runtime: p.runtime } : {}),
    },
  };
  return { body, command };
}

const now = (): number => performance.now();

function limitsOf(opts: Partial<OutputLimits>): OutputLimits {
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

interface Verdict {
  killedFor: 'timeout' | OutputViolation | null;
  startError: string | null;
  state: ContainerInfo['state'] | null;
  waitStatus: number | null;
}

function classify(
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

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), ms))),
  ]).finally(() => clearTimeout(timer));
}

class DockerSandboxRunner implements ExecutionSandbox {
  constructor(private readonly engine: DockerEngine) {}

  async createExecutionContainer(spec: ExecutionContainerSpec): Promise<{ containerId: string; command: string[] }> {
    const { body, command } = executionContainerBody(spec);
    // Docker would silently create an empty volume for a name that does not exist: refuse instead, and refuse
    // a materialized volume whose copy never completed (no seal). One listing answers for every volume and seal;
    // the sandbox image is made present meanwhile (an inspect, a pull only when absent).
    const volumes = [spec.runtimeVolume, spec.codeVolume, ...(spec.additionVolumes ?? [])];
    const [listed, image] = await Promise.allSettled([
      this.engine.volumesNamed([...volumes, ...volumes.map((v) => `${v}${SEAL_SUFFIX}`)]),
      this.engine.pullByDigest(spec.policy.image),
    ]);
    if (listed.status === 'rejected') throw listed.reason;
    const found = new Map(listed.value.map((v) => [v.name, v]));
    const problems: string[] = [];
    for (const name of volumes) {
      const v = found.get(name);
      if (!v) problems.push(`volume ${name} does not exist`);
      else if (v.labels[LABEL_VOLUME_KIND] !== undefined && !found.has(`${name}${SEAL_SUFFIX}`))
        problems.push(`volume ${name} was never completely materialized (no seal)`);
    }
    if (problems.length > 0)
      throw new ValidationError('SANDBOX_VOLUME_MISSING', 'cannot create the execution container', problems);
    if (image.status === 'rejected') throw image.reason;
    const containerId = await this.engine.createContainer(body, spec.name);
    return { containerId, command };
  }

  async invoke(containerId: string, envelope: InvocationEnvelope, opts: InvokeOptions): Promise<InvocationResult> {
    const t0 = now();
    const deadlineAt = t0 + opts.deadlineMs;
    const limits = limitsOf(opts);
    const line = Buffer.from(JSON.stringify(envelope) + '\n', 'utf8');
    const maxEnvelope = opts.maxEnvelopeBytes ?? 8 * 1024 * 1024;
    if (line.length > maxEnvelope)
      throw new ValidationError(
        'ENVELOPE_TOO_LARGE',
        `the invocation envelope is ${line.length} bytes; the bound is ${maxEnvelope}`,
      );

    const info = opts.inspected?.id === containerId ? opts.inspected : await this.engine.inspectContainer(containerId);
    if (!info)
      throw new ContainerStateError('CONTAINER_NOT_FOUND', containerId, `container ${containerId} does not exist`);
    // A pre-started sandbox is running, its worker blocked on stdin; it never had an envelope (no invocation
    // label), and StdinOnce closes its stdin when this one attach ends: it cannot take a second envelope.
    const prestarted = info.labels[PRESTART_LABEL] !== undefined && info.labels[INVOCATION_LABEL] === undefined;
    if (prestarted) {
      if (!info.state.running) {
        throw new ContainerStateError(
          'PRESTARTED_NOT_RUNNING',
          containerId,
          `pre-started sandbox ${containerId} is not running (${info.state.status}); it cannot take an envelope`,
        );
      }
    } else if (info.state.status !== 'created' || info.state.startedAt !== null) {
      throw new ContainerStateError(
        'CONTAINER_ALREADY_STARTED',
        containerId,
        `container ${containerId} was already started (${info.state.status}); an execution container runs one invocation`,
      );
    }
    const expectedId = info.labels[INVOCATION_LABEL];
    if (expectedId !== undefined && expectedId !== envelope.id) {
      throw new ValidationError(
        'ENVELOPE_MISMATCH',
        `envelope id ${envelope.id} is not the invocation ${expectedId} this container was created for`,
      );
    }

    const verdict: Verdict = { killedFor: null, startError: null, state: null, waitStatus: null };
    let killing: Promise<void> | null = null;
    const kill = (why: Verdict['killedFor']) => {
      if (verdict.killedFor === null && why !== null) verdict.killedFor = why;
      killing ??= this.engine.kill(containerId).catch(() => undefined);
    };
    let graceTimer: NodeJS.Timeout | undefined;
    let tTerminal: number | null = null;
    let terminalSeen: () => void = () => undefined;
    const terminal = new Promise<'terminal'>((resolve) => (terminalSeen = () => resolve('terminal')));
    const collector = new FrameCollector(limits, envelope.id, {
      onBreach: (kind) => kill(kind),
      onTerminal: () => {
        tTerminal = now();
        graceTimer = setTimeout(() => kill(null), opts.exitGraceMs ?? 2000);
        terminalSeen();
      },
      ...(opts.onFrame ? { onFrame: opts.onFrame } : {}),
      now,
    });
    const demux = new StreamDemuxer(
      (b) => collector.stdout(b),
      (b) => collector.stderr(b),
    );

    // Both must be in place before the start; neither depends on the other.
    const [attached, waited] = await Promise.allSettled([
      this.engine.attach(containerId),
      this.engine.waitNextExit(containerId),
    ]);
    if (attached.status === 'rejected') {
      if (waited.status === 'fulfilled') waited.value.cancel();
      throw attached.reason;
    }
    const stream = attached.value;
    const streamEnded = new Promise<void>((resolve) => {
      stream.on('data', (c: Buffer) => demux.push(c));
      stream.on('end', resolve);
      stream.on('close', resolve);
      stream.on('error', () => resolve());
    });
    const tAttached = now();
    if (waited.status === 'rejected') {
      stream.destroy();
      throw waited.reason;
    }
    const waiter = waited.value;

    const deadlineTimer = setTimeout(() => kill('timeout'), Math.max(0, deadlineAt - now()));
    // tStarted ends up as the moment the envelope is handed over: the run is counted from there.
    let tStarted = now();
    let startMs = 0;
    let adapterReadyMs = 0;
    try {
      if (!prestarted) {
        await this.engine.start(containerId);
        startMs = now() - tStarted;
        adapterReadyMs = startMs;
      }
      tStarted = now();
      stream.write(line);
      stream.end(); // half-close: StdinOnce closes the worker's stdin, output keeps flowing
    } catch (err) {
      verdict.startError = err instanceof Error ? err.message : String(err);
      waiter.cancel();
      stream.destroy();
    }

    let answeredEarly = false;
    if (verdict.startError === null) {
      const exited = waiter.exited.then(
        (x) => x,
        () => null,
      );
      const first = opts.answerOnTerminal ? await Promise.race([exited, terminal]) : await exited;
      if (first === 'terminal') {
        // The worker answered: its exit (slow on a busy daemon) is not waited for beyond exitWaitMs.
        const late = await withTimeout(exited, opts.answerOnTerminal?.exitWaitMs ?? 0);
        if (late === 'timeout') {
          answeredEarly = true;
          waiter.cancel();
        } else verdict.waitStatus = late?.statusCode ?? null;
      } else verdict.waitStatus = first?.statusCode ?? null;
      // The attach stream delivers the last bytes around the time of the exit: give it a moment to drain.
      if (!answeredEarly) await withTimeout(streamEnded, 2000);
    }
    clearTimeout(deadlineTimer);
    clearTimeout(graceTimer);
    if (killing) await killing;
    stream.destroy();
    const tExited = now();

    const out = collector.finish();
    // A result frame and a clean exit (status 0, so no OOM kill) need nothing more from the Engine; any other
    // ending is classified from the container's recorded state (exit code, OOM).
    const clean =
      (out.terminal?.type === 'result' &&
        verdict.killedFor === null &&
        verdict.startError === null &&
        verdict.waitStatus === 0) ||
      (answeredEarly && out.terminal !== null && verdict.killedFor === null);
    verdict.state = clean ? null : ((await this.engine.inspectContainer(containerId))?.state ?? null);
    const base: ResultCommon = {
      containerId,
      invocationId: envelope.id,
      exitCode: verdict.state?.exitCode ?? verdict.waitStatus,
      oomKilled: verdict.state?.oomKilled ?? false,
      ...keptOutput(out),
      timings: {
        attachMs: tAttached - t0,
        startMs,
        adapterReadyMs,
        firstFrameMs: out.firstFrameAt !== null ? out.firstFrameAt - tStarted : null,
        resultMs: tTerminal !== null ? tTerminal - tStarted : null,
        runMs: tExited - tStarted,
        totalMs: now() - t0,
        prestarted,
      },
    };
    return { ...base, ...classify(out, verdict) };
  }

  async collectResult(containerId: string, opts: CollectOptions = {}): Promise<InvocationResult> {
    const t0 = now();
    let info = await this.engine.inspectContainer(containerId);
    if (!info)
      throw new ContainerStateError('CONTAINER_NOT_FOUND', containerId, `container ${containerId} does not exist`);
    if (info.state.startedAt === null) {
      throw new ContainerStateError(
        'CONTAINER_NOT_STARTED',
        containerId,
        `container ${containerId} was never started; invoke it instead`,
      );
    }
    const invocationId = opts.invocationId ?? info.labels[INVOCATION_LABEL] ?? null;
    const verdict: Verdict = { killedFor: null, startError: null, state: null, waitStatus: null };
    if (info.state.running) {
      const remaining = (opts.deadlineAt ?? Number.POSITIVE_INFINITY) - Date.now();
      const waited =
        remaining > 0
          ? await withTimeout(this.engine.waitNotRunning(containerId), Math.min(remaining, 2 ** 31 - 1))
          : 'timeout';
      if (waited === 'timeout') {
        verdict.killedFor = 'timeout';
        await this.engine.kill(containerId);
        await this.engine.waitNotRunning(containerId);
      }
      info = (await this.engine.inspectContainer(containerId)) ?? info;
    }
    verdict.state = info.state;

    const collector = new FrameCollector(limitsOf(opts), invocationId);
    const demux = new StreamDemuxer(
      (b) => collector.stdout(b),
      (b) => collector.stderr(b),
    );
    const logs = await this.engine.logs(containerId);
    await new Promise<void>((resolve) => {
      logs.on('data', (c: Buffer) => demux.push(c));
      logs.on('end', resolve);
      logs.on('close', resolve);
      logs.on('error', () => resolve());
    });
    logs.destroy();
    const out = collector.finish();
    const base: ResultCommon = {
      containerId,
      invocationId: invocationId ?? '',
      exitCode: info.state.exitCode,
      oomKilled: info.state.oomKilled,
      ...keptOutput(out),
      timings: {
        attachMs: 0,
        startMs: 0,
        firstFrameMs: null,
        runMs:
          info.state.startedAt && info.state.finishedAt
            ? Date.parse(info.state.finishedAt) - Date.parse(info.state.startedAt)
            : 0,
        totalMs: now() - t0,
      },
    };
    return { ...base, ...classify(out, verdict) };
  }

  async removeContainer(containerId: string): Promise<void> {
    await this.engine.removeContainer(containerId, { force: true });
  }
}

export function createExecutionSandbox(engine: DockerEngine): ExecutionSandbox {
  return new DockerSandboxRunner(engine);
}
