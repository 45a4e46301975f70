// Recovery against the real parts: a supervisor goes away (closed, or SIGKILLed in a child process at a named
// fault point), a new one opens the same home, and what it finds in Docker and /proc becomes events with their
// evidence. Adopted containers keep running untouched (no hook re-runs), exits while down are crashes with their
// code, vanished containers are lost, PRoot children (dead with their supervisor) crash and restart by policy,
// containers and volumes no actor owns are recorded and removed, an overdue restart timer fires exactly once, and
// executions interrupted at any step still end with their real result.
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReconcileOptions } from '../../../src/supervisor/recovery/reconciler.ts';
import { RECONCILER_STREAM, type ReconcileReport } from '../../../src/supervisor/recovery/reconcile-run.ts';
import { machineCanAdoptDiscovered } from '../../../src/supervisor/recovery/strays.ts';
import { createRunlog, type Runlog, type RunlogOptions } from '../../../src/supervisor/runlog.ts';
import { SqlitePortStore } from '../../../src/store/sqlite/port-adapter.ts';
import { collect } from '../../../src/store/port.ts';
import { alive, getJson, requireDockerAppBase, requireProot, until } from '../../support/apps.ts';
import { helloApp, homeWithPolicy, startChild, type ChildSupervisor } from '../../support/child-supervisor.ts';
import { docker, imageRef, requireRegistry } from '../../support/docker.ts';
import { publishCodeSource, publishNodeRuntime, startTestPds, type TestPds } from '../../support/pds.ts';
import { expectSnapshotPlusTailEqualsFold } from '../../support/snapshot-property.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const LABELS = { 'runlog.test': '1' };
const PORTS = { min: 4700, max: 4799 };
// Archive limits of our own: the cached runtime volume is this suite's, not shared with other suites' runs.
const POLICY = JSON.stringify({ archive: { maxEntries: 19_990 } });
const RESTART = { policy: 'on-failure', maxRestarts: 5, backoffMs: 200, maxBackoffMs: 200 };
const CODE = `
export function greet(input, context) { context.log('greeting'); return { greeting: 'Hello, ' + input.name + '!' }; }
export async function slow(input, context) {
  context.log('started');
  await new Promise((r) => setTimeout(r, input.ms ?? 1500));
  return { done: true, n: input.n ?? null };
}
`;

let root: string;
let network: string;
let pds: TestPds;
let runtimeUri: string;
let nonce = 0;
const opened: Runlog[] = [];
const children: ChildSupervisor[] = [];

const newHome = (name: string): string => homeWithPolicy(root, name, POLICY);

async function open(home: string, extra: Partial<RunlogOptions> = {}): Promise<Runlog> {
  const rl = await createRunlog({
    home,
    labels: LABELS,
    containerNetwork: network,
    portRange: PORTS,
    healthTimeoutMs: 20_000,
    killGraceMs: 2000,
    watchApps: false,
    atproto: { plcUrl: pds.plcUrl },
    log: () => undefined,
    ...extra,
  });
  opened.push(rl);
  return rl;
}

function child(home: string, fault?: { point: string; event?: string }): ChildSupervisor {
  const c = startChild(
    { home, labels: LABELS, network, portRange: PORTS, plcUrl: pds.plcUrl, healthTimeoutMs: 20_000, killGraceMs: 2000 },
    fault ? { RUNLOG_FAULT: fault.point, ...(fault.event ? { RUNLOG_FAULT_EVENT: fault.event } : {}) } : {},
  );
  children.push(c);
  return c;
}

/** Closes a supervisor (containers keep running, PRoot children stop) and removes what it left in Docker. */
async function shutdown(rl: Runlog): Promise<void> {
  await rl.close().catch(() => undefined);
  const mine = await docker.listContainers({
    all: true,
    filters: JSON.stringify({ label: [`runlog.home=${rl.home}`] }),
  });
  await Promise.all(
    mine.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  );
}

const containersOf = async (stream: string) =>
  docker.listContainers({ all: true, filters: JSON.stringify({ label: [`runlog.stream=${stream}`] }) });
const app = (appId: string, sandbox: 'proot' | 'container', restart: Record<string, unknown> = RESTART) =>
  helloApp(root, { appId, sandbox, restart });
const reconcileWith = (rl: Runlog, o: ReconcileOptions) =>
  (rl.reconcile as (o: ReconcileOptions) => Promise<ReconcileReport>)(o);

async function publishFreshCode(): Promise<string> {
  const n = ++nonce;
  return publishCodeSource(pds, `author${n}-${process.pid}.test`, root, runtimeUri, `// ${n} ${Date.now()}\n${CODE}`);
}

beforeAll(async () => {
  requireProot();
  await requireDockerAppBase();
  await requireRegistry();
  root = mkdtempSync(join(tmpdir(), 'runlog-recovery-'));
  network = `runlog-rec-${process.pid}`;
  pds = await startTestPds();
  runtimeUri = await publishNodeRuntime(pds, `runtimes-${process.pid}.test`);
}, 180_000);

afterAll(async () => {
  for (const c of children) await c.sigkill().catch(() => undefined);
  for (const rl of opened) await rl.close().catch(() => undefined);
  const mine = await docker.listContainers({ all: true, filters: JSON.stringify({ label: ['runlog.test=1'] }) });
  await Promise.all(
    mine
      .filter((c) => (c.Labels['runlog.home'] ?? '').startsWith(root ?? '\0'))
      .map((c) =>
        docker
          .getContainer(c.Id)
          .remove({ force: true, v: true })
          .catch(() => undefined),
      ),
  );
  const vols = (await docker.listVolumes({ filters: JSON.stringify({ label: ['runlog.test=1'] }) })).Volumes ?? [];
  await Promise.all(
    vols
      .filter((v) => (v.Labels?.['runlog.home'] ?? '').startsWith(root ?? '\0'))
      .map((v) =>
        docker
          .getVolume(v.Name)
          .remove()
          .catch(() => undefined),
      ),
  );
  await docker
    .getNetwork(network)
    .remove()
    .catch(() => undefined);
  await pds?.close();
  if (root) rmSync(root, { recursive: true, force: true });
}, 120_000);

describe('app instances after a supervisor restart', () => {
  it('a running container is adopted as it is: same container, no hook re-run, exit watcher and logs re-attached', async () => {
    const home = newHome('adopt');
    const rl1 = await open(home);
    const v = await rl1.spawnApp({ appDir: app('com.example.adopt', 'container') });
    const ctx = v.context as any;
    const before = await docker.getContainer(ctx.containerId).inspect();
    await rl1.close();

    const rl2 = await open(home);
    try {
      await until('running again', async () => (await rl2.inspect(v.id)).state === 'running');
      const evs = await rl2.events(v.id);
      expect(evs.map((e) => e.type)).toEqual([
        'instance.requested',
        'instance.spawned',
        'instance.healthy',
        'instance.running',
        'instance.adopted',
        'instance.running',
      ]);
      expect(evs[4]).toMatchObject({
        meta: { source: 'reconciler' },
        data: {
          containerId: ctx.containerId,
          evidence: { containerId: ctx.containerId, state: 'running', startedAt: before.State.StartedAt },
        },
      });
      expect(evs[5]!.data).toMatchObject({ adopted: true });
      const after = await docker.getContainer(ctx.containerId).inspect();
      expect(after.State.StartedAt).toBe(before.State.StartedAt);
      expect(after.RestartCount).toBe(0);
      // The app saw onCreate and onStart once, from the first supervisor: adoption ran no hook.
      const health = await getJson(ctx.host, ctx.port, '/api/lifecycle/health');
      expect(health.body).toMatchObject({ instanceId: v.id, events: ['onCreate', 'onStart'] });
      expect((await rl2.inspect(v.id)).context).toMatchObject({ adopted: true, containerId: ctx.containerId });
      expect(() => rl2.logs(v.id)).not.toThrow();
      // The exit watcher is back: a kill from outside is a crash with its code, and the policy restarts it.
      await docker.getContainer(ctx.containerId).kill();
      await until(
        'crash recorded',
        async () => (await rl2.events(v.id)).some((e) => e.type === 'instance.crashed'),
        20_000,
      );
      expect((await rl2.events(v.id)).find((e) => e.type === 'instance.crashed')!.data).toMatchObject({
        reason: 'exit',
        exitCode: 137,
      });
      await until(
        'restarted',
        async () =>
          (await rl2.inspect(v.id)).state === 'running' &&
          ((await rl2.inspect(v.id)).context as any).containerId !== ctx.containerId,
        30_000,
      );
    } finally {
      await shutdown(rl2);
    }
  });

  it('a container that exited while the supervisor was down: crashed with its exit code, removed, restarted by policy', async () => {
    const home = newHome('exited');
    const rl1 = await open(home);
    const v = await rl1.spawnApp({ appDir: app('com.example.exited', 'container') });
    const containerId = (v.context as any).containerId as string;
    await rl1.close();
    await docker.getContainer(containerId).kill();
    await until('exited', async () => (await docker.getContainer(containerId).inspect()).State.Status === 'exited');

    const rl2 = await open(home);
    try {
      const crash = (await rl2.events(v.id)).find((e) => e.type === 'instance.crashed')!;
      expect(crash).toMatchObject({
        meta: { source: 'reconciler' },
        data: { reason: 'exit', exitCode: 137, evidence: { containerId, state: 'exited', exitCode: 137 } },
      });
      expect((crash.data.evidence as any).finishedAt).toEqual(expect.any(String));
      await until('restarted by policy', async () => (await rl2.inspect(v.id)).state === 'running', 30_000);
      expect((await rl2.inspect(v.id)).context).toMatchObject({ restarts: 1 });
      expect(((await rl2.inspect(v.id)).context as any).containerId).not.toBe(containerId);
      await expect(docker.getContainer(containerId).inspect()).rejects.toMatchObject({ statusCode: 404 });
    } finally {
      await shutdown(rl2);
    }
  });

  it('a container frozen with docker pause while the supervisor was down: adopted as it is, never removed', async () => {
    const home = newHome('frozen');
    const rl1 = await open(home);
    const v = await rl1.spawnApp({ appDir: app('com.example.frozen', 'container') });
    const containerId = (v.context as any).containerId as string;
    await rl1.close();
    await docker.getContainer(containerId).pause();
    const rl2 = await open(home);
    try {
      const adopted = (await rl2.events(v.id)).find((e) => e.type === 'instance.adopted');
      expect(adopted, (await rl2.events(v.id)).map((e) => e.type).join(', ')).toMatchObject({
        data: { containerId, evidence: { containerId, state: 'paused' } },
      });
      expect((await rl2.events(v.id)).some((e) => e.type === 'instance.crashed')).toBe(false);
      expect((await docker.getContainer(containerId).inspect()).State.Status).toBe('paused');
      await docker.getContainer(containerId).unpause();
      await until('running again', async () => (await rl2.inspect(v.id)).state === 'running');
      expect(((await rl2.inspect(v.id)).context as any).containerId).toBe(containerId);
    } finally {
      await docker
        .getContainer(containerId)
        .unpause()
        .catch(() => undefined);
      await shutdown(rl2);
    }
  });

  it('a container that is gone: lost, with the evidence', async () => {
    const home = newHome('gone');
    const rl1 = await open(home);
    const v = await rl1.spawnApp({ appDir: app('com.example.gone', 'container') });
    const containerId = (v.context as any).containerId as string;
    await rl1.close();
    await docker.getContainer(containerId).remove({ force: true });

    const rl2 = await open(home);
    try {
      expect((await rl2.inspect(v.id)).state).toBe('lost');
      expect((await rl2.events(v.id)).at(-1)).toMatchObject({
        type: 'instance.lost',
        meta: { source: 'reconciler' },
        data: { evidence: { containerId, observed: 'no container with this stream label' } },
      });
      expect((await rl2.list()).map((a) => a.id)).not.toContain(v.id);
    } finally {
      await shutdown(rl2);
    }
  });

  it(
    'a PRoot instance (its child stopped with the supervisor closed gracefully): ' +
      'suspended, then spawned again without a crash',
    async () => {
      const home = newHome('proot');
      const rl1 = await open(home);
      const v = await rl1.spawnApp({ appDir: app('com.example.prootrec', 'proot') });
      const pid = (v.context as any).pid as number;
      await rl1.close();
      await until('proot gone', () => !alive(pid));

      const rl2 = await open(home);
      try {
        await until('running again', async () => (await rl2.inspect(v.id)).state === 'running', 30_000);
        const types = (await rl2.events(v.id)).map((e) => e.type);
        // (A supervisor killed outright records no suspension: its next start counts a crash, test/int/supervisor/graceful-stop.test.ts.)
        expect(types.slice(4)).toEqual([
          'instance.suspended',
          'instance.recovered',
          'instance.spawned',
          'instance.healthy',
          'instance.running',
        ]);
        expect((await rl2.events(v.id))[4]).toMatchObject({
          meta: { source: 'shutdown' },
          data: { reason: 'supervisor-stop', evidence: { sandbox: 'proot', pid, state: 'running' } },
        });
        expect((await rl2.events(v.id))[5]).toMatchObject({ meta: { source: 'reconciler' } });
        const ctx = (await rl2.inspect(v.id)).context as any;
        expect(ctx.pid).not.toBe(pid);
        expect(ctx.restarts).toBe(0);
        expect((await getJson(ctx.host, ctx.port, '/api/lifecycle/health')).body.events).toEqual([
          'onCreate',
          'onStart',
        ]);
      } finally {
        await shutdown(rl2);
      }
    },
  );

  it('a restart timer that came due while the supervisor was down fires exactly once', async () => {
    const home = newHome('timer');
    const rl1 = await open(home);
    const v = await rl1.spawnApp({
      appDir: app('com.example.timer', 'proot', {
        policy: 'on-failure',
        maxRestarts: 3,
        backoffMs: 2500,
        maxBackoffMs: 2500,
      }),
    });
    process.kill(-(v.context as any).pid, 'SIGKILL');
    await until(
      'restart scheduled',
      async () => (await rl1.events(v.id)).some((e) => e.type === 'instance.restart-scheduled'),
      10_000,
    );
    const dueAt = String((await rl1.events(v.id)).find((e) => e.type === 'instance.restart-scheduled')!.data.dueAt);
    await rl1.close(); // the supervisor is gone before the timer fires
    await until('overdue', () => Date.now() > Date.parse(dueAt) + 300, 10_000);
    expect(runlogInternals(rl1).store).toBeDefined();

    const reopenedAt = new Date().toISOString();
    const rl2 = await open(home);
    try {
      await until('running again', async () => (await rl2.inspect(v.id)).state === 'running', 30_000);
      await new Promise((r) => setTimeout(r, 1000));
      const due = (await rl2.events(v.id)).filter((e) => e.type === 'instance.restart-due');
      expect(due).toHaveLength(1);
      expect(due[0]!.data).toMatchObject({ dueAt });
      expect(due[0]!.at >= reopenedAt).toBe(true);
      expect((await rl2.events(v.id)).filter((e) => e.type === 'instance.spawned')).toHaveLength(2);
    } finally {
      await shutdown(rl2);
    }
  });

  it('stop interrupted by a SIGKILL (after stop-requested was appended): the next supervisor finishes the stop', async () => {
    const home = newHome('stopping');
    const c = child(home, { point: 'after-append', event: 'instance.stop-requested' });
    expect(await c.ready).toBe(true);
    const v = await c.request<{ id: string; context: any }>('spawn', {
      appDir: app('com.example.stopping', 'container'),
    });
    c.send('stop', { instanceId: v.id });
    expect((await c.exited).signal).toBe('SIGKILL');
    expect((await containersOf(`instance-${v.id}`)).map((x) => x.State)).toEqual(['running']);

    const rl2 = await open(home);
    try {
      await until('stopped', async () => (await rl2.inspect(v.id)).state === 'stopped', 30_000);
      const types = (await rl2.events(v.id)).map((e) => e.type);
      // The recovery is a fact in the log: the machine entered stopping again, and so stopped the container again.
      expect(types.slice(-3)).toEqual(['instance.stop-requested', 'instance.recovered', 'instance.exited']);
      expect((await rl2.events(v.id)).at(-2)).toMatchObject({
        meta: { source: 'reconciler' },
        data: { version: types.length - 2, evidence: { state: 'running' } },
      });
      await until('container gone', async () =>
        (await containersOf(`instance-${v.id}`)).every((x) => x.State !== 'running'),
      );
    } finally {
      await shutdown(rl2);
    }
  });

  it('reconciling on demand leaves what this supervisor runs alone', async () => {
    const home = newHome('ondemand');
    const rl = await open(home);
    try {
      const a = await rl.spawnApp({ appDir: app('com.example.ondemandc', 'container') });
      const b = await rl.spawnApp({ appDir: app('com.example.ondemandp', 'proot') });
      const report = await rl.reconcile();
      expect(report).toEqual({ dryRun: false, actions: [], unreachable: [] });
      expect((await rl.inspect(a.id)).version).toBe(4);
      expect((await rl.inspect(b.id)).version).toBe(4);
    } finally {
      await shutdown(rl);
    }
  });

  it('Docker unreachable: reconciliation reports it and leaves container instances as logged', async () => {
    const home = newHome('nodocker');
    const rl1 = await open(home);
    const v = await rl1.spawnApp({ appDir: app('com.example.nodocker', 'container') });
    await rl1.close();
    const rl2 = await open(home, { parts: { dockerSocket: join(root, 'no-such-docker.sock') } });
    try {
      const report = await rl2.reconcile();
      expect(report.unreachable.join('\n')).toMatch(/^docker: /);
      expect(report.actions).toEqual([]);
      expect((await rl2.inspect(v.id)).state).toBe('running');
      expect(await rl2.events(v.id)).toHaveLength(4);
    } finally {
      await shutdown(rl2);
    }
  });
});

describe('containers and volumes no actor owns', () => {
  let home: string;
  let rl: Runlog;
  const ids: Record<string, string> = {};
  const vol = (name: string) => `runlog-code-${name}-${process.pid}`;

  beforeAll(async () => {
    home = newHome('strays');
    const rl1 = await open(home);
    // A stream that is terminal in the log…
    const v = await rl1.spawnApp({ appDir: app('com.example.strayed', 'container') });
    await rl1.stop(v.id);
    await rl1.close();
    ids.stoppedInstance = v.id;
    const image = imageRef('app-base');
    const mk = async (
      labels: Record<string, string>,
      start: boolean,
      mounts: { Type: 'volume'; Source: string; Target: string }[] = [],
    ) => {
      const c = await docker.createContainer({
        Image: image,
        Entrypoint: ['/usr/local/bin/node', '-e', 'setInterval(() => {}, 1e9)'],
        Labels: { ...LABELS, 'runlog.home': home, ...labels },
        HostConfig: { NetworkMode: 'none', Mounts: mounts },
      });
      if (start) await c.start();
      return c.id;
    };
    const volume = (name: string, labels: Record<string, string>) =>
      docker.createVolume({ Name: name, Labels: { ...LABELS, 'runlog.home': home, ...labels } });
    await volume(vol('unsealed'), {
      'runlog.volume-kind': 'code',
      'runlog.cache-key': 'code sha256:unsealed',
      'runlog.stream': 'execution-exec_GHOST',
    });
    await volume(vol('kept'), { 'runlog.volume-kind': 'code', 'runlog.cache-key': 'code sha256:kept' });
    await volume(`${vol('kept')}-sealed`, { 'runlog.seal-for': vol('kept'), 'runlog.cache-key': 'code sha256:kept' });
    await volume(`${vol('gone')}-sealed`, { 'runlog.seal-for': vol('gone'), 'runlog.cache-key': 'code sha256:gone' });
    // …with a container still running under its name; an instance container no stream knows; an execution's
    // container and a materializer's carrier whose execution the log never heard of.
    ids.afterStop = await mk(
      { 'runlog.stream': `instance-${v.id}`, 'runlog.kind': 'instance', 'runlog.app': 'com.example.strayed' },
      true,
    );
    ids.ghostInstance = await mk(
      { 'runlog.stream': 'instance-ghost1', 'runlog.kind': 'instance', 'runlog.app': 'com.example.ghost' },
      true,
    );
    ids.ghostExecution = await mk({ 'runlog.stream': 'execution-exec_GHOST', 'runlog.kind': 'execution' }, false);
    ids.carrier = await mk(
      {
        'runlog.stream': 'execution-exec_GHOST',
        'runlog.kind': 'materializer',
        'runlog.materializing': vol('unsealed'),
      },
      false,
      [{ Type: 'volume', Source: vol('unsealed'), Target: '/at-run-output' }],
    );
    rl = await open(home, { reconcile: false });
  });

  afterAll(async () => rl && shutdown(rl));

  it('a dry run reports every one of them and changes nothing', async () => {
    const report = await rl.reconcile({ dryRun: true });
    const discovered = report.actions.filter((a) => a.action === 'discovered');
    expect(discovered.map((a) => a.evidence.containerId ?? a.evidence.volume).sort()).toEqual(
      [
        ids.afterStop,
        ids.ghostInstance,
        ids.ghostExecution,
        ids.carrier,
        vol('unsealed'),
        `${vol('gone')}-sealed`,
      ].sort(),
    );
    expect(report.actions.filter((a) => a.action === 'removed')).toHaveLength(6);
    expect(await collect(runlogInternals(rl).store.readStream(RECONCILER_STREAM))).toEqual([]);
    for (const id of [ids.afterStop, ids.ghostInstance, ids.ghostExecution, ids.carrier])
      expect((await docker.getContainer(id!).inspect()).Id).toBe(id);
  });

  it('each is recorded with its evidence, then removed (orphanPolicy remove, the default); sealed caches stay', async () => {
    const report = await rl.reconcile();
    expect(report.actions.filter((a) => a.action === 'removed')).toHaveLength(6);
    const facts = await collect(runlogInternals(rl).store.readStream(RECONCILER_STREAM));
    const discovered = facts.filter((e) => e.type === 'reconciler.discovered');
    expect(discovered).toHaveLength(6);
    const byContainer = (id: string) => discovered.find((e) => (e.data.evidence as any).containerId === id)!;
    expect(byContainer(ids.ghostInstance!).data).toMatchObject({
      object: 'container',
      kind: 'instance',
      stream: 'instance-ghost1',
      decision: 'remove',
      evidence: {
        state: 'running',
        exitCode: null,
        startedAt: expect.any(String),
        reason: 'no stream in the log knows it',
        labels: { 'runlog.app': 'com.example.ghost' },
      },
    });
    expect(byContainer(ids.afterStop!).data).toMatchObject({
      kind: 'instance',
      evidence: { state: 'running', reason: 'its instance is stopped in the log' },
    });
    expect(byContainer(ids.ghostExecution!).data).toMatchObject({
      kind: 'execution',
      evidence: { state: 'created', startedAt: null },
    });
    expect(byContainer(ids.carrier!).data).toMatchObject({
      kind: 'materializer',
      evidence: { reason: 'the carrier of a materialization that did not finish' },
    });
    expect(
      discovered
        .filter((e) => e.data.object === 'volume')
        .map((e) => (e.data.evidence as any).volume)
        .sort(),
    ).toEqual([vol('unsealed'), `${vol('gone')}-sealed`].sort());
    // every discovery is followed by its removal, in the log
    const removed = facts.filter((e) => e.type === 'reconciler.removed');
    expect(removed.map((e) => e.data.containerId ?? e.data.volume).sort()).toEqual(
      discovered.map((e) => (e.data.evidence as any).containerId ?? (e.data.evidence as any).volume).sort(),
    );
    for (const id of [ids.afterStop, ids.ghostInstance, ids.ghostExecution, ids.carrier])
      await expect(docker.getContainer(id!).inspect()).rejects.toMatchObject({ statusCode: 404 });
    const left = (
      (await docker.listVolumes({ filters: JSON.stringify({ label: [`runlog.home=${home}`] }) })).Volumes ?? []
    )
      .map((v) => v.Name)
      .sort();
    expect(left).toEqual([vol('kept'), `${vol('kept')}-sealed`]);
    // The log and Docker agree now: nothing more to record.
    expect(await rl.reconcile()).toEqual({ dryRun: false, actions: [], unreachable: [] });
    expect((await rl.inspect(ids.stoppedInstance!)).state).toBe('stopped');
  });

  it("orphanPolicy 'adopt': a running instance container whose stream the log does not know", async () => {
    const h = newHome('orphan-adopt');
    const rl1 = await open(h);
    const v = await rl1.spawnApp({ appDir: app('com.example.orphan', 'container') });
    const ctx = v.context as any;
    await rl1.close();
    for (const f of readdirSync(h).filter((n) => n.startsWith('runlog.db'))) rmSync(join(h, f)); // the log is gone
    const rl2 = await open(h, { reconcile: false });
    try {
      const report = await reconcileWith(rl2, { orphanPolicy: 'adopt' });
      const found = (await collect(runlogInternals(rl2).store.readStream(RECONCILER_STREAM))).find(
        (e) => e.type === 'reconciler.discovered',
      )!;
      expect(found.data).toMatchObject({
        kind: 'instance',
        stream: `instance-${v.id}`,
        evidence: { containerId: ctx.containerId, state: 'running' },
      });
      if (machineCanAdoptDiscovered()) {
        expect(found.data.decision).toBe('adopt');
        await until('adopted and running', async () => (await rl2.inspect(v.id)).state === 'running');
        expect((await rl2.events(v.id)).map((e) => e.type)).toEqual(['instance.discovered', 'instance.running']);
        expect((await getJson(ctx.host, ctx.port, '/api/lifecycle/health')).body.events).toEqual([
          'onCreate',
          'onStart',
        ]);
      } else {
        // This instance machine cannot start an actor from a discovered container: safer to remove it than to
        // leave it running unaccounted for.
        expect(found.data).toMatchObject({
          decision: 'remove',
          note: 'the instance machine has no instance.discovered transition',
        });
        expect(report.actions.map((a) => a.action)).toEqual(['discovered', 'removed']);
        await expect(docker.getContainer(ctx.containerId).inspect()).rejects.toMatchObject({ statusCode: 404 });
      }
    } finally {
      await shutdown(rl2);
    }
  });
});

describe('executions interrupted by a SIGKILL end with their real result', () => {
  async function killedAt(point: string, event: string | undefined, handler: string, input: Record<string, unknown>) {
    const home = newHome(`exec-${point}-${event ?? 'any'}`);
    const uri = await publishFreshCode();
    const c = child(home, { point, ...(event ? { event } : {}) });
    expect(await c.ready).toBe(true);
    c.send('execute', { uri, handler, input });
    expect((await c.exited).signal).toBe('SIGKILL');
    const stream = c.committed.find((e) => e.stream.startsWith('execution-'))!.stream;
    return { home, c, stream, id: stream.slice('execution-'.length) };
  }

  async function finish(home: string, id: string): Promise<Runlog> {
    const rl = await open(home);
    await until(
      'execution finished',
      async () => ['succeeded', 'failed'].includes((await rl.inspect(id)).state),
      60_000,
    );
    await rl.idle();
    return rl;
  }

  it('mid-invocation: the container kept running; its result is collected from its output', async () => {
    const { home, c, stream, id } = await killedAt('mid-invocation', undefined, 'slow', { ms: 2500, n: 7 });
    expect((await containersOf(stream)).map((x) => x.State)).toEqual(['running']);
    const rl = await finish(home, id);
    try {
      expect((await rl.inspect(id)).state).toBe('succeeded');
      expect(((await rl.inspect(id)).context as any).result.output).toEqual({ done: true, n: 7 });
      const types = (await rl.events(id)).map((e) => e.type);
      expect(types.slice(-2)).toEqual(['execution.adopted', 'execution.succeeded']);
      expect((await rl.events(id)).find((e) => e.type === 'execution.adopted')).toMatchObject({
        meta: { source: 'reconciler' },
        data: { evidence: { state: expect.stringMatching(/running|exited/) } },
      });
      for (const a of c.committed)
        expect(
          (await collect(runlogInternals(rl).store.readStream(a.stream, { from: a.version, to: a.version })))[0]?.type,
        ).toBe(a.eventType);
      await until('cleaned up', async () => (await containersOf(stream)).length === 0);
    } finally {
      await shutdown(rl);
    }
  });

  it('after execution.started was appended (container created, never started): the invocation runs then', async () => {
    const { home, stream, id } = await killedAt('after-append', 'execution.started', 'greet', { name: 'Ada' });
    expect((await containersOf(stream)).map((x) => x.State)).toEqual(['created']);
    const rl = await finish(home, id);
    try {
      expect((await rl.inspect(id)).state).toBe('succeeded');
      expect(((await rl.inspect(id)).context as any).result.output).toEqual({ greeting: 'Hello, Ada!' });
      expect((await rl.events(id)).map((e) => e.type)).not.toContain('execution.adopted');
      await until('cleaned up', async () => (await containersOf(stream)).length === 0);
    } finally {
      await shutdown(rl);
    }
  });

  it('mid-materialization: the unsealed volume and its carrier are recorded and removed, the step runs again', async () => {
    const { home, id } = await killedAt('mid-materialization', undefined, 'greet', { name: 'Grace' });
    const carriers = await docker.listContainers({
      all: true,
      filters: JSON.stringify({ label: [`runlog.home=${home}`, 'runlog.kind=materializer'] }),
    });
    expect(new Set(carriers.map((c) => c.Labels['runlog.materializing'])).size).toBe(1);
    const unsealed = carriers[0]!.Labels['runlog.materializing']!;
    // Which upload the kill cut depends on what earlier tests left cached (volumes are shared by content): the
    // runtime's leaves its carrier (it mounts the volume) and the download's source (the same image, without the
    // volume); the code's, uploaded from the verified blob, only its carrier.
    expect(unsealed).toMatch(/^runlog-(runtime|addition|code)-/);
    expect(carriers.map((c) => c.Labels['runlog.materializer-role'] ?? 'carrier').sort()).toEqual(
      unsealed.startsWith('runlog-code-') ? ['carrier'] : ['carrier', 'source'],
    );
    const rl = await finish(home, id);
    try {
      expect((await rl.inspect(id)).state).toBe('succeeded');
      expect(((await rl.inspect(id)).context as any).result.output).toEqual({ greeting: 'Hello, Grace!' });
      const facts = await collect(runlogInternals(rl).store.readStream(RECONCILER_STREAM));
      expect(
        facts.filter((e) => e.type === 'reconciler.removed').map((e) => e.data.containerId ?? e.data.volume),
      ).toEqual(expect.arrayContaining([...carriers.map((c) => c.Id), unsealed]));
      const volumes =
        (await docker.listVolumes({ filters: JSON.stringify({ label: [`runlog.home=${home}`] }) })).Volumes ?? [];
      const names = new Set(volumes.map((v) => v.Name));
      for (const v of volumes) {
        if (v.Labels?.['runlog.seal-for']) expect(names.has(v.Labels['runlog.seal-for'])).toBe(true);
        else
          expect(
            names.has(`${v.Name}-sealed`) ||
              (await docker
                .getVolume(`${v.Name}-sealed`)
                .inspect()
                .then(
                  () => true,
                  () => false,
                )),
          ).toBe(true);
      }
      // The sandbox pre-started for this code's next execution (a fact on the sandbox-pool stream) is the pool's.
      expect(
        (
          await docker.listContainers({ all: true, filters: JSON.stringify({ label: [`runlog.home=${home}`] }) })
        ).filter((c) => c.Labels['runlog.kind'] !== 'prestart'),
      ).toEqual([]);
    } finally {
      await shutdown(rl);
    }
  });
});

// Snapshots are a cache (issue 15): over every log these recoveries wrote, snapshot + tail is the full fold.
describe('the recovery logs', () => {
  it('fold the same from any snapshot plus its tail, for every actor', async () => {
    const homes = readdirSync(root).filter((n) => existsSync(join(root, n, 'runlog.db')));
    expect(homes.length).toBeGreaterThan(5);
    let cuts = 0;
    for (const h of homes) {
      const store = new SqlitePortStore(join(root, h, 'runlog.db'), { readOnly: true });
      try {
        cuts += await expectSnapshotPlusTailEqualsFold(store);
      } finally {
        await store.close();
      }
    }
    expect(cuts).toBeGreaterThan(homes.length);
  });
});
