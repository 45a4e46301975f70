// Spawn-to-healthy, both sandboxes, side by side with the raw primitive in the same run.
//
//   runlog  createRunlog().spawnApp({ appDir: examples/hello-app, sandbox }): value = time from the call to the
//           instance's `healthy` transition (bus listener on actor:transition): the requested/spawned/healthy
//           appends, the runner's preparation, the spawn and the identity-verified health poll. Time to
//           `running` (+ the onCreate/onStart hooks and the running append) is in the notes.
//   raw     proot: unshare + the perl rootfs guard and seccomp shim + proot, exactly as ProotRunner builds them
//           (runner.command), the same environment, + the same health poll (waitHealthy). container: dockerode createContainer + start
//           with the same image, binds, env, labels and hardening on the same network, inspect for the IP, + the
//           same health poll. No hooks on the raw side (raw + hooks is in the notes, against time to running).
// A round is 3 (proot) or 2 (container) spawns per side, interleaved, the side going first alternating; the
// round's figure is their median. Every spawn is a fresh instance, killed afterwards (rl.kill / SIGKILL of the
// process group / force remove). One untimed warm-up spawn per side first (toolchain build, image check,
// network creation). The runlog side's notes split its own work (prepare, around the runner, healthy append)
// from the runner's spawn → healthy time.
import { spawn as spawnChild } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Docker from 'dockerode';
import { createRunlog, type Runlog } from '../src/supervisor/runlog.ts';
import { loadManifest } from '../src/adapters/apps/load-manifest.ts';
import { httpRequest } from '../src/adapters/health/http.ts';
import { waitHealthy } from '../src/adapters/health/wait-healthy.ts';
import { containerName } from '../src/adapters/sandbox/container-identity.ts';
import { resolveEntrypoint } from '../src/adapters/sandbox/entrypoint.ts';
import { sandboxEnv } from '../src/adapters/sandbox/env.ts';
import { ensureBashrc, homeLayout } from '../src/adapters/sandbox/layout.ts';
import { ProotRunner } from '../src/adapters/sandbox/proot-runner.ts';
import { ALL_TOOLS_MOUNT, MY_TOOLS_MOUNT } from '../src/adapters/tools/toolchain.ts';
import { provisionToolsDir } from '../src/adapters/tools/provision.ts';
import { lifecyclePath, type AppManifest } from '../src/domain/manifest.ts';
import { closeWithin, median, nowMs, round, sizes, type Bench, type BenchResult } from './harness.ts';

const REPO = resolve(import.meta.dirname, '..');
const HELLO_APP_DIR = join(REPO, 'examples/hello-app');
const SETUP_DIR = process.env.RUNLOG_SETUP_DIR ?? '/var/lib/runlog-setup';
const ROOTFS = process.env.RUNLOG_ROOTFS ?? join(SETUP_DIR, 'rootfs/debian-bookworm');
const DOCKER_SOCKET = '/var/run/docker.sock';
const SETUP_HINT = 'run `npm run setup`';
const BENCH_LABELS = { 'runlog.bench': '1' } as const;
const HEALTH_TIMEOUT_MS = 20_000;
const HEALTH_INTERVAL_MS = 50; // the runners' default
const HOOK_TIMEOUT_MS = 10_000;
const OS_API_BASE = 'http://127.0.0.1:0'; // what InstanceSupervisor passes to its runners

function requireProot(): void {
  if (!existsSync('/usr/bin/proot')) throw new Error(`proot is not installed at /usr/bin/proot: ${SETUP_HINT}`);
  if (!existsSync('/usr/bin/perl'))
    throw new Error(`perl (runs the seccomp shim) is not at /usr/bin/perl: ${SETUP_HINT}`);
  if (!existsSync(join(ROOTFS, '.runlog-complete'))) throw new Error(`no Debian rootfs at ${ROOTFS}: ${SETUP_HINT}`);
}

async function requireDocker(docker: Docker): Promise<string> {
  try {
    await docker.ping();
  } catch (e) {
    throw new Error(`Docker does not answer on ${DOCKER_SOCKET} (${(e as Error).message}): ${SETUP_HINT}`);
  }
  const refFile = join(SETUP_DIR, 'images/app-base.ref');
  if (!existsSync(refFile)) throw new Error(`no app-base image recorded at ${refFile}: ${SETUP_HINT}`);
  const image = readFileSync(refFile, 'utf8').trim();
  if (!/@sha256:[0-9a-f]{64}$/.test(image))
    throw new Error(`${refFile} holds '${image}', not a digest reference: ${SETUP_HINT}`);
  return image;
}

/** A free TCP port on 127.0.0.1 (the kernel's choice), for the raw PRoot app. */
function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolvePort(port));
    });
  });
}

function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
  }
}

interface RawTarget {
  /** Spawns one raw instance and polls its health; returns ms to healthy and ms including the hooks. */
  once(i: number): Promise<{ healthyMs: number; withHooksMs: number }>;
}

/** The raw PRoot primitive: the shim + proot with the runner's own argv and env, then the same health poll. */
function rawProot(
  home: string,
  workspace: string,
  appId: string,
  manifest: AppManifest,
  runner: ProotRunner,
): RawTarget {
  const L = homeLayout(home);
  const hostAppDir = join(workspace, 'apps', appId);
  const entrypoint = resolveEntrypoint(hostAppDir, `/workspace/apps/${appId}`, manifest, 'proot');
  return {
    async once(i) {
      const instanceId = `bench-raw-p${process.pid}-${i}`;
      // What the runner prepares before it spawns (untimed here: only the primitive is measured).
      provisionToolsDir(L.instanceToolsDir(instanceId), L.toolchainDir, manifest.tools);
      mkdirSync(L.instanceDataDir(instanceId), { recursive: true });
      mkdirSync(L.instanceTmpDir(instanceId), { recursive: true, mode: 0o700 });
      mkdirSync(L.instanceVarTmpDir(instanceId), { recursive: true, mode: 0o700 });
      const port = await freePort();
      const env = sandboxEnv({ port, appId, instanceId, osApiBase: OS_API_BASE, layerTag: '[proot]' });
      const t0 = nowMs();
      const cmd = runner.command(instanceId, appId, manifest, entrypoint);
      const child = spawnChild(cmd.file, cmd.args, {
        cwd: '/',
        env,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout!.resume();
      child.stderr!.resume();
      const exited = new Promise<void>((r) => {
        child.once('exit', () => r());
        child.once('error', () => r()); // never started: no exit will come
      });
      try {
        await new Promise<void>((ok, fail) => {
          child.once('spawn', ok);
          child.once('error', fail);
        });
        const health = await waitHealthy({
          host: '127.0.0.1',
          port,
          path: lifecyclePath(manifest.lifecycle.basePath, 'health'),
          appId,
          instanceId,
          timeoutMs: HEALTH_TIMEOUT_MS,
          intervalMs: HEALTH_INTERVAL_MS,
        });
        const healthyMs = nowMs() - t0;
        if (health.kind !== 'match')
          throw new Error(
            `raw proot instance not healthy: ${health.kind} ${'message' in health ? health.message : ''}`,
          );
        for (const hook of ['onCreate', 'onStart']) await hookOk('127.0.0.1', port, manifest, hook);
        return { healthyMs, withHooksMs: nowMs() - t0 };
      } finally {
        killGroup(child.pid!);
        await exited;
        killGroup(child.pid!); // tracees detached from a killed proot
        rmSync(join(L.home, 'instances', instanceId), { recursive: true, force: true });
      }
    },
  };
}

/** The raw container primitive: dockerode create + start + inspect (IP), then the same health poll. */
function rawContainer(
  docker: Docker,
  image: string,
  network: string,
  home: string,
  workspace: string,
  appId: string,
  manifest: AppManifest,
): RawTarget {
  const L = homeLayout(home);
  const hostAppDir = join(workspace, 'apps', appId);
  const sandboxAppDir = `/workspace/apps/${appId}`;
  const cmd = resolveEntrypoint(hostAppDir, sandboxAppDir, manifest, 'container');
  return {
    async once(i) {
      const instanceId = `bench-raw-c${process.pid}-${i}`;
      provisionToolsDir(L.instanceToolsDir(instanceId), L.toolchainDir, manifest.tools);
      mkdirSync(L.appDataDir(appId), { recursive: true });
      const bashrc = ensureBashrc(L);
      const name = containerName(instanceId);
      const port = 4100;
      const binds = [
        `${hostAppDir}:${sandboxAppDir}`,
        ...['packages', 'node_modules']
          .filter((d) => existsSync(join(workspace, d)))
          .map((d) => `${join(workspace, d)}:/workspace/${d}:ro`),
        `${L.appDataDir(appId)}:/data`,
        `${bashrc}:/root/.bashrc:ro`,
        `${L.toolchainDir}:${ALL_TOOLS_MOUNT}:ro`,
        `${L.instanceToolsDir(instanceId)}:${MY_TOOLS_MOUNT}:ro`,
      ];
      const env = sandboxEnv({ port, appId, instanceId, osApiBase: OS_API_BASE, layerTag: '[ctnr]' });
      const t0 = nowMs();
      const container = await docker.createContainer({
        name,
        Hostname: name,
        Image: image,
        Cmd: cmd,
        Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
        WorkingDir: sandboxAppDir,
        // Not runlog.home: the reconciler removes containers of its home that no actor owns.
        Labels: {
          ...BENCH_LABELS,
          'runlog.bench.home': home,
          'runlog.stream': `instance-${instanceId}`,
          'runlog.app': appId,
          'runlog.base-path': manifest.lifecycle.basePath,
        },
        HostConfig: {
          NetworkMode: network,
          Binds: binds,
          CapDrop: ['ALL'],
          SecurityOpt: ['no-new-privileges'],
          ReadonlyRootfs: true,
          Tmpfs: { '/tmp': 'rw,nosuid,nodev,size=512m', '/root': 'rw,nosuid,nodev,size=256m' },
          PidsLimit: 1024,
          Memory: 1024 ** 3,
          Init: true,
        },
        NetworkingConfig: { EndpointsConfig: { [network]: { Aliases: [name] } } },
      });
      try {
        await container.start();
        const info = await container.inspect();
        const host = info.NetworkSettings.Networks[network]?.IPAddress ?? '';
        if (!host) throw new Error(`raw container ${name} has no IP on ${network}`);
        const health = await waitHealthy({
          host,
          port,
          path: lifecyclePath(manifest.lifecycle.basePath, 'health'),
          appId,
          instanceId,
          timeoutMs: HEALTH_TIMEOUT_MS,
          intervalMs: HEALTH_INTERVAL_MS,
        });
        const healthyMs = nowMs() - t0;
        if (health.kind !== 'match')
          throw new Error(`raw container not healthy: ${health.kind} ${'message' in health ? health.message : ''}`);
        for (const hook of ['onCreate', 'onStart']) await hookOk(host, port, manifest, hook);
        return { healthyMs, withHooksMs: nowMs() - t0 };
      } finally {
        await container.remove({ force: true }).catch(() => undefined);
        rmSync(join(L.home, 'instances', instanceId), { recursive: true, force: true });
      }
    },
  };
}

async function hookOk(host: string, port: number, manifest: AppManifest, hook: string): Promise<void> {
  const a = await httpRequest({
    host,
    port,
    method: 'POST',
    path: lifecyclePath(manifest.lifecycle.basePath, hook),
    body: {},
    timeoutMs: HOOK_TIMEOUT_MS,
  });
  if (a.status < 200 || a.status >= 300) throw new Error(`raw ${hook} answered HTTP ${a.status}`);
}

/**
 * One runlog spawn: ms to the `healthy` transition, ms to `running` (spawnApp resolved), then rl.kill. The
 * transitions are stamped as they happen (bus), which splits runlog's own work from the runner's
 * spawn → healthy time (reported by the runner in `instance.spawned`).
 */
async function runlogOnce(rl: Runlog, sandbox: 'proot' | 'container', i: number) {
  const instanceId = `bench-${sandbox === 'proot' ? 'p' : 'c'}${process.pid}-${i}`;
  const at: Record<string, number> = {};
  const off = rl.on('actor:transition', (t) => {
    if (t.id === instanceId) at[t.event.type] ??= nowMs();
  });
  const t0 = nowMs();
  try {
    const view = await rl.spawnApp({ appDir: HELLO_APP_DIR, sandbox, instanceId });
    const runningMs = nowMs() - t0;
    if (view.state !== 'running') throw new Error(`runlog instance ended ${view.state}`);
    const events = await rl.events(instanceId);
    const logAt = (type: string) => Date.parse(events.find((e) => e.type === type)?.at ?? '');
    const spawned = events.find((e) => e.type === 'instance.spawned');
    const runnerMs = Number((spawned?.data as { healthyAfterMs?: number } | undefined)?.healthyAfterMs ?? Number.NaN);
    const requested = at['instance.requested']! - t0;
    const toSpawned = at['instance.spawned']! - t0;
    return {
      healthyMs: at['instance.healthy']! - t0,
      runningMs,
      runnerMs,
      logHealthyMs: logAt('instance.healthy') - logAt('instance.requested'),
      /** spawnApp's validation, the app copy into the workspace and the durable `requested` append. */
      prepareMs: requested,
      /** Effect start, manifest load, port, the runner's preparation, and the `spawned` append (runner spawn → healthy excluded). */
      aroundRunnerMs: toSpawned - requested - runnerMs,
      /** The `healthy` append. */
      healthyAppendMs: at['instance.healthy']! - at['instance.spawned']!,
    };
  } finally {
    off();
    await rl.kill(instanceId).catch(() => undefined);
  }
}

function spawnBench(sandbox: 'proot' | 'container'): Bench {
  const name = `spawn.${sandbox}`;
  const target = sandbox === 'proot' ? 1.25 : 1.1;
  return {
    name,
    needs:
      sandbox === 'proot' ? 'proot, perl and the Debian rootfs' : 'Docker, the app-base image and the Debian rootfs',
    async run(opts): Promise<BenchResult> {
      const { rounds, log } = opts;
      const { perRound } = sizes(opts, { full: { perRound: sandbox === 'proot' ? 3 : 2 }, smoke: { perRound: 1 } });
      requireProot(); // both sandboxes use the rootfs (the container's toolchain is checked against it)
      const docker = new Docker({ socketPath: DOCKER_SOCKET });
      const image = sandbox === 'container' ? await requireDocker(docker) : '';
      const root = mkdtempSync(join(tmpdir(), 'runlog-bench-spawn-'));
      const home = join(root, 'home');
      mkdirSync(home);
      const network = `runlog-bench-${process.pid}`;
      let rl: Runlog | null = null;
      try {
        rl = await createRunlog({
          home,
          labels: { ...BENCH_LABELS },
          containerNetwork: network,
          portRange: { min: 5100, max: 5199 },
          healthTimeoutMs: HEALTH_TIMEOUT_MS,
          killGraceMs: 2000,
          log: () => undefined,
        });
        // Warm-up (untimed): installs the app, builds the toolchain, checks the image, creates the network.
        await runlogOnce(rl, sandbox, 0);
        const workspace = join(home, 'workspace');
        const appId = JSON.parse(readFileSync(join(HELLO_APP_DIR, 'runlog.json'), 'utf8')).appId as string;
        const manifest = { ...loadManifest(join(workspace, 'apps', appId)), sandbox };
        const runner = new ProotRunner({ home, workspaceDir: workspace, rootfs: ROOTFS, osApiBase: OS_API_BASE });
        const raw =
          sandbox === 'proot'
            ? rawProot(home, workspace, appId, manifest, runner)
            : rawContainer(docker, image, network, home, workspace, appId, manifest);
        await raw.once(0);

        const ours: Awaited<ReturnType<typeof runlogOnce>>[] = [];
        const theirs: Awaited<ReturnType<RawTarget['once']>>[] = [];
        const oursByRound: number[] = [];
        const theirsByRound: number[] = [];
        const runningByRound: number[] = [];
        const rawHooksByRound: number[] = [];
        let k = 0;
        for (let r = 1; r <= rounds; r++) {
          const o: number[] = [];
          const t: number[] = [];
          const oRunning: number[] = [];
          const tHooks: number[] = [];
          for (let j = 0; j < perRound; j++, k++) {
            // Alternate who goes first, so neither side always meets a just-freed (or still busy) system.
            const runOurs = async () => {
              const x = await runlogOnce(rl!, sandbox, k + 1);
              ours.push(x);
              o.push(x.healthyMs);
              oRunning.push(x.runningMs);
            };
            const runRaw = async () => {
              const x = await raw.once(k + 1);
              theirs.push(x);
              t.push(x.healthyMs);
              tHooks.push(x.withHooksMs);
            };
            if (k % 2) {
              await runOurs();
              await runRaw();
            } else {
              await runRaw();
              await runOurs();
            }
          }
          oursByRound.push(median(o));
          theirsByRound.push(median(t));
          runningByRound.push(median(oRunning));
          rawHooksByRound.push(median(tHooks));
          log(
            `${name} round ${r}: runlog healthy ${o.map((x) => x.toFixed(0)).join('/')} ms, raw ${t.map((x) => x.toFixed(0)).join('/')} ms`,
          );
        }
        const v = median(oursByRound);
        const b = median(theirsByRound);
        const running = median(runningByRound);
        const rawHooks = median(rawHooksByRound);
        return {
          name,
          value: round(v),
          unit: 'ms',
          baseline: round(b),
          ratio: round(v / b),
          notes: {
            target: `≤ ${target.toFixed(2)}×`,
            measures: 'runlog: spawnApp call → healthy transition; raw: spawn → identity-verified health (no hooks)',
            running_ms: round(running),
            raw_with_hooks_ms: round(rawHooks),
            running_ratio: round(running / rawHooks),
            runner_spawn_to_healthy_ms: round(median(ours.map((o) => o.runnerMs))),
            overhead_prepare_ms: round(median(ours.map((o) => o.prepareMs))),
            overhead_around_runner_ms: round(median(ours.map((o) => o.aroundRunnerMs))),
            overhead_healthy_append_ms: round(median(ours.map((o) => o.healthyAppendMs))),
            log_requested_to_healthy_ms: round(median(ours.map((o) => o.logHealthyMs))),
            rounds:
              `${rounds} × ${perRound} spawns per side, ` +
              `interleaved (round figure = median of its spawns; +1 untimed warm-up per side)`,
          },
        };
      } finally {
        await closeWithin(rl);
        if (sandbox === 'container') await cleanupDocker(docker, home, network);
        rmSync(root, { recursive: true, force: true });
      }
    },
  };
}

/** Removes what the bench made in Docker: its containers (by label and home) and its network. */
async function cleanupDocker(docker: Docker, home: string, network: string): Promise<void> {
  const all = await docker.listContainers({ all: true, filters: { label: ['runlog.bench=1'] } }).catch(() => []);
  const mine = all.filter((c) => c.Labels['runlog.home'] === home || c.Labels['runlog.bench.home'] === home);
  await Promise.all(
    mine.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  );
  const nets = await docker.listNetworks({ filters: { name: [network] } });
  for (const n of nets.filter((x) => x.Name === network))
    await docker
      .getNetwork(n.Id)
      .remove()
      .catch(() => undefined);
}

export const spawnBenches: Bench[] = [spawnBench('container'), spawnBench('proot')];
