// Two paths fold events through a machine: the live host's `step` (XState's public `transition()`, after a
// `can()` check) and replay's `foldEvent`/`replay` (the machine's own transition with one inert scope, built
// once per fold for speed). Nothing else checks that they agree, which matters at every XState upgrade:
// this folds long seeded random walks over every event of both vocabularies, both ways, and compares the
// snapshots (state, status, context) after every event.
import { describe, expect, it } from 'vitest';
import type { ActorKind, ExecutionEvent, InstanceEvent, MachineEvent } from '../../../src/domain/events.ts';
import type { InstanceSpec } from '../../../src/machines/instance.machine.ts';
import { seededRandom } from '../../support/seeded-random.ts';
import {
  foldEvent,
  initialSnapshot,
  machines,
  replay,
  stateName,
  step,
  type AnySnapshot,
} from '../../../src/machines/runtime.ts';

const restart = {
  policy: 'on-failure' as const,
  maxRestarts: 3,
  backoffMs: 1000,
  maxBackoffMs: 8000,
  resetAfterMs: 60_000,
};
const spec: InstanceSpec = {
  instanceId: 'i1',
  appId: 'a',
  appDir: '/a',
  sandbox: 'container',
  runtime: 'raw',
  tools: ['curl'],
  lifecycleBasePath: '',
  restart,
};
const request = {
  executionId: 'e1',
  uri: 'at://did:plc:a/x/y',
  handler: 'h',
  input: { n: 1 },
  callerDid: null,
  timeoutMs: 5000,
};

type Draft<E> = E extends { type: infer T; data: infer D } ? { type: T; data: D } : never;

/** One sample of every instance event (typed: a renamed event or a wrong field fails the typecheck here too). */
const instanceEvents: Draft<InstanceEvent>[] = [
  { type: 'instance.requested', data: { spec } },
  { type: 'instance.discovered', data: { spec, containerId: 'c9', host: '127.0.0.1', port: 4109, pid: 9 } },
  { type: 'instance.spawned', data: { pid: 7, containerId: 'c1', host: '127.0.0.1', port: 4100 } },
  { type: 'instance.healthy', data: { identity: 'match' } },
  { type: 'instance.healthy', data: { identity: 'legacy', warning: 'no identity' } },
  { type: 'instance.spawn-failed', data: { reason: 'health-timeout', code: 'HEALTH_TIMEOUT', message: 'slow' } },
  { type: 'instance.spawn-failed', data: { reason: 'spawn-error', code: 'SPAWN_FAILED', message: 'no' } },
  {
    type: 'instance.lifecycle-failed',
    data: { reason: 'lifecycle-failed', hook: 'onStart', code: 'X', message: 'hook' },
  },
  { type: 'instance.running', data: { hooks: ['onCreate', 'onStart'] } },
  { type: 'instance.pause-requested', data: {} },
  { type: 'instance.resume-requested', data: {} },
  { type: 'instance.stop-requested', data: { graceMs: null } },
  { type: 'instance.kill-requested', data: {} },
  { type: 'instance.exited', data: { exitCode: 0, signal: 'SIGTERM' } },
  { type: 'instance.crashed', data: { reason: 'exit', exitCode: 1, message: 'died' } },
  { type: 'instance.crashed', data: { reason: 'identity-mismatch', message: 'not mine' } },
  { type: 'instance.adopted', data: { containerId: 'c2', host: '127.0.0.1', port: 4101, pid: 8 } },
  { type: 'instance.lost', data: {} },
  {
    type: 'instance.suspended',
    data: {
      reason: 'supervisor-stop',
      message: 'its supervisor stopped',
      evidence: { sandbox: 'proot', pid: 7, state: 'running' },
    },
  },
  { type: 'instance.restart-scheduled', data: { attempt: 1, delayMs: 1000, dueAt: '2026-12-01T12:00:01.000Z' } },
  { type: 'instance.restart-due', data: { attempt: 1, dueAt: '2026-12-01T12:00:01.000Z' } },
  { type: 'instance.tool-granted', data: { tool: 'git', via: 'cap' } },
  { type: 'instance.tool-revoked', data: { tool: 'curl', via: 'cap' } },
  { type: 'instance.recovered', data: { version: 4 } },
  { type: 'instance.recovered', data: { version: 9, node: 'b', evidence: { containerId: 'c2', state: 'running' } } },
];

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
  launcher: { kind: 'node' } as never,
  env: [],
  additions: [],
  limits: { memoryMb: 64, cpus: 1, pids: 32, timeoutMs: 5000 } as never,
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

/** One sample of every execution event. */
const executionEvents: Draft<ExecutionEvent>[] = [
  { type: 'execution.requested', data: { request, deadline: '2026-12-01T13:00:00.000Z' } },
  { type: 'execution.step', data: { name: 'code-record', detail: { cid: 'c' } } },
  { type: 'execution.resolved', data: resolved },
  { type: 'execution.materialized', data: materialized },
  { type: 'execution.started', data: { containerId: 'k1' } },
  { type: 'execution.adopted', data: { containerId: 'k2' } },
  { type: 'execution.succeeded', data: { output: { ok: true }, outputHash: 'h', stderrTail: 'warn' } },
  { type: 'execution.failed', data: { reason: 'runtime', code: 'BOOM', message: 'boom', stderrTail: 'trace' } },
  { type: 'execution.failed', data: { reason: 'timeout', code: 'DEADLINE_EXCEEDED', message: 'late' } },
  { type: 'execution.cancel-requested', data: {} },
  { type: 'execution.recovered', data: { version: 3 } },
  { type: 'execution.recovered', data: { version: 5, evidence: { containerId: 'k1', state: 'created' } } },
];

const samples: Record<ActorKind, { type: string; data: object }[]> = {
  instance: instanceEvents,
  execution: executionEvents,
};

/**
 * A walk of `length` events: mostly ones the current state accepts (so the walk goes deep: restarts, adoption,
 * pause/resume), some it does not (the live path records those as rejected; replay must leave the snapshot alone).
 */
function walk(kind: ActorKind, seed: number, length: number): MachineEvent[] {
  const machine = machines[kind];
  const rand = seededRandom(seed);
  let t = Date.parse('2026-12-01T12:00:00.000Z');
  let snapshot = initialSnapshot(machine);
  const events: MachineEvent[] = [];
  for (let i = 0; i < length; i++) {
    t += Math.floor(rand() * 90_000); // sometimes past resetAfterMs: the restart count resets
    const at = new Date(t).toISOString();
    const candidates = samples[kind].map((s) => ({ type: s.type, at, data: s.data as Record<string, unknown> }));
    const accepted = candidates.filter((e) => snapshot.can(e));
    // Mostly events that keep the actor alive, so walks go deep before they end.
    const alive = accepted.filter((e) => step(machine, snapshot, e).snapshot.status !== 'done');
    const r = rand();
    const pool = alive.length > 0 && r < 0.75 ? alive : accepted.length > 0 && r < 0.92 ? accepted : candidates;
    const event = pool[Math.floor(rand() * pool.length)]!;
    events.push(event);
    snapshot = step(machine, snapshot, event).snapshot;
    // An ended actor takes no more events; start the walk again on a fresh one (a new stream, as in a log).
    if (snapshot.status === 'done' && i < length - 1) break;
  }
  return events;
}

const reached: Record<ActorKind, Set<string>> = { instance: new Set(), execution: new Set() };
/** Which event types some walk had accepted, in which states. */
const taken: Record<ActorKind, Set<string>> = { instance: new Set(), execution: new Set() };

const view = (s: AnySnapshot) => ({ state: stateName(s), status: s.status, context: s.context });

describe('live and replay folds agree', () => {
  it.each([
    ['instance', 1],
    ['instance', 2],
    ['instance', 3],
    ['instance', 4],
    ['execution', 1],
    ['execution', 2],
    ['execution', 3],
  ] as const)(
    '%s walks (seed %i): the same snapshot after every event, and at the end through replay()',
    (kind, seed) => {
      const machine = machines[kind];
      let streams = 0;
      let folded = 0;
      const states = new Set<string>();
      for (let n = 0; n < 60; n++) {
        const events = walk(kind, seed * 1000 + n, 80);
        let live = initialSnapshot(machine);
        let replayed: AnySnapshot | undefined;
        for (const [i, e] of events.entries()) {
          const from = stateName(live);
          const r = step(machine, live, e);
          if (r.accepted) taken[kind].add(`${e.type} in ${from}`);
          live = r.snapshot;
          replayed = foldEvent(machine, replayed, e);
          expect(view(replayed), `${kind} stream ${n}, event ${i + 1} (${e.type})`).toEqual(view(live));
          states.add(stateName(live));
        }
        expect(view(replay(machine, events))).toEqual(view(live));
        streams += 1;
        folded += events.length;
      }
      expect(streams).toBe(60);
      expect(folded).toBeGreaterThan(60 * 2);
      for (const s of states) reached[kind].add(s);
    },
  );

  // Runs after the walks above (vitest runs a file's tests in order): they went everywhere, not only the first steps.
  it('the walks reached every state of both machines', () => {
    expect([...reached.instance].sort()).toEqual([
      'adopted',
      'crashed.backoff',
      'crashed.down',
      'healthy',
      'lost',
      'new',
      'paused',
      'running',
      'spawning',
      'stopped',
      'stopping',
      'suspended',
    ]);
    expect([...reached.execution].sort()).toEqual([
      'adopted',
      'failed',
      'materializing',
      'new',
      'resolving',
      'running',
      'starting',
      'succeeded',
    ]);
  });

  it('the walks folded recovered in every state that takes it (not only rejected it)', () => {
    // Recovery re-enters these states (the restart timer's backoff either arms its timer or plans it again).
    expect([...taken.instance].filter((t) => t.startsWith('instance.recovered')).sort()).toEqual([
      'instance.recovered in adopted',
      'instance.recovered in crashed.backoff',
      'instance.recovered in stopping',
      'instance.recovered in suspended',
    ]);
    expect([...taken.execution].filter((t) => t.startsWith('execution.recovered')).sort()).toEqual(
      ['adopted', 'materializing', 'resolving', 'running', 'starting'].map((s) => `execution.recovered in ${s}`),
    );
  });
});
