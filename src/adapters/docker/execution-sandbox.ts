// The hardened main container of an at-run execution, and one invocation over worker protocol v1.
//
// createExecutionContainer: the runner-owned sandbox image (digest-pinned), created STOPPED, with the runtime,
//   addition and code volumes read-only, a size-bounded tmpfs work dir, read-only rootfs, non-root user, all
//   capabilities dropped, no-new-privileges, Docker's default seccomp profile, no network, bounded memory
//   (no swap), PIDs and CPU, no health check, only the runtime record's environment, stdin open for exactly
//   one attach, optionally under gVisor (runtime `runsc`). Never AutoRemove: the result stays collectable.
//   The create body itself is built and validated in execution-container-body.ts.
// invoke: attach → wait(next-exit) → start → one NDJSON envelope line on stdin → close stdin → frames from
//   stdout (bounded), stderr kept bounded; the deadline is enforced here by killing the container.
// collectResult: the same verdict for a container that already ran (after a supervisor restart), from logs.
//   Both classify the ending in invocation-result.ts.
import { ValidationError } from '../../domain/errors.ts';
import type { ContainerInfo, DockerEngine } from './docker-port.ts';
import { ContainerStateError } from './errors.ts';
import { LABEL_VOLUME_KIND, SEAL_SUFFIX } from './materialized-volume-labels.ts';
import { FrameCollector, StreamDemuxer, type Frame, type OutputLimits } from './frames.ts';
import {
  INVOCATION_LABEL,
  PRESTART_LABEL,
  executionContainerBody,
  type ExecutionContainerSpec,
} from './execution-container-body.ts';
import {
  classify,
  keptOutput,
  limitsOf,
  type InvocationResult,
  type ResultCommon,
  type Verdict,
} from './invocation-result.ts';

export const PROTOCOL_VERSION = 1;

export interface InvocationEnvelope {
  version: 1;
  id: string;
  type: 'invoke';
  code: { uri: string; cid: string };
  handler: string;
  input: unknown;
  /**
   * secrets: the job's opened secrets by name, present only when its job names a secrets record. They exist in
   * this envelope alone (stdin), never in argv, env, labels or any record of the invocation.
   */
  context: { callerDid: string | null; deadline: string; secrets?: Record<string, string> };
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

const now = (): number => performance.now();

/** The promise's value, or 'timeout' once `ms` have passed first. */
function withTimeout<T>(p: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), ms))),
  ]).finally(() => clearTimeout(timer));
}

/** The envelope as the one NDJSON line the worker reads; refused when it is over the bound. */
function envelopeLine(envelope: InvocationEnvelope, maxEnvelopeBytes: number | undefined): Buffer {
  const line = Buffer.from(JSON.stringify(envelope) + '\n', 'utf8');
  const maxEnvelope = maxEnvelopeBytes ?? 8 * 1024 * 1024;
  if (line.length > maxEnvelope)
    throw new ValidationError(
      'ENVELOPE_TOO_LARGE',
      `the invocation envelope is ${line.length} bytes; the bound is ${maxEnvelope}`,
    );
  return line;
}

/**
 * Checks that the container can take this envelope, and answers whether it is a pre-started sandbox: a container
 * created for one invocation must never have started, a pre-started one must still be running.
 */
function invocableAs(containerId: string, info: ContainerInfo | null, envelope: InvocationEnvelope): boolean {
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
  return prestarted;
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
    const line = envelopeLine(envelope, opts.maxEnvelopeBytes);

    const info = opts.inspected?.id === containerId ? opts.inspected : await this.engine.inspectContainer(containerId);
    const prestarted = invocableAs(containerId, info, envelope);

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
