// The reconciler's decision table: for every live state of each machine and every observation the reconciler can
// make of it, what recovery records (machines/reconcile-decision.ts, pure). One row per (state, observation) pair;
// a pair that cannot occur is listed with the reason, and the last tests check that the rows and those pairs
// together cover every live state of both machines.
import { describe, expect, it } from 'vitest';
import type { MachineEvent } from '../../../src/domain/events.ts';
import {
  decide,
  onGracefulStop,
  onRehydrate,
  type ActorAt,
  type ExecutionObservation,
  type InstanceObservation,
} from '../../../src/machines/reconcile-decision.ts';
import type { InstanceSpec } from '../../../src/machines/instance.machine.ts';
import { machines, replay, stateName, step } from '../../../src/machines/runtime.ts';

const T0 = Date.parse('2026-12-01T12:00:00.000Z');
const iso = (ms: number) => new Date(T0 + ms).toISOString();
const ev = (type: string, data: object = {}, ms = 0): MachineEvent => ({
  type,
  at: iso(ms),
  data: data as Record<string, unknown>,
});

const restart = {
  policy: 'on-failure' as const,
  maxRestarts: 3,
  backoffMs: 1000,
  maxBackoffMs: 8000,
  resetAfterMs: 600_000,
};
const spec = (sandbox: 'container' | 'proot'): InstanceSpec => ({
  instanceId: 'i1',
  appId: 'a',
  appDir: '/a',
  sandbox,
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart,
});

/** The events that bring an instance to each live state. */
function instanceHistory(state: string, sandbox: 'container' | 'proot'): MachineEvent[] {
  const spawning = [ev('instance.requested', { spec: spec(sandbox) })];
  const healthy = [
    ...spawning,
    ev('instance.spawned', {
      containerId: sandbox === 'container' ? 'c1' : null,
      pid: 41,
      host: '127.0.0.1',
      port: 4100,
    }),
    ev('instance.healthy', { identity: 'match' }),
  ];
  const running = [...healthy, ev('instance.running', {})];
  const byState: Record<string, MachineEvent[]> = {
    spawning,
    healthy,
    running,
    paused: [...running, ev('instance.pause-requested')],
    adopted: [...running, ev('instance.adopted', { containerId: 'c1', host: '127.0.0.1', port: 4100, pid: 41 })],
    stopping: [...running, ev('instance.stop-requested', {})],
    'crashed.backoff': [...running, ev('instance.crashed', { reason: 'exit', exitCode: 1 }, 1000)],
    suspended: [...running, ev('instance.suspended', { reason: 'supervisor-stop' }, 1000)],
  };
  return byState[state]!;
}

function instanceAt(state: string, sandbox: 'container' | 'proot' = 'container'): ActorAt {
  const events = instanceHistory(state, sandbox);
  const snapshot = replay(machines.instance, events);
  expect(stateName(snapshot)).toBe(state);
  return { snapshot, version: events.length };
}

const DEADLINE_MS = 60_000;
const resolved = {
  codeUri: 'at://x',
  codeCid: 'c',
  via: null,
  author: 'did:plc:a',
  runtimeName: 'node',
  runtimeUri: 'at://r',
  runtimeCid: 'r',
  blobCid: 'b',
  entrypoint: 'index.js',
  image: 'img@sha256:1',
  platform: { os: 'linux', architecture: 'amd64' },
  exportPath: '/rt',
  launcher: { kind: 'node' },
  env: [],
  additions: [],
  limits: { memoryMb: 64, cpus: 1, pids: 32, timeoutMs: 5000 },
  clamped: [],
  isolation: 'runc',
  mode: 'strict',
};
const materialized = {
  runtimeVolume: 'rv',
  runtimeDigest: 'sha256:1',
  additionVolumes: [],
  codeVolume: 'cv',
  codeDigest: 'sha256:2',
  entries: 3,
  cached: { runtime: false, code: true },
};

function executionAt(state: string): ActorAt {
  const request = {
    executionId: 'e1',
    uri: 'at://did:plc:a/x/y',
    handler: 'h',
    input: {},
    callerDid: null,
    timeoutMs: DEADLINE_MS,
  };
  const resolving = [ev('execution.requested', { request, deadline: iso(DEADLINE_MS) })];
  const refused = { code: 'JOB_EXPIRED', message: 'its notAfter has passed' };
  const refusing = [ev('execution.requested', { request, deadline: iso(DEADLINE_MS), refused })];
  const materializing = [...resolving, ev('execution.resolved', resolved)];
  const starting = [...materializing, ev('execution.materialized', materialized)];
  const running = [...starting, ev('execution.started', { containerId: 'k1' })];
  const events = (
    {
      refusing,
      resolving,
      materializing,
      starting,
      running,
      adopted: [...running, ev('execution.adopted', { containerId: 'k1' })],
    } as Record<string, MachineEvent[]>
  )[state]!;
  const snapshot = replay(machines.execution, events);
  expect(stateName(snapshot)).toBe(state);
  return { snapshot, version: events.length };
}

const seen = { containerId: 'c1', state: 'running' };
const gone = { node: 'a', takenOverBy: 'b' };
const AT = iso(5000);
const LATE = iso(DEADLINE_MS + 1);

const instanceObservations: Record<string, InstanceObservation> = {
  'node gone': { at: AT, node: 'gone', evidence: gone },
  'proot child died': { at: AT, sandbox: 'proot' },
  'no container': { at: AT, sandbox: 'container', container: 'none' },
  'container running': {
    at: AT,
    sandbox: 'container',
    container: 'alive',
    location: { containerId: 'c1', host: '127.0.0.1', port: 4100, pid: 41, startedAt: iso(0) },
    evidence: seen,
  },
  'container exited 137': {
    at: AT,
    sandbox: 'container',
    container: 'exited',
    exitCode: 137,
    evidence: { containerId: 'c1', state: 'exited', exitCode: 137 },
  },
};

/** [state, observation, outcome, events, preparation, effects the machine then emits] */
type Row = [string, string, string | null, string[], string[], string[]];

const CRASH = ['instance.crashed'];
const instanceTable: Row[] = [
  ['spawning', 'node gone', 'crashed', CRASH, [], ['releasePort', 'announce', 'scheduleRestart']],
  ['spawning', 'proot child died', 'crashed', CRASH, [], ['releasePort', 'announce', 'scheduleRestart']],
  ['spawning', 'no container', 'crashed', CRASH, [], ['releasePort', 'announce', 'scheduleRestart']],
  [
    'spawning',
    'container running',
    'crashed',
    CRASH,
    ['remove-container'],
    ['releasePort', 'announce', 'scheduleRestart'],
  ],
  [
    'spawning',
    'container exited 137',
    'crashed',
    CRASH,
    ['remove-container'],
    ['releasePort', 'announce', 'scheduleRestart'],
  ],
  ['healthy', 'node gone', 'crashed', CRASH, [], ['releasePort', 'announce', 'scheduleRestart']],
  ['healthy', 'proot child died', 'crashed', CRASH, [], ['releasePort', 'announce', 'scheduleRestart']],
  ['healthy', 'no container', 'crashed', CRASH, [], ['releasePort', 'announce', 'scheduleRestart']],
  [
    'healthy',
    'container running',
    'crashed',
    CRASH,
    ['remove-container'],
    ['releasePort', 'announce', 'scheduleRestart'],
  ],
  [
    'healthy',
    'container exited 137',
    'crashed',
    CRASH,
    ['remove-container'],
    ['releasePort', 'announce', 'scheduleRestart'],
  ],
  ['running', 'node gone', 'crashed', CRASH, [], ['releasePort', 'announce', 'scheduleRestart']],
  ['running', 'proot child died', 'crashed', CRASH, [], ['releasePort', 'announce', 'scheduleRestart']],
  ['running', 'no container', 'lost', ['instance.lost'], [], ['releasePort']],
  ['running', 'container running', 'adopted', ['instance.adopted'], ['hold-for-reattach'], ['reattach']],
  [
    'running',
    'container exited 137',
    'crashed',
    CRASH,
    ['remove-container'],
    ['releasePort', 'announce', 'scheduleRestart'],
  ],
  ['paused', 'node gone', 'crashed', CRASH, [], ['releasePort', 'announce', 'scheduleRestart']],
  ['paused', 'proot child died', 'crashed', CRASH, [], ['releasePort', 'announce', 'scheduleRestart']],
  ['paused', 'no container', 'lost', ['instance.lost'], [], ['releasePort']],
  ['paused', 'container running', 'adopted', ['instance.adopted'], ['hold-for-reattach'], ['reattach']],
  [
    'paused',
    'container exited 137',
    'crashed',
    CRASH,
    ['remove-container'],
    ['releasePort', 'announce', 'scheduleRestart'],
  ],
  ['adopted', 'node gone', 'crashed', CRASH, [], ['releasePort', 'announce', 'scheduleRestart']],
  // A PRoot instance is never adopted by the reconciler; the machine allows instance.adopted for any sandbox, so the row is kept.
  ['adopted', 'proot child died', 'crashed', CRASH, [], ['releasePort', 'announce', 'scheduleRestart']],
  ['adopted', 'no container', 'lost', ['instance.lost'], [], ['releasePort']],
  ['adopted', 'container running', 'resumed', ['instance.recovered'], ['hold-for-reattach'], ['reattach']],
  [
    'adopted',
    'container exited 137',
    'crashed',
    CRASH,
    ['remove-container'],
    ['releasePort', 'announce', 'scheduleRestart'],
  ],
  // Stopping, its restart policy has nothing to restart: lost with its node.
  ['stopping', 'node gone', 'lost', ['instance.lost'], [], ['releasePort']],
  ['stopping', 'proot child died', 'exited', ['instance.exited'], [], ['releasePort']],
  ['stopping', 'no container', 'exited', ['instance.exited'], [], ['releasePort']],
  ['stopping', 'container running', 'resumed', ['instance.recovered'], ['watch-for-stop'], ['stopSandbox']],
  ['stopping', 'container exited 137', 'exited', ['instance.exited'], ['remove-container'], ['releasePort']],
  // Taken over from a dead node, a restart timer is planned again here (its due time was never recorded).
  ['crashed.backoff', 'node gone', 'resumed', ['instance.recovered'], [], ['scheduleRestart']],
  // Otherwise its timer was recovered at rehydration (onRehydrate, below): what is observed changes nothing.
  ['crashed.backoff', 'proot child died', null, [], [], []],
  ['crashed.backoff', 'no container', null, [], [], []],
  ['crashed.backoff', 'container running', null, [], [], []],
  ['crashed.backoff', 'container exited 137', null, [], [], []],
  // Suspended by a graceful stop of its supervisor (onGracefulStop, below): spawned again, no crash counted. Only
  // PRoot instances are suspended; the container rows keep the table total (a container found running is adopted).
  ['suspended', 'node gone', 'resumed', ['instance.recovered'], [], ['spawn']],
  ['suspended', 'proot child died', 'resumed', ['instance.recovered'], [], ['spawn']],
  ['suspended', 'no container', 'resumed', ['instance.recovered'], [], ['spawn']],
  ['suspended', 'container running', 'adopted', ['instance.adopted'], ['hold-for-reattach'], ['reattach']],
  ['suspended', 'container exited 137', 'resumed', ['instance.recovered'], ['remove-container'], ['spawn']],
];

const executionObservations: Record<string, ExecutionObservation> = {
  'node gone': { at: AT, node: 'gone', evidence: gone },
  'no container recorded': { at: AT, container: 'unrecorded' },
  'no container recorded, deadline passed': { at: LATE, container: 'unrecorded' },
  'container missing': {
    at: AT,
    container: 'missing',
    evidence: { containerId: 'k1', observed: 'container not found' },
  },
  'container created, never started': {
    at: AT,
    container: 'created',
    evidence: { containerId: 'k1', state: 'created', startedAt: null },
  },
  'container created, never started, deadline passed': {
    at: LATE,
    container: 'created',
    evidence: { containerId: 'k1', state: 'created', startedAt: null },
  },
  'container started': { at: AT, container: 'started', evidence: { containerId: 'k1', state: 'exited' } },
};

const FAILED = ['execution.failed'];
const END = ['cleanup', 'announce'];
const executionTable: Row[] = [
  // A refused job is answered again wherever and whenever it is taken back: nothing of it ran.
  ['refusing', 'node gone', 'resumed', ['execution.recovered'], [], ['refuse']],
  ['refusing', 'no container recorded', 'resumed', ['execution.recovered'], [], ['refuse']],
  ['refusing', 'no container recorded, deadline passed', 'resumed', ['execution.recovered'], [], ['refuse']],
  ...(['resolving', 'materializing', 'starting'] as const).flatMap((state): Row[] => [
    [state, 'node gone', 'lost', FAILED, [], END],
    [
      state,
      'no container recorded',
      'resumed',
      ['execution.recovered'],
      [],
      [{ resolving: 'resolve', materializing: 'materialize', starting: 'createSandbox' }[state]],
    ],
    [state, 'no container recorded, deadline passed', 'failed', FAILED, [], END],
  ]),
  ['running', 'node gone', 'lost', FAILED, [], END],
  ['running', 'container missing', 'lost', FAILED, [], END],
  ['running', 'container created, never started', 'resumed', ['execution.recovered'], [], ['invoke']],
  ['running', 'container created, never started, deadline passed', 'failed', FAILED, [], END],
  ['running', 'container started', 'adopted', ['execution.adopted'], [], ['collect']],
  ['adopted', 'node gone', 'lost', FAILED, [], END],
  ['adopted', 'container missing', 'lost', FAILED, [], END],
  ['adopted', 'container created, never started', 'collect', ['execution.recovered'], [], ['collect']],
  ['adopted', 'container created, never started, deadline passed', 'collect', ['execution.recovered'], [], ['collect']],
  ['adopted', 'container started', 'collect', ['execution.recovered'], [], ['collect']],
];

/**
 * Pairs that cannot occur, and why (the shell asks Docker only about the container the log names):
 * [states, observations starting with, reason].
 */
const impossible: [string[], string, string][] = [
  [
    ['refusing', 'resolving', 'materializing', 'starting'],
    'container',
    'no container is recorded before execution.started',
  ],
  [['running', 'adopted'], 'no container recorded', 'execution.started records the container'],
];
const whyImpossible = (state: string, observation: string) =>
  impossible.find(([states, prefix]) => states.includes(state) && observation.startsWith(prefix))?.[2];

describe('reconcile decision table: instances', () => {
  it.each(instanceTable)('%s × %s → %s %j', (state, observation, outcome, events, prepare, effects) => {
    const obs = instanceObservations[observation]!;
    const actor = instanceAt(state, 'sandbox' in obs && obs.sandbox === 'proot' ? 'proot' : 'container');
    const d = decide('instance', actor, obs);
    expect(d.outcome).toBe(outcome);
    expect(d.events.map((e) => e.type)).toEqual(events);
    expect(d.prepare).toEqual(prepare);
    expect(d.effects).toEqual(effects);
    // Every event decided is one the machine takes in that state (never recorded as rejected).
    let s = actor.snapshot;
    for (const e of d.events) {
      const r = step(machines.instance, s, { type: e.type, at: AT, data: e.data as Record<string, unknown> });
      expect(r.accepted, `${e.type} in ${stateName(s)}`).toBe(true);
      s = r.snapshot;
    }
    for (const e of d.events)
      if (e.type === 'instance.recovered') expect(e.data).toMatchObject({ version: actor.version });
  });

  it('an instance lost with its node: a crash node-lost when its restart policy restarts it here, else lost', () => {
    const restarted = decide('instance', instanceAt('running'), instanceObservations['node gone']!);
    expect(restarted.events).toMatchObject([
      { type: 'instance.crashed', data: { reason: 'node-lost', evidence: gone } },
    ]);
    const never = [
      ev('instance.requested', { spec: { ...spec('container'), restart: { ...restart, policy: 'never' } } }),
    ];
    const down = decide(
      'instance',
      { snapshot: replay(machines.instance, never), version: 1 },
      instanceObservations['node gone']!,
    );
    expect(down).toMatchObject({ outcome: 'lost', events: [{ type: 'instance.lost', data: { evidence: gone } }] });
  });

  it('what the events carry: exit codes, crash reasons and the evidence', () => {
    const exited = decide('instance', instanceAt('running'), instanceObservations['container exited 137']!);
    expect(exited.events[0]).toMatchObject({
      type: 'instance.crashed',
      data: { reason: 'exit', exitCode: 137, evidence: { containerId: 'c1', exitCode: 137 } },
    });
    const stopped = decide('instance', instanceAt('stopping'), instanceObservations['container exited 137']!);
    expect(stopped.events[0]).toMatchObject({ type: 'instance.exited', data: { exitCode: 137 } });
    const interrupted = decide('instance', instanceAt('healthy'), instanceObservations['container running']!);
    expect(interrupted.events[0]).toMatchObject({
      data: { reason: 'supervisor-restart', evidence: { containerId: 'c1', removed: true, state: 'healthy' } },
    });
    const proot = decide('instance', instanceAt('running', 'proot'), instanceObservations['proot child died']!);
    expect(proot.events[0]).toMatchObject({
      data: { reason: 'supervisor-restart', evidence: { sandbox: 'proot', pid: 41, state: 'running' } },
    });
    const adopted = decide('instance', instanceAt('paused'), instanceObservations['container running']!);
    expect(adopted.events[0]).toMatchObject({
      type: 'instance.adopted',
      data: { containerId: 'c1', host: '127.0.0.1', port: 4100, pid: 41, evidence: seen },
    });
    const lost = decide('instance', instanceAt('running'), instanceObservations['no container']!);
    expect(lost.events[0]).toMatchObject({
      data: { evidence: { containerId: 'c1', observed: 'no container with this stream label' } },
    });
  });

  it('rehydration recovers a restart timer (armed at its recorded due time, or planned again) and nothing else', () => {
    const unscheduled = instanceAt('crashed.backoff');
    expect(onRehydrate(unscheduled)).toEqual([{ type: 'instance.recovered', data: { version: unscheduled.version } }]);
    const events = [
      ...instanceHistory('crashed.backoff', 'container'),
      ev('instance.restart-scheduled', { attempt: 1, delayMs: 1000, dueAt: iso(2000) }, 1000),
    ];
    const scheduled: ActorAt = { snapshot: replay(machines.instance, events), version: events.length };
    const recover = (a: ActorAt) => {
      const [e] = onRehydrate(a);
      return step(machines.instance, a.snapshot, { type: e!.type, at: AT, data: e!.data as Record<string, unknown> });
    };
    // Due time recorded: armed again at it, nothing planned anew. Not recorded (the supervisor died first): planned.
    expect(recover(scheduled)).toMatchObject({
      accepted: true,
      effects: [{ type: 'armRestart', params: { instanceId: 'i1', attempt: 1, dueAt: iso(2000) } }],
    });
    expect(stateName(recover(scheduled).snapshot)).toBe('crashed.backoff');
    expect(recover(unscheduled)).toMatchObject({
      accepted: true,
      effects: [{ type: 'scheduleRestart', params: { instanceId: 'i1', attempt: 1, delayMs: 1000 } }],
    });
    for (const state of ['spawning', 'healthy', 'running', 'paused', 'adopted', 'stopping', 'suspended'])
      expect(onRehydrate(instanceAt(state))).toEqual([]);
  });

  it('a graceful stop suspends the PRoot instances whose sandbox this process runs or starts, and nothing else', () => {
    for (const state of ['spawning', 'healthy', 'running', 'paused']) {
      const actor = instanceAt(state, 'proot');
      // Its sandbox died with an earlier supervisor (this process does not hold it): its crash is not forgiven.
      expect(onGracefulStop(actor, false), state).toEqual([]);
      const events = onGracefulStop(actor, true);
      expect(events, state).toMatchObject([
        { type: 'instance.suspended', data: { reason: 'supervisor-stop', evidence: { sandbox: 'proot', state } } },
      ]);
      const r = step(machines.instance, actor.snapshot, {
        type: events[0]!.type,
        at: AT,
        data: events[0]!.data as Record<string, unknown>,
      });
      expect(r.accepted, state).toBe(true);
      expect(stateName(r.snapshot), state).toBe('suspended');
    }
    // Stopping, backing off, already suspended: nothing of theirs runs. A container keeps running (adopted next start).
    for (const state of ['stopping', 'crashed.backoff', 'suspended'])
      expect(onGracefulStop(instanceAt(state, 'proot'), true), state).toEqual([]);
    for (const state of ['spawning', 'healthy', 'running', 'paused', 'adopted'])
      expect(onGracefulStop(instanceAt(state, 'container'), true), state).toEqual([]);
  });

  it('graceful restarts leave the crash budget untouched; a supervisor that died still counts a crash', () => {
    // maxRestarts 3: four graceful stop/start cycles, each suspend → recover → spawn → running.
    const budget = { ...restart, maxRestarts: 3 };
    let snapshot = replay(machines.instance, [
      ev('instance.requested', { spec: { ...spec('proot'), restart: budget } }),
      ev('instance.spawned', { pid: 41, port: 4100 }),
      ev('instance.healthy', { identity: 'match' }),
      ev('instance.running', {}),
    ]);
    let version = 4;
    const apply = (e: { type: string; data: unknown }, ms: number) => {
      const r = step(machines.instance, snapshot, {
        type: e.type,
        at: iso(ms),
        data: e.data as Record<string, unknown>,
      });
      expect(r.accepted, `${e.type} in ${stateName(snapshot)}`).toBe(true);
      snapshot = r.snapshot;
      version++;
      return r;
    };
    for (let cycle = 1; cycle <= 4; cycle++) {
      const t = cycle * 10_000;
      for (const e of onGracefulStop({ snapshot, version }, true)) apply(e, t);
      expect(stateName(snapshot)).toBe('suspended');
      const d = decide('instance', { snapshot, version }, { at: iso(t + 1000), sandbox: 'proot' });
      expect(d.outcome).toBe('resumed');
      const r = apply(d.events[0]!, t + 1000);
      expect(r.effects).toMatchObject([{ type: 'spawn', params: { attempt: 0 } }]);
      apply({ type: 'instance.spawned', data: { pid: 41 + cycle, port: 4100 } }, t + 1100);
      apply({ type: 'instance.healthy', data: { identity: 'match' } }, t + 1200);
      apply({ type: 'instance.running', data: {} }, t + 1300);
      expect(stateName(snapshot)).toBe('running');
      expect((snapshot.context as { restarts: number; lastCrash: unknown }).restarts).toBe(0);
      expect((snapshot.context as { lastCrash: unknown }).lastCrash).toBeNull();
    }
    // Killed outright (no suspension recorded): the next start records a crash, and the restart policy counts it.
    const killed = decide('instance', { snapshot, version }, { at: iso(60_000), sandbox: 'proot' });
    expect(killed.events).toMatchObject([{ type: 'instance.crashed', data: { reason: 'supervisor-restart' } }]);
    apply(killed.events[0]!, 60_000);
    expect(stateName(snapshot)).toBe('crashed.backoff');
    expect((snapshot.context as { lastCrash: { reason: string } }).lastCrash.reason).toBe('supervisor-restart');
  });
});

describe('reconcile decision table: executions', () => {
  it.each(executionTable)('%s × %s → %s %j', (state, observation, outcome, events, prepare, effects) => {
    const actor = executionAt(state);
    const d = decide('execution', actor, executionObservations[observation]!);
    expect(d.outcome).toBe(outcome);
    expect(d.events.map((e) => e.type)).toEqual(events);
    expect(d.prepare).toEqual(prepare);
    expect(d.effects).toEqual(effects);
    for (const e of d.events)
      expect(actor.snapshot.can({ type: e.type, at: AT, data: e.data as Record<string, unknown> }), e.type).toBe(true);
  });

  it('failures carry their reason and code; an invocation run again is marked resumed', () => {
    const late = decide(
      'execution',
      executionAt('materializing'),
      executionObservations['no container recorded, deadline passed']!,
    );
    expect(late.events[0]).toMatchObject({ data: { reason: 'timeout', code: 'DEADLINE_EXCEEDED' } });
    const missing = decide('execution', executionAt('running'), executionObservations['container missing']!);
    expect(missing.events[0]).toMatchObject({ data: { reason: 'lost', code: 'CONTAINER_GONE' } });
    const node = decide('execution', executionAt('adopted'), executionObservations['node gone']!);
    expect(node.events[0]).toMatchObject({ data: { reason: 'lost', code: 'NODE_LOST', evidence: gone } });
    // The machine emits the invocation again, marked resumed (executions.ts then checks the envelope arrived).
    const actor = executionAt('running');
    const d = decide('execution', actor, executionObservations['container created, never started']!);
    const r = step(machines.execution, actor.snapshot, {
      type: d.events[0]!.type,
      at: AT,
      data: d.events[0]!.data as Record<string, unknown>,
    });
    expect(stateName(r.snapshot)).toBe('running');
    expect(r.effects).toMatchObject([{ type: 'invoke', params: { containerId: 'k1', resumed: true } }]);
    // Started normally, the same invocation is not marked.
    const started = step(machines.execution, executionAt('starting').snapshot, {
      type: 'execution.started',
      at: AT,
      data: { containerId: 'k1' },
    });
    expect(started.effects).toEqual([
      { type: 'invoke', params: expect.not.objectContaining({ resumed: expect.anything() }) },
    ]);
  });
});

describe('the table covers every pair', () => {
  const liveStates = (kind: 'instance' | 'execution') => {
    const states: string[] = [];
    const walk = (node: { key: string; type: string; states: Record<string, unknown> }, prefix: string) => {
      for (const [key, child] of Object.entries(node.states) as [
        string,
        { key: string; type: string; states: Record<string, unknown> },
      ][]) {
        const name = prefix ? `${prefix}.${key}` : key;
        if (Object.keys(child.states).length > 0) walk(child, name);
        else if (child.type !== 'final' && key !== 'new') states.push(name);
      }
    };
    walk(machines[kind].root as never, '');
    return states.sort();
  };

  it('instances: every live state × every observation has one row', () => {
    expect(liveStates('instance')).toEqual([
      'adopted',
      'crashed.backoff',
      'healthy',
      'paused',
      'running',
      'spawning',
      'stopping',
      'suspended',
    ]);
    const rows = instanceTable.map(([s, o]) => `${s}|${o}`);
    expect(new Set(rows).size).toBe(rows.length);
    const want = liveStates('instance').flatMap((s) => Object.keys(instanceObservations).map((o) => `${s}|${o}`));
    expect(rows.sort()).toEqual(want.sort());
  });

  it('executions: every live state × every observation has one row or a reason it cannot occur', () => {
    expect(liveStates('execution')).toEqual([
      'adopted',
      'materializing',
      'refusing',
      'resolving',
      'running',
      'starting',
    ]);
    const rows = executionTable.map(([s, o]) => `${s}|${o}`);
    expect(new Set(rows).size).toBe(rows.length);
    for (const s of liveStates('execution')) {
      for (const o of Object.keys(executionObservations)) {
        const row = rows.includes(`${s}|${o}`);
        const why = whyImpossible(s, o);
        expect(
          row !== (why !== undefined),
          `${s} × ${o}: ${row ? 'a row and a reason' : 'neither a row nor a reason'}`,
        ).toBe(true);
      }
    }
    // The reasons hold: the log names a container exactly from running on.
    for (const s of liveStates('execution')) {
      const recorded = (executionAt(s).snapshot.context as { containerId: string | null }).containerId !== null;
      expect(recorded, s).toBe(s === 'running' || s === 'adopted');
    }
  });
});
