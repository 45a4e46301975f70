// What both runners do the same way around a spawn: argument checks before anything starts, and turning a
// failed identity gate into the error the caller sees.

import { ValidationError } from '../../domain/errors.ts';
import type { AppManifest } from '../../domain/manifest.ts';
import type { HealthResult } from '../health/wait-healthy.ts';
import { SandboxError } from './errors.ts';
import { assertIds } from './layout.ts';
import type { ExitInfo } from './app-sandbox-runner.ts';

export function checkSpawn(
  label: string,
  instanceId: string,
  appId: string,
  port: number,
  manifest: AppManifest,
  busy: boolean,
): void {
  assertIds(instanceId, appId);
  if (manifest.appId !== appId)
    throw new ValidationError('SPAWN_INVALID', `spawn of ${appId} was given the manifest of ${manifest.appId}`);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new ValidationError('SPAWN_INVALID', `port ${port} is not a TCP port`);
  if (busy) throw new SandboxError('INSTANCE_BUSY', `${label} instance ${instanceId} is still running`, { instanceId });
}

/** The error for a gate that did not pass (mismatch, timeout, exit before health); the child is already stopped. */
export function gateError(
  label: string,
  health: HealthResult,
  ids: { instanceId: string; appId: string; port: number },
  exit: ExitInfo,
  lastOutput: string,
): SandboxError {
  const { instanceId, appId, port } = ids;
  if (health.kind === 'mismatch')
    return new SandboxError('HEALTH_MISMATCH', health.message, {
      ...ids,
      claimedApp: health.claimedApp,
      claimedInstance: health.claimedInstance,
    });
  if (health.kind === 'timeout')
    return new SandboxError('HEALTH_TIMEOUT', `${health.message}\n--- last output ---\n${lastOutput}`, ids);
  return new SandboxError(
    'EXITED_BEFORE_HEALTHY',
    `${label} ${appId} (${instanceId}) on port ${port} exited before becoming healthy (${exit.signal ?? `code ${exit.code}`})` +
      `\n--- last output ---\n${lastOutput}`,
    { ...ids, code: exit.code, signal: exit.signal },
  );
}
