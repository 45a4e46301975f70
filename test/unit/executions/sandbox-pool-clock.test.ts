// The pre-started sandbox pool reads the injected Clock (issue 13): how long a sandbox waited, and its removal
// once it has been idle for the policy's idleMs, are measured on it. No Docker: the engine and sandbox are fakes.
import { describe, expect, it } from 'vitest';
import type { ContainerInfo, ContainerState, DockerEngine } from '../../../src/adapters/docker/docker-port.ts';
import type { ExecutionSandbox } from '../../../src/adapters/docker/execution-sandbox.ts';
import type { NewEvent } from '../../../src/domain/events.ts';
import { SandboxPool, type PoolTarget } from '../../../src/supervisor/executions/pool/sandbox-pool.ts';
import { SimulatedClock } from '../../support/clock.ts';
import { partial } from '../../support/partial.ts';

function pool(clock: SimulatedClock) {
  const facts: NewEvent[] = [];
  const removed: string[] = [];
  const engine = partial<DockerEngine>({
    start: async () => undefined,
    removeContainer: async (id: string) => void removed.push(id),
    inspectContainer: async () => partial<ContainerInfo>({ state: partial<ContainerState>({ running: true }) }),
    cpuUsageNs: async () => 5_000_000,
  });
  const sandbox = partial<ExecutionSandbox>({
    createExecutionContainer: async () => ({ containerId: 'c1', command: [] }),
  });
  const p = new SandboxPool({
    engine,
    sandbox,
    policy: { perCode: 1, total: 8, maxMemoryMb: 2048, idleMs: 60_000, idleCpuMs: 1000 },
    labels: { 'runlog.home': '/nowhere' },
    record: (events) => void facts.push(...events),
    read: async () => [],
    log: () => undefined,
    clock,
  });
  return { p, facts, removed };
}

const target = partial<PoolTarget>({
  key: 'k',
  uri: 'at://did:plc:x/code/1',
  codeCid: 'c',
  runtimeCid: 'r',
  memoryMb: 64,
  spec: partial({}),
});

describe('sandbox pool on the injected clock', () => {
  it('a claimed sandbox waited as long as the clock says', async () => {
    const clock = new SimulatedClock();
    const { p } = pool(clock);
    p.fill(target);
    await p.settled();
    clock.advance(1234);
    const claimed = await p.claim(target.uri, 'k', 'ex1');
    // With the inspect that found it running, handed on to its invocation (no second inspect).
    expect(claimed).toEqual({
      sandboxId: expect.stringMatching(/^pre_/),
      containerId: 'c1',
      waitedMs: 1234,
      info: { state: { running: true } },
      idleCpuMs: 5,
    });
    expect(clock.pending).toBe(0); // claiming cancelled the idle removal
  });

  it('an idle sandbox is removed when idleMs has passed on the clock, not before', async () => {
    const clock = new SimulatedClock();
    const { p, facts, removed } = pool(clock);
    p.fill(target);
    await p.settled();
    expect(clock.pending).toBe(1);
    clock.advance(59_999);
    await p.settled();
    expect(p.list()).toHaveLength(1);
    clock.advance(1);
    await p.settled();
    expect(p.list()).toEqual([]);
    expect(removed).toEqual(['c1']);
    expect(facts.at(-1)).toMatchObject({ type: 'pool.sandbox-removed', data: { containerId: 'c1', reason: 'idle' } });
  });
});
