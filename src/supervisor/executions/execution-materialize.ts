// The materialize effect of an execution: 7–11, the runtime and its additions copied out of stopped containers
// into volumes, and the verified code blob copied beside them. The copies overlap where they safely can, every
// step is recorded as it lands, and a copy left past the caller's deadline is awaited by idle() and close().
import type { Materializer } from '../../adapters/docker/materializer.ts';
import type { MaterializeProgress } from '../../adapters/docker/materialize-steps.ts';
import type { Clock } from '../../domain/clock.ts';
import type { Resolved } from '../../domain/execution-events.ts';
import type { ExecutionContext } from '../../machines/execution.machine.ts';
import type { FaultHook } from '../host/faults.ts';
import type { CodePreparation } from './code-preparation.ts';
import { classify } from './execution-outcomes.ts';
import type { LatencyProfiles } from './execution-profiles.ts';
import type { ExecutionEffectContext, ExecutionProgress } from './execution-progress.ts';
import { byCallerDeadline, leaveBehind, StepDeadlineError } from './step-deadline.ts';

export interface MaterializeDeps {
  /** The Docker materializer, made on first use. */
  materializer: () => Materializer;
  code: CodePreparation;
  progress: ExecutionProgress;
  profiles: LatencyProfiles;
  faults?: FaultHook;
  clock: Clock;
  /** Copies left past a deadline, awaited by idle() and close(). */
  removals: Set<Promise<unknown>>;
  labels: (extra: Record<string, string>) => Record<string, string>;
}

// 7–11: runtime and additions out of stopped containers, the code blob verified, validated and copied.
// The code blob was usually fetched and validated during resolution already (see CodePrefetch). Both volumes'
// cache checks run at once; an uncached code volume's copy then runs beside the runtime's stream: it starts once
// that stream has begun (the runtime image, its carrier, is present then, and an interruption before that point
// leaves the runtime's containers only) or the runtime volume is ready, and never after the runtime failed.
// Additions are copied one at a time after the runtime.
export async function materializeExecution(
  deps: MaterializeDeps,
  r: Resolved,
  ctx: ExecutionEffectContext,
): Promise<void> {
  const { profiles } = deps;
  const t0 = performance.now();
  const labels = deps.labels({ 'runlog.stream': ctx.actor.stream, 'runlog.kind': 'execution' });
  let runtimeStreaming!: () => void;
  let runtimeFailed!: (err: unknown) => void;
  const codeMayCopy = new Promise<void>((resolve, reject) => {
    runtimeStreaming = resolve;
    runtimeFailed = reject;
  });
  codeMayCopy.catch(() => undefined); // the runtime's failure is reported as the runtime's
  const onProgress = (p: MaterializeProgress) => {
    if (p.phase === 'done')
      deps.progress.report(ctx.actor.id, {
        name: `${p.kind}:${p.step}`,
        detail: { ms: p.ms ?? null, volume: p.volume },
      });
    // The volume and its carrier container exist, the copy into it has not happened: the worst moment to die.
    if (p.step === 'upload' && p.phase === 'started') deps.faults?.('mid-materialization', { effect: 'materialize' });
    if (p.kind === 'runtime' && p.step === 'upload' && p.phase === 'started') runtimeStreaming();
  };
  const deadline = Date.parse((ctx.actor.snapshot.context as ExecutionContext).deadline ?? '');
  const prepared = deps.code.take(
    ctx.actor.id,
    r.author,
    r.blobCid,
    r.entrypoint,
    Number.isFinite(deadline) ? deadline : undefined,
  );
  prepared.catch(() => undefined); // awaited below unless an earlier step fails
  // Step events are appended while the next step runs; all of them are in the log before the outcome.
  const steps: Promise<unknown>[] = [];
  const runtimeP = deps.materializer().materializeRuntime({
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
      deps.progress.step(ctx, 'code-blob', {
        cid: code.cid,
        size: code.size,
        ...(code.reused ? { reused: true } : {}),
      }),
    );
    const copy = deps.materializer().materializeCode({
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
    byCallerDeadline(work, ctx.actor.snapshot.context as ExecutionContext, deps.clock, step);
  try {
    const runtime = await until(runtimeP, 'the runtime copy');
    steps.push(
      deps.progress.step(ctx, 'runtime-materialized', {
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
        deps.materializer().materializeAddition({ image, labels, onProgress }),
        'an addition copy',
      );
      additions.push(add.volume);
      steps.push(
        deps.progress.step(ctx, 'addition-materialized', {
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
    profiles.add(ctx.actor.id, { materializeMs: performance.now() - t0 });
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
      err instanceof StepDeadlineError ? leaveBehind(deps.removals, [runtimeP, codeCopy]) : codeCopy,
      ...steps,
    ]);
    profiles.add(ctx.actor.id, { materializeMs: performance.now() - t0 });
    await ctx.dispatch(
      profiles.withProfile(ctx.actor.id, { type: 'execution.failed', data: classify(err, 'materialization') }),
    );
  }
}
