// An execution's steps as they happen: each is recorded as an execution.step event and told to the caller's
// onProgress callback. The callback runs inside effects, so what it throws is logged here, never the execution's.
import type { EffectContext } from '../host/actor-host.ts';

/** The context the execution machine's effects run in. */
export type ExecutionEffectContext = EffectContext<'execution'>;

/** One step of an execution, as a caller's onProgress sees it. */
export type ProgressStep = { name: string; detail: Record<string, unknown> };

export class ExecutionProgress {
  private readonly progress = new Map<string, (step: ProgressStep) => void>();

  constructor(private readonly log: (msg: string) => void) {}

  onProgress(executionId: string, cb: (step: ProgressStep) => void): () => void {
    // The caller's callback runs inside effects: whatever it throws is its own problem, never the execution's.
    this.progress.set(executionId, (step) => {
      try {
        cb(step);
      } catch (err) {
        this.log(`onProgress of ${executionId} threw: ${err instanceof Error ? err.message : String(err)}`);
      }
    });
    return () => this.progress.delete(executionId);
  }

  /** Tells the caller only (a detail not recorded as its own event, e.g. a materializer's phase). */
  report(executionId: string, step: ProgressStep): void {
    this.progress.get(executionId)?.(step);
  }

  /** Tells the caller and records the step in the execution's stream. */
  async step(ctx: ExecutionEffectContext, name: string, detail: Record<string, unknown>): Promise<void> {
    this.progress.get(ctx.actor.id)?.({ name, detail });
    await ctx.dispatch({ type: 'execution.step', data: { name, detail } });
  }
}
