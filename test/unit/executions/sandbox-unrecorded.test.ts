// A sandbox container that no recorded event names is removed by the node that made it: when `execution.started`
// is refused (the lease went to another node while the daemon made the container) or cancelled, nothing else
// could ever find it, neither the execution's cleanup nor the new owner's takeover.
import { describe, expect, it } from 'vitest';
import type { ExecutionSandbox } from '../../../src/adapters/docker/execution-sandbox.ts';
import type { Parts } from '../../../src/config/parts.ts';
import type { OperatorPolicy } from '../../../src/domain/at-run/operator-policy.ts';
import { FencedError } from '../../../src/domain/errors.ts';
import type { Materialized, Resolved } from '../../../src/domain/execution-events.ts';
import type { DispatchResult } from '../../../src/supervisor/host/actor-host.ts';
import type { ExecutionRequest } from '../../../src/machines/execution.machine.ts';
import { ExecutionEgressSteps } from '../../../src/supervisor/executions/execution-egress.ts';
import { ExecutionInvoker } from '../../../src/supervisor/executions/execution-invoke.ts';
import { LatencyProfiles } from '../../../src/supervisor/executions/execution-profiles.ts';
import type { ExecutionEffectContext } from '../../../src/supervisor/executions/execution-progress.ts';
import type { JobSecrets } from '../../../src/supervisor/executions/job-secrets.ts';
import type { PrestartGate } from '../../../src/supervisor/executions/pool/prestart-gate.ts';
import type { PoolTarget, SandboxPool } from '../../../src/supervisor/executions/pool/sandbox-pool.ts';
import { codeOf } from '../../support/errors.ts';
import { partial } from '../../support/partial.ts';

const URI = 'at://did:plc:aaaaaaaaaaaaaaaaaaaaaaaa/dev.mainasara.at-run.beta.v2.code/greet';

function invokerWith(removed: string[]) {
  const sandbox = partial<ExecutionSandbox>({
    createExecutionContainer: async () => ({ containerId: 'c-made', command: [] }),
    removeContainer: async (id: string) => {
      removed.push(id);
    },
  });
  return new ExecutionInvoker({
    parts: partial<Parts>({ images: { 'at-run-sandbox': 'registry/sandbox@sha256:00' } }),
    policy: partial<OperatorPolicy>({}),
    pool: () => partial<SandboxPool>({ claim: async () => null }),
    sandbox: () => sandbox,
    gate: partial<PrestartGate<PoolTarget>>({}),
    profiles: new LatencyProfiles(),
    labels: (extra) => extra,
    nowMs: () => 0,
    secrets: partial<JobSecrets>({}),
    egress: new ExecutionEgressSteps(() => null),
  });
}

const request = partial<ExecutionRequest>({ uri: URI, executionId: 'exec_1' });
const resolved = partial<Resolved>({
  codeUri: URI,
  limits: partial<Resolved['limits']>({ memoryMb: 64, pids: 16, cpus: 1 }),
  env: [],
});
const materialized = partial<Materialized>({ runtimeVolume: 'r', codeVolume: 'c' });
const contextWith = (dispatch: ExecutionEffectContext['dispatch']) =>
  partial<ExecutionEffectContext>({
    actor: partial<ExecutionEffectContext['actor']>({ stream: 'execution-exec_1' }),
    dispatch,
  });

describe('a sandbox container no event names', () => {
  it('is removed when recording execution.started is refused as FENCED, and the refusal still reaches the caller', async () => {
    const removed: string[] = [];
    const ctx = contextWith(() => Promise.reject(new FencedError('execution-exec_1', 'c')));
    const outcome = await codeOf(invokerWith(removed).createSandbox(request, resolved, materialized, ctx));
    expect(outcome).toBe('FENCED');
    expect(removed).toEqual(['c-made']);
  });

  it('is removed when execution.started is not accepted (cancelled meanwhile)', async () => {
    const removed: string[] = [];
    const ctx = contextWith(async () => partial<DispatchResult>({ accepted: false }));
    await invokerWith(removed).createSandbox(request, resolved, materialized, ctx);
    expect(removed).toEqual(['c-made']);
  });

  it('is kept when execution.started is recorded: the execution invokes it and its cleanup removes it', async () => {
    const removed: string[] = [];
    const ctx = contextWith(async () => partial<DispatchResult>({ accepted: true }));
    await invokerWith(removed).createSandbox(request, resolved, materialized, ctx);
    expect(removed).toEqual([]);
  });
});
