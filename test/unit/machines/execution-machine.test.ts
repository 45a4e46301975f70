import { describe, expect, it } from 'vitest';
import { executionMachine } from '../../../src/machines/execution.machine.ts';
import { isTerminal, stateName } from '../../../src/machines/runtime.ts';
import { effectTypes, ev, expectRejected, given } from '../../support/spec.ts';

const request = {
  executionId: 'exec_1',
  uri: 'at://did:plc:a/dev.mainasara.at-run.beta.v2.code/x',
  handler: 'greet',
  input: { name: 'Ada' },
  callerDid: null,
  timeoutMs: 5000,
};
const requested = () => ev('execution.requested', { request, deadline: '2026-01-01T01:00:00.000Z' });
const resolved = () =>
  ev('execution.resolved', {
    codeCid: 'bafycode',
    runtimeCid: 'bafyrt',
    image: 'localhost:5000/rt@sha256:' + 'a'.repeat(64),
    limits: { memoryMb: 256 },
  });
const materialized = () => ev('execution.materialized', { runtimeVolume: 'v-rt', codeVolume: 'v-code' });
const started = () => ev('execution.started', { containerId: 'c1' });
const toRunning = () => [requested(), resolved(), materialized(), started()];

describe('execution machine', () => {
  it('requested → resolving, effect resolve', () => {
    const t = given(executionMachine, []).when(requested());
    expect(t.state).toBe('resolving');
    expect(effectTypes(t)).toEqual(['resolve']);
    expect(t.context.deadline).toBe('2026-01-01T01:00:00.000Z');
  });

  it('a job refused at intake goes to refusing and is answered (effect refuse), never resolved', () => {
    const refused = { code: 'JOB_EXPIRED', message: 'its notAfter has passed' };
    const refusedRequest = () => ev('execution.requested', { request, deadline: '2026-01-01T01:00:00.000Z', refused });
    const t = given(executionMachine, []).when(refusedRequest());
    expect(t.state).toBe('refusing');
    expect(t.effects).toEqual([{ type: 'refuse', params: { request, refused } }]);
    expect(t.context.refused).toEqual(refused);
    // Answered again after a restart; only its failure ends it.
    const again = given(executionMachine, [refusedRequest()]).when(ev('execution.recovered', { version: 1 }));
    expect(again.state).toBe('refusing');
    expect(effectTypes(again)).toEqual(['refuse']);
    const failed = given(executionMachine, [refusedRequest()]).when(
      ev('execution.failed', { reason: 'validation', code: 'JOB_EXPIRED', message: 'its notAfter has passed' }),
    );
    expect(failed.state).toBe('failed');
    expect(failed.context.failure).toEqual({ reason: 'validation', ...refused });
    expect(effectTypes(failed)).toEqual(['cleanup', 'announce']);
    expectRejected(given(executionMachine, [refusedRequest()]).when(resolved()), 'refusing');
  });

  it('resolved → materializing with what was resolved kept', () => {
    const t = given(executionMachine, [requested()]).when(resolved());
    expect(t.state).toBe('materializing');
    expect(effectTypes(t)).toEqual(['materialize']);
    expect(t.context.resolved).toMatchObject({ codeCid: 'bafycode', runtimeCid: 'bafyrt' });
  });

  it('steps are recorded in order without changing state', () => {
    const t = given(executionMachine, [requested(), resolved()]).when(
      ev('execution.step', { name: 'runtime-pulled', detail: { ms: 12 } }),
    );
    expect(t.state).toBe('materializing');
    expect(t.context.steps).toEqual([expect.objectContaining({ name: 'runtime-pulled', detail: { ms: 12 } })]);
  });

  it('materialized → starting (createSandbox); started → running (invoke)', () => {
    const t = given(executionMachine, [requested(), resolved()]).when(materialized());
    expect(t.state).toBe('starting');
    expect(effectTypes(t)).toEqual(['createSandbox']);
    const t2 = given(executionMachine, [requested(), resolved(), materialized()]).when(started());
    expect(t2.state).toBe('running');
    expect(effectTypes(t2)).toEqual(['invoke']);
    expect(t2.effects[0]!.params).toMatchObject({ containerId: 'c1' });
  });

  it('running → succeeded keeps output and cleans up, announces', () => {
    const t = given(executionMachine, toRunning()).when(
      ev('execution.succeeded', { output: { greeting: 'hi Ada' }, outputHash: 'abc' }),
    );
    expect(t.state).toBe('succeeded');
    expect(t.context.result).toEqual({ output: { greeting: 'hi Ada' }, outputHash: 'abc' });
    expect(effectTypes(t)).toEqual(['cleanup', 'announce']);
    expect(isTerminal(t.snapshot)).toBe(true);
  });

  it.each([
    ['resolving', 1, 'resolution'],
    ['materializing', 2, 'materialization'],
    ['starting', 3, 'runtime'],
    ['running', 4, 'timeout'],
  ])('%s → failed with a typed reason', (state, n, reason) => {
    const g = given(executionMachine, toRunning().slice(0, n));
    expect(stateName(g.snapshot)).toBe(state);
    const t = g.when(ev('execution.failed', { reason, code: 'X', message: 'boom' }));
    expect(t.state).toBe('failed');
    expect(t.context.failure).toEqual({ reason, code: 'X', message: 'boom' });
    expect(effectTypes(t)).toEqual(['cleanup', 'announce']);
  });

  it('an unknown failure reason is recorded as runtime', () => {
    const t = given(executionMachine, toRunning()).when(ev('execution.failed', { reason: 'weird', code: 'X' }));
    expect(t.context.failure.reason).toBe('runtime');
  });

  it('cancel before running fails as cancelled; while running it kills the sandbox', () => {
    const t = given(executionMachine, [requested()]).when(ev('execution.cancel-requested'));
    expect(t.state).toBe('failed');
    expect(t.context.failure.reason).toBe('cancelled');
    const t2 = given(executionMachine, toRunning()).when(ev('execution.cancel-requested'));
    expect(t2.state).toBe('running');
    expect(effectTypes(t2)).toEqual(['killSandbox']);
  });

  it('adopted after a restart collects the result from the container', () => {
    const t = given(executionMachine, toRunning()).when(ev('execution.adopted', { containerId: 'c1' }));
    expect(t.state).toBe('adopted');
    expect(effectTypes(t)).toEqual(['collect']);
    const t2 = given(executionMachine, [...toRunning(), ev('execution.adopted', { containerId: 'c1' })]).when(
      ev('execution.succeeded', { output: 1 }),
    );
    expect(t2.state).toBe('succeeded');
    expect(t2.context.adopted).toBe(true);
  });

  it.each([
    ['new', [], 'execution.resolved'],
    ['resolving', [requested()], 'execution.succeeded'],
    ['running', toRunning(), 'execution.resolved'],
    ['succeeded', [...toRunning(), ev('execution.succeeded', { output: 1 })], 'execution.failed'],
  ])('%s rejects %s', (state, history, type) => {
    const g = given(executionMachine, history as any);
    expect(stateName(g.snapshot)).toBe(state);
    expectRejected(g.when(ev(type, { reason: 'runtime' })), state);
  });
});
