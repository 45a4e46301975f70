import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { EffectHandlers } from '../../../src/supervisor/host/actor-host.ts';
import type { EventStorePort } from '../../../src/store/port.ts';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import type { InstanceSpec } from '../../../src/machines/instance.machine.ts';
import { SimulatedClock } from '../../support/clock.ts';
import { tempDir } from '../../support/tmp.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const spec = (over: Partial<InstanceSpec> = {}): InstanceSpec => ({
  instanceId: 'i1',
  appId: 'com.example.hello',
  appDir: '/apps/hello',
  sandbox: 'proot',
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart: { policy: 'on-failure', maxRestarts: 2, backoffMs: 30, maxBackoffMs: 100, resetAfterMs: 600_000 },
  ...over,
});

/** The unit tier does no IO beyond its temp dir: no Docker reconciliation or event watch, no workspace watcher. */
const OFFLINE = { reconcile: false, engineWatch: false, watchApps: false } as const;

/** A fake sandbox: spawn succeeds, health matches, hooks succeed. Each call is recorded. */
function fakeInstanceEffects(
  calls: string[],
  store?: () => Pick<EventStorePort, 'streamVersion'>,
): Partial<EffectHandlers<'instance'>> {
  return {
    spawn: async (p, ctx) => {
      // Rule 1: by the time an effect runs, the event that caused it is on disk.
      if (store) calls.push(`spawn@v${await store().streamVersion(ctx.actor.stream)}`);
      else calls.push('spawn');
      await ctx.dispatch({
        type: 'instance.spawned',
        data: { pid: 100 + calls.length, host: '127.0.0.1', port: p.spec.port ?? 4100 },
      });
      calls.push('health');
      await ctx.dispatch({ type: 'instance.healthy', data: { identity: 'match' } });
    },
    callLifecycle: async (p, ctx) => {
      calls.push(`lifecycle:${p.hooks.join(',')}`);
      if (p.hooks.includes('onStart')) await ctx.dispatch({ type: 'instance.running', data: {} });
    },
    stopSandbox: async (_p, ctx) => {
      calls.push('stop');
      await ctx.dispatch({ type: 'instance.exited', data: { exitCode: 0 } });
    },
    forceKill: () => {
      calls.push('forceKill');
    },
    releasePort: () => {
      calls.push('releasePort');
    },
  };
}

describe('actor host', () => {
  it('drives an instance to running through effects; each event is appended before its effects run', async () => {
    const calls: string[] = [];
    const rl: Awaited<ReturnType<typeof createRunlog>> = await createRunlog({
      ...OFFLINE,
      home: tempDir(),
      effects: { instance: fakeInstanceEffects(calls, () => runlogInternals(rl).store) },
    });
    const transitions: string[] = [];
    rl.on('actor:transition', (t) => transitions.push(`${t.from}→${t.to}`));
    await runlogInternals(rl).host.create('instance', 'i1', { type: 'instance.requested', data: { spec: spec() } });
    await rl.idle();
    expect((await rl.inspect('i1')).state).toBe('running');
    expect(calls).toEqual(['spawn@v1', 'health', 'lifecycle:onCreate,onStart']);
    expect((await rl.events('i1')).map((e) => e.type)).toEqual([
      'instance.requested',
      'instance.spawned',
      'instance.healthy',
      'instance.running',
    ]);
    expect(transitions).toEqual(['new→spawning', 'spawning→spawning', 'spawning→healthy', 'healthy→running']);
    expect(await rl.list()).toMatchObject([
      { id: 'i1', kind: 'instance', state: 'running', status: 'active', summary: { appId: 'com.example.hello' } },
    ]);
    await rl.close();
  });

  it('group commit: events of many actors decided at once share one transaction; each actor stays in order', async () => {
    const rl = await createRunlog({ ...OFFLINE, home: tempDir(), supervise: false, readOnly: false });
    const ids = Array.from({ length: 20 }, (_, i) => `g${i}`);
    await Promise.all(
      ids.map((id) =>
        runlogInternals(rl).host.create('instance', id, {
          type: 'instance.requested',
          data: { spec: spec({ instanceId: id }) },
        }),
      ),
    );
    const batches: number[] = [];
    const appendMany = runlogInternals(rl).store.appendMany.bind(runlogInternals(rl).store);
    runlogInternals(rl).store.appendMany = (requests) => {
      batches.push(requests.length);
      return appendMany(requests);
    };
    // Two events per actor, dispatched back to back: the first of each shares a transaction, the second waits
    // for its own actor's first (one actor's events never share a batch out of order).
    const results = await Promise.all(
      ids.flatMap((id, i) => [
        runlogInternals(rl).host.dispatch('instance', id, {
          type: 'instance.spawned',
          data: { pid: 1000 + i, host: '127.0.0.1', port: 4100 + i },
        }),
        runlogInternals(rl).host.dispatch('instance', id, { type: 'instance.healthy', data: { identity: 'match' } }),
      ]),
    );
    expect(results.every((r) => r.accepted)).toBe(true);
    expect(batches).toEqual([20, 20]);
    for (const id of ids) {
      expect((await rl.events(id)).map((e) => [e.version, e.type])).toEqual([
        [1, 'instance.requested'],
        [2, 'instance.spawned'],
        [3, 'instance.healthy'],
      ]);
      expect((await rl.inspect(id)).state).toBe('healthy');
    }
    await rl.close();
  });

  it('group commit: a failed transaction fails every dispatch in it and changes no actor', async () => {
    const rl = await createRunlog({ ...OFFLINE, home: tempDir(), supervise: false, readOnly: false });
    await Promise.all(
      ['f1', 'f2'].map((id) =>
        runlogInternals(rl).host.create('instance', id, {
          type: 'instance.requested',
          data: { spec: spec({ instanceId: id }) },
        }),
      ),
    );
    runlogInternals(rl).store.appendMany = () => {
      throw Object.assign(new Error('disk full'), { code: 'STORE_WRITE' });
    };
    const outcomes = await Promise.allSettled(
      ['f1', 'f2'].map((id) =>
        runlogInternals(rl).host.dispatch('instance', id, {
          type: 'instance.spawned',
          data: { pid: 1, host: '127.0.0.1', port: 4100 },
        }),
      ),
    );
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected']);
    expect(runlogInternals(rl).host.get('instance', 'f1')!.version).toBe(1);
    expect((await rl.inspect('f2')).state).toBe('spawning');
    await rl.close();
  });

  it('records an illegal event as rejected and keeps going', async () => {
    const calls: string[] = [];
    const rl = await createRunlog({ ...OFFLINE, home: tempDir(), effects: { instance: fakeInstanceEffects(calls) } });
    await runlogInternals(rl).host.create('instance', 'i1', { type: 'instance.requested', data: { spec: spec() } });
    await rl.idle();
    const r = await rl.send('instance', 'i1', { type: 'instance.healthy', data: { identity: 'match' } });
    expect(r.accepted).toBe(false);
    const last = (await rl.events('i1')).at(-1)!;
    expect(last.type).toBe('instance.rejected');
    expect(last.data).toEqual({
      rejected: { type: 'instance.healthy', data: { identity: 'match' } },
      state: 'running',
    });
    expect((await rl.inspect('i1')).state).toBe('running');
    await rl.send('instance', 'i1', { type: 'instance.stop-requested', data: {} });
    await rl.idle();
    expect((await rl.inspect('i1')).state).toBe('stopped');
    await rl.close();
  });

  it('an effect that throws becomes a crash event in the log', async () => {
    const rl = await createRunlog({
      ...OFFLINE,
      home: tempDir(),
      effects: {
        instance: {
          spawn: () => {
            throw Object.assign(new Error('proot: not found'), { code: 'ENOENT' });
          },
        },
      },
    });
    const errors: string[] = [];
    rl.on('effect:error', (e) => errors.push(e.error));
    await runlogInternals(rl).host.create('instance', 'i1', {
      type: 'instance.requested',
      data: { spec: spec({ restart: { ...spec().restart, policy: 'never' } }) },
    });
    await rl.idle();
    expect(errors).toEqual(['proot: not found']);
    expect((await rl.inspect('i1')).state).toBe('crashed.down');
    expect((await rl.events('i1')).at(-1)).toMatchObject({
      type: 'instance.crashed',
      data: { reason: 'effect-failed', code: 'ENOENT', effect: 'spawn' },
    });
    await rl.close();
  });

  it('restart with backoff: timers are events; crash → scheduled → due → running again, and app:crashed is announced', async () => {
    const calls: string[] = [];
    const clock = new SimulatedClock();
    const rl = await createRunlog({
      ...OFFLINE,
      home: tempDir(),
      clock,
      effects: { instance: fakeInstanceEffects(calls) },
    });
    const crashed: unknown[] = [];
    rl.on('app:crashed', (p) => crashed.push(p));
    await runlogInternals(rl).host.create('instance', 'i1', { type: 'instance.requested', data: { spec: spec() } });
    await rl.idle();
    await rl.send('instance', 'i1', { type: 'instance.crashed', data: { reason: 'exit', exitCode: 3 } });
    await rl.idle();
    // The first backoff is 30 ms of the simulated clock: nothing fires a millisecond before it.
    clock.advance(29);
    await rl.idle();
    expect((await rl.inspect('i1')).state).toBe('crashed.backoff');
    clock.advance(1);
    await rl.idle();
    expect(crashed).toMatchObject([{ instanceId: 'i1', crash: { exitCode: 3, reason: 'exit' } }]);
    const types = (await rl.events('i1')).map((e) => e.type);
    expect(types.slice(4)).toEqual([
      'instance.crashed',
      'instance.restart-scheduled',
      'instance.restart-due',
      'instance.spawned',
      'instance.healthy',
      'instance.running',
    ]);
    expect(await rl.inspect('i1')).toMatchObject({ state: 'running', summary: { restarts: 1 } });
    await rl.close();
  });

  it('backoff doubles with each consecutive restart and gives up after maxRestarts (on a simulated clock)', async () => {
    const clock = new SimulatedClock();
    const rl = await createRunlog({
      ...OFFLINE,
      home: tempDir(),
      clock,
      effects: { instance: fakeInstanceEffects([]) },
    });
    await runlogInternals(rl).host.create('instance', 'i1', { type: 'instance.requested', data: { spec: spec() } });
    await rl.idle();
    const scheduled = async () =>
      (await rl.events('i1')).filter((e) => e.type === 'instance.restart-scheduled').map((e) => e.data.delayMs);
    for (const delay of [30, 60]) {
      await rl.send('instance', 'i1', { type: 'instance.crashed', data: { reason: 'exit', exitCode: 1 } });
      await rl.idle();
      clock.advance(delay - 1);
      await rl.idle();
      expect((await rl.inspect('i1')).state).toBe('crashed.backoff');
      clock.advance(1);
      await rl.idle();
      expect((await rl.inspect('i1')).state).toBe('running');
    }
    expect(await scheduled()).toEqual([30, 60]);
    // maxRestarts is 2: the third crash in a row stays down, and no timer is left armed.
    await rl.send('instance', 'i1', { type: 'instance.crashed', data: { reason: 'exit', exitCode: 1 } });
    await rl.idle();
    expect((await rl.inspect('i1')).state).toBe('crashed.down');
    expect(clock.pending).toBe(0);
    await rl.close();
  });

  it(
    'a restart timer that came due while the supervisor was down fires once at start (recovered from the log, ' +
      'on a simulated clock)',
    async () => {
      const home = tempDir();
      const clock = new SimulatedClock();
      const calls: string[] = [];
      const rl = await createRunlog({ ...OFFLINE, home, clock, effects: { instance: fakeInstanceEffects(calls) } });
      await runlogInternals(rl).host.create('instance', 'i1', { type: 'instance.requested', data: { spec: spec() } });
      await rl.idle();
      await rl.send('instance', 'i1', { type: 'instance.crashed', data: { exitCode: 1 } });
      await rl.idle();
      expect((await rl.inspect('i1')).state).toBe('crashed.backoff');
      expect((await rl.events('i1')).at(-1)).toMatchObject({
        type: 'instance.restart-scheduled',
        data: { attempt: 1, delayMs: 30 },
      });
      // The supervisor "dies" with its timer armed (close drops it): it never fires in this process.
      await rl.close();
      clock.advance(1000);

      const calls2: string[] = [];
      const rl2 = await createRunlog({ ...OFFLINE, home, clock, effects: { instance: fakeInstanceEffects(calls2) } });
      // Recovered from the log at start: the machine re-arms the timer at the due time it holds, overdue: it fires now.
      clock.advance(0);
      await rl2.idle();
      expect((await rl2.inspect('i1')).state).toBe('running');
      const after = (await rl2.events('i1')).map((e) => e.type).slice(-6);
      expect(after).toEqual([
        'instance.restart-scheduled',
        'instance.recovered',
        'instance.restart-due',
        'instance.spawned',
        'instance.healthy',
        'instance.running',
      ]);
      expect((await rl2.events('i1')).find((e) => e.type === 'instance.recovered')).toMatchObject({
        version: 7,
        data: { version: 6 },
        meta: { source: 'rehydration' },
      });
      expect((await rl2.events('i1')).filter((e) => e.type === 'instance.restart-due')).toHaveLength(1);
      expect(calls2[0]).toBe('spawn');
      await rl2.close();
    },
  );

  it('a restart timer not yet due when the supervisor restarts fires at its recorded due time, not earlier', async () => {
    const home = tempDir();
    const clock = new SimulatedClock();
    const slow = { ...spec().restart, backoffMs: 10_000, maxBackoffMs: 10_000 };
    const rl = await createRunlog({ ...OFFLINE, home, clock, effects: { instance: fakeInstanceEffects([]) } });
    await runlogInternals(rl).host.create('instance', 'i1', {
      type: 'instance.requested',
      data: { spec: spec({ restart: slow }) },
    });
    await rl.idle();
    await rl.send('instance', 'i1', { type: 'instance.crashed', data: { exitCode: 1 } });
    await rl.idle();
    await rl.close();
    clock.advance(4000); // down for 4 s of the 10 s backoff

    const rl2 = await createRunlog({ ...OFFLINE, home, clock, effects: { instance: fakeInstanceEffects([]) } });
    await rl2.idle();
    expect(clock.pending).toBe(1);
    clock.advance(5999);
    await rl2.idle();
    expect((await rl2.inspect('i1')).state).toBe('crashed.backoff');
    clock.advance(1);
    await rl2.idle();
    expect((await rl2.inspect('i1')).state).toBe('running');
    expect((await rl2.events('i1')).filter((e) => e.type === 'instance.restart-scheduled')).toHaveLength(1);
    await rl2.close();
  });

  it('a restart never scheduled (the supervisor died before recording its due time) is planned again at start', async () => {
    const home = tempDir();
    const clock = new SimulatedClock();
    const rl = await createRunlog({
      ...OFFLINE,
      home,
      clock,
      effects: { instance: { ...fakeInstanceEffects([]), scheduleRestart: () => undefined } },
    });
    await runlogInternals(rl).host.create('instance', 'i1', { type: 'instance.requested', data: { spec: spec() } });
    await rl.idle();
    await rl.send('instance', 'i1', { type: 'instance.crashed', data: { exitCode: 1 } });
    await rl.idle();
    expect((await rl.events('i1')).some((e) => e.type === 'instance.restart-scheduled')).toBe(false);
    await rl.close();

    const rl2 = await createRunlog({ ...OFFLINE, home, clock, effects: { instance: fakeInstanceEffects([]) } });
    await rl2.idle();
    expect((await rl2.events('i1')).map((e) => e.type).slice(-2)).toEqual([
      'instance.recovered',
      'instance.restart-scheduled',
    ]);
    clock.advance(30);
    await rl2.idle();
    expect((await rl2.inspect('i1')).state).toBe('running');
    await rl2.close();
  });

  it('rebuild recomputes the projection from events alone', async () => {
    const calls: string[] = [];
    const rl = await createRunlog({ ...OFFLINE, home: tempDir(), effects: { instance: fakeInstanceEffects(calls) } });
    await runlogInternals(rl).host.create('instance', 'a', {
      type: 'instance.requested',
      data: { spec: spec({ instanceId: 'a' }) },
    });
    await runlogInternals(rl).host.create('instance', 'b', {
      type: 'instance.requested',
      data: { spec: spec({ instanceId: 'b' }) },
    });
    await rl.idle();
    await rl.send('instance', 'b', { type: 'instance.stop-requested', data: {} });
    await rl.idle();
    const before = await rl.list({ all: true });
    await runlogInternals(rl).store.replaceActorRows([]);
    expect(await rl.list({ all: true })).toEqual([]);
    expect(await rl.rebuild()).toEqual({ actors: 2, events: 10 });
    expect(await rl.list({ all: true })).toEqual(before);
    expect((await rl.list()).map((r) => r.id)).toEqual(['a']);
    await rl.close();
  });

  it('replay shows state after each event and at a chosen version', async () => {
    const calls: string[] = [];
    const rl = await createRunlog({ ...OFFLINE, home: tempDir(), effects: { instance: fakeInstanceEffects(calls) } });
    await runlogInternals(rl).host.create('instance', 'i1', { type: 'instance.requested', data: { spec: spec() } });
    await rl.idle();
    const full = await rl.replay('i1');
    expect(full.steps.map((s) => `${s.from}→${s.to}`)).toEqual([
      'new→spawning',
      'spawning→spawning',
      'spawning→healthy',
      'healthy→running',
    ]);
    expect(full.steps[0]!.effects.map((e) => e.type)).toEqual(['spawn']);
    const at2 = await rl.replay('i1', { to: 2 });
    expect(at2.state).toBe('spawning');
    expect(at2.context).toMatchObject({ pid: expect.any(Number) });
    await expect(rl.replay('i1', { to: 99 })).rejects.toThrow(/cannot replay to 99/);
    await expect(rl.inspect('nope')).rejects.toThrow(/not found/);
    await rl.close();
  });

  it('inspection without supervision runs no effects', async () => {
    const home = tempDir();
    const rl = await createRunlog({ ...OFFLINE, home, effects: { instance: { spawn: () => undefined } } });
    await runlogInternals(rl).host.create('instance', 'i1', { type: 'instance.requested', data: { spec: spec() } });
    await rl.close();
    const ro = await createRunlog({ ...OFFLINE, db: join(home, 'runlog.db'), supervise: false });
    expect((await ro.inspect('i1')).state).toBe('spawning');
    expect(await ro.events('i1')).toHaveLength(1);
    await ro.close();
  });
});
