// Errors the Docker adapter throws on purpose. Each has a stable code (RunlogError); no dockerode error object
// escapes: the Engine's message and HTTP status are kept in `details`.
import { RunlogError, type ErrorCode } from '../../domain/errors.ts';

/** The Engine does not answer on its socket. */
export class DockerUnavailableError extends RunlogError {
  constructor(socketPath: string, reason: string, options?: { cause?: unknown }) {
    super('DOCKER_UNAVAILABLE', `Docker Engine not answering on ${socketPath}: ${reason}`, { socketPath, reason }, options);
  }
}

/** An Engine API call failed. `status` is the HTTP status the Engine answered, when it answered. */
export class DockerApiError extends RunlogError {
  constructor(operation: string, message: string, readonly status: number | undefined, options?: { cause?: unknown; code?: ErrorCode; details?: Record<string, unknown> }) {
    super(options?.code ?? 'DOCKER_API', `${operation}: ${message}`, { operation, status, ...options?.details }, options);
  }
}

/** A digest-pinned image could not be pulled (wrong digest, unknown repository, registry down). */
export class ImagePullError extends RunlogError {
  constructor(readonly ref: string, reason: string, readonly notFound: boolean, options?: { cause?: unknown }) {
    super(
      notFound ? 'IMAGE_NOT_FOUND' : 'IMAGE_PULL_FAILED',
      notFound ? `image ${ref} is not in its registry (no manifest with that digest): ${reason}` : `could not pull ${ref}: ${reason}`,
      { ref, reason },
      options,
    );
  }
}

/** Copying an image's export directory (or a code archive) into a volume failed at `step`. */
export class MaterializationError extends RunlogError {
  constructor(code: ErrorCode, readonly step: string, message: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(code, message, { step, ...details }, options);
  }
}

/** `invoke` was called on a container that had already been started once (its stdin is gone). */
export class ContainerStateError extends RunlogError {
  constructor(code: ErrorCode, containerId: string, message: string) {
    super(code, message, { containerId });
  }
}
