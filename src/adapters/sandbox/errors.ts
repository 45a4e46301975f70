import { RunlogError, type ErrorCode } from '../../domain/errors.ts';

/**
 * Why a sandbox operation failed. `code` is one of:
 *   SPAWN_FAILED          the sandbox could not be started (proot/Docker error)
 *   ENTRYPOINT_MISSING    runtime 'raw' (or a declared entrypoint) without its file — the seed's exact text
 *   HEALTH_MISMATCH       something else answered the health check (port squatter) — the seed's exact text
 *   HEALTH_TIMEOUT        no healthy answer in time
 *   EXITED_BEFORE_HEALTHY the child exited while the runner waited for health
 *   LIFECYCLE_FAILED      a lifecycle hook answered non-2xx or not at all
 *   INSTANCE_UNKNOWN      no live instance with that id in this runner
 *   INSTANCE_BUSY         spawn of an instance id that is still running
 *   ADOPT_UNSUPPORTED     ProotRunner: its children never outlive the supervisor
 *   SETUP_MISSING         proot, the rootfs, Docker or the base image is missing (run `npm run setup`)
 */
export class SandboxError extends RunlogError {
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(code, message, details, options);
  }
}
