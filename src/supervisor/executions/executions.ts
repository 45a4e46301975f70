// at-run executions under the supervisor: the execution machine's effects carried out by the AT
// Protocol reader, the archive validator, the Docker materializer and the hardened sandbox. Every step
// records what it used (CIDs, digests, volumes, limits) as an event. This class holds what the steps share (the
// Docker ports, the pool, the profiles); each step is its own module: resolve, materialize, the sandbox's invoke.
import {
  createAtprotoReader,
  type AtprotoReader,
  type AtprotoReaderOptions,
  type Publisher,
} from '../../adapters/atproto/index.ts';
import { createHash } from 'node:crypto';
import type { DockerEngine } from '../../adapters/docker/docker-port.ts';
import { egressProxyHost, type EgressProxyHost } from '../../adapters/egress/egress-proxy-host.ts';
import { hostResolvers } from '../../adapters/egress/host-resolvers.ts';
import { openRunnerKeyRing } from '../../adapters/files/runner-keys.ts';
import { createDockerEngine } from '../../adapters/docker/dockerode-engine.ts';
import { createMaterializer, type Materializer } from '../../adapters/docker/materializer.ts';
import {
  createExecutionSandbox,
  type ExecutionSandbox as ExecSandbox,
} from '../../adapters/docker/execution-sandbox.ts';
import { DEFAULT_OPERATOR_POLICY, type OperatorPolicy } from '../../domain/at-run/operator-policy.ts';
import { mayPrestart } from '../../domain/at-run/policy-admission.ts';
import type { RecordedEvent } from '../../domain/events.ts';
import type { LatencyProfile, Resolved } from '../../domain/execution-events.ts';
import type { ExecutionContext } from '../../machines/execution.machine.ts';
import type { ActorHost, EffectHandlers } from '../host/actor-host.ts';
import { answerRefusal, putRunnerRecordFor, withJobReceipt } from './execution-receipts.ts';
import { CodePreparation } from './code-preparation.ts';
import { ExecutionEgressSteps } from './execution-egress.ts';
import { ExecutionInvoker } from './execution-invoke.ts';
import { materializeExecution, type MaterializeDeps } from './execution-materialize.ts';
import { LatencyProfiles } from './execution-profiles.ts';
import { ExecutionProgress, type ExecutionEffectContext, type ProgressStep } from './execution-progress.ts';
import { ExecutionResolver } from './execution-resolver.ts';
import { JobSecrets } from './job-secrets.ts';
import type { FaultHook } from '../host/faults.ts';
import type { Parts } from '../../config/parts.ts';
import { PrestartGate } from './pool/prestart-gate.ts';
import { recordPoolFacts } from './pool/pool-facts.ts';
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
  /** The egress proxy of network-granted executions (decision 12); used only when the policy grants network. */
  egress?: EgressOptions;
}

/** How the egress proxy reaches the world. */
export interface EgressOptions {
  /** The resolvers it asks (`ip` or `ip:port`); default: the host's (/etc/resolv.conf), loopback ones left out. */
  resolvers?: string[];
  /** An existing Docker network for its way out; default: one made for it (and removed at close). */
  outboundNetwork?: string;
}

export type { LatencyProfile };

// Moved to the domain with the execution's events; re-exported for the code that imports it from here.
export type { Resolved };

export class ExecutionSupervisor {
  readonly policy: OperatorPolicy;
  private engineInstance: DockerEngine | null = null;
  private materializerInstance: Materializer | null = null;
  private sandboxInstance: ExecSandbox | null = null;
  readonly reader: AtprotoReader;
  private readonly progress = new ExecutionProgress((m) => this.opts.log?.(m));
  /** Step durations of the executions this process is running (see LatencyProfile). */
  private readonly profiles = new LatencyProfiles();
  private poolInstance: SandboxPool | null = null;
  /** Pre-starts wait while a burst is unanswered; only trusted publishers' runtimes pre-start (prestart-gate.ts). */
  private readonly gate = new PrestartGate<PoolTarget>((target) => this.pool.fill(target), {
    trusts: (did) => mayPrestart(this.policy.prestart, did),
  });
  /** Used containers being removed (the cleanup effect) and copies left past a deadline, awaited by idle() and close(). */
  private readonly removals = new Set<Promise<unknown>>();
  /** The code archives: prefetched during resolution, cached once verified (code-preparation.ts). */
  private readonly code: CodePreparation;
  private readonly resolver: ExecutionResolver;
  private readonly invoker: ExecutionInvoker;
  private readonly materializeDeps: MaterializeDeps;
  private egressHostInstance: EgressProxyHost | null | undefined;
  private readonly egress = new ExecutionEgressSteps(() => this.egressHost);

  private nowMs(): number {
    return (this.opts.clock ?? systemClock).nowMs();
  }

  constructor(
    private readonly opts: ExecutionOptions,
    private readonly host: () => ActorHost,
  ) {
    this.policy = opts.policy ?? DEFAULT_OPERATOR_POLICY;
    this.reader = createAtprotoReader({ mode: 'strict', ...opts.atproto });
    this.code = new CodePreparation(this.reader, this.policy);
    // The runner's DID is its publisher's (the repo its runner record, with the keys secrets are sealed to, is in).
    const secrets = new JobSecrets({
      reader: this.reader,
      ring: () => openRunnerKeyRing(opts.home),
      runnerDid: () => opts.receipts?.did,
      nowMs: () => this.nowMs(),
    });
    this.resolver = new ExecutionResolver({
      policy: this.policy,
      reader: this.reader,
      engine: () => this.engine,
      code: this.code,
      gate: this.gate,
      profiles: this.profiles,
      progress: this.progress,
      secrets,
      nowMs: () => this.nowMs(),
    });
    this.invoker = new ExecutionInvoker({
      parts: opts.parts,
      policy: this.policy,
      pool: () => this.pool,
      sandbox: () => this.sandbox,
      gate: this.gate,
      profiles: this.profiles,
      labels: (extra) => this.labels(extra),
      nowMs: () => this.nowMs(),
      faults: opts.faults,
      receipts: opts.receipts,
      secrets,
      egress: this.egress,
    });
    this.materializeDeps = {
      materializer: () => this.materializer,
      code: this.code,
      progress: this.progress,
      profiles: this.profiles,
      faults: opts.faults,
      clock: opts.clock ?? systemClock,
      removals: this.removals,
      labels: (extra) => this.labels(extra),
    };
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

  /**
   * The egress proxy host, made on first use; null when this runner cannot run one (no egress-proxy image, or no
   * resolver to give it): a network-granted execution then fails with NETWORK_NOT_ALLOWED.
   */
  get egressHost(): EgressProxyHost | null {
    if (this.egressHostInstance !== undefined) return this.egressHostInstance;
    const image = this.opts.parts.images['egress-proxy'];
    const resolvers = this.opts.egress?.resolvers ?? hostResolvers();
    this.egressHostInstance =
      image && resolvers.length > 0
        ? egressProxyHost({
            engine: this.engine,
            image,
            resolvers,
            ...(this.opts.egress?.outboundNetwork ? { outboundNetwork: this.opts.egress.outboundNetwork } : {}),
            labels: this.labels(),
            nameSuffix: createHash('sha256').update(this.opts.home).digest('hex').slice(0, 12),
            log: (m) => this.opts.log?.(m),
          })
        : null;
    return this.egressHostInstance;
  }

  /**
   * Removes, in the background (idle() and close() wait for it), the execution networks an earlier supervisor of
   * this home left that no sandbox is on: after the start-up reconcile, which removed that supervisor's proxy.
   */
  sweepEgress(): void {
    const host = this.egressHost;
    if (!host) return;
    const sweeping = host
      .sweep()
      .catch((err: unknown) =>
        this.opts.log?.(`the egress networks of an earlier run were not all removed: ${(err as Error).message}`),
      )
      .finally(() => this.removals.delete(sweeping));
    this.removals.add(sweeping);
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
      record: (events) =>
        void recordPoolFacts({ host: this.host, readFacts: this.opts.readFacts, log: this.opts.log }, events),
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

  /** Removes the pool's waiting sandboxes (before the log closes: their removal is recorded). */
  async close(): Promise<void> {
    await this.poolInstance?.close();
    while (this.removals.size > 0) await Promise.allSettled([...this.removals]);
    await this.egressHostInstance?.stop();
  }

  private labels(extra: Record<string, string> = {}): Record<string, string> {
    return { 'runlog.home': this.opts.home, ...this.opts.labels, ...extra };
  }

  onProgress(executionId: string, cb: (step: ProgressStep) => void): () => void {
    return this.progress.onProgress(executionId, cb);
  }

  /** The execution machine's effects but `announce` (the bus's, wired in runlog.ts). */
  handlers(): Omit<EffectHandlers<'execution'>, 'announce'> {
    return {
      resolve: (p, ctx) => this.resolver.resolve(p.request, this.answering(ctx)),
      refuse: (p, ctx) => answerRefusal(this.opts.receipts, p.request, p.refused, this.jobTimes(ctx), ctx.dispatch),
      materialize: (p, ctx) => materializeExecution(this.materializeDeps, p.resolved, this.answering(ctx)),
      createSandbox: (p, ctx) => this.invoker.createSandbox(p.request, p.resolved, p.materialized, this.answering(ctx)),
      invoke: (p, ctx) =>
        this.invoker.invoke(
          p.request,
          String(p.containerId),
          p.deadline,
          p.resolved,
          this.answering(ctx),
          p.resumed === true,
        ),
      collect: (p, ctx) => this.invoker.collect(p.request, String(p.containerId), p.deadline, this.answering(ctx)),
      killSandbox: (p, ctx) => this.kill(p.containerId, this.answering(ctx)),
      cleanup: (p) => this.cleanup(p.executionId, p.containerId),
    };
  }

  /** A job execution's times for its receipt: from its request to now. */
  private jobTimes(ctx: ExecutionEffectContext): { startedAt: string; finishedAt: () => string } {
    const now = () => new Date(this.nowMs()).toISOString();
    return { startedAt: ExecutionSupervisor.view(ctx.actor.snapshot.context).requestedAt ?? now(), finishedAt: now };
  }

  /**
   * The context a job's step runs with: a failure that no receipt names yet is answered with one before it is
   * recorded, so the caller on the network hears of every failure, not only of those after the invocation.
   */
  private answering(ctx: ExecutionEffectContext): ExecutionEffectContext {
    const publisher = this.opts.receipts;
    const request = ExecutionSupervisor.view(ctx.actor.snapshot.context).request;
    if (!publisher || !request?.job) return ctx;
    return {
      ...ctx,
      dispatch: async (e) =>
        e.type === 'execution.failed'
          ? ctx.dispatch({ ...e, data: await withJobReceipt(publisher, request, e.data, this.jobTimes(ctx)) })
          : ctx.dispatch(e),
    };
  }

  private async kill(containerId: string | null, ctx: ExecutionEffectContext): Promise<void> {
    await ctx.dispatch({
      type: 'execution.failed',
      data: { reason: 'cancelled', code: 'CANCELLED', message: 'cancelled while running' },
    });
    if (containerId) await this.engine.kill(containerId).catch(() => undefined);
  }

  private async cleanup(executionId: string | undefined, containerId: string | null): Promise<void> {
    // Runtime and code volumes stay: they are caches keyed by content, re-confirmed against the PDS each run.
    if (executionId) this.code.drop(executionId); // cancelled before materializing
    if (executionId) this.profiles.forget(executionId);
    if (executionId) this.invoker.forget(executionId);
    if (executionId) this.gate.ended(executionId);
    // A network-granted execution's network goes after its container (nothing is then left to detach).
    const releaseNetwork = () => (executionId ? this.egress.release(executionId, null) : Promise.resolve());
    if (!containerId) return releaseNetwork().catch(() => undefined);
    // Runs after execute() has answered (it returns on the outcome): tracked, so close() still waits for it.
    const removal = this.sandbox
      .removeContainer(containerId)
      .catch(() => undefined)
      .then(releaseNetwork)
      .catch(() => undefined);
    this.removals.add(removal);
    try {
      await removal;
    } finally {
      this.removals.delete(removal);
    }
  }

  /**
   * Advertises this runner's policy in its own repo (dev.mainasara.at-run.beta.v2.runner, rkey "self"), with the
   * public keys of its key ring (<home>/runner-keys.json, created on this first use) that secrets are sealed to.
   */
  async publishRunnerRecord(): Promise<{ uri: string; cid: string } | null> {
    if (!this.opts.receipts) return null;
    const keys = openRunnerKeyRing(this.opts.home).list();
    return putRunnerRecordFor(this.opts.receipts, this.opts.parts, this.policy, await this.engine.platform(), keys);
  }

  /** The execution-specific context as a typed view (for inspect/outcome). */
  static view(context: unknown): ExecutionContext {
    return context as ExecutionContext;
  }
}
