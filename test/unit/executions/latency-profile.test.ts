// The latency profile: recorded on the outcome event (optional data), folded into the execution's context, laid
// out as a waterfall for `runlog inspect`; logs written before profiles existed still replay and still show the
// phases from their timestamps. Also: the operator policy's `prestart` bounds.
import { describe, expect, it } from 'vitest';
import { parseOperatorPolicy, DEFAULT_OPERATOR_POLICY } from '../../../src/domain/at-run/operator-policy.ts';
import { executionWaterfall, renderWaterfall } from '../../../src/domain/latency-profile.ts';
import { executionMachine } from '../../../src/machines/execution.machine.ts';
import { ev, given } from '../../support/spec.ts';

const request = {
  executionId: 'exec_1',
  uri: 'at://did:plc:a/dev.mainasara.at-run.beta.v2.code/x',
  handler: 'greet',
  input: null,
  callerDid: null,
  timeoutMs: 5000,
};
const at = (ms: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, 0, ms)).toISOString();
const profile = {
  resolveMs: 40,
  materializeMs: 10,
  createMs: 3,
  attachMs: 4,
  startMs: 0,
  adapterReadyMs: 0,
  firstFrameMs: 20,
  resultMs: 22,
  exitMs: 30,
  invokeMs: 40,
  prestarted: true,
};
const events = (withProfile: boolean) => [
  { type: 'execution.requested', at: at(0), data: { request } },
  { type: 'execution.resolved', at: at(45), data: {} },
  { type: 'execution.materialized', at: at(60), data: {} },
  { type: 'execution.started', at: at(65), data: { containerId: 'c1', prestarted: true } },
  { type: 'execution.succeeded', at: at(110), data: { output: 1, ...(withProfile ? { profile } : {}) } },
];

describe('latency profile', () => {
  it('the outcome event’s profile lands in the context; an outcome without one (an older log) replays with none', () => {
    const base = [
      ev('execution.requested', { request, deadline: at(9000) }),
      ev('execution.resolved', {}),
      ev('execution.materialized', {}),
      ev('execution.started', { containerId: 'c1' }),
    ];
    expect(
      given(executionMachine, base).when(ev('execution.succeeded', { output: 1, profile })).context.profile,
    ).toEqual(profile);
    const old = given(executionMachine, base).when(ev('execution.succeeded', { output: 1 }));
    expect(old.state).toBe('succeeded');
    expect(old.context.profile).toBeNull();
    expect(
      given(executionMachine, base).when(ev('execution.failed', { reason: 'runtime', code: 'X', profile: [1] })).context
        .profile,
    ).toBeNull();
  });

  it('a waterfall puts each step at its phase’s event time, with the profile’s durations', () => {
    const rows = executionWaterfall(events(true));
    const byStep = Object.fromEntries(rows.map((r) => [r.step, r]));
    expect(byStep.resolve).toEqual({ step: 'resolve', offsetMs: 0, ms: 40 });
    expect(byStep.materialize).toEqual({ step: 'materialize', offsetMs: 45, ms: 10 });
    expect(byStep['create (pre-started: claimed)']).toEqual({
      step: 'create (pre-started: claimed)',
      offsetMs: 60,
      ms: 3,
    });
    expect(byStep['first frame']).toEqual({ step: 'first frame', offsetMs: 69, ms: 20 });
    expect(byStep.exit).toEqual({ step: 'exit', offsetMs: 69, ms: 30 });
    expect(byStep['total (to the outcome event)']).toEqual({
      step: 'total (to the outcome event)',
      offsetMs: 0,
      ms: 110,
    });
    const lines = renderWaterfall(rows, 20);
    expect(lines).toHaveLength(rows.length);
    expect(lines[0]).toMatch(/^resolve\s+█+\s+40 ms {2}@0$/);
  });

  it('without a profile (an older log) the phases come from the timestamps alone', () => {
    const rows = executionWaterfall(events(false));
    expect(rows.map((r) => [r.step, r.offsetMs, r.ms])).toEqual([
      ['resolve', 0, 45],
      ['materialize', 45, 15],
      ['create', 60, 5],
      ['run', 65, 45],
      ['total (to the outcome event)', 0, 110],
    ]);
    expect(executionWaterfall([])).toEqual([]);
  });
});

describe('operator policy: prestart', () => {
  it('defaults, overrides, 0 turns it off, and every bad value is listed', () => {
    expect(parseOperatorPolicy({}).prestart).toEqual(DEFAULT_OPERATOR_POLICY.prestart);
    expect(parseOperatorPolicy({ prestart: { perCode: 0 } }).prestart).toMatchObject({
      perCode: 0,
      total: DEFAULT_OPERATOR_POLICY.prestart.total,
    });
    expect(
      parseOperatorPolicy({ prestart: { perCode: 2, total: 3, maxMemoryMb: 512, idleMs: 1000 } }).prestart,
    ).toEqual({ perCode: 2, total: 3, maxMemoryMb: 512, idleMs: 1000, idleCpuMs: 1000, publishers: [] });
    let issues: string[] = [];
    try {
      parseOperatorPolicy({ prestart: { perCode: -1, total: 1.5, maxMemoryMb: 0, idleMs: 'x', colour: 1 } });
    } catch (err) {
      issues = (err as { issues: string[] }).issues;
    }
    expect(issues).toEqual(
      expect.arrayContaining([
        'prestart.colour is not a known setting',
        'prestart.perCode must be a non-negative integer (got -1)',
        'prestart.total must be a non-negative integer (got 1.5)',
        'prestart.maxMemoryMb must be a positive integer (got 0)',
        'prestart.idleMs must be a positive integer (got "x")',
      ]),
    );
  });
});
