// ContainerRunner against the real Docker Engine, the app-base image from the local registry (by digest),
// and a real user-defined bridge network.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type Docker from 'dockerode';
import type { DockerEngine } from '../../../src/adapters/docker/docker-port.ts';
import { createDockerEngine } from '../../../src/adapters/docker/dockerode-engine.ts';
import { ContainerRunner } from '../../../src/adapters/sandbox/container-runner.ts';
import { containerName } from '../../../src/adapters/sandbox/container-identity.ts';
import { homeLayout } from '../../../src/adapters/sandbox/layout.ts';
import { provisionToolsDir } from '../../../src/adapters/tools/provision.ts';
import { TcpPortAllocator } from '../../../src/adapters/net/tcp-port-allocator.ts';
import { IDENTITY_HEADERS } from '../../../src/adapters/health/wait-healthy.ts';
import { SandboxError } from '../../../src/adapters/sandbox/errors.ts';
import type { ExitInfo } from '../../../src/adapters/sandbox/app-sandbox-runner.ts';
import {
  HELLO_APP_ID,
  LIAR_SERVER,
  ROOTFS,
  cleanupDocker,
  getJson,
  makeWorkspace,
  requireDockerAppBase,
  until,
  type TestWorkspace,
} from '../../support/apps.ts';

const CANARY = 'RUNLOG_TEST_SUPERVISOR_SECRET';
const NETWORK = `runlog-net-test-${process.pid}`;
let ws: TestWorkspace;
let docker: Docker;
let image: string;
let runner: ContainerRunner;
// Below the kernel's ephemeral range (ip_local_port_range 32768–60999), like the product's default 4100–4999.
const ports = new TcpPortAllocator({ min: 23400, max: 23699 });
let seq = 0;
const nextId = (): string => `hello-${process.pid}-${++seq}`;

const newRunner = (engine?: DockerEngine): ContainerRunner =>
  new ContainerRunner({
    ...(engine ? { engine } : {}),
    home: ws.home,
    workspaceDir: ws.workspace,
    rootfs: ROOTFS,
    image,
    osApiBase: 'http://runlog-host:7070',
    network: NETWORK,
    extraLabels: { 'runlog.test': '1' },
    killGraceMs: 2_000,
    healthTimeoutMs: 30_000,
    healthIntervalMs: 25,
    warn: () => {},
  });

beforeAll(async () => {
  ({ docker, image } = await requireDockerAppBase());
  process.env[CANARY] = 'must-not-leak';
  ws = makeWorkspace();
  runner = newRunner();
  await Promise.all([runner.ensureReady(), runner.ensureToolchain()]);
});

afterAll(async () => {
  await runner?.close();
  if (docker && ws) await cleanupDocker(docker, ws.home, NETWORK);
  ws?.cleanup();
  delete process.env[CANARY];
});

const containersOf = async (instanceId: string): Promise<Docker.ContainerInfo[]> =>
  docker.listContainers({
    all: true,
    filters: { label: [`runlog.stream=instance-${instanceId}`, `runlog.home=${ws.home}`] },
  });

const exec = async (containerId: string, cmd: string[]): Promise<string> => {
  const e = await docker.getContainer(containerId).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = await e.start({});
  const chunks: Buffer[] = [];
  const { Writable } = await import('node:stream');
  const sink = new Writable({ write: (c: Buffer, _e, cb) => (chunks.push(c), cb()) });
  docker.modem.demuxStream(stream, sink, sink);
  await new Promise((r) => stream.on('end', r));
  return Buffer.concat(chunks).toString();
};

describe('ContainerRunner', () => {
  const spawned: string[] = [];
  afterEach(async () => {
    await Promise.all(spawned.splice(0).map((id) => runner.forceKill(id)));
  });

  it('spawns hello-app in a labelled, hardened container on the runlog network; the identity matches', async () => {
    ws.installHello({ sandbox: 'container' }, 'com.example.other'); // a second app: must stay invisible
    const manifest = ws.installHello({ sandbox: 'container' });
    const id = nextId();
    const port = ports.allocate(id);
    const r = await runner.spawn(id, HELLO_APP_ID, port, manifest);
    spawned.push(id);
    expect(r).toMatchObject({ port, identity: 'match' });
    expect(r.host).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(runner.getHost(id)).toBe(r.host);

    const hello = await getJson(r.host, port, '/');
    expect(hello.body).toBe(`Hello from ${HELLO_APP_ID} (${id}) [ctnr]\n`);
    expect(hello.headers[IDENTITY_HEADERS.instanceId]).toBe(id);
    await runner.callLifecycle(id, 'onStart');
    expect((await getJson(r.host, port, '/api/lifecycle/health')).body).toMatchObject({
      status: 'ok',
      appId: HELLO_APP_ID,
      instanceId: id,
      events: ['onStart'],
    });

    const info = await docker.getContainer(r.containerId!).inspect();
    expect(info.Name).toBe(`/${containerName(id)}`);
    expect(info.Config.Hostname).toBe(containerName(id));
    expect(info.Config.Labels).toMatchObject({
      'runlog.stream': `instance-${id}`,
      'runlog.kind': 'instance',
      'runlog.home': ws.home,
      'runlog.app': HELLO_APP_ID,
      'runlog.test': '1',
    });
    expect(Object.keys(info.NetworkSettings.Networks)).toEqual([NETWORK]);
    expect(info.HostConfig).toMatchObject({
      CapDrop: ['ALL'],
      ReadonlyRootfs: true,
      SecurityOpt: ['no-new-privileges'],
      Init: true,
    });
    expect(info.Image).toBe((await docker.getImage(image).inspect()).Id);
    expect(info.HostConfig.Binds).not.toContain('/var/run/docker.sock:/var/run/docker.sock');
    // The sliced bind: the container sees its own app directory and no other.
    expect((await exec(r.containerId!, ['/bin/ls', '/workspace/apps'])).trim()).toBe(HELLO_APP_ID);
    expect(await exec(r.containerId!, ['/bin/sh', '-c', 'touch /x 2>&1; echo $?'])).toMatch(/Read-only file system/);

    const lines: string[] = [];
    for await (const l of runner.logs(id)) lines.push(l.line);
    expect(lines).toContain(`hello-app ${HELLO_APP_ID} listening on 0.0.0.0:${port}`);
  });

  it('gives the container exactly the sandbox environment: nothing of the supervisor leaks', async () => {
    const manifest = ws.installHello({ sandbox: 'container' });
    const id = nextId();
    const port = ports.allocate(id);
    const r = await runner.spawn(id, HELLO_APP_ID, port, manifest);
    spawned.push(id);
    const { body } = await getJson(r.host, port, '/env');
    const env = body.env as Record<string, string>;
    // Docker adds HOSTNAME; bash adds PWD, SHLVL and _.
    expect(
      Object.keys(env)
        .filter((k) => !['HOSTNAME', 'PWD', 'SHLVL', '_'].includes(k))
        .sort(),
    ).toEqual(['APP_ID', 'APP_INSTANCE_ID', 'APP_PORT', 'AURA_LAYER_TAG', 'HOME', 'OS_API_BASE', 'PATH']);
    expect(env).toMatchObject({
      APP_ID: HELLO_APP_ID,
      APP_INSTANCE_ID: id,
      APP_PORT: String(port),
      AURA_LAYER_TAG: '[ctnr]',
      OS_API_BASE: 'http://runlog-host:7070',
      HOSTNAME: containerName(id),
    });
    expect(env.PATH!.split(':')[0]).toBe('/aura/my-tools');
    expect(env).not.toHaveProperty('NODE_EXTRA_CA_CERTS');
    expect(env).not.toHaveProperty(CANARY);
    expect(body.path['/aura/my-tools']).toEqual(['bash', 'node']);
  });

  it('puts only granted tools on PATH, and a grant/revoke reaches the running container without a respawn', async () => {
    const manifest = ws.installHello({ sandbox: 'container' });
    const id = nextId();
    const port = ports.allocate(id);
    const r = await runner.spawn(id, HELLO_APP_ID, port, manifest);
    spawned.push(id);
    expect((await getJson(r.host, port, '/which?name=git')).body).toMatchObject({ path: null });
    expect((await getJson(r.host, port, '/which?name=jq')).body).toMatchObject({ path: null });

    const L = homeLayout(ws.home);
    provisionToolsDir(L.instanceToolsDir(id), L.toolchainDir, [...manifest.tools, 'git', 'jq']);
    const git = (await getJson(r.host, port, '/which?name=git')).body;
    expect(git).toMatchObject({ path: '/aura/my-tools/git' });
    expect(git.version).toMatch(/^git version \d/);
    expect((await getJson(r.host, port, '/which?name=jq')).body.version).toMatch(/^jq-/);

    provisionToolsDir(L.instanceToolsDir(id), L.toolchainDir, manifest.tools);
    expect((await getJson(r.host, port, '/which?name=git')).body).toMatchObject({ path: null });
    const info = await docker.getContainer(r.containerId!).inspect();
    expect(info.State).toMatchObject({ Running: true, Pid: r.pid }); // the same container throughout
  });

  it('binds the Docker socket only when tools[] grants docker', async () => {
    const manifest = ws.installHello({ sandbox: 'container', tools: ['bash', 'node', 'docker'] });
    const id = nextId();
    const port = ports.allocate(id);
    const r = await runner.spawn(id, HELLO_APP_ID, port, manifest);
    spawned.push(id);
    const info = await docker.getContainer(r.containerId!).inspect();
    expect(info.HostConfig.Binds).toContain('/var/run/docker.sock:/var/run/docker.sock');
    expect((await getJson(r.host, port, '/which?name=docker')).body).toMatchObject({
      path: '/aura/my-tools/docker',
      version: expect.stringMatching(/^Docker version/),
    });
  });

  it('fails spawn when the health identity is not the instance, and removes the container', async () => {
    const appId = 'com.example.liar';
    const manifest = ws.installApp(
      appId,
      { sandbox: 'container', runtime: 'raw' },
      { 'entrypoint.sh': 'exec node server.mjs\n', 'server.mjs': LIAR_SERVER },
    );
    const id = nextId();
    const port = ports.allocate(id);
    const err = await runner.spawn(id, appId, port, manifest).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxError);
    expect((err as SandboxError).code).toBe('HEALTH_MISMATCH');
    expect((err as Error).message).toBe(
      `[ContainerRunner] ${appId} on port ${port}: health identity mismatch (expected ` +
        `appId=${appId}, got appId=com.example.squatter). Another process is likely squatting this port.`,
    );
    await until('the container to be removed', async () => (await containersOf(id)).length === 0);
    expect(runner.getHost(id)).toBeNull();
  });

  it('fails spawn of an app that exits before it is healthy, with its exit code and last output', async () => {
    const appId = 'com.example.crasher';
    const manifest = ws.installApp(
      appId,
      { sandbox: 'container', runtime: 'raw' },
      { 'entrypoint.sh': 'echo "cannot start: no config" >&2\nexit 3\n' },
    );
    const id = nextId();
    const err = await runner.spawn(id, appId, ports.allocate(id), manifest).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'EXITED_BEFORE_HEALTHY', details: { code: 3 } });
    expect((err as Error).message).toMatch(/--- last output ---\ncannot start: no config/);
    await until('the container to be removed', async () => (await containersOf(id)).length === 0);
  });

  it('rejects a raw app without entrypoint.sh before creating a container (the seed text)', async () => {
    const manifest = ws.installHello({ sandbox: 'container' });
    const dir = join(ws.appsDir, HELLO_APP_ID);
    rmSync(join(dir, 'entrypoint.sh'));
    const id = nextId();
    await expect(runner.spawn(id, HELLO_APP_ID, ports.allocate(id), manifest)).rejects.toThrow(
      `[ContainerRunner] app '${HELLO_APP_ID}' has runtime: 'raw' but no entrypoint file at ${dir}/entrypoint.sh`,
    );
    expect(await containersOf(id)).toEqual([]);
  });

  it('reports an outside docker kill as an unexpected exit (137), and kill() as an expected one', async () => {
    const manifest = ws.installHello({ sandbox: 'container' });
    const a = nextId();
    const ra = await runner.spawn(a, HELLO_APP_ID, ports.allocate(a), manifest);
    const exitA = new Promise<ExitInfo>((r) => runner.onExit(a, r));
    await docker.getContainer(ra.containerId!).kill();
    expect(await exitA).toEqual({ code: 137, signal: 'SIGKILL', expected: false });
    await until('the exited container to be removed', async () => (await containersOf(a)).length === 0);
    expect(runner.getHost(a)).toBeNull();

    const b = nextId();
    await runner.spawn(b, HELLO_APP_ID, ports.allocate(b), manifest);
    const exitB = new Promise<ExitInfo>((r) => runner.onExit(b, r));
    await runner.kill(b);
    expect(await exitB).toEqual({ code: 0, signal: null, expected: true }); // SIGTERM → hello-app exits 0
    expect(await containersOf(b)).toEqual([]);
  });

  it('finds orphans by label (never by name), and registerAdopted re-attaches the exit watcher', async () => {
    const manifest = ws.installHello({ sandbox: 'container', lifecycle: { basePath: '/hello' } });
    const id = nextId();
    const port = ports.allocate(id);
    const first = newRunner();
    const r = await first.spawn(id, HELLO_APP_ID, port, manifest);
    // A container named like ours but without our labels must not be listed.
    const decoy = await docker.createContainer({
      name: `runlog-decoy-${process.pid}`,
      Image: image,
      Cmd: ['/bin/true'],
      Labels: { 'runlog.test': '1', 'runlog.home': ws.home },
    });
    try {
      await first.close(); // the "supervisor" goes away; the container stays
      expect((await docker.getContainer(r.containerId!).inspect()).State.Running).toBe(true);

      const second = newRunner();
      const orphans = await second.listOrphanRecords();
      expect(orphans).toHaveLength(1);
      const rec = orphans[0]!;
      expect(rec).toMatchObject({
        instanceId: id,
        appId: HELLO_APP_ID,
        containerId: r.containerId,
        port,
        host: r.host,
        state: 'running',
        exitCode: null,
        basePath: '/hello',
        pid: r.pid,
      });
      expect(Date.parse(rec.startedAt!)).toBeGreaterThan(Date.now() - 120_000);

      second.registerAdopted(rec);
      expect(await second.listOrphanRecords()).toEqual([]); // tracked now
      expect(second.getHost(id)).toBe(r.host);
      await second.callLifecycle(id, 'onResume'); // reaches <basePath>/api/lifecycle/onResume
      expect((await getJson(r.host, port, '/hello/api/lifecycle/health')).body.events).toEqual(['onResume']);

      const exit = new Promise<ExitInfo>((res) => second.onExit(id, res));
      await docker.getContainer(r.containerId!).kill();
      expect(await exit).toEqual({ code: 137, signal: 'SIGKILL', expected: false });
      await second.close();
    } finally {
      await decoy.remove({ force: true });
    }
  });

  it('close() while a spawn waits for health ends that spawn with SPAWN_FAILED and leaves its container for the next runner', async () => {
    // A supervisor asked to stop while an instance was starting once stayed alive: the spawn finished after close()
    // and followed the new container's logs on a connection nothing would ever close.
    const appId = 'com.example.sleeper';
    const manifest = ws.installApp(
      appId,
      { sandbox: 'container', runtime: 'raw' },
      { 'entrypoint.sh': 'exec sleep 600\n' },
    );
    const id = nextId();
    const first = newRunner();
    const spawning = first.spawn(id, appId, ports.allocate(id), manifest).catch((e: unknown) => e);
    await until(
      'the container to start',
      async () => (await containersOf(id)).some((c) => c.State === 'running'),
      30_000,
    );
    await first.close();
    const err = await spawning;
    expect(err).toBeInstanceOf(SandboxError);
    expect(err).toMatchObject({
      code: 'SPAWN_FAILED',
      message: `[ContainerRunner] the runner is closed: instance ${id} is left to the next supervisor`,
    });
    await expect(first.spawn(nextId(), appId, 23699, manifest)).rejects.toMatchObject({ code: 'SPAWN_FAILED' });

    const second = newRunner();
    const orphans = await second.listOrphanRecords();
    expect(orphans.map((o) => [o.instanceId, o.state])).toEqual([[id, 'running']]);
    second.registerAdopted(orphans[0]!);
    await second.forceKill(id);
    await second.close();
    expect(await containersOf(id)).toEqual([]);
  });

  it(
    'detach() while a watcher is reporting an exit lets the report finish, ' +
      'onExit told first, and the runner goes on working',
    async () => {
      // What the reconciler relies on when the Docker daemon comes back: it detaches the runner, then drops its exit
      // subscriptions and lists containers. An exit reported half-way (container removed, nobody told) made it record
      // the instance `lost` (the SIGKILL variant of the daemon restart test).
      const manifest = ws.installHello({ sandbox: 'container' });
      // Hold the watcher's removal of this container until the test lets it go.
      let armed = '';
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let removing!: () => void;
      const removalStarted = new Promise<void>((r) => (removing = r));
      // The runner reaches Docker only through its engine port: this one holds removals of the armed container.
      const real = createDockerEngine();
      const gated: DockerEngine = new Proxy(real, {
        get(target, prop) {
          if (prop === 'removeContainer') {
            return async (cid: string, opts?: { force?: boolean }) => {
              if (armed !== '' && cid === armed) {
                removing();
                await gate;
              }
              return target.removeContainer(cid, opts);
            };
          }
          const value: unknown = Reflect.get(target, prop, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      const first = newRunner(gated);
      const id = nextId();
      const r = await first.spawn(id, HELLO_APP_ID, ports.allocate(id), manifest);
      let told: ExitInfo | null = null;
      first.onExit(id, (x) => (told = x));
      armed = r.containerId!;
      await docker.getContainer(r.containerId!).kill();
      await removalStarted; // the watcher knows the exit and is removing the container
      let detached = false;
      const detaching = first.detach().then(() => (detached = true));
      await new Promise((res) => setImmediate(res));
      expect(detached).toBe(false); // detach() waits for the report in flight …
      release();
      await detaching;
      expect(told).toEqual({ code: 137, signal: 'SIGKILL', expected: false }); // … which told onExit before it returned
      expect(await containersOf(id)).toEqual([]);
      // Detached is not closed: what the runner spawns next is watched as before.
      const next = nextId();
      await first.spawn(next, HELLO_APP_ID, ports.allocate(next), manifest);
      const exitNext = new Promise<ExitInfo>((res) => first.onExit(next, res));
      await first.kill(next);
      expect(await exitNext).toEqual({ code: 0, signal: null, expected: true });
      await first.close();
    },
  );

  it('reports an orphan that exited while nobody watched, with its exit code', async () => {
    const manifest = ws.installHello({ sandbox: 'container' });
    const id = nextId();
    const first = newRunner();
    const r = await first.spawn(id, HELLO_APP_ID, ports.allocate(id), manifest);
    await first.close();
    await docker.getContainer(r.containerId!).stop({ t: 1 });
    const second = newRunner();
    const [rec] = await second.listOrphanRecords();
    expect(rec).toMatchObject({ instanceId: id, state: 'exited', exitCode: 0, host: null, pid: null });
    const exit = new Promise<ExitInfo>((res) => second.onExit(id, res));
    second.registerAdopted(rec!);
    expect(await exit).toEqual({ code: 0, signal: null, expected: false });
    await until('the exited orphan to be removed', async () => (await containersOf(id)).length === 0);
  });
});
