// No step of an execution waits past its caller's deadline: the request's time plus its timeout, the bound its
// network reads already have. A step still going then (a runtime's first copy into its volume, slowed by a busy
// daemon) is not waited for: the execution answers TIMEOUT by its deadline, and the step goes on in the background,
// so the next execution of that runtime takes the finished, sealed volume (the materializer's lock hands it over).
import type { Clock } from '../../domain/clock.ts';
import { RunlogError } from '../../domain/errors.ts';
import type { ExecutionContext } from '../../machines/execution.machine.ts';

/** The execution's deadline passed while a step was under way; the step was left to finish on its own. */
export class StepDeadlineError extends RunlogError {
  constructor(step: string, deadlineAt: number) {
    super(
      'TIMEOUT',
      `the execution's deadline (${new Date(deadlineAt).toISOString()}) passed during ${step}; ` +
        'it goes on in the background for the next execution',
      { bound: 'execution', step },
    );
  }
}

/** The caller's deadline of an execution (epoch ms): requested at + timeoutMs; NaN when the context says neither. */
export function callerDeadline(context: ExecutionContext): number {
  return Date.parse(context.requestedAt ?? '') + (context.request?.timeoutMs ?? Number.NaN);
}

/**
 * What `work` settles with, or StepDeadlineError once the execution's caller deadline passes on `clock`, whichever
 * comes first. `work` itself is not stopped (and its late failure is not unhandled). Without a deadline: `work`.
 */
export function byCallerDeadline<T>(
  work: Promise<T>,
  context: ExecutionContext,
  clock: Clock,
  step: string,
): Promise<T> {
  const deadlineAt = callerDeadline(context);
  if (!Number.isFinite(deadlineAt)) return work;
  return new Promise<T>((resolve, reject) => {
    const cancel = clock.after(Math.max(0, deadlineAt - clock.nowMs()), () =>
      reject(new StepDeadlineError(step, deadlineAt)),
    );
    work.then(
      (v) => (cancel(), resolve(v)),
      (err: unknown) => (cancel(), reject(err)),
    );
  });
}

/**
 * Leaves `work` (a copy the execution stopped waiting for) to finish in the background, held in `pending` until it
 * settles so that idle() and close() wait for it. Returns null: there is nothing for the caller to wait for.
 */
export function leaveBehind(pending: Set<Promise<unknown>>, work: readonly (Promise<unknown> | null)[]): null {
  const left = Promise.allSettled(work).then(() => void pending.delete(left));
  pending.add(left);
  return null;
}
