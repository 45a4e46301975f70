// ProotRunner against real PRoot and the real Debian rootfs; the identity gate and the app SDK against real
// HTTP servers.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ProotRunner } from '../../../src/adapters/sandbox/proot-runner.ts';
import { homeLayout } from '../../../src/adapters/sandbox/layout.ts';
import { provisionToolsDir } from '../../../src/adapters/tools/provision.ts';
import { waitHealthy, IDENTITY_HEADERS } from '../../../src/adapters/health/wait-healthy.ts';
import { TcpPortAllocator, readListeningPorts } from '../../../src/adapters/net/tcp-port-allocator.ts';
import { createAppServer } from '../../../src/app-sdk/index.ts';
import type { ExitInfo } from '../../../src/adapters/sandbox/app-sandbox-runner.ts';
import { SandboxError } from '../../../src/adapters/sandbox/errors.ts';
import {
  HELLO_APP_ID,
  LEGACY_SERVER,
  LIAR_SERVER,
  REPO,
  ROOTFS,
  alive,
  getJson,
  makeWorkspace,
  requireProot,
  until,
  type TestWorkspace,
} from '../../support/apps.ts';

const CANARY = 'RUNLOG_TEST_SUPERVISOR_SECRET';
let ws: TestWorkspace;
let runner: ProotRunner;
// Below the kernel's ephemeral range (ip_local_port_range 32768–60999): an outbound connection cannot take one
// of these ports between allocation and listen.
const ports = new TcpPortAllocator({ min: 23100, max: 23399 });
const warnings: string[] = [];
let seq = 0;
const nextId = (): string => `hello-${process.pid}-${++seq}`;

beforeAll(async () => {
  requireProot();
  process.env[CANARY] = 'must-not-leak';
  ws = makeWorkspace();
  runner = new ProotRunner({
    home: ws.home,
    workspaceDir: ws.workspace,
    rootfs: ROOTFS,
    osApiBase: 'http://127.0.0.1:7070',
    killGraceMs: 3_000,
    healthTimeoutMs: 20_000,
    healthIntervalMs: 25,
    warn: (m) => warnings.push(m),
  });
  await runner.ensureToolchain();
});

afterAll(async () => {
  await runner?.close();
  ws?.cleanup();
  delete process.env[CANARY];
});

describe('ProotRunner', () => {
  const spawned: string[] = [];
  afterEach(async () => {
    await Promise.all(spawned.splice(0).map((id) => runner.forceKill(id)));
  });

  it('spawns hello-app and the health identity matches', async () => {
    const manifest = ws.installHello();
    const id = nextId();
    const port = ports.allocate(id);
    const r = await runner.spawn(id, HELLO_APP_ID, port, manifest);
    spawned.push(id);
    expect(r).toMatchObject({ host: '127.0.0.1', port, identity: 'match' });
    expect(alive(r.pid)).toBe(true);
    expect(runner.getHost(id)).toBe('127.0.0.1');
    expect(runner.getPort(id)).toBe(port);

    const health = await getJson(r.host, port, '/api/lifecycle/health');
    expect(health.body).toMatchObject({ status: 'ok', appId: HELLO_APP_ID, instanceId: id });
    const hello = await getJson(r.host, port, '/');
    expect(hello.body).toBe(`Hello from ${HELLO_APP_ID} (${id}) [proot]\n`);
    expect(hello.headers[IDENTITY_HEADERS.appId]).toBe(HELLO_APP_ID);
    expect(hello.headers[IDENTITY_HEADERS.instanceId]).toBe(id);

    await runner.callLifecycle(id, 'onCreate');
    await runner.callLifecycle(id, 'onStart');
    expect(await runner.callOptionalLifecycle(id, 'onCustomThing', { a: 1 })).toBeNull();
    expect((await getJson(r.host, port, '/api/lifecycle/health')).body.events).toEqual(['onCreate', 'onStart']);

    const lines: string[] = [];
    for await (const l of runner.logs(id)) lines.push(l.line);
    expect(lines).toContain(`hello-app ${HELLO_APP_ID} listening on 127.0.0.1:${port}`);
  });

  it('gives the app exactly the sandbox environment: nothing of the supervisor leaks', async () => {
    expect(process.env.NODE_EXTRA_CA_CERTS ?? process.env[CANARY]).toBeTruthy();
    const manifest = ws.installHello();
    const id = nextId();
    const port = ports.allocate(id);
    await runner.spawn(id, HELLO_APP_ID, port, manifest);
    spawned.push(id);
    const { body } = await getJson('127.0.0.1', port, '/env');
    const env = body.env as Record<string, string>;
    // bash adds SHLVL and _; proot and bash set PWD.
    expect(
      Object.keys(env)
        .filter((k) => !['PWD', 'SHLVL', '_'].includes(k))
        .sort(),
    ).toEqual(['APP_ID', 'APP_INSTANCE_ID', 'APP_PORT', 'AURA_LAYER_TAG', 'HOME', 'OS_API_BASE', 'PATH']);
    expect(env).toMatchObject({
      APP_ID: HELLO_APP_ID,
      APP_INSTANCE_ID: id,
      APP_PORT: String(port),
      AURA_LAYER_TAG: '[proot]',
      OS_API_BASE: 'http://127.0.0.1:7070',
      HOME: '/root',
    });
    expect(env.PATH!.split(':')[0]).toBe('/aura/my-tools');
    expect(env).not.toHaveProperty('NODE_EXTRA_CA_CERTS');
    expect(env).not.toHaveProperty(CANARY);
    expect(body.cwd).toBe(`/workspace/apps/${HELLO_APP_ID}`);
    expect(body.path['/aura/my-tools']).toEqual(['bash', 'node']);
  });

  it('puts only granted tools on PATH, and a grant/revoke reaches the running app without a respawn', async () => {
    const manifest = ws.installHello({ tools: ['bash', 'node'] });
    const id = nextId();
    const port = ports.allocate(id);
    const r = await runner.spawn(id, HELLO_APP_ID, port, manifest);
    spawned.push(id);
    expect((await getJson('127.0.0.1', port, '/which?name=git')).body).toMatchObject({ path: null });

    const L = homeLayout(ws.home);
    const granted = provisionToolsDir(L.instanceToolsDir(id), L.toolchainDir, [...manifest.tools, 'git']);
    expect(granted.linked).toContain('git');
    const which = (await getJson('127.0.0.1', port, '/which?name=git')).body;
    expect(which).toMatchObject({ path: '/aura/my-tools/git' });
    expect(which.version).toMatch(/^git version \d/);

    const revoked = provisionToolsDir(L.instanceToolsDir(id), L.toolchainDir, manifest.tools);
    expect(revoked.removed).toEqual(['git']);
    expect((await getJson('127.0.0.1', port, '/which?name=git')).body).toMatchObject({ path: null });
    expect(alive(r.pid)).toBe(true);
    expect(runner.getPort(id)).toBe(port); // same incarnation throughout
  });

  it("binds the seed's mounts, and the Docker socket only when tools[] grants docker or *", () => {
    const manifest = ws.installHello();
    const args = runner.prootArgs('i1', HELLO_APP_ID, manifest, ['/bin/bash', 'x']);
    const L = homeLayout(ws.home);
    expect(args).toEqual(
      expect.arrayContaining([
        `--rootfs=${ROOTFS}`,
        `--bind=${ws.workspace}:/workspace`,
        `--bind=${L.instanceDataDir('i1')}:/data`,
        '--bind=/proc',
        '--bind=/dev',
        `--bind=${L.instanceTmpDir('i1')}:/tmp`,
        `--bind=${L.instanceVarTmpDir('i1')}:/var/tmp`,
        '--bind=/etc/resolv.conf',
        `--bind=${L.userHomeDir}:/root`,
        `--bind=${L.toolchainDir}:/aura/all-tools`,
        `--bind=${L.instanceToolsDir('i1')}:/aura/my-tools`,
        `--cwd=/workspace/apps/${HELLO_APP_ID}`,
      ]),
    );
    expect(args.some((a) => a.includes('docker.sock'))).toBe(false);
    expect(runner.prootArgs('i1', HELLO_APP_ID, { ...manifest, tools: ['docker'] }, [])).toContain(
      '--bind=/var/run/docker.sock',
    );
    expect(runner.prootArgs('i1', HELLO_APP_ID, { ...manifest, tools: ['*'] }, [])).toContain(
      '--bind=/var/run/docker.sock',
    );
  });

  it('respects lifecycle.basePath for the health gate and hooks', async () => {
    const manifest = ws.installHello({ lifecycle: { basePath: '/hello' } });
    const id = nextId();
    const port = ports.allocate(id);
    await runner.spawn(id, HELLO_APP_ID, port, manifest);
    spawned.push(id);
    expect((await getJson('127.0.0.1', port, '/hello/api/lifecycle/health')).body).toMatchObject({
      appId: HELLO_APP_ID,
      instanceId: id,
    });
    expect((await getJson('127.0.0.1', port, '/api/lifecycle/health')).status).toBe(404);
    await runner.callLifecycle(id, 'onPause');
    expect((await getJson('127.0.0.1', port, '/hello/api/lifecycle/health')).body.events).toEqual(['onPause']);
  });

  it('fails loud on a port squatter and leaves nothing running', async () => {
    const manifest = ws.installHello();
    const id = nextId();
    const port = ports.allocate(id);
    const squatter = await listen(port, (_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ status: 'ok', appId: 'com.example.squatter', instanceId: 'x-1' }));
    });
    try {
      const err = await runner.spawn(id, HELLO_APP_ID, port, manifest).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SandboxError);
      expect((err as SandboxError).code).toBe('HEALTH_MISMATCH');
      expect((err as Error).message).toBe(
        `[ProotRunner] ${HELLO_APP_ID} on port ${port}: health identity mismatch (expected ` +
          `appId=${HELLO_APP_ID}, got appId=com.example.squatter). Another process is likely squatting this port.`,
      );
      expect(runner.getHost(id)).toBeNull();
      expect(prootChildren()).toEqual([]);
    } finally {
      squatter.close();
    }
  });

  it('accepts a legacy app without identity, with a warning', async () => {
    const appId = 'com.example.legacy';
    const manifest = ws.installApp(
      appId,
      { runtime: 'raw', tools: ['node'] },
      { 'entrypoint.sh': 'exec node server.mjs\n', 'server.mjs': LEGACY_SERVER },
    );
    const id = nextId();
    const r = await runner.spawn(id, appId, ports.allocate(id), manifest);
    spawned.push(id);
    expect(r.identity).toBe('legacy');
    expect(warnings.some((w) => w.includes(`${appId} on port ${r.port}: health answer carries no identity`))).toBe(
      true,
    );
  });

  it('fails spawn of an app whose health claims another identity, and stops it', async () => {
    const appId = 'com.example.liar';
    const manifest = ws.installApp(
      appId,
      { runtime: 'raw', tools: ['node'] },
      { 'entrypoint.sh': 'exec node server.mjs\n', 'server.mjs': LIAR_SERVER },
    );
    const id = nextId();
    const port = ports.allocate(id);
    await expect(runner.spawn(id, appId, port, manifest)).rejects.toThrow(
      `[ProotRunner] ${appId} on port ${port}: health identity mismatch (expected ` +
        `appId=${appId}, got appId=com.example.squatter). Another process is likely squatting this port.`,
    );
    await until('the liar to stop listening', () => !readListeningPorts().has(port));
    expect(prootChildren()).toEqual([]);
  });

  it('fails spawn of an app that exits before it is healthy, with its exit code and last output', async () => {
    const appId = 'com.example.crasher';
    const manifest = ws.installApp(
      appId,
      { runtime: 'raw' },
      { 'entrypoint.sh': 'echo "cannot start: no config" >&2\nexit 3\n' },
    );
    const id = nextId();
    const err = await runner.spawn(id, appId, ports.allocate(id), manifest).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'EXITED_BEFORE_HEALTHY', details: { code: 3, signal: null } });
    expect((err as Error).message).toMatch(
      /exited before becoming healthy \(code 3\)\n--- last output ---\ncannot start: no config/,
    );
    expect(runner.getHost(id)).toBeNull();
  });

  it('rejects a raw app without entrypoint.sh before starting anything (the seed text)', async () => {
    const manifest = ws.installHello();
    const dir = join(ws.appsDir, HELLO_APP_ID);
    rmSync(join(dir, 'entrypoint.sh'));
    const id = nextId();
    await expect(runner.spawn(id, HELLO_APP_ID, ports.allocate(id), manifest)).rejects.toThrow(
      `[ProotRunner] app '${HELLO_APP_ID}' has runtime: 'raw' but no entrypoint file at ${dir}/entrypoint.sh`,
    );
    expect(prootChildren()).toEqual([]);
    expect(() => runner.logs(id)).toThrow(/no logs/);
  });

  it('reports an outside SIGKILL as an unexpected exit, and kill() as an expected one', async () => {
    const manifest = ws.installHello();
    const a = nextId();
    const pa = ports.allocate(a);
    const ra = await runner.spawn(a, HELLO_APP_ID, pa, manifest);
    const exitA = new Promise<ExitInfo>((r) => runner.onExit(a, r));
    process.kill(ra.pid, 'SIGKILL');
    expect(await exitA).toEqual({ code: null, signal: 'SIGKILL', expected: false });
    await until('the app (a detached tracee) to be gone too', () => !readListeningPorts().has(pa));
    expect(runner.getHost(a)).toBeNull();

    const b = nextId();
    const rb = await runner.spawn(b, HELLO_APP_ID, ports.allocate(b), manifest);
    const exitB = new Promise<ExitInfo>((r) => runner.onExit(b, r));
    await runner.kill(b);
    expect(await exitB).toEqual({ code: 0, signal: null, expected: true }); // hello-app exits 0 on SIGTERM
    expect(alive(rb.pid)).toBe(false);
    const lines: string[] = [];
    for await (const l of runner.logs(b, { follow: true })) lines.push(l.line); // ends: the instance exited
    expect(lines).toContain('hello-app: SIGTERM, closing');

    const c = nextId();
    await runner.spawn(c, HELLO_APP_ID, ports.allocate(c), manifest);
    await runner.forceKill(c);
    const exitC = await new Promise<ExitInfo>((r) => runner.onExit(c, r)); // registered after the exit: still delivered
    expect(exitC).toEqual({ code: null, signal: 'SIGKILL', expected: true });
  });

  it("gives the app a private /tmp and no view of the supervisor's process (/proc/<pid>/environ, root, fd)", async () => {
    // What the host keeps in /tmp (a runlog home under /tmp, its token) must not be visible inside.
    const marker = `runlog-host-secret-${process.pid}-${Date.now()}`;
    writeFileSync(join('/tmp', marker), 'host only');
    const written = `runlog-app-wrote-${process.pid}-${Date.now()}`;
    const sup = process.pid; // this process runs the runner: it is the supervisor
    const probe = [
      '#!/bin/bash',
      `SUP=${sup}`,
      '{',
      '  [ -e /proc/$SUP ] && echo "sup-proc: visible" || echo "sup-proc: absent"',
      '  cat /proc/$SUP/environ >/dev/null 2>&1 && echo "sup-environ: readable" || echo "sup-environ: unreadable"',
      '  ls /proc/$SUP/root/ >/dev/null 2>&1 && echo "sup-root: listable" || echo "sup-root: unlistable"',
      '  ls /proc/$SUP/fd/ >/dev/null 2>&1 && echo "sup-fd: listable" || echo "sup-fd: unlistable"',
      `  grep -l ${CANARY} /proc/[0-9]*/environ >/dev/null 2>&1 && echo "canary: found" || echo "canary: not found"`,
      '  cat /proc/self/environ | tr "\\0" "\\n" | grep -c "^APP_INSTANCE_ID=" | sed "s/^/self-environ-app-id: /"',
      `  [ -e /tmp/${marker} ] && echo "host-tmp: visible" || echo "host-tmp: invisible"`,
      `  echo from-app > /tmp/${written} && echo "tmp-write: ok"`,
      '  echo "pids: $(ls /proc | grep -cE "^[0-9]+$")"',
      '} > /data/probe.txt 2>&1',
      'exec node server.mjs',
      '',
    ].join('\n');
    const manifest = ws.installHello();
    writeFileSync(join(ws.appsDir, HELLO_APP_ID, 'entrypoint.sh'), probe, { mode: 0o755 });
    const id = nextId();
    const port = ports.allocate(id);
    const L = homeLayout(ws.home);
    try {
      const r = await runner.spawn(id, HELLO_APP_ID, port, manifest);
      spawned.push(id);
      expect(alive(r.pid)).toBe(true); // tracked from the host's side as before
      const report = readFileSync(join(L.instanceDataDir(id), 'probe.txt'), 'utf8');
      expect(report).toContain('sup-proc: absent');
      expect(report).toContain('sup-environ: unreadable');
      expect(report).toContain('sup-root: unlistable');
      expect(report).toContain('sup-fd: unlistable');
      expect(report).toContain('canary: not found');
      expect(report).toContain('self-environ-app-id: 1'); // /proc itself works: the app sees its own processes
      expect(report).toContain('host-tmp: invisible');
      expect(report).toContain('tmp-write: ok');
      expect(Number(/pids: (\d+)/.exec(report)?.[1])).toBeLessThan(20); // its own namespace, not the host's hundreds
      // What it wrote to /tmp landed in its private directory, not in the host's /tmp.
      expect(readFileSync(join(L.instanceTmpDir(id), written), 'utf8')).toBe('from-app\n');
      expect(existsSync(join('/tmp', written))).toBe(false);
      expect(statSync(L.instanceTmpDir(id)).mode & 0o777).toBe(0o700);
      // A graceful stop still reaches the app through the namespace (unshare waits and passes its status on).
      const exit = new Promise<ExitInfo>((res) => runner.onExit(id, res));
      await runner.kill(id);
      expect(await exit).toEqual({ code: 0, signal: null, expected: true });
      expect(existsSync(L.instanceTmpDir(id))).toBe(false); // scratch space goes with the process
    } finally {
      rmSync(join('/tmp', marker), { force: true });
      rmSync(join('/tmp', written), { force: true });
    }
  });

  it("keeps one instance's writes to /etc, /var/tmp and /dev/shm from every other instance and from the base rootfs", async () => {
    const name = `runlog-isolation-${process.pid}-${Date.now()}`;
    const paths = [`/etc/${name}`, `/var/tmp/${name}`, `/dev/shm/${name}`];
    const probe = [
      '#!/bin/bash',
      '{',
      '  if [ "$(cat /data/role)" = write ]; then',
      ...paths.map((p) => `    ( echo from-writer > ${p} ) 2>&1 && echo "wrote ${p}"`),
      '    ( : >> /root/.bashrc ) 2>&1 && echo "opened the shared bashrc for writing"',
      '    ( : >> /aura/all-tools/node ) 2>&1 && echo "opened the shared toolchain for writing"',
      '  fi',
      ...paths.map((p) => `  [ -e ${p} ] && echo "sees ${p}" || echo "no ${p}"`),
      '} > /data/probe.txt 2>&1',
      'exec node server.mjs',
      '',
    ].join('\n');
    const manifest = ws.installHello();
    writeFileSync(join(ws.appsDir, HELLO_APP_ID, 'entrypoint.sh'), probe, { mode: 0o755 });
    const L = homeLayout(ws.home);
    const [writer, reader] = [nextId(), nextId()];
    const report = (id: string) => readFileSync(join(L.instanceDataDir(id), 'probe.txt'), 'utf8');
    try {
      for (const [id, role] of [
        [writer, 'write'],
        [reader, 'read'],
      ] as const) {
        mkdirSync(L.instanceDataDir(id), { recursive: true });
        writeFileSync(join(L.instanceDataDir(id), 'role'), role);
        await runner.spawn(id, HELLO_APP_ID, ports.allocate(id), manifest); // the probe has run once it is healthy
        spawned.push(id);
      }
      const wrote = report(writer);
      // The shared image refuses the write outright; the bashrc and the toolchain every instance uses too.
      expect(wrote).toContain(`/etc/${name}: Read-only file system`);
      expect(wrote).toContain(`no /etc/${name}`);
      expect(wrote).toMatch(/\/root\/.bashrc: Read-only file system/);
      expect(wrote).toMatch(/\/aura\/all-tools\/node: Read-only file system/);
      expect(wrote).not.toContain('for writing');
      // /var/tmp and /dev/shm are the writer's own: it sees what it wrote there, in its own directory and tmpfs.
      expect(wrote).toContain(`wrote /var/tmp/${name}`);
      expect(wrote).toContain(`wrote /dev/shm/${name}`);
      expect(wrote).toContain(`sees /var/tmp/${name}`);
      expect(wrote).toContain(`sees /dev/shm/${name}`);
      expect(readFileSync(join(L.instanceVarTmpDir(writer), name), 'utf8')).toBe('from-writer\n');
      // The other instance, the base rootfs and the host's /dev/shm see none of it.
      expect(report(reader).trim().split('\n')).toEqual(paths.map((p) => `no ${p}`));
      expect(existsSync(join(ROOTFS, 'etc', name))).toBe(false);
      expect(existsSync(join(ROOTFS, 'var/tmp', name))).toBe(false);
      expect(existsSync(join('/dev/shm', name))).toBe(false);
      // The read-only view is the instance's alone: the host's mount table does not have it.
      expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(` ${ROOTFS} `);
    } finally {
      rmSync(join(ROOTFS, 'etc', name), { force: true });
      rmSync(join(ROOTFS, 'var/tmp', name), { force: true });
      rmSync(join('/dev/shm', name), { force: true });
    }
  });

  it('kills its children when the supervisor process is SIGKILLed', async () => {
    const manifest = ws.installHello();
    const id = nextId();
    const port = ports.allocate(id);
    const script = join(ws.home, 'supervisor.mts');
    writeFileSync(
      script,
      `
      import { ProotRunner } from ${JSON.stringify(join(REPO, 'src/adapters/sandbox/proot-runner.ts'))};
      const runner = new ProotRunner({
        home: ${JSON.stringify(ws.home)},
        workspaceDir: ${JSON.stringify(ws.workspace)},
        rootfs: ${JSON.stringify(ROOTFS)},
        osApiBase: 'http://127.0.0.1:7070',
      });
      const r = await runner.spawn(${JSON.stringify(id)}, ${JSON.stringify(HELLO_APP_ID)}, ${port}, ${JSON.stringify(manifest)});
      console.log(JSON.stringify(r));
      setInterval(() => {}, 1000);
    `,
    );
    const sup = spawn(process.execPath, ['--import', 'tsx', script], {
      cwd: REPO,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const line = await new Promise<string>((resolve, reject) => {
      sup.stdout.on('data', (c: Buffer) => resolve(c.toString()));
      sup.once('exit', (code) => reject(new Error(`supervisor exited early (${code})`)));
    });
    const r = JSON.parse(line) as { pid: number };
    try {
      expect(alive(r.pid)).toBe(true);
      expect(readListeningPorts().has(port)).toBe(true);
      sup.kill('SIGKILL');
      await until('proot to die with the supervisor', () => !alive(r.pid));
      await until('the app to stop listening', () => !readListeningPorts().has(port));
    } finally {
      sup.kill('SIGKILL');
      try {
        process.kill(-r.pid, 'SIGKILL'); // only if the test failed: leave nothing behind
      } catch {
        // already gone
      }
    }
  });
});

describe('identity gate (waitHealthy)', () => {
  const base = {
    host: '127.0.0.1',
    path: '/api/lifecycle/health',
    appId: 'com.aura.foo',
    instanceId: 'foo-1',
    timeoutMs: 3_000,
    intervalMs: 20,
    label: '[ProotRunner]',
  };
  const servers: Server[] = [];
  afterEach(() => servers.splice(0).forEach((s) => s.close()));
  const serve = async (handler: Parameters<typeof createServer>[1] & {}): Promise<number> => {
    const s = await listen(0, handler);
    servers.push(s);
    return (s.address() as { port: number }).port;
  };

  it('matches on body fields, or on the SDK headers alone', async () => {
    const p1 = await serve((_q, res) =>
      res.end(JSON.stringify({ status: 'ok', appId: 'com.aura.foo', instanceId: 'foo-1' })),
    );
    expect(await waitHealthy({ ...base, port: p1 })).toMatchObject({ kind: 'match', attempts: 1 });
    const p2 = await serve((_q, res) => {
      res.setHeader('x-app-id', 'com.aura.foo');
      res.setHeader('x-app-instance-id', 'foo-1');
      res.end('ok');
    });
    expect(await waitHealthy({ ...base, port: p2 })).toMatchObject({ kind: 'match' });
  });

  it('formats a mismatch exactly like the seed', async () => {
    const port = await serve((_q, res) => res.end(JSON.stringify({ appId: 'com.aura.bar', instanceId: 'bar-1' })));
    const v = await waitHealthy({ ...base, port });
    expect(v).toMatchObject({ kind: 'mismatch', claimedApp: 'com.aura.bar', claimedInstance: 'bar-1' });
    expect(v.kind === 'mismatch' && v.message).toBe(
      `[ProotRunner] com.aura.foo on port ${port}: health identity mismatch ` +
        `(expected appId=com.aura.foo, got appId=com.aura.bar). Another process is likely squatting this port.`,
    );
  });

  it('treats a wrong instance, a half identity and a body/header conflict as mismatches', async () => {
    const wrongInstance = await serve((_q, res) =>
      res.end(JSON.stringify({ appId: 'com.aura.foo', instanceId: 'foo-0' })),
    );
    expect(await waitHealthy({ ...base, port: wrongInstance })).toMatchObject({
      kind: 'mismatch',
      message: expect.stringContaining('(expected instanceId=foo-1, got instanceId=foo-0)'),
    });
    const half = await serve((_q, res) => res.end(JSON.stringify({ appId: 'com.aura.foo' })));
    expect(await waitHealthy({ ...base, port: half })).toMatchObject({
      kind: 'mismatch',
      message: expect.stringContaining('got instanceId=<none>'),
    });
    const conflict = await serve((_q, res) => {
      res.setHeader('x-app-id', 'com.aura.bar');
      res.end(JSON.stringify({ appId: 'com.aura.foo', instanceId: 'foo-1' }));
    });
    expect(await waitHealthy({ ...base, port: conflict })).toMatchObject({
      kind: 'mismatch',
      message: expect.stringContaining('conflicting identity'),
    });
  });

  it('accepts an answer without identity as legacy, keeps polling through non-2xx answers, and times out', async () => {
    let calls = 0;
    const port = await serve((_q, res) => {
      res.statusCode = ++calls < 3 ? 503 : 200;
      res.end('{}');
    });
    expect(await waitHealthy({ ...base, port })).toMatchObject({ kind: 'legacy', attempts: 3 });
    const never = await serve((_q, res) => {
      res.statusCode = 500;
      res.end();
    });
    expect(await waitHealthy({ ...base, port: never, timeoutMs: 300 })).toMatchObject({
      kind: 'timeout',
      lastError: 'HTTP 500',
    });
  });

  it('polls until the app listens, and stops on abort', async () => {
    const free = await serve(() => {});
    const port = (servers.pop()!.close(), free);
    const ctl = new AbortController();
    setTimeout(() => ctl.abort('child exited'), 150);
    expect(await waitHealthy({ ...base, port, signal: ctl.signal })).toMatchObject({ kind: 'aborted' });
  });
});

describe('app SDK', () => {
  it('stamps identity on every response and serves the lifecycle routes under basePath', async () => {
    const seen: unknown[] = [];
    const server = createAppServer({
      appId: 'com.example.sdk',
      instanceId: 'sdk-1',
      basePath: '/x',
      handlers: { onStart: (body) => void seen.push(body), onStop: () => ({ bye: true }) },
      handler: (_req, res) => {
        res.statusCode = 418;
        res.end('teapot');
      },
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const other = await getJson('127.0.0.1', port, '/anything');
      expect(other.status).toBe(418);
      expect(other.headers).toMatchObject({ 'x-app-id': 'com.example.sdk', 'x-app-instance-id': 'sdk-1' });
      expect((await getJson('127.0.0.1', port, '/x/api/lifecycle/health')).body).toEqual({
        status: 'ok',
        appId: 'com.example.sdk',
        instanceId: 'sdk-1',
      });
      const { postHook } = await import('../../../src/adapters/sandbox/lifecycle-client.ts');
      const t = { instanceId: 'sdk-1', appId: 'com.example.sdk', host: '127.0.0.1', port, basePath: '/x' };
      expect(await postHook('[t]', t, 'onStart', { reason: 'test' }, false, 2000)).toBeNull();
      expect(seen).toEqual([{ reason: 'test' }]);
      expect(await postHook('[t]', t, 'onStop', {}, false, 2000)).toEqual({ bye: true });
      expect(await postHook('[t]', t, 'onSomethingElse', {}, true, 2000)).toBeNull();
      await expect(postHook('[t]', { ...t, basePath: '' }, 'onStart', {}, false, 2000)).rejects.toThrow(
        /answered HTTP 418/,
      );
    } finally {
      server.close();
    }
  });
});

function listen(port: number, handler: Parameters<typeof createServer>[1] & {}): Promise<Server> {
  const s = createServer(handler);
  return new Promise((resolve, reject) => {
    s.once('error', reject);
    s.listen(port, '127.0.0.1', () => resolve(s));
  });
}

/** proot (or its perl shim) processes whose parent is this test process: the runner's children. */
function prootChildren(): number[] {
  const out: number[] = [];
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if ((comm === 'proot' || comm === 'perl') && Number(fields[1]) === process.pid) out.push(Number(pid));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
