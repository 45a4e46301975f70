// The cluster chaos planner (test/support/cluster-chaos-plan.ts) and its checks' pure parts: a seed gives the
// same rounds every time (so a printed seed replays a failure), every fault kind gets its share of rounds, and
// each round has a request on each side of its fault.
import { describe, expect, it } from 'vitest';
import { checkRound, summaryTable, type RoundEvidence } from '../../support/cluster-chaos-checks.ts';
import {
  CHAOS_FAULT_KINDS,
  NODE_FAULTS,
  parseSeed,
  planRound,
  planRun,
  seededRandom,
} from '../../support/cluster-chaos-plan.ts';

const NODES = ['a', 'b', 'c'];

describe('the cluster chaos planner', () => {
  it('gives the same rounds for the same seed, and other rounds for another seed', () => {
    const one = planRun({ seed: 42, roundsPerKind: 2, nodes: NODES, requestsPerRound: 5 });
    expect(planRun({ seed: 42, roundsPerKind: 2, nodes: NODES, requestsPerRound: 5 })).toEqual(one);
    expect(planRun({ seed: 43, roundsPerKind: 2, nodes: NODES, requestsPerRound: 5 })).not.toEqual(one);
  });

  it('plans roundsPerKind rounds of each of the five fault kinds', () => {
    const rounds = planRun({ seed: 7, roundsPerKind: 2, nodes: NODES, requestsPerRound: 5 });
    expect(rounds).toHaveLength(10);
    expect(rounds.map((r) => r.index)).toEqual([...Array(10).keys()]);
    for (const kind of CHAOS_FAULT_KINDS)
      expect(
        rounds.filter((r) => r.kind === kind),
        kind,
      ).toHaveLength(2);
  });

  it('replays one round from its own seed and kind alone', () => {
    for (const r of planRun({ seed: 99, roundsPerKind: 3, nodes: NODES, requestsPerRound: 6 }))
      expect(planRound(r.seed, r.kind, r.index, NODES, 6)).toEqual(r);
  });

  it('strikes a node only for the node faults, sends a request before and after every fault, and probes timers where a node goes', () => {
    for (let seed = 0; seed < 200; seed++) {
      for (const r of planRun({ seed, roundsPerKind: 1, nodes: NODES, requestsPerRound: 4 })) {
        expect(r.victim === null, `${seed} ${r.kind}`).toBe(!NODE_FAULTS.has(r.kind));
        if (r.victim) expect(NODES).toContain(r.victim);
        expect(r.faultAfter).toBeGreaterThanOrEqual(0);
        expect(r.faultAfter).toBeLessThan(r.requests.length - 1);
        expect(r.timerProbe).toBe(r.kind === 'kill-node' || r.kind === 'stop-node');
        expect(r.appendLockedNth).toBeGreaterThanOrEqual(1);
        for (const q of r.requests) {
          expect(NODES).toContain(q.via);
          if (q.pin) expect(NODES).toContain(q.pin);
          expect(q.gapMs).toBeGreaterThanOrEqual(100);
        }
      }
    }
  });

  it('draws its numbers from the seed alone, in [0, 1)', () => {
    const a = seededRandom(5);
    const b = seededRandom(5);
    const xs = Array.from({ length: 1000 }, () => a());
    expect(Array.from({ length: 1000 }, () => b())).toEqual(xs);
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
    expect(new Set(xs).size).toBeGreaterThan(990);
  });

  it('refuses a seed that is not a 32-bit unsigned integer, and rounds that cannot hold a fault', () => {
    expect(parseSeed('123')).toBe(123);
    for (const bad of ['-1', '1.5', 'x', String(2 ** 32)]) expect(() => parseSeed(bad), bad).toThrow(/seed/);
    expect(() => planRun({ seed: 1, roundsPerKind: 0, nodes: NODES, requestsPerRound: 5 })).toThrow(/rounds/);
    expect(() => planRound(1, 'kill-node', 0, ['a'], 5)).toThrow(/two nodes/);
    expect(() => planRound(1, 'kill-node', 0, NODES, 1)).toThrow(/two requests/);
  });
});

describe('the cluster chaos checks', () => {
  const plan = planRound(11, 'stop-node', 0, NODES, 4);
  const victim = plan.victim!;
  const other = NODES.find((n) => n !== victim)!;
  const base = (): RoundEvidence => ({
    plan,
    runSeed: 1,
    ttlMs: 2000,
    outcomes: [],
    events: [],
    roundStartSeq: 0,
    actors: new Map(),
    leases: new Map(),
    dockerEvents: [],
    leaseMoves: [],
    outageMs: null,
    containersLeft: [],
    homes: { '/h/a': 'a', '/h/b': 'b', '/h/c': 'c' },
    liveNodes: [...NODES],
    faultFailure: null,
    probe: null,
  });
  const failed = (ev: RoundEvidence) =>
    Object.fromEntries(
      checkRound(ev)
        .filter((r) => r.failures.length)
        .map((r) => [r.name, r.failures]),
    );

  it('passes a round where everything held', () => {
    const ev = base();
    ev.outcomes = [
      {
        i: 0,
        kind: 'spawn-container',
        tag: 's1',
        via: 'a',
        pin: null,
        status: 201,
        body: { id: 's1', state: 'running' },
        acked: true,
        error: null,
      },
    ];
    ev.events = [{ seq: 1, stream: 'instance-s1', type: 'instance.requested', data: {}, meta: { node: other } }];
    ev.actors.set('instance-s1', { state: 'running', status: 'active' });
    ev.leases.set('instance-s1', other);
    ev.containersLeft = [
      { id: 'c1', state: 'running', labels: { 'runlog.stream': 'instance-s1', 'runlog.home': `/h/${other}` } },
    ];
    expect(failed(ev)).toEqual({});
  });

  it('names the round, the seed and the evidence of each failure', () => {
    const ev = base();
    ev.outcomes = [
      {
        i: 0,
        kind: 'spawn-container',
        tag: 's1',
        via: 'a',
        pin: null,
        status: 504,
        body: { error: { code: 'TIMEOUT', message: 'state running' } },
        acked: false,
        error: 'TIMEOUT',
      },
      {
        i: 1,
        kind: 'exec',
        tag: 'x1',
        via: 'b',
        pin: null,
        status: 200,
        body: { status: 'succeeded', executionId: 'e1', output: { tag: 'x1' } },
        acked: true,
        error: null,
      },
    ];
    ev.events = [
      { seq: 1, stream: 'instance-s1', type: 'instance.requested', data: {}, meta: { node: other } },
      {
        seq: 2,
        stream: 'execution-e1',
        type: 'execution.requested',
        data: { request: { input: { tag: 'x1' } } },
        meta: { node: other },
      },
      { seq: 3, stream: 'execution-e1', type: 'execution.succeeded', data: {}, meta: { node: victim } },
    ];
    ev.actors.set('instance-s1', { state: 'running', status: 'active' });
    ev.actors.set('execution-e1', { state: 'succeeded', status: 'terminal' });
    ev.dockerEvents = [1, 2].map((n) => ({
      action: 'start',
      id: `k${n}`,
      labels: { 'runlog.stream': 'execution-e1' },
    }));
    ev.containersLeft = [
      { id: 'c9', state: 'running', labels: { 'runlog.stream': 'instance-gone', 'runlog.home': '/h/a' } },
    ];
    ev.leaseMoves = [{ stream: 'instance-s1', from: other, to: victim, atMs: 4100 }];
    ev.faultFailure = 'no such fault point';
    ev.probe = { stream: 'instance-p', scheduledSeq: 1 };
    const f = failed(ev);
    expect(Object.keys(f).sort()).toEqual(['answers', 'fault', 'leases', 'orphans', 'sandbox-starts', 'timers']);
    for (const list of Object.values(f))
      for (const line of list) expect(line).toContain(`round 1 (stop-node on ${victim}, round seed 11, run seed 1)`);
    expect(f.answers!.join()).toContain('answered 504 TIMEOUT');
    expect(f['sandbox-starts']!.join()).toContain('2 container start(s)');
    expect(f.leases!.join()).toContain(`moved from ${other} to ${victim}`);
  });

  it(
    'lets the victim lose its leases and leave requests unanswered, wants an answer from every other node, ' +
      'and judges a PostgreSQL outage only when it was shorter than the TTL',
    () => {
      const ev = base();
      ev.leaseMoves = [{ stream: 'instance-s1', from: victim, to: other, atMs: 2500 }];
      ev.outcomes = [
        {
          i: 0,
          kind: 'exec',
          tag: 'x1',
          via: victim,
          pin: null,
          status: 0,
          body: null,
          acked: false,
          error: 'TypeError: fetch failed (ECONNRESET)',
        },
      ];
      expect(failed(ev)).toEqual({});
      ev.outcomes = [
        {
          i: 0,
          kind: 'exec',
          tag: 'x1',
          via: other,
          pin: victim,
          status: 0,
          body: null,
          acked: false,
          error: 'TimeoutError: aborted',
        },
      ];
      expect(failed(ev).answers).toEqual([
        expect.stringContaining(`exec x1 through ${other} pinned to ${victim} got no answer`),
      ]);
      ev.outcomes = [];
      const pgRound = {
        ...base(),
        plan: planRound(3, 'pg-restart', 0, NODES, 4),
        leaseMoves: [{ stream: 'instance-s1', from: 'a', to: 'b', atMs: 900 }],
      };
      expect(Object.keys(failed({ ...pgRound, outageMs: 1500 }))).toEqual(['leases']);
      expect(failed({ ...pgRound, outageMs: 2500 })).toEqual({});
    },
  );

  it('sums the rounds per fault kind in the summary table', () => {
    const stats = { requests: 5, acknowledged: 4, executions: 2, sandboxStarts: 3, takeovers: 1, checkFailures: 0 };
    const table = summaryTable([
      { kind: 'kill-node', stats },
      { kind: 'kill-node', stats: { ...stats, checkFailures: 2 } },
      { kind: 'pg-kill', stats },
    ]);
    const lines = table.split('\n');
    expect(lines[0]).toMatch(
      /^fault kind\s+rounds\s+requests\s+acknowledged\s+executions\s+sandbox starts\s+takeovers\s+check failures$/,
    );
    expect(lines[2]!.split(/\s+/)).toEqual(['kill-node', '2', '10', '8', '4', '6', '2', '2']);
    expect(lines.at(-1)!.split(/\s+/)).toEqual(['total', '3', '15', '12', '6', '9', '3', '2']);
  });
});
