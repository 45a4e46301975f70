// What the `actors` projection keeps per actor: a small, stable summary for `ps` and the inspector.
import type { ActorKind } from '../domain/events.ts';
import type { ExecutionContext } from './execution.machine.ts';
import type { InstanceContext } from './instance.machine.ts';
import { isTerminal, stateName, type AnySnapshot } from './runtime.ts';

export function summarize(kind: ActorKind, snapshot: AnySnapshot): Record<string, unknown> {
  if (kind === 'instance') {
    const c = snapshot.context as InstanceContext;
    return {
      appId: c.spec?.appId ?? null,
      sandbox: c.spec?.sandbox ?? null,
      pid: c.pid,
      port: c.port,
      containerId: c.containerId,
      restarts: c.restarts,
      adopted: c.adopted,
      lastCrash: c.lastCrash ? { reason: c.lastCrash.reason, exitCode: c.lastCrash.exitCode } : null,
      nextRestartAt: c.nextRestartAt,
    };
  }
  const c = snapshot.context as ExecutionContext;
  return {
    uri: c.request?.uri ?? null,
    handler: c.request?.handler ?? null,
    codeCid: (c.resolved?.codeCid as string) ?? null,
    runtimeCid: (c.resolved?.runtimeCid as string) ?? null,
    containerId: c.containerId,
    failure: c.failure ? { reason: c.failure.reason, code: c.failure.code } : null,
    adopted: c.adopted,
  };
}

export function actorStatus(snapshot: AnySnapshot): 'active' | 'terminal' {
  return isTerminal(snapshot) ? 'terminal' : 'active';
}

export { stateName };
