// What a pre-started sandbox does before its envelope arrives is bounded in CPU and accounted to the pool
// (issue 26, item 7). While a sandbox waits, the pool reads its CPU every few seconds on the injected clock; over
// the policy's idleCpuMs it is removed as `idle-cpu` and its key is not pre-started again. Claims and removals
// say how much CPU the sandbox used idle, and the pool's totals feed the Prometheus metrics. No Docker: the
// engine and sandbox are fakes, time is a SimulatedClock.
import { describe, expect, it } from 'vitest';
import type { ContainerInfo, ContainerState, DockerEngine } from '../../../src/adapters/docker/docker-port.ts';
import type { ExecutionSandbox } from '../../../src/adapters/docker/execution-sandbox.ts';
import { DEFAULT_OPERATOR_POLICY, parseOperatorPolicy } from '../../../src/domain/at-run/operator-policy.ts';
import type { NewEvent } from '../../../src/domain/events.ts';
import type { Metered } from '../../../src/store/capabilities.ts';
import type { EventStorePort } from '../../../src/store/port.ts';
import type { ActorHost } from '../../../src/supervisor/host/actor-host.ts';
import { createBus } from '../../../src/supervisor/host/bus.ts';
import { RunlogMetrics } from '../../../src/supervisor/observability/metrics.ts';
import {
  PRESTART_CPU_CHECK_MS,
  SandboxPool,
  type PoolTarget,
} from '../../../src/supervisor/executions/pool/sandbox-pool.ts';
import { SimulatedClock } from '../../support/clock.ts';
import { partial } from '../../support/partial.ts';

const MS = 1_000_000;

/** A pool over a fake engine whose containers have used `cpu.get(id)` ns of CPU (null: gone; an Error: thrown). */
function pool(opts: { idleCpuMs?: number; perCode?: number } = {}) {
  const clock = new SimulatedClock();
  const facts: NewEvent[] = [];
  const logs: string[] = [];
  const removed: string[] = [];
  const cpu = new Map<string, number | null | Error>();
  const reads: string[] = [];
  let n = 0;
  const engine = partial<DockerEngine>({
    start: async () => undefined,
    removeContainer: async (id: string) => void removed.push(id),
    inspectContainer: async () => partial<ContainerInfo>({ state: partial<ContainerState>({ running: true }) }),
    cpuUsageNs: async (id: string) => {
      reads.push(id);
      const v = cpu.has(id) ? cpu.get(id)! : 0;
      if (v instanceof Error) throw v;
      return v;
    },
  });
  const sandbox = partial<ExecutionSandbox>({
    createExecutionContainer: async () => ({ containerId: `c${++n}`, command: [] }),
  });
  const p = new SandboxPool({
    engine,
    sandbox,
    policy: {
      perCode: opts.perCode ?? 1,
      total: 8,
      maxMemoryMb: 2048,
      idleMs: 60_000,
      idleCpuMs: opts.idleCpuMs ?? 1000,
    },
    labels: { 'runlog.home': '/nowhere' },
    record: (events) => void facts.push(...events),
    read: async () => [],
    log: (m) => void logs.push(m),
    clock,
  });
  const of = (type: string) => facts.filter((f) => f.type === type).map((f) => f.data as Record<string, unknown>);
  return { p, clock, facts, of, logs, removed, cpu, reads };
}

const target = (key = 'k', uri = 'at://did:plc:x/code/1') =>
  partial<PoolTarget>({
    key,
    uri,
    publisher: 'did:plc:rt',
    codeCid: 'c',
    runtimeCid: 'r',
    memoryMb: 64,
    spec: partial({}),
  });

describe('the CPU a pre-started sandbox uses while it waits', () => {
  it(
    'is read every few seconds on the clock; ' +
      'a sandbox that stays under the bound waits until idleMs, and its removal says what it used',
    async () => {
      const { p, clock, of, reads, cpu } = pool();
      p.fill(target());
      await p.settled();
      expect(reads).toEqual([]);
      cpu.set('c1', 120 * MS);
      clock.advance(PRESTART_CPU_CHECK_MS);
      await p.settled();
      expect(reads).toEqual(['c1']);
      clock.advance(PRESTART_CPU_CHECK_MS);
      await p.settled();
      expect(reads).toEqual(['c1', 'c1']);
      expect(p.list()).toHaveLength(1);
      for (let t = 2 * PRESTART_CPU_CHECK_MS; t < 60_000; t += PRESTART_CPU_CHECK_MS) {
        clock.advance(PRESTART_CPU_CHECK_MS);
        await p.settled();
      }
      clock.advance(60_000);
      await p.settled();
      expect(p.list()).toEqual([]);
      expect(of('pool.sandbox-removed')).toEqual([
        { sandbox: expect.any(String), containerId: 'c1', reason: 'idle', idleCpuMs: 120 },
      ]);
    },
  );

  it('a sandbox over idleCpuMs is removed as idle-cpu at the next reading, and its key is not pre-started again', async () => {
    const { p, clock, of, logs, removed, cpu } = pool({ idleCpuMs: 1000 });
    p.fill(target());
    await p.settled();
    cpu.set('c1', 1500 * MS);
    clock.advance(PRESTART_CPU_CHECK_MS);
    await p.settled();
    expect(p.list()).toEqual([]);
    expect(removed).toEqual(['c1']);
    expect(of('pool.sandbox-removed')).toEqual([
      { sandbox: expect.any(String), containerId: 'c1', reason: 'idle-cpu', idleCpuMs: 1500, idleCpuBoundMs: 1000 },
    ]);
    expect(of('pool.prestart-stopped')).toEqual([
      { key: 'k', uri: 'at://did:plc:x/code/1', reason: 'idle-cpu', idleCpuMs: 1500, idleCpuBoundMs: 1000 },
    ]);
    expect(logs.filter((l) => l.includes('idle-cpu') || l.includes('not pre-started'))).toHaveLength(1);
    // The same key is never started again by this pool; another key still is.
    p.fill(target());
    p.fill(target());
    await p.settled();
    expect(p.list()).toEqual([]);
    expect(of('pool.sandbox-prestarting')).toHaveLength(1);
    expect(of('pool.prestart-stopped')).toHaveLength(1);
    p.fill(target('other', 'at://did:plc:x/code/2'));
    await p.settled();
    expect(p.list().map((e) => e.key)).toEqual(['other']);
  });

  it('a reading that fails leaves the sandbox waiting and it is read again; one whose container is gone is removed', async () => {
    const { p, clock, of, cpu, reads } = pool();
    p.fill(target());
    await p.settled();
    cpu.set('c1', new Error('daemon busy'));
    clock.advance(PRESTART_CPU_CHECK_MS);
    await p.settled();
    expect(p.list()).toHaveLength(1);
    cpu.set('c1', null);
    clock.advance(PRESTART_CPU_CHECK_MS);
    await p.settled();
    expect(reads).toHaveLength(3); // two checks and the read before the removal
    expect(p.list()).toEqual([]);
    expect(of('pool.sandbox-removed')).toEqual([
      { sandbox: expect.any(String), containerId: 'c1', reason: 'gone', idleCpuMs: null },
    ]);
    expect(of('pool.prestart-stopped')).toEqual([]);
  });

  it('a claim records the CPU the sandbox used while it waited; one over the bound is still used, and its key stops', async () => {
    const { p, of, cpu } = pool({ idleCpuMs: 1000 });
    p.fill(target());
    await p.settled();
    cpu.set('c1', 42 * MS);
    const claimed = await p.claim('at://did:plc:x/code/1', 'k', 'ex1');
    expect(claimed).toMatchObject({ containerId: 'c1', idleCpuMs: 42 });
    expect(of('pool.sandbox-claimed')).toEqual([
      { sandbox: expect.any(String), containerId: 'c1', executionId: 'ex1', idleCpuMs: 42 },
    ]);

    p.fill(target());
    await p.settled();
    cpu.set('c2', 1800 * MS);
    expect(await p.claim('at://did:plc:x/code/1', 'k', 'ex2')).toMatchObject({ containerId: 'c2', idleCpuMs: 1800 });
    expect(of('pool.prestart-stopped')).toEqual([
      { key: 'k', uri: 'at://did:plc:x/code/1', reason: 'idle-cpu', idleCpuMs: 1800, idleCpuBoundMs: 1000 },
    ]);
    p.fill(target());
    await p.settled();
    expect(p.list()).toEqual([]);
  });

  it('the pool accounts the idle CPU of every claimed and removed sandbox, and its removals by bounded reason', async () => {
    const { p, clock, cpu } = pool({ idleCpuMs: 1000 });
    p.fill(target('a', 'at://did:plc:x/code/a'));
    p.fill(target('b', 'at://did:plc:x/code/b'));
    p.fill(target('c', 'at://did:plc:x/code/c'));
    await p.settled();
    cpu.set('c1', 250 * MS);
    cpu.set('c2', 2000 * MS);
    cpu.set('c3', 10 * MS);
    await p.claim('at://did:plc:x/code/a', 'a', 'ex1');
    clock.advance(PRESTART_CPU_CHECK_MS);
    await p.settled();
    await p.claim('at://did:plc:x/code/c', 'c', 'ex2');
    await p.settled();
    expect(p.accounts()).toEqual({
      idleCpuMs: 250 + 2000 + 10,
      claimed: 2,
      removed: { 'idle-cpu': 1 },
      stoppedKeys: 1,
    });
    // A changed record supersedes d's sandbox: its reason's detail is free text, it is counted by its kind.
    expect(await p.claim('at://did:plc:x/code/d', 'd', 'ex3')).toBeNull();
    p.fill(target('d', 'at://did:plc:x/code/d'));
    await p.settled();
    await p.claim('at://did:plc:x/code/d', 'd2', 'ex4');
    await p.settled();
    expect(p.accounts().removed).toEqual({ 'idle-cpu': 1, superseded: 1 });
  });
});

describe('prestart metrics', () => {
  it('expose the idle CPU and removals by reason that the pool accounted', async () => {
    const store = partial<EventStorePort>({ lastSeq: async () => 0 });
    const metered: Metered = { sizeBytes: async () => 0, observeAppends: () => undefined };
    const host = partial<ActorHost>({ live: () => [] });
    let accounts = {
      idleCpuMs: 2500,
      claimed: 3,
      removed: { 'idle-cpu': 1, idle: 2 } as Record<string, number>,
      stoppedKeys: 1,
    };
    const metrics = new RunlogMetrics({
      store,
      metered,
      host: () => host,
      bus: createBus(),
      now: () => new Date().toISOString(),
      processMetrics: false,
      prestart: () => accounts,
    });
    let text = await metrics.text();
    expect(text).toContain('runlog_prestart_idle_cpu_seconds_total 2.5');
    expect(text).toContain('runlog_prestart_sandboxes_removed_total{reason="idle-cpu"} 1');
    expect(text).toContain('runlog_prestart_sandboxes_removed_total{reason="idle"} 2');
    expect(text).toContain('runlog_prestart_stopped_keys 1');
    accounts = { ...accounts, idleCpuMs: 4000, removed: { 'idle-cpu': 2, idle: 2, 'made up: x': 5 } };
    text = await metrics.text();
    expect(text).toContain('runlog_prestart_idle_cpu_seconds_total 4');
    expect(text).toContain('runlog_prestart_sandboxes_removed_total{reason="idle-cpu"} 2');
    expect(text).toContain('runlog_prestart_sandboxes_removed_total{reason="other"} 5');
    metrics.close();
  });
});

describe('operator policy: prestart.idleCpuMs', () => {
  it('defaults to one second of CPU, takes a positive integer, and lists a bad value like the other prestart keys', () => {
    expect(DEFAULT_OPERATOR_POLICY.prestart.idleCpuMs).toBe(1000);
    expect(parseOperatorPolicy({}).prestart.idleCpuMs).toBe(1000);
    expect(parseOperatorPolicy({ prestart: { idleCpuMs: 250 } }).prestart).toMatchObject({
      idleCpuMs: 250,
      idleMs: 60_000,
    });
    for (const bad of [0, -5, 1.5, '100', null]) {
      let issues: string[] = [];
      try {
        parseOperatorPolicy({ prestart: { idleCpuMs: bad } });
      } catch (err) {
        issues = (err as { issues: string[] }).issues;
      }
      expect(issues).toEqual([`prestart.idleCpuMs must be a positive integer (got ${JSON.stringify(bad)})`]);
    }
  });
});
