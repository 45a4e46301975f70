// A spawn that this node may no longer carry out removes what it started (src/supervisor/instances/instances.ts): its
// `instance.spawned` refused (FENCED: the lease went to another node during the spawn), or the instance let go of
// (relinquish: the lease lost, or the node fencing itself) while the sandbox was still being created. The runner is
// a stand-in that records what it is asked; the supervisor's wiring is the real one.
import { describe, expect, it } from 'vitest';
import type { AppSandboxRunner, SpawnResult } from '../../../src/adapters/sandbox/app-sandbox-runner.ts';
import type { LiveActor } from '../../../src/supervisor/host/actor-host.ts';
import { InstanceSupervisor } from '../../../src/supervisor/instances/instances.ts';
import { FencedError } from '../../../src/domain/errors.ts';
import type { InstanceSpec } from '../../../src/machines/instance.machine.ts';
import { HELLO_APP_DIR } from '../../support/apps.ts';
import { tempDir } from '../../support/tmp.ts';

const result: SpawnResult = {
  pid: 42,
  containerId: 'c0ffee',
  host: '172.17.0.9',
  port: 4100,
  identity: 'match',
  healthyAfterMs: 5,
};

async function supervisor(host: Record<string, unknown> = {}) {
  const asked: string[] = [];
  let finish: (r: SpawnResult) => void = () => undefined;
  const runner = {
    kind: 'container',
    spawn: () => {
      asked.push('spawn');
      return new Promise<SpawnResult>((r) => (finish = r));
    },
    forceKill: async (id: string) => void asked.push(`forceKill ${id}`),
    // A hook whose sandbox was killed under it: the runner no longer knows the instance.
    callLifecycle: async (id: string, hook: string) => {
      asked.push(`${hook} ${id}`);
      throw Object.assign(new Error(`[ContainerRunner] no running instance ${id}`), { code: 'NOT_RUNNING' });
    },
    getPort: () => null,
    onExit: () => () => undefined,
    close: async () => undefined,
  } as unknown as AppSandboxRunner;
  const home = tempDir();
  const sup = new InstanceSupervisor(
    {
      home,
      parts: {
        setupDir: home,
        rootfs: home,
        registry: '127.0.0.1:5000',
        images: {},
        dockerSocket: '/nonexistent.sock',
      },
      runners: { container: runner },
      portRange: { min: 47100, max: 47199 },
    },
    () => ({ live: () => [], ...host }) as never,
  );
  // Installed into the supervisor's workspace, as a spawn request is.
  const spec: InstanceSpec = await sup.prepare(HELLO_APP_DIR, 'container', 'i1');
  const actor = { id: 'i1', kind: 'instance', stream: 'instance-i1' } as LiveActor;
  return { sup, spec, actor, asked, finish: (r: SpawnResult) => finish(r) };
}

describe('a spawn this node may no longer carry out', () => {
  it('whose instance.spawned is refused (FENCED) force-kills the sandbox it started and fails', async () => {
    const t = await supervisor();
    const dispatched: string[] = [];
    const spawning = t.sup.handlers().spawn(
      { spec: t.spec } as never,
      {
        actor: t.actor,
        dispatch: async (e: { type: string }) => {
          dispatched.push(e.type);
          throw new FencedError('instance-i1', 'a');
        },
      } as never,
    );
    await new Promise((r) => setTimeout(r, 10));
    t.finish(result);
    await expect(spawning).rejects.toThrow(FencedError);
    expect(dispatched).toEqual(['instance.spawned']);
    expect(t.asked).toEqual(['spawn', 'forceKill i1']);
    await t.sup.close();
  });

  it(
    'let go of while its sandbox is being created: ' +
      'killed at once and again when the runner hands it over, nothing dispatched',
    async () => {
      const t = await supervisor();
      const dispatched: string[] = [];
      const spawning = t.sup
        .handlers()
        .spawn(
          { spec: t.spec } as never,
          { actor: t.actor, dispatch: async (e: { type: string }) => void dispatched.push(e.type) } as never,
        );
      await new Promise((r) => setTimeout(r, 10));
      expect(t.sup.sandboxed()).toEqual(['i1']); // in flight: the self-fence stops it too
      await t.sup.relinquish('i1');
      expect(t.asked).toEqual(['spawn', 'forceKill i1']);
      t.finish(result);
      await spawning;
      expect(t.asked).toEqual(['spawn', 'forceKill i1', 'forceKill i1']);
      expect(dispatched).toEqual([]);
      expect(t.sup.sandboxed()).toEqual([]);
      await t.sup.close();
    },
  );

  it('a hook cut short because this node let go of the sandbox records no lifecycle failure; the same failure otherwise does', async () => {
    const t = await supervisor();
    const dispatched: { type: string; data?: Record<string, unknown> }[] = [];
    const ctx = {
      actor: { ...t.actor, snapshot: { context: { identity: 'match', spec: { sandbox: 'container' } } } },
      dispatch: async (e: { type: string }) => void dispatched.push(e),
    } as never;
    await t.sup.handlers().callLifecycle({ hooks: ['onStart'] } as never, ctx);
    expect(dispatched.map((e) => [e.type, e.data?.reason])).toEqual([
      ['instance.lifecycle-failed', 'lifecycle-failed'],
    ]);
    dispatched.length = 0;
    await t.sup.relinquish('i1', 'self-fence');
    await t.sup.handlers().callLifecycle({ hooks: ['onStart'] } as never, ctx);
    expect(dispatched).toEqual([]);
    expect(t.asked.filter((a) => a.startsWith('onStart'))).toEqual(['onStart i1', 'onStart i1']);
    await t.sup.close();
  });

  it(
    'once renewals are answered again, an instance the self-fence stopped is recorded crashed ' +
      '(self-fenced); one whose lease was lost, or that stopped, is not',
    async () => {
      const states: Record<string, string> = { i1: 'healthy', i2: 'running', i3: 'stopping' };
      const dispatched: [string, string, unknown][] = [];
      const t = await supervisor({
        get: (_kind: string, id: string) =>
          states[id] ? { id, kind: 'instance', snapshot: { value: states[id], context: {} } } : undefined,
        dispatch: async (_kind: string, id: string, e: { type: string; data: { reason: string } }) => {
          dispatched.push([id, e.type, e.data.reason]);
          if (id === 'i2') throw new FencedError('instance-i2', 'a'); // taken meanwhile: nothing to record here
          return { accepted: true };
        },
      });
      for (const id of ['i1', 'i2', 'i3']) await t.sup.relinquish(id, 'self-fence');
      await t.sup.relinquish('i4'); // its lease was lost: another node's now
      await t.sup.recordSelfFenced(1500);
      expect(dispatched).toEqual([
        ['i1', 'instance.crashed', 'self-fenced'],
        ['i2', 'instance.crashed', 'self-fenced'],
      ]);
      await t.sup.recordSelfFenced(1500); // recorded once
      expect(dispatched).toHaveLength(2);
      await t.sup.close();
    },
  );
});
