// at-run executions under the supervisor: the execution machine's effects carried out by the AT
// Protocol reader, the archive validator, the Docker materializer and the hardened sandbox. Every step
// records what it used (CIDs, digests, volumes, limits) as an event.
import { assertValidArchive, entriesUnder, writeArchive } from '../../adapters/archive/index.ts';
import {
  createAtprotoReader,
  isAtprotoError,
  type AtprotoReader,
  type AtprotoReaderOptions,
  type CodeUriResolution,
  type FetchedRecord,
  type Publisher,
} from '../../adapters/atproto/index.ts';
import type { ContainerInfo, DockerEngine } from '../../adapters/docker/docker-port.ts';
import { createDockerEngine } from '../../adapters/docker/dockerode-engine.ts';
import { createMaterializer, type Materializer, type MaterializeProgress } from '../../adapters/docker/materializer.ts';
import {
  createExecutionSandbox,
  type InvocationEnvelope,
  type InvocationResult,
  type ExecutionSandbox as ExecSandbox,
} from '../../adapters/docker/execution-sandbox.ts';
import {
  assertCodeRecord,
  checkRuntimeBinding,
  runtimePublisherOfUri,
  type CodeRecord,
} from '../../domain/at-run/code-record.ts';
import {
  admitCode,
  admitRuntime,
  DEFAULT_OPERATOR_POLICY,
  ENVELOPE_OVERHEAD_BYTES,
  mayPrestart,
  type OperatorPolicy,
} from '../../domain/at-run/operator-policy.ts';
import { selectRuntimePlatform } from '../../domain/at-run/runtime-record.ts';
import { RunlogError, ValidationError } from '../../domain/errors.ts';
import type { RecordedEvent } from '../../domain/events.ts';
import type { LatencyProfile, Materialized, OutcomeData, Resolved } from '../../domain/execution-events.ts';
import type { ExecutionContext, ExecutionRequest } from '../../machines/execution.machine.ts';
import type { ActorHost, EffectContext as AnyEffectContext, EffectHandlers } from '../host/actor-host.ts';
import {
  classify,
  envelopeLost,
  envelopeNotReceived,
  outcomeEvent,
  sandboxSpec,
  sha256,
  type OutcomeEvent,
} from './execution-outcomes.ts';
import { putRunnerRecordFor, writeReceiptFor } from './execution-receipts.ts';
import { CodePrefetch, VerifiedCodeCache, type PreparedCode } from './code-prefetch.ts';
import { FreshFlight } from './fresh-flight.ts';
import type { FaultHook } from '../host/faults.ts';
import type { Parts } from '../../config/parts.ts';
import { ResolutionHints } from './resolution-hints.ts';
import { byCallerDeadline, leaveBehind, StepDeadlineError } from './step-deadline.ts';
import { PrestartGate } from './pool/prestart-gate.ts';
import { POOL_STREAM, SandboxPool, type PoolTarget } from './pool/sandbox-pool.ts';
import { systemClock } from '../host/system-clock.ts';
import type { Clock } from '../../domain/clock.ts';

export interface ExecutionOptions {
  home: string;
  /** What "now" is for deadlines and receipts (default: the wall clock). */
  clock?: Clock;
  parts: Parts;
  policy?: OperatorPolicy;
  atproto?: AtprotoReaderOptions;
  /** Extra labels on every container and volume (tests mark theirs). */
  labels?: Record<string, string>;
  faults?: FaultHook;
  /**
   * The Docker Engine port: one given (tests), or how to get the supervisor's shared one, asked for on first use
   * (default: one on parts.dockerSocket, made on first use).
   */
  engine?: DockerEngine | (() => DockerEngine);
  /** When set, a receipt (dev.mainasara.at-run.beta.v2.execution) is written to this account's repo after each invocation. */
  receipts?: Publisher;
  log?: (msg: string) => void;
  /** Reads a fact stream of the log (the sandbox pool's recovery reads its own). */
  readFacts?: (stream: string) => Promise<RecordedEvent[]>;
}

export type { LatencyProfile };

// Moved to the domain with the execution's events; re-exported for the code that imports it from here.
export type { Resolved };

type EffectContext = AnyEffectContext<'execution'>;

/** What a prepared code archive is: the blob (from its author's PDS) and the entrypoint it was checked for. */
const codeKey = (author: string, blobCid: string, entrypoint: string): string => `${author}\n${blobCid}\n${entrypoint}`;

/** A shared read that ran out of its starter's time: a joiner with more time reads again (fresh-flight.ts). */
const isNetworkTimeout = (err: unknown): boolean => isAtprotoError(err) && err.code === 'NETWORK_TIMEOUT';

export class ExecutionSupervisor {
  readonly policy: OperatorPolicy;
  private engineInstance: DockerEngine | null = null;
  private materializerInstance: Materializer | null = null;
  private sandboxInstance: ExecSandbox | null = null;
  readonly reader: AtprotoReader;
  private platformOnce: Promise<{ os: string; architecture: string; variant?: string }> | null = null;
  private readonly prefetch = new CodePrefetch();
  private readonly verifiedCode = new VerifiedCodeCache();
  private readonly hints = new ResolutionHints();
  /** Reads of a burst's executions shared while in flight, never across a submission (fresh-flight.ts). */
  private readonly records = new FreshFlight<FetchedRecord>({ retryable: isNetworkTimeout, nowMs: () => this.nowMs() });
  private readonly codeUris = new FreshFlight<CodeUriResolution>({
    retryable: isNetworkTimeout,
    nowMs: () => this.nowMs(),
  });
  private readonly progress = new Map<string, (step: { name: string; detail: Record<string, unknown> }) => void>();
  /** Step durations of the executions this process is running (see LatencyProfile). */
  private readonly profiles = new Map<string, LatencyProfile>();
  private poolInstance: SandboxPool | null = null;
  /** What to pre-start once an execution has answered (createSandbox → invoke). */
  private readonly nextSandbox = new Map<string, PoolTarget>();
  /** The pool's inspect of a claimed sandbox, handed to its invocation (createSandbox → invoke). */
  private readonly claimedInfo = new Map<string, ContainerInfo>();
  /** Pre-starts wait while a burst is unanswered; only trusted publishers' runtimes pre-start (prestart-gate.ts). */
  private readonly gate = new PrestartGate<PoolTarget>((target) => this.pool.fill(target), {
    trusts: (did) => mayPrestart(this.policy.prestart, did),
  });
  /** Used containers being removed (the cleanup effect) and copies left past a deadline, awaited by idle() and close(). */
  private readonly removals = new Set<Promise<unknown>>();

  private nowMs(): number {
    return (this.opts.clock ?? systemClock).nowMs();
  }

  constructor(
    private readonly opts: ExecutionOptions,
    private readonly host: () => ActorHost,
  ) {
    this.policy = opts.policy ?? DEFAULT_OPERATOR_POLICY;
    this.reader = createAtprotoReader({ mode: 'strict', ...opts.atproto });
  }

  get engine(): DockerEngine {
    const given = this.opts.engine;
    this.engineInstance ??=
      typeof given === 'function'
        ? given()
        : (given ?? createDockerEngine({ socketPath: this.opts.parts.dockerSocket }));
    return this.engineInstance;
  }

  private get materializer(): Materializer {
    this.materializerInstance ??= createMaterializer(this.engine, {
      limits: this.policy.archive,
      labels: this.labels(),
    });
    return this.materializerInstance;
  }

  get sandbox(): ExecSandbox {
    this.sandboxInstance ??= createExecutionSandbox(this.engine);
    return this.sandboxInstance;
  }

  /** Pre-started one-shot sandboxes (sandbox-pool.ts). */
  get pool(): SandboxPool {
    this.poolInstance ??= new SandboxPool({
      engine: this.engine,
      sandbox: this.sandbox,
      policy: this.policy.prestart,
      labels: this.labels(),
      record: (events) => void this.recordPoolFacts(events),
      read: async () => (await this.opts.readFacts?.(POOL_STREAM)) ?? [],
      log: (m) => this.opts.log?.(m),
      clock: this.opts.clock ?? systemClock,
    });
    return this.poolInstance;
  }

  /** Resolves when the background work of executions that answered is done: removals, the pool's starts. */
  async idle(): Promise<void> {
    while (this.removals.size > 0) await Promise.allSettled([...this.removals]);
    await this.poolInstance?.settled();
  }

  /**
   * The pool's facts are observed facts (a sandbox was started, claimed, removed): while PostgreSQL restarts they
   * are sent again until it answers, never an unhandled rejection (that would end the supervisor) nor a silent
   * loss (a claimed sandbox's container would be unaccounted for). One cut off after it committed is found in
   * the log (by its sandbox) before it is sent again.
   */
  private async recordPoolFacts(events: Parameters<ActorHost['appendFact']>[1]): Promise<void> {
    const sandboxOf = (data: unknown) => (data as { sandbox?: unknown } | undefined)?.sandbox;
    let failure: unknown = null;
    // Sent again only once a read of the log says it did not land; a read cut off as well is tried again first.
    let send = true;
    for (let attempt = 0, delay = 500; attempt <= 30; attempt++, delay = Math.min(delay * 2, 5000)) {
      if (send) {
        try {
          await this.host().appendFact(POOL_STREAM, events);
          return;
        } catch (err) {
          failure = err;
          if (!(err instanceof RunlogError && err.code === 'STORE_UNAVAILABLE') || attempt >= 30) break;
        }
      }
      await new Promise((r) => setTimeout(r, delay));
      const landed = this.opts.readFacts ? await this.opts.readFacts(POOL_STREAM).catch(() => null) : [];
      if (
        landed &&
        events.every((e) => landed.some((l) => l.type === e.type && sandboxOf(l.data) === sandboxOf(e.data)))
      )
        return;
      send = landed !== null;
    }
    this.opts.log?.(
      `pool fact ${events.map((e) => e.type).join(', ')} not recorded: ${failure instanceof Error ? failure.message : String(failure)}`,
    );
  }

  /** Removes the pool's waiting sandboxes (before the log closes: their removal is recorded). */
  async close(): Promise<void> {
    await this.poolInstance?.close();
    while (this.removals.size > 0) await Promise.allSettled([...this.removals]);
  }

  private profile(executionId: string, add: LatencyProfile): void {
    this.profiles.set(executionId, { ...this.profiles.get(executionId), ...add });
  }

  /** An outcome event with the execution's latency profile; the profile is forgotten. */
  private withProfile<T extends { type: 'execution.succeeded' | 'execution.failed'; data: OutcomeData }>(
    executionId: string,
    event: T,
  ): T {
    const profile = this.profiles.get(executionId);
    this.profiles.delete(executionId);
    if (!profile) return event;
    const rounded = Object.fromEntries(
      Object.entries(profile).map(([k, v]) => [k, typeof v === 'number' ? Math.round(v * 10) / 10 : v]),
    ) as LatencyProfile;
    return { ...event, data: { ...event.data, profile: rounded } };
  }

  private labels(extra: Record<string, string> = {}): Record<string, string> {
    return { 'runlog.home': this.opts.home, ...this.opts.labels, ...extra };
  }

  onProgress(executionId: string, cb: (step: { name: string; detail: Record<string, unknown> }) => void): () => void {
    // The caller's callback runs inside effects: whatever it throws is its own problem, never the execution's.
    this.progress.set(executionId, (step) => {
      try {
        cb(step);
      } catch (err) {
        this.opts.log?.(`onProgress of ${executionId} threw: ${err instanceof Error ? err.message : String(err)}`);
      }
    });
    return () => this.progress.delete(executionId);
  }

  private async step(ctx: EffectContext, name: string, detail: Record<string, unknown>): Promise<void> {
    this.progress.get(ctx.actor.id)?.({ name, detail });
    await ctx.dispatch({ type: 'execution.step', data: { name, detail } });
  }

  /** The execution machine's effects but `announce` (the bus's, wired in runlog.ts). */
  handlers(): Omit<EffectHandlers<'execution'>, 'announce'> {
    return {
      resolve: (p, ctx) => this.resolve(p.request, ctx),
      materialize: (p, ctx) => this.materialize(p.resolved, ctx),
      createSandbox: (p, ctx) => this.createSandbox(p.request, p.resolved, p.materialized, ctx),
      invoke: (p, ctx) =>
        this.invoke(p.request, String(p.containerId), p.deadline, p.resolved, ctx, p.resumed === true),
      collect: (p, ctx) => this.collect(String(p.containerId), p.deadline, ctx),
      killSandbox: (p, ctx) => this.kill(p.containerId, ctx),
      cleanup: (p) => this.cleanup(p.executionId, p.containerId),
    };
  }

  // 1–6 of the seed's PDS-first flow: URI → DID → PDS → code record → runtime record → platform.
  // The runtime record and the code blob depend on the code record, but what it named last time (a hint) is
  // read alongside it; a hint is used only when this execution's verified code record names the same thing.
  private async resolve(request: ExecutionRequest, ctx: EffectContext): Promise<void> {
    const id = ctx.actor.id;
    const t0 = performance.now();
    this.gate.begin(id);
    let resolved: Resolved;
    // Every network read of the resolution ends within the caller's timeout, counted from the request: a slow
    // PDS spends the execution's time, never more (NETWORK_TIMEOUT, reason timeout).
    const requestedAt = Date.parse((ctx.actor.snapshot.context as ExecutionContext).requestedAt ?? '');
    const deadlineAt = (Number.isFinite(requestedAt) ? requestedAt : this.nowMs()) + request.timeoutMs;
    // Step events record what was used; they are appended while the next read is under way.
    const steps: Promise<void>[] = [];
    const hint = this.hints.get(request.uri);
    // A record (or alias) read shared with the burst's other executions of it, begun after this one was submitted.
    const submittedAt = Number.isFinite(requestedAt) ? requestedAt : Number.NaN;
    const fetchRecord = (uri: string, expectCid?: string) =>
      this.records.run(`${uri}\n${expectCid ?? ''}`, submittedAt, deadlineAt, () =>
        this.reader.fetchRecord(uri, { deadlineAt, ...(expectCid ? { expectCid } : {}) }),
      );
    const early = hint ? fetchRecord(hint.runtimeUri) : null;
    early?.catch(() => undefined); // used (and its failure seen) only if the code record still names it
    if (hint)
      this.prefetch.start(id, codeKey(hint.author, hint.blobCid, hint.entrypoint), () =>
        this.prepareCode(hint.author, hint.blobCid, hint.entrypoint, deadlineAt),
      );
    try {
      const target = await this.codeUris.run(request.uri, submittedAt, deadlineAt, () =>
        this.reader.resolveCodeUri(request.uri, { deadlineAt }),
      );
      const code = await fetchRecord(target.codeUri, target.expectCid);
      steps.push(
        this.step(ctx, 'code-record', { uri: code.uri, cid: code.cid, mode: code.mode, via: target.via ?? null }),
      );
      const record: CodeRecord = assertCodeRecord(code.value);
      // The author listed the handlers: an unknown one is refused now, before anything is pulled or started.
      if (record.handlers && !record.handlers.includes(request.handler)) {
        throw new ValidationError(
          'HANDLER_NOT_FOUND',
          `${code.uri} exports no handler named ${request.handler} (its record lists ${record.handlers.join(', ')})`,
          [`${request.handler} is not listed`],
        );
      }
      const { limits, clamped } = admitCode(this.policy, record);
      const author = code.uri.slice('at://'.length).split('/')[0]!;
      const blobCid = record.blob.ref.$link;
      // The verified code record names the blob: fetch, verify and validate it while the runtime record is read.
      if (
        !hint ||
        codeKey(hint.author, hint.blobCid, hint.entrypoint) !== codeKey(author, blobCid, record.entrypoint)
      ) {
        this.prefetch.start(id, codeKey(author, blobCid, record.entrypoint), () =>
          this.prepareCode(author, blobCid, record.entrypoint, deadlineAt),
        );
      }
      // Fetched by URI, verified (strict: signature and proof), then bound: its CID must be the strong
      // reference's and the blob's MIME subtype (RUNTIME_BINDING_MISMATCH otherwise).
      const runtimeUri = record.runtimeRecord.uri;
      const [runtime, platform] = await Promise.all([
        early && hint?.runtimeUri === runtimeUri ? early : fetchRecord(runtimeUri),
        this.daemonPlatform(),
      ]);
      checkRuntimeBinding(record, { uri: runtime.uri, cid: runtime.cid });
      steps.push(this.step(ctx, 'runtime-record', { uri: runtime.uri, cid: runtime.cid }));
      const selected = selectRuntimePlatform(runtime.value, platform, {
        acceptedProtocolVersions: this.policy.protocolVersions,
      });
      const image = admitRuntime(this.policy, selected);
      const requestedTimeout = request.timeoutMs > 0 ? request.timeoutMs : limits.timeoutMs;
      resolved = {
        codeUri: code.uri,
        codeCid: code.cid,
        via: target.via ? String((target.via as { uri?: string }).uri ?? target.via) : null,
        author,
        runtimeName: record.runtime,
        runtimeUri: runtime.uri,
        runtimeCid: runtime.cid,
        blobCid,
        entrypoint: record.entrypoint,
        image: `${image.repository}@${image.digest}`,
        platform,
        exportPath: selected.platform.exportPath,
        launcher: selected.platform.launcher,
        env: selected.platform.env ?? [],
        additions: record.additions ?? [],
        limits: { ...limits, timeoutMs: Math.min(limits.timeoutMs, requestedTimeout) },
        clamped,
        isolation: this.policy.isolation,
        mode: code.mode,
      };
      // The envelope is known now but for its deadline (a fixed-length timestamp): refuse one the sandbox would
      // refuse before anything is pulled, extracted or created.
      this.checkEnvelope(request, resolved);
      this.hints.set(request.uri, { author, runtimeUri, blobCid, entrypoint: record.entrypoint });
      await Promise.all(steps);
    } catch (err) {
      this.prefetch.drop(id);
      await Promise.allSettled(steps);
      this.profile(id, { resolveMs: performance.now() - t0 });
      await ctx.dispatch(this.withProfile(id, { type: 'execution.failed', data: classify(err, 'resolution') }));
      return;
    }
    this.profile(id, { resolveMs: performance.now() - t0 });
    const result = await ctx.dispatch({ type: 'execution.resolved', data: resolved });
    if (!result.accepted) this.prefetch.drop(id); // cancelled meanwhile: nothing will materialize it
  }

  /** The daemon's OS/architecture does not change while it runs: asked once (again after a failure). */
  private daemonPlatform(): Promise<{ os: string; architecture: string; variant?: string }> {
    this.platformOnce ??= this.engine.platform().catch((err: unknown) => {
      this.platformOnce = null;
      throw err;
    });
    return this.platformOnce;
  }

  /** The largest envelope sent on stdin: the largest input the policy admits, and room for the rest. */
  private get maxEnvelopeBytes(): number {
    return this.policy.input.maxBytes + ENVELOPE_OVERHEAD_BYTES;
  }

  private envelopeOf(
    request: ExecutionRequest,
    r: Pick<Resolved, 'codeUri' | 'codeCid'>,
    deadline: string,
  ): InvocationEnvelope {
    return {
      version: 1,
      id: request.executionId,
      type: 'invoke',
      code: { uri: r.codeUri, cid: r.codeCid },
      handler: request.handler,
      input: request.input ?? null,
      context: { callerDid: request.callerDid, deadline },
    };
  }

  private checkEnvelope(request: ExecutionRequest, r: Resolved): void {
    const size = Buffer.byteLength(JSON.stringify(this.envelopeOf(request, r, new Date(0).toISOString()))) + 1;
    if (size > this.maxEnvelopeBytes) {
      throw new ValidationError(
        'ENVELOPE_TOO_LARGE',
        `the invocation envelope would be ${size} bytes; this runner sends at most ${this.maxEnvelopeBytes}`,
        [`${size} > ${this.maxEnvelopeBytes}`],
      );
    }
  }

  /** 10 and the checks before 11: the blob from the author's PDS (CID verified), validated, re-written. */
  private async prepareCode(
    author: string,
    blobCid: string,
    entrypoint: string,
    deadlineAt?: number,
  ): Promise<PreparedCode> {
    // Called only with the blob CID a verified code record names (or a hint, used only if the record still names
    // it): bytes that hashed to that CID and passed validation before are the same bytes.
    const key = codeKey(author, blobCid, entrypoint);
    const known = this.verifiedCode.get(key);
    if (known) return known;
    const blob = await this.reader.fetchBlob(author, blobCid, deadlineAt === undefined ? {} : { deadlineAt });
    // A view, not a copy: the validator takes its own private copy of the bytes it checks.
    const bytes = Buffer.from(blob.bytes.buffer, blob.bytes.byteOffset, blob.bytes.byteLength);
    const report = await assertValidArchive(bytes, this.policy.archive, { kind: 'code', entrypoint });
    const archive = await writeArchive(entriesUnder(report.entries, report.topLevel[0]!));
    const prepared = { cid: blob.cid, size: blob.size, entries: report.entries.length, archive };
    this.verifiedCode.set(key, prepared);
    return prepared;
  }

  // 7–11: runtime and additions out of stopped containers, the code blob verified, validated and copied.
  // The code blob was usually fetched and validated during resolution already (see CodePrefetch). Both volumes'
  // cache checks run at once; an uncached code volume's copy then runs beside the runtime's stream: it starts once
  // that stream has begun (the runtime image, its carrier, is present then, and an interruption before that point
  // leaves the runtime's containers only) or the runtime volume is ready, and never after the runtime failed.
  // Additions are copied one at a time after the runtime.
  private async materialize(r: Resolved, ctx: EffectContext): Promise<void> {
    const t0 = performance.now();
    const labels = this.labels({ 'runlog.stream': ctx.actor.stream, 'runlog.kind': 'execution' });
    let runtimeStreaming!: () => void;
    let runtimeFailed!: (err: unknown) => void;
    const codeMayCopy = new Promise<void>((resolve, reject) => {
      runtimeStreaming = resolve;
      runtimeFailed = reject;
    });
    codeMayCopy.catch(() => undefined); // the runtime's failure is reported as the runtime's
    const onProgress = (p: MaterializeProgress) => {
      if (p.phase === 'done')
        this.progress.get(ctx.actor.id)?.({
          name: `${p.kind}:${p.step}`,
          detail: { ms: p.ms ?? null, volume: p.volume },
        });
      // The volume and its carrier container exist, the copy into it has not happened: the worst moment to die.
      if (p.step === 'upload' && p.phase === 'started')
        this.opts.faults?.('mid-materialization', { effect: 'materialize' });
      if (p.kind === 'runtime' && p.step === 'upload' && p.phase === 'started') runtimeStreaming();
    };
    const deadline = Date.parse((ctx.actor.snapshot.context as ExecutionContext).deadline ?? '');
    const prepared =
      this.prefetch.take(ctx.actor.id, codeKey(r.author, r.blobCid, r.entrypoint)) ??
      this.prepareCode(r.author, r.blobCid, r.entrypoint, Number.isFinite(deadline) ? deadline : undefined);
    prepared.catch(() => undefined); // awaited below unless an earlier step fails
    // Step events are appended while the next step runs; all of them are in the log before the outcome.
    const steps: Promise<unknown>[] = [];
    const runtimeP = this.materializer.materializeRuntime({
      image: r.image,
      exportPath: r.exportPath,
      labels,
      onProgress,
    });
    runtimeP.then(runtimeStreaming, runtimeFailed);
    let failed = false;
    let codeCopy: Promise<unknown> | null = null;
    const codeP = prepared.then((code) => {
      if (failed) return null; // the runtime failed first: the execution is over
      steps.push(
        this.step(ctx, 'code-blob', { cid: code.cid, size: code.size, ...(code.reused ? { reused: true } : {}) }),
      );
      const copy = this.materializer.materializeCode({
        archive: code.archive,
        carrierImage: r.image,
        codeCid: r.blobCid,
        labels,
        onProgress,
        after: codeMayCopy,
      });
      codeCopy = copy;
      return copy.then((volume) => ({ code, volume }));
    });
    codeP.catch(() => undefined); // awaited below
    const until = <T>(work: Promise<T>, step: string) =>
      byCallerDeadline(work, ctx.actor.snapshot.context as ExecutionContext, this.opts.clock ?? systemClock, step);
    try {
      const runtime = await until(runtimeP, 'the runtime copy');
      steps.push(
        this.step(ctx, 'runtime-materialized', {
          volume: runtime.volume,
          digest: runtime.digest,
          cached: runtime.cached,
          pulled: runtime.pulled,
          entries: runtime.entries,
          bytes: runtime.bytes,
          ms: runtime.timings.totalMs,
        }),
      );
      const additions: string[] = [];
      for (const [i, image] of r.additions.entries()) {
        const add = await until(
          this.materializer.materializeAddition({ image, labels, onProgress }),
          'an addition copy',
        );
        additions.push(add.volume);
        steps.push(
          this.step(ctx, 'addition-materialized', {
            index: i,
            image,
            volume: add.volume,
            digest: add.digest,
            cached: add.cached,
          }),
        );
      }
      const { code, volume } = (await until(codeP, 'the code copy'))!;
      await Promise.all(steps);
      this.profile(ctx.actor.id, { materializeMs: performance.now() - t0 });
      await ctx.dispatch({
        type: 'execution.materialized',
        data: {
          runtimeVolume: runtime.volume,
          runtimeDigest: runtime.digest,
          additionVolumes: additions,
          codeVolume: volume.volume,
          codeDigest: volume.digest,
          entries: code.entries,
          cached: { runtime: runtime.cached, code: volume.cached },
        },
      });
    } catch (err) {
      // The code's copy, if it began, ends first; past the deadline the copies go on, awaited by idle() and close().
      failed = true;
      await Promise.allSettled([
        err instanceof StepDeadlineError ? leaveBehind(this.removals, [runtimeP, codeCopy]) : codeCopy,
        ...steps,
      ]);
      this.profile(ctx.actor.id, { materializeMs: performance.now() - t0 });
      await ctx.dispatch(
        this.withProfile(ctx.actor.id, { type: 'execution.failed', data: classify(err, 'materialization') }),
      );
    }
  }

  /** The create spec of an execution's sandbox: everything but its labels and invocation id. */

  // 12: the fixed runner-owned sandbox, created stopped with read-only content mounts — or, when this exact
  // sandbox (same records, runtime, volumes, limits, isolation: the key) was pre-started, taken from the pool.
  private async createSandbox(
    request: ExecutionRequest,
    r: Resolved,
    m: Materialized,
    ctx: EffectContext,
  ): Promise<void> {
    const t0 = performance.now();
    const spec = sandboxSpec(this.opts.parts, r, m);
    // The key covers what the records said (CIDs) and everything the container is made of: a changed record,
    // runtime, volume or limit is another key, and the old sandbox is never served for it.
    const key = sha256(
      JSON.stringify({ codeUri: r.codeUri, codeCid: r.codeCid, runtimeCid: r.runtimeCid, blobCid: r.blobCid, spec }),
    );
    const target = {
      key,
      uri: request.uri,
      publisher: runtimePublisherOfUri(r.runtimeUri) ?? '',
      codeCid: r.codeCid,
      runtimeCid: r.runtimeCid,
      memoryMb: r.limits.memoryMb,
      spec,
    };
    let containerId: string;
    try {
      const claimed = await this.pool.claim(request.uri, key, request.executionId);
      if (claimed) {
        containerId = claimed.containerId;
        this.claimedInfo.set(request.executionId, claimed.info);
        this.profile(request.executionId, {
          createMs: performance.now() - t0,
          prestarted: true,
          sandboxWaitedMs: claimed.waitedMs,
        });
      } else {
        ({ containerId } = await this.sandbox.createExecutionContainer({
          ...spec,
          labels: this.labels({ 'runlog.stream': ctx.actor.stream, 'runlog.kind': 'execution' }),
          invocationId: request.executionId,
        }));
        this.profile(request.executionId, { createMs: performance.now() - t0, prestarted: false });
      }
    } catch (err) {
      await ctx.dispatch(
        this.withProfile(request.executionId, { type: 'execution.failed', data: classify(err, 'runtime') }),
      );
      return;
    }
    const started = await ctx.dispatch({
      type: 'execution.started',
      data: { containerId, ...(this.profiles.get(request.executionId)?.prestarted ? { prestarted: true } : {}) },
    });
    // Cancelled meanwhile: nothing will invoke or clean up this container.
    if (!started.accepted) {
      this.claimedInfo.delete(request.executionId);
      await this.sandbox.removeContainer(containerId).catch(() => undefined);
    }
    // Once this one has answered, the next sandbox for this code is started (invoke): not now, when its start
    // would compete with this execution's own attach and run on the daemon.
    else this.nextSandbox.set(request.executionId, target);
  }

  // 13: one envelope on stdin, frames on stdout; the deadline is the supervisor's to enforce.
  private async invoke(
    request: ExecutionRequest,
    containerId: string,
    deadline: string | null,
    r: Resolved,
    ctx: EffectContext,
    resumed = false,
  ): Promise<void> {
    // The handler's deadline is the invocation's: the effective timeout from now, never past the request's.
    const deadlineMs = Math.max(1, Math.min(r.limits.timeoutMs, Date.parse(deadline ?? '') - this.nowMs()));
    const envelope = this.envelopeOf(request, r, new Date(this.nowMs() + deadlineMs).toISOString());
    // Resumed after a restart, the container is inspected afresh.
    const inspected = resumed ? undefined : this.claimedInfo.get(request.executionId);
    this.claimedInfo.delete(request.executionId);
    let result: InvocationResult;
    try {
      result = await this.sandbox.invoke(containerId, envelope, {
        deadlineMs,
        maxEnvelopeBytes: this.maxEnvelopeBytes,
        maxFrameBytes: r.limits.frameBytes,
        // Recorded before frameDepth existed: the sandbox's default bound.
        ...(typeof r.limits.frameDepth === 'number' ? { maxFrameDepth: r.limits.frameDepth } : {}),
        maxStdoutBytes: r.limits.stdoutBytes,
        maxStderrBytes: r.limits.stderrBytes,
        // The container runs the handler (envelope delivered, a frame came back): a death here leaves the
        // result to be collected from the container after a restart.
        onFrame: () => this.opts.faults?.('mid-invocation', { effect: 'invoke' }),
        // The answer is the terminal frame; the worker's exit is the cleanup's business (it removes the container).
        answerOnTerminal: { exitWaitMs: 0 },
        ...(inspected ? { inspected } : {}),
      });
    } catch (err) {
      this.fillNext(request.executionId);
      await ctx.dispatch(
        this.withProfile(request.executionId, { type: 'execution.failed', data: classify(err, 'runtime') }),
      );
      return;
    }
    this.fillNext(request.executionId);
    const t = result.timings;
    this.profile(request.executionId, {
      attachMs: t.attachMs,
      startMs: t.startMs,
      adapterReadyMs: t.adapterReadyMs ?? t.startMs,
      firstFrameMs: t.firstFrameMs,
      resultMs: t.resultMs ?? null,
      exitMs: t.runMs,
      invokeMs: t.totalMs,
      ...(t.prestarted !== undefined ? { prestarted: t.prestarted } : {}),
    });
    if (resumed && envelopeNotReceived(result)) {
      // Resumed after a restart on a container a dead supervisor had attached to: with StdinOnce its stdin closed
      // when that attach dropped, so the worker read EOF instead of the envelope. The handler never ran.
      await ctx.dispatch(
        this.withProfile(
          request.executionId,
          envelopeLost(
            result,
            'a supervisor that died had attached to this container, closing its stdin before the envelope',
          ),
        ),
      );
      return;
    }
    const event = this.withProfile(request.executionId, outcomeEvent(result, sha256(JSON.stringify(envelope.input))));
    await this.attachReceipt(event, request, r, ctx);
    await ctx.dispatch(event);
  }

  /** The next execution of this code will find its sandbox started (in the background; bounded by the policy). */
  private fillNext(executionId: string): void {
    const target = this.nextSandbox.get(executionId);
    this.nextSandbox.delete(executionId);
    this.gate.answered(executionId, target);
  }

  /** Writes the receipt before the outcome is recorded, so the outcome event names it (or why it failed). */
  private async attachReceipt(
    event: OutcomeEvent,
    request: ExecutionRequest,
    r: Resolved,
    ctx: EffectContext,
  ): Promise<void> {
    if (!this.opts.receipts) return;
    const startedAt =
      (ctx.actor.snapshot.context as ExecutionContext).startedAt ?? new Date(this.nowMs()).toISOString();
    await writeReceiptFor(this.opts.receipts, this.opts.parts, event, request, r, {
      startedAt,
      finishedAt: () => new Date(this.nowMs()).toISOString(),
    });
  }

  /** A container that outlived the supervisor: its frames are read from its logs (or it is waited for). */
  private async collect(containerId: string, deadline: string | null, ctx: EffectContext): Promise<void> {
    try {
      const result = await this.sandbox.collectResult(containerId, { deadlineAt: Date.parse(deadline ?? '') });
      if (envelopeNotReceived(result)) {
        // Started, but its stdin closed before the envelope line: the delivery died with the supervisor.
        await ctx.dispatch(envelopeLost(result, 'the supervisor died while delivering the invocation'));
        return;
      }
      await ctx.dispatch(outcomeEvent(result, null));
    } catch (err) {
      const c = classify(err, 'lost');
      await ctx.dispatch({ type: 'execution.failed', data: { ...c, reason: 'lost' } });
    }
  }

  private async kill(containerId: string | null, ctx: EffectContext): Promise<void> {
    await ctx.dispatch({
      type: 'execution.failed',
      data: { reason: 'cancelled', code: 'CANCELLED', message: 'cancelled while running' },
    });
    if (containerId) await this.engine.kill(containerId).catch(() => undefined);
  }

  private async cleanup(executionId: string | undefined, containerId: string | null): Promise<void> {
    // Runtime and code volumes stay: they are caches keyed by content, re-confirmed against the PDS each run.
    if (executionId) this.prefetch.drop(executionId); // cancelled before materializing
    if (executionId) this.profiles.delete(executionId);
    if (executionId) this.nextSandbox.delete(executionId);
    if (executionId) this.claimedInfo.delete(executionId);
    if (executionId) this.gate.ended(executionId);
    if (!containerId) return;
    // Runs after execute() has answered (it returns on the outcome): tracked, so close() still waits for it.
    const removal = this.sandbox.removeContainer(containerId).catch(() => undefined);
    this.removals.add(removal);
    try {
      await removal;
    } finally {
      this.removals.delete(removal);
    }
  }

  /** Advertises this runner's policy in its own repo (dev.mainasara.at-run.beta.v2.runner, rkey "self"). */
  async publishRunnerRecord(): Promise<{ uri: string; cid: string } | null> {
    if (!this.opts.receipts) return null;
    return putRunnerRecordFor(this.opts.receipts, this.opts.parts, this.policy, await this.engine.platform());
  }

  /** The execution-specific context as a typed view (for inspect/outcome). */
  static view(context: unknown): ExecutionContext {
    return context as ExecutionContext;
  }
}
