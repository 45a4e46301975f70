// Errors the Docker adapter throws on purpose. Each has a stable code (RunlogError); no dockerode error object
// escapes: the Engine's message and HTTP status are kept in `details`.
import { RunlogError, type ErrorCode } from '../../domain/errors.ts';

/** The Engine does not answer on its socket (refused, gone, reset): the daemon is down or restarting. */
export class DockerUnavailableError extends RunlogError {
  constructor(socketPath: string, reason: string, options?: { cause?: unknown }) {
    super(
      'DOCKER_UNAVAILABLE',
      `Docker Engine not answering on ${socketPath}: ${reason}`,
      { socketPath, reason },
      options,
    );
  }
}

/** An Engine API call failed. `status` is the HTTP status the Engine answered, when it answered. */
export class DockerApiError extends RunlogError {
  constructor(
    operation: string,
    message: string,
    readonly status: number | undefined,
    options?: { cause?: unknown; code?: ErrorCode; details?: Record<string, unknown> },
  ) {
    super(
      options?.code ?? 'DOCKER_API',
      `${operation}: ${message}`,
      { operation, status, ...options?.details },
      options,
    );
  }
}

/** The Engine answered 404: no such container, image, volume or network. */
export class DockerNotFoundError extends DockerApiError {
  constructor(operation: string, message: string, options?: { cause?: unknown; details?: Record<string, unknown> }) {
    super(operation, message, 404, { ...options, code: 'DOCKER_NOT_FOUND' });
  }
}

/** The Engine answered 409: a name already taken, a container in the wrong state, a volume in use. */
export class DockerConflictError extends DockerApiError {
  constructor(operation: string, message: string, options?: { cause?: unknown; details?: Record<string, unknown> }) {
    super(operation, message, 409, { ...options, code: 'DOCKER_CONFLICT' });
  }
}

/** An ordinary Engine call did not finish within its timeout (the daemon is alive but slow, or hung). */
export class DockerTimeoutError extends RunlogError {
  constructor(
    readonly operation: string,
    readonly timeoutMs: number,
    options?: { cause?: unknown },
  ) {
    super(
      'DOCKER_TIMEOUT',
      `${operation}: the Docker Engine did not answer within ${timeoutMs} ms`,
      { operation, timeoutMs },
      options,
    );
  }
}

/** The error for an answer the Engine gave (by its status), or for no answer at all. */
export function dockerAnswerError(
  operation: string,
  message: string,
  status: number | undefined,
  options?: { cause?: unknown; details?: Record<string, unknown> },
): DockerApiError {
  if (status === 404) return new DockerNotFoundError(operation, message, options);
  if (status === 409) return new DockerConflictError(operation, message, options);
  return new DockerApiError(operation, message, status, options);
}

/** A digest-pinned image could not be pulled (wrong digest, unknown repository, registry down). */
export class ImagePullError extends RunlogError {
  readonly status: number | undefined;
  /** `status`: the Engine's HTTP answer to the pull request, when it refused it (5xx: the daemon's own trouble). */
  constructor(
    readonly ref: string,
    reason: string,
    readonly notFound: boolean,
    options?: { cause?: unknown; status?: number },
  ) {
    super(
      notFound ? 'IMAGE_NOT_FOUND' : 'IMAGE_PULL_FAILED',
      notFound
        ? `image ${ref} is not in its registry (no manifest with that digest): ${reason}`
        : `could not pull ${ref}: ${reason}`,
      { ref, reason },
      options,
    );
    this.status = options?.status;
  }
}

/**
 * Whether an error (or one of its causes) is the Docker Engine's trouble rather than the caller's: 'down' when it
 * did not answer at all (socket refused or gone: DockerUnavailableError), 'error' when it answered 5xx (e.g. while
 * shutting down) or not within its timeout.
 */
export function engineTrouble(err: unknown): 'down' | 'error' | null {
  let trouble: 'error' | null = null;
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof DockerUnavailableError) return 'down';
    if (
      e instanceof DockerTimeoutError ||
      ((e instanceof DockerApiError || e instanceof ImagePullError) && (e.status ?? 0) >= 500)
    )
      trouble = 'error';
  }
  return trouble;
}

/** Copying an image's export directory (or a code archive) into a volume failed at `step`. */
export class MaterializationError extends RunlogError {
  constructor(
    code: ErrorCode,
    readonly step: string,
    message: string,
    details?: Record<string, unknown>,
    options?: { cause?: unknown },
  ) {
    super(code, message, { step, ...details }, options);
  }
}

/** `invoke` was called on a container that had already been started once (its stdin is gone). */
export class ContainerStateError extends RunlogError {
  constructor(code: ErrorCode, containerId: string, message: string) {
    super(code, message, { containerId });
  }
}
