// The sandbox of an execution and its invocation: 12, the runner-owned sandbox created (or claimed from the pool of
// pre-started ones), and 13, one envelope on stdin and frames on stdout, or, after a restart, the result collected
// from a container that outlived the supervisor. The receipt is written before the outcome that names it.
import type { Publisher } from '../../adapters/atproto/index.ts';
import type { ContainerInfo } from '../../adapters/docker/docker-port.ts';
import type { ExecutionSandbox } from '../../adapters/docker/execution-sandbox.ts';
import type { InvocationResult } from '../../adapters/docker/invocation-result.ts';
import type { Parts } from '../../config/parts.ts';
import { runtimePublisherOfUri } from '../../domain/at-run/code-record.ts';
import type { OperatorPolicy } from '../../domain/at-run/operator-policy.ts';
import type { Materialized, Resolved } from '../../domain/execution-events.ts';
import type { ExecutionContext, ExecutionRequest } from '../../machines/execution.machine.ts';
import type { DispatchResult } from '../host/actor-host.ts';
import type { FaultHook } from '../host/faults.ts';
import {
  classify,
  envelopeLost,
  envelopeNotReceived,
  outcomeEvent,
  sandboxSpec,
  sha256,
  type OutcomeEvent,
} from './execution-outcomes.ts';
import type { LatencyProfiles } from './execution-profiles.ts';
import type { ExecutionEffectContext } from './execution-progress.ts';
import { grantOf, type ExecutionEgressSteps } from './execution-egress.ts';
import { writeReceiptFor } from './execution-receipts.ts';
import { envelopeOf, maxEnvelopeBytes } from './invocation-envelope.ts';
import type { JobSecrets } from './job-secrets.ts';
import type { PrestartGate } from './pool/prestart-gate.ts';
import type { PoolTarget, SandboxPool } from './pool/sandbox-pool.ts';

export interface InvokerDeps {
  parts: Parts;
  policy: OperatorPolicy;
  /** The pool of pre-started sandboxes and the hardened sandbox, each made on first use. */
  pool: () => SandboxPool;
  sandbox: () => ExecutionSandbox;
  gate: PrestartGate<PoolTarget>;
  profiles: LatencyProfiles;
  labels: (extra: Record<string, string>) => Record<string, string>;
  nowMs: () => number;
  faults?: FaultHook;
  /** When set, a receipt is written to this account's repo after each invocation. */
  receipts?: Publisher;
  /** A job's sealed secrets, opened for its envelope only (job-secrets.ts). */
  secrets: JobSecrets;
  /** A network-granted execution's network through the egress proxy (execution-egress.ts). */
  egress: ExecutionEgressSteps;
}

export class ExecutionInvoker {
  /** What to pre-start once an execution has answered (createSandbox → invoke). */
  private readonly nextSandbox = new Map<string, PoolTarget>();
  /** The pool's inspect of a claimed sandbox, handed to its invocation (createSandbox → invoke). */
  private readonly claimedInfo = new Map<string, ContainerInfo>();

  constructor(private readonly deps: InvokerDeps) {}

  /** Forgets what createSandbox left for an execution's invoke (it ended, or was cancelled, before that). */
  forget(executionId: string): void {
    this.nextSandbox.delete(executionId);
    this.claimedInfo.delete(executionId);
  }

  // 12: the fixed runner-owned sandbox, created stopped with read-only content mounts — or, when this exact
  // sandbox (same records, runtime, volumes, limits, isolation: the key) was pre-started, taken from the pool.
  async createSandbox(
    request: ExecutionRequest,
    r: Resolved,
    m: Materialized,
    ctx: ExecutionEffectContext,
  ): Promise<void> {
    const { profiles } = this.deps;
    const t0 = performance.now();
    const spec = sandboxSpec(this.deps.parts, r, m);
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
    // A network-granted execution gets a sandbox made for it on its own network: never a pre-started one.
    const grant = grantOf(r);
    try {
      const claimed = grant ? null : await this.deps.pool().claim(request.uri, key, request.executionId);
      if (claimed) {
        containerId = claimed.containerId;
        this.claimedInfo.set(request.executionId, claimed.info);
        profiles.add(request.executionId, {
          createMs: performance.now() - t0,
          prestarted: true,
          sandboxWaitedMs: claimed.waitedMs,
        });
      } else {
        const network = grant ? await this.deps.egress.open(request.executionId, grant) : undefined;
        ({ containerId } = await this.deps
          .sandbox()
          .createExecutionContainer({
            ...spec,
            labels: this.deps.labels({ 'runlog.stream': ctx.actor.stream, 'runlog.kind': 'execution' }),
            invocationId: request.executionId,
            ...(network ? { network } : {}),
          })
          .catch(async (err: unknown) => {
            await this.deps.egress.release(request.executionId, null);
            throw err;
          }));
        profiles.add(request.executionId, { createMs: performance.now() - t0, prestarted: false });
      }
    } catch (err) {
      await ctx.dispatch(
        profiles.withProfile(request.executionId, { type: 'execution.failed', data: classify(err, 'runtime') }),
      );
      return;
    }
    let started: DispatchResult;
    try {
      started = await ctx.dispatch({
        type: 'execution.started',
        data: { containerId, ...(profiles.get(request.executionId)?.prestarted ? { prestarted: true } : {}) },
      });
    } catch (err) {
      // Not recorded (the lease went to another node while the daemon made the container, or the store failed):
      // no event names this container, so neither a cleanup nor a takeover would ever find it.
      await this.dropUnrecorded(request.executionId, containerId);
      throw err;
    }
    // Cancelled meanwhile: nothing will invoke or clean up this container.
    if (!started.accepted) await this.dropUnrecorded(request.executionId, containerId);
    // Once this one has answered, the next sandbox for this code is started (invoke): not now, when its start
    // would compete with this execution's own attach and run on the daemon.
    else if (!grant) this.nextSandbox.set(request.executionId, target);
  }

  /** Removes a container that no recorded event names (best effort: a daemon that fails here fails the next step too). */
  private async dropUnrecorded(executionId: string, containerId: string): Promise<void> {
    this.claimedInfo.delete(executionId);
    await this.deps
      .sandbox()
      .removeContainer(containerId)
      .catch(() => undefined);
    await this.deps.egress.release(executionId, containerId).catch(() => undefined);
  }

  // 13: one envelope on stdin, frames on stdout; the deadline is the supervisor's to enforce.
  async invoke(
    request: ExecutionRequest,
    containerId: string,
    deadline: string | null,
    r: Resolved,
    ctx: ExecutionEffectContext,
    resumed = false,
  ): Promise<void> {
    const { profiles, nowMs } = this.deps;
    // The handler's deadline is the invocation's: the effective timeout from now, never past the request's.
    const budgetMs = () => Math.max(1, Math.min(r.limits.timeoutMs, Date.parse(deadline ?? '') - nowMs()));
    // Resumed after a restart, the container is inspected afresh.
    const inspected = resumed ? undefined : this.claimedInfo.get(request.executionId);
    this.claimedInfo.delete(request.executionId);
    // A job's secrets are opened again here (resolution only checked them), for this envelope alone: they are
    // held by no field and written nowhere, so a resumed invoke opens them the same way. Opening spends the
    // invocation's own time.
    let secrets: Record<string, string> | undefined;
    try {
      secrets = await this.deps.secrets.open(request, r, nowMs() + budgetMs());
    } catch (err) {
      this.fillNext(request.executionId);
      await this.closeEgress(request.executionId, r, ctx);
      await ctx.dispatch(
        profiles.withProfile(request.executionId, { type: 'execution.failed', data: classify(err, 'runtime') }),
      );
      return;
    }
    const deadlineMs = budgetMs();
    const envelope = envelopeOf(request, r, new Date(nowMs() + deadlineMs).toISOString(), secrets);
    let result: InvocationResult;
    try {
      result = await this.deps.sandbox().invoke(containerId, envelope, {
        deadlineMs,
        maxEnvelopeBytes: maxEnvelopeBytes(this.deps.policy),
        maxFrameBytes: r.limits.frameBytes,
        // Recorded before frameDepth existed: the sandbox's default bound.
        ...(typeof r.limits.frameDepth === 'number' ? { maxFrameDepth: r.limits.frameDepth } : {}),
        maxStdoutBytes: r.limits.stdoutBytes,
        maxStderrBytes: r.limits.stderrBytes,
        // The container runs the handler (envelope delivered, a frame came back): a death here leaves the
        // result to be collected from the container after a restart.
        onFrame: () => this.deps.faults?.('mid-invocation', { effect: 'invoke' }),
        // The answer is the terminal frame; the worker's exit is the cleanup's business (it removes the container).
        answerOnTerminal: { exitWaitMs: 0 },
        ...(inspected ? { inspected } : {}),
      });
    } catch (err) {
      this.fillNext(request.executionId);
      await this.closeEgress(request.executionId, r, ctx);
      await ctx.dispatch(
        profiles.withProfile(request.executionId, { type: 'execution.failed', data: classify(err, 'runtime') }),
      );
      return;
    }
    this.fillNext(request.executionId);
    // The handler answered: its network is closed (what is still open is cut) and what it did is recorded.
    await this.closeEgress(request.executionId, r, ctx);
    const t = result.timings;
    profiles.add(request.executionId, {
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
        profiles.withProfile(
          request.executionId,
          envelopeLost(
            result,
            'a supervisor that died had attached to this container, closing its stdin before the envelope',
          ),
        ),
      );
      return;
    }
    const event = profiles.withProfile(
      request.executionId,
      outcomeEvent(result, sha256(JSON.stringify(envelope.input))),
    );
    await this.attachReceipt(event, request, r, ctx);
    await ctx.dispatch(event);
  }

  /** Closes a network-granted execution's network and records what the proxy saw (nothing for one without). */
  private async closeEgress(executionId: string, r: Resolved | undefined, ctx: ExecutionEffectContext): Promise<void> {
    if (!r || !grantOf(r)) return;
    await this.deps.egress.close(executionId, ctx).catch(() => undefined);
  }

  /** The next execution of this code will find its sandbox started (in the background; bounded by the policy). */
  private fillNext(executionId: string): void {
    const target = this.nextSandbox.get(executionId);
    this.nextSandbox.delete(executionId);
    this.deps.gate.answered(executionId, target);
  }

  /** Writes the receipt before the outcome is recorded, so the outcome event names it (or why it failed). */
  private async attachReceipt(
    event: OutcomeEvent,
    request: ExecutionRequest,
    r: Resolved,
    ctx: ExecutionEffectContext,
  ): Promise<void> {
    if (!this.deps.receipts) return;
    const { nowMs } = this.deps;
    const startedAt = (ctx.actor.snapshot.context as ExecutionContext).startedAt ?? new Date(nowMs()).toISOString();
    const egress = this.deps.egress.receipt(request.executionId, grantOf(r));
    await writeReceiptFor(this.deps.receipts, this.deps.parts, event, request, r, {
      startedAt,
      finishedAt: () => new Date(nowMs()).toISOString(),
      ...(egress ? { egress } : {}),
    });
  }

  /**
   * A container that outlived the supervisor: its frames are read from its logs (or it is waited for). Its receipt
   * is written before the outcome, as after an invocation, when the execution had resolved (it always has, once it
   * has a container).
   */
  async collect(
    request: ExecutionRequest,
    containerId: string,
    deadline: string | null,
    ctx: ExecutionEffectContext,
  ): Promise<void> {
    const r = (ctx.actor.snapshot.context as ExecutionContext).resolved;
    let event: OutcomeEvent;
    try {
      const result = await this.deps.sandbox().collectResult(containerId, { deadlineAt: Date.parse(deadline ?? '') });
      // Started, but its stdin closed before the envelope line: the delivery died with the supervisor.
      event = envelopeNotReceived(result)
        ? envelopeLost(result, 'the supervisor died while delivering the invocation')
        : outcomeEvent(result, sha256(JSON.stringify(request.input ?? null))); // the envelope's input (envelopeOf)
    } catch (err) {
      const c = classify(err, 'lost');
      event = { type: 'execution.failed', data: { ...c, reason: 'lost' } };
    }
    // Its proxy went with the supervisor that died: its network is removed, and what remains of it recorded.
    await this.closeEgress(request.executionId, r ?? undefined, ctx);
    if (r) await this.attachReceipt(event, request, r, ctx);
    await ctx.dispatch(event);
  }
}
