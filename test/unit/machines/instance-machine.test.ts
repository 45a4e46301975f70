import { describe, expect, it } from 'vitest';
import type { MachineEvent } from '../../../src/domain/events.ts';
import { instanceMachine, restartDelay, type InstanceSpec } from '../../../src/machines/instance.machine.ts';
import { isTerminal, stateName } from '../../../src/machines/runtime.ts';
import { effectTypes, ev, expectRejected, given } from '../../support/spec.ts';

const spec = (over: Partial<InstanceSpec> = {}): InstanceSpec => ({
  instanceId: 'i1',
  appId: 'com.example.hello',
  appDir: '/apps/hello',
  sandbox: 'proot',
  runtime: 'raw',
  tools: ['bash'],
  lifecycleBasePath: '',
  restart: { policy: 'never', maxRestarts: 3, backoffMs: 1000, maxBackoffMs: 8000, resetAfterMs: 600_000 },
  ...over,
});
const requested = (s = spec()) => ev('instance.requested', { spec: s });
const spawned = () => ev('instance.spawned', { pid: 42, host: '127.0.0.1', port: 4100 });
const healthy = () => ev('instance.healthy', { identity: 'match' });
const running = () => ev('instance.running');
const toRunning = (s = spec()) => [requested(s), spawned(), healthy(), running()];

describe('instance machine', () => {
  it('new + requested → spawning, effect spawn with the spec', () => {
    const t = given(instanceMachine, []).when(requested());
    expect(t.state).toBe('spawning');
    expect(effectTypes(t)).toEqual(['spawn']);
    expect(t.effects[0]!.params.spec).toMatchObject({ instanceId: 'i1', appId: 'com.example.hello' });
  });

  it('spawning + spawned → stays spawning, records pid/port (the spawn effect goes on to verify identity)', () => {
    const t = given(instanceMachine, [requested()]).when(spawned());
    expect(t.state).toBe('spawning');
    expect(effectTypes(t)).toEqual([]);
    expect(t.context).toMatchObject({ pid: 42, port: 4100, host: '127.0.0.1' });
  });

  it('spawning + healthy → healthy, calls onCreate and onStart', () => {
    const t = given(instanceMachine, [requested(), spawned()]).when(healthy());
    expect(t.state).toBe('healthy');
    expect(t.effects).toEqual([
      { type: 'callLifecycle', params: { instanceId: 'i1', hooks: ['onCreate', 'onStart'] } },
    ]);
  });

  it('legacy identity is accepted and the warning kept', () => {
    const t = given(instanceMachine, [requested(), spawned()]).when(
      ev('instance.healthy', { identity: 'legacy', warning: 'no identity in health body' }),
    );
    expect(t.state).toBe('healthy');
    expect(t.context.identity).toBe('legacy');
    expect(t.context.warnings).toEqual(['no identity in health body']);
  });

  it('healthy + running → running with runningSince', () => {
    const r = running();
    const t = given(instanceMachine, [requested(), spawned(), healthy()]).when(r);
    expect(t.state).toBe('running');
    expect(t.context.runningSince).toBe(r.at);
  });

  it('identity mismatch → crashed.down (permanent), kills what was spawned, announces app:crashed', () => {
    const s = spec({ restart: { ...spec().restart, policy: 'on-failure' } });
    const t = given(instanceMachine, [requested(s), spawned()]).when(
      ev('instance.spawn-failed', { reason: 'identity-mismatch', message: 'health identity mismatch' }),
    );
    expect(t.state).toBe('crashed.down');
    expect(effectTypes(t)).toEqual(['forceKill', 'releasePort', 'announce']);
    expect(t.context.lastCrash).toMatchObject({ reason: 'identity-mismatch' });
    expect(isTerminal(t.snapshot)).toBe(true);
  });

  it('running + crashed with policy never → crashed.down with exit code', () => {
    const t = given(instanceMachine, toRunning()).when(
      ev('instance.crashed', { reason: 'exit', exitCode: 137, signal: 'SIGKILL' }),
    );
    expect(t.state).toBe('crashed.down');
    expect(t.context.lastCrash).toMatchObject({ exitCode: 137, signal: 'SIGKILL', reason: 'exit' });
    expect(t.effects.find((e) => e.type === 'announce')!.params).toMatchObject({
      topic: 'app:crashed',
      instanceId: 'i1',
    });
  });

  it('on-failure: crash → backoff with a scheduled restart; timer events drive the respawn', () => {
    const s = spec({ restart: { ...spec().restart, policy: 'on-failure' } });
    const crash = ev('instance.crashed', { reason: 'exit', exitCode: 1 });
    const t = given(instanceMachine, toRunning(s)).when(crash);
    expect(t.state).toBe('crashed.backoff');
    expect(t.effects.find((e) => e.type === 'scheduleRestart')!.params).toEqual({
      instanceId: 'i1',
      attempt: 1,
      delayMs: 1000,
    });
    expect(isTerminal(t.snapshot)).toBe(false);

    const scheduled = ev('instance.restart-scheduled', { attempt: 1, dueAt: '2026-01-01T01:00:00.000Z' });
    const t2 = given(instanceMachine, [...toRunning(s), crash]).when(scheduled);
    expect(t2.state).toBe('crashed.backoff');
    expect(t2.context.nextRestartAt).toBe('2026-01-01T01:00:00.000Z');

    const t3 = given(instanceMachine, [...toRunning(s), crash, scheduled]).when(
      ev('instance.restart-due', { attempt: 1 }),
    );
    expect(t3.state).toBe('spawning');
    expect(t3.context.restarts).toBe(1);
    expect(effectTypes(t3)).toEqual(['spawn']);
  });

  it('backoff doubles per consecutive restart up to the cap, then gives up at maxRestarts', () => {
    const s = spec({ restart: { ...spec().restart, policy: 'on-failure' } });
    const history = toRunning(s);
    const delays: number[] = [];
    for (let i = 0; i < 4; i++) {
      const t = given(instanceMachine, history).when(ev('instance.crashed', { reason: 'exit', exitCode: 1 }));
      if (t.state === 'crashed.down') break;
      delays.push(t.effects.find((e) => e.type === 'scheduleRestart')!.params.delayMs as number);
      history.push(
        ev('instance.crashed', { reason: 'exit', exitCode: 1 }),
        ev('instance.restart-due'),
        spawned(),
        healthy(),
        running(),
      );
    }
    expect(delays).toEqual([1000, 2000, 4000]);
    const final = given(instanceMachine, history).when(ev('instance.crashed', { reason: 'exit', exitCode: 1 }));
    expect(final.state).toBe('crashed.down');
    expect(restartDelay(s.restart, 10)).toBe(8000);
  });

  it('a long run resets the consecutive restart count', () => {
    const s = spec({ restart: { ...spec().restart, policy: 'on-failure', resetAfterMs: 60_000 } });
    const events = [requested(s), spawned(), healthy(), ev('instance.running', {}, '2026-02-01T00:00:00.000Z')];
    events.push(
      ev('instance.crashed', { exitCode: 1 }, '2026-02-01T00:00:01.000Z'),
      ev('instance.restart-due', {}, '2026-02-01T00:00:02.000Z'),
    );
    events.push(spawned(), healthy(), ev('instance.running', {}, '2026-02-01T00:00:03.000Z'));
    const t = given(instanceMachine, events).when(ev('instance.crashed', { exitCode: 1 }, '2026-02-01T01:00:00.000Z'));
    expect(t.context.restarts).toBe(0);
    expect(t.effects.find((e) => e.type === 'scheduleRestart')!.params.delayMs).toBe(1000);
  });

  it('a crash lands in crashed.backoff exactly when recordCrash plans a restart delay', () => {
    const onFailure = spec({ restart: { ...spec().restart, policy: 'on-failure', maxRestarts: 1 } });
    const cases: [InstanceSpec, MachineEvent[], MachineEvent][] = [
      [spec(), toRunning(), ev('instance.crashed', { exitCode: 1 })],
      [onFailure, toRunning(onFailure), ev('instance.crashed', { exitCode: 1 })],
      [onFailure, toRunning(onFailure), ev('instance.crashed', { reason: 'spawn-error' })],
      [onFailure, [requested(onFailure)], ev('instance.spawn-failed', { reason: 'spawn-error' })],
      [
        onFailure,
        [requested(onFailure), spawned(), healthy()],
        ev('instance.lifecycle-failed', { reason: 'lifecycle-failed' }),
      ],
      [
        onFailure,
        [...toRunning(onFailure), ev('instance.crashed'), ev('instance.restart-due'), spawned(), healthy(), running()],
        ev('instance.crashed'),
      ],
    ];
    const states = cases.map(([, history, crash]) => {
      const t = given(instanceMachine, history).when(crash);
      expect(t.state === 'crashed.backoff').toBe(t.context.nextRestartDelayMs !== null);
      return t.state;
    });
    expect(states).toEqual([
      'crashed.down',
      'crashed.backoff',
      'crashed.down',
      'crashed.down',
      'crashed.backoff',
      'crashed.down',
    ]);
  });

  it('stop during backoff cancels the timer and ends stopped', () => {
    const s = spec({ restart: { ...spec().restart, policy: 'on-failure' } });
    const t = given(instanceMachine, [...toRunning(s), ev('instance.crashed', { exitCode: 1 })]).when(
      ev('instance.stop-requested'),
    );
    expect(t.state).toBe('stopped');
    expect(effectTypes(t)).toEqual(['cancelRestart', 'releasePort']);
  });

  it('running + stop-requested → stopping (onStop, then graceful stop); exited → stopped', () => {
    const t = given(instanceMachine, toRunning()).when(ev('instance.stop-requested', { graceMs: 2000 }));
    expect(t.state).toBe('stopping');
    expect(effectTypes(t)).toEqual(['stopSandbox']);
    const t2 = given(instanceMachine, [...toRunning(), ev('instance.stop-requested')]).when(
      ev('instance.exited', { exitCode: 0 }),
    );
    expect(t2.state).toBe('stopped');
    expect(t2.context.lastExit).toMatchObject({ exitCode: 0 });
    expect(isTerminal(t2.snapshot)).toBe(true);
  });

  it('kill-requested → stopping with forceKill', () => {
    const t = given(instanceMachine, toRunning()).when(ev('instance.kill-requested'));
    expect(t.state).toBe('stopping');
    expect(effectTypes(t)).toEqual(['forceKill', 'stopSandbox']);
  });

  it('pause and resume call the optional hooks', () => {
    const t = given(instanceMachine, toRunning()).when(ev('instance.pause-requested'));
    expect(t.state).toBe('paused');
    expect(t.effects[0]).toEqual({
      type: 'callLifecycle',
      params: { instanceId: 'i1', hooks: ['onPause'], optional: true },
    });
    const t2 = given(instanceMachine, [...toRunning(), ev('instance.pause-requested')]).when(
      ev('instance.resume-requested'),
    );
    expect(t2.state).toBe('running');
  });

  it('a paused app adopted after a supervisor restart comes back paused, no hook run; resumed, it runs', () => {
    const s = spec({ sandbox: 'container' });
    const paused = [...toRunning(s), ev('instance.pause-requested'), ev('instance.adopted', { containerId: 'c1' })];
    const t = given(instanceMachine, paused).when(running());
    expect(t.state).toBe('paused');
    expect(t.effects).toEqual([]);
    expect(t.context).toMatchObject({ paused: true, adopted: true });
    const t2 = given(instanceMachine, [...paused, running()]).when(ev('instance.resume-requested'));
    expect(t2.state).toBe('running');
    expect(t2.context).toMatchObject({ paused: false });
    // Resumed before the restart: adopted as running.
    const resumed = [
      ...toRunning(s),
      ev('instance.pause-requested'),
      ev('instance.resume-requested'),
      ev('instance.adopted', { containerId: 'c1' }),
    ];
    expect(given(instanceMachine, resumed).when(running()).state).toBe('running');
    // A crash while paused: the restarted process is not paused.
    const crashed = [
      ...toRunning(s),
      ev('instance.pause-requested'),
      ev('instance.crashed', { reason: 'exit', exitCode: 1 }),
    ];
    expect(given(instanceMachine, crashed).when(ev('instance.lost')).context).toMatchObject({ paused: false });
  });

  it('adopted after a supervisor restart: reattach without lifecycle hooks, then running', () => {
    const s = spec({ sandbox: 'container' });
    const t = given(instanceMachine, toRunning(s)).when(
      ev('instance.adopted', { containerId: 'c1', host: '10.0.0.2', port: 4100 }),
    );
    expect(t.state).toBe('adopted');
    expect(effectTypes(t)).toEqual(['reattach']);
    expect(t.context).toMatchObject({ adopted: true, containerId: 'c1' });
    const t2 = given(instanceMachine, [...toRunning(s), ev('instance.adopted', { containerId: 'c1' })]).when(running());
    expect(t2.state).toBe('running');
    expect(effectTypes(t2)).toEqual([]);
  });

  it('lost from any live state is terminal', () => {
    for (const history of [[requested()], [requested(), spawned(), healthy()], toRunning()]) {
      const t = given(instanceMachine, history).when(ev('instance.lost', { evidence: { reason: 'container gone' } }));
      expect(t.state).toBe('lost');
      expect(isTerminal(t.snapshot)).toBe(true);
    }
  });

  it('tool grants and revokes update the spec and re-provision in any state', () => {
    const t = given(instanceMachine, toRunning()).when(ev('instance.tool-granted', { tool: 'git' }));
    expect(t.state).toBe('running');
    expect(t.context.spec.tools).toEqual(['bash', 'git']);
    expect(t.effects).toEqual([{ type: 'provisionTools', params: { instanceId: 'i1', tools: ['bash', 'git'] } }]);
    const t2 = given(instanceMachine, [...toRunning(), ev('instance.tool-granted', { tool: 'git' })]).when(
      ev('instance.tool-revoked', { tool: 'bash' }),
    );
    expect(t2.context.spec.tools).toEqual(['git']);
  });

  describe('illegal events are rejected, not applied', () => {
    it.each([
      ['new', [], 'instance.spawned'],
      ['new', [], 'instance.running'],
      ['spawning', [requested()], 'instance.running'],
      ['running', toRunning(), 'instance.healthy'],
      ['running', toRunning(), 'instance.restart-due'],
      ['stopped', [...toRunning(), ev('instance.stop-requested'), ev('instance.exited')], 'instance.stop-requested'],
      ['crashed.down', [...toRunning(), ev('instance.crashed')], 'instance.restart-due'],
    ])('%s rejects %s', (state, history, type) => {
      const g = given(instanceMachine, history as any);
      expect(stateName(g.snapshot)).toBe(state);
      expectRejected(g.when(ev(type)), state);
    });
  });
});
