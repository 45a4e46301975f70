// The steps of a materialization: their names, the progress reported around each one, and the runner that times
// them and wraps what fails in them.
//
// Every step of a copy goes through one runner so the caller sees each start and end (and may hold the copy at a
// step's end), the timings add up per step, and a failure that is not already a typed error says which step of
// which content failed.
import { RunlogError } from '../../domain/errors.ts';
import type { PullProgress } from './docker-port.ts';
import { MaterializationError } from './errors.ts';

export type MaterializeKind = 'runtime' | 'addition' | 'code';
export type MaterializeStep =
  | 'cache'
  | 'pull'
  | 'lock'
  | 'create-volume'
  | 'create-container'
  | 'download'
  | 'validate'
  | 'upload'
  | 'remove-container'
  | 'seal';

export interface MaterializeProgress {
  kind: MaterializeKind;
  step: MaterializeStep;
  phase: 'started' | 'done';
  volume: string;
  containerId?: string;
  pull?: PullProgress;
  ms?: number;
}

/**
 * Progress callback. It may return a promise: the materializer waits for it before going on (a caller can
 * inspect the stopped container at `upload` done, for instance).
 */
export type ProgressHandler = (p: MaterializeProgress) => void | Promise<void>;

/** Runs one named step of a copy (see createStepRunner). */
export type StepRunner = <T>(
  step: MaterializeStep,
  fn: () => Promise<T>,
  extra?: Partial<MaterializeProgress>,
) => Promise<T>;

const now = (): number => performance.now();

/** Which copy the steps belong to: named in their progress and in a failure's message. */
export interface StepSubject {
  kind: MaterializeKind;
  volume: string;
  cacheKey: string;
  onProgress: ProgressHandler | undefined;
}

/**
 * The runner of one copy's steps: reports each start and end (with the carrier container once there is one, as
 * `containerId()` answers at that moment), adds each step's time to `timings`, and wraps a failure that is not a
 * RunlogError as MATERIALIZATION_FAILED at that step.
 */
export function createStepRunner(
  spec: StepSubject,
  timings: Partial<Record<MaterializeStep, number>>,
  containerId: () => string | undefined,
): StepRunner {
  const carrier = (): { containerId?: string } => {
    const id = containerId();
    return id ? { containerId: id } : {};
  };
  return async (name, fn, extra) => {
    const started = now();
    await spec.onProgress?.({
      kind: spec.kind,
      step: name,
      phase: 'started',
      volume: spec.volume,
      ...carrier(),
      ...extra,
    });
    try {
      const result = await fn();
      timings[name] = (timings[name] ?? 0) + (now() - started);
      await spec.onProgress?.({
        kind: spec.kind,
        step: name,
        phase: 'done',
        volume: spec.volume,
        ms: now() - started,
        ...carrier(),
        ...extra,
      });
      return result;
    } catch (err) {
      if (err instanceof RunlogError) throw err;
      throw new MaterializationError(
        'MATERIALIZATION_FAILED',
        name,
        `materializing ${spec.cacheKey} failed at ${name}: ${err instanceof Error ? err.message : String(err)}`,
        { volume: spec.volume },
        { cause: err },
      );
    }
  };
}
