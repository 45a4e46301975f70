// ProotRunner — the cheap sandbox. PRoot rewrites file-access syscalls (ptrace) so the app sees the Debian
// rootfs; it shares the host's kernel and network. Weak isolation: apps are cooperating, not adversarial
// (they can see the whole workspace and the host's /dev).
//
// Two departures from the seed's bind list, so an app cannot reach the supervisor's secrets:
//  - /tmp and /var/tmp are the instance's own directories (<home>/instances/<id>/{tmp,var-tmp}), not the host's
//    nor the rootfs's: a home under /tmp, or anything else the host keeps there, stays out of sight, and what one
//    instance leaves there no other sees.
//  - proot runs in a PID namespace of its own with a fresh /proc (`unshare --pid --fork --mount-proc`; for a
//    non-root supervisor with `--user --map-root-user` first: the guard below needs root in that namespace to
//    mount, and a uid not mapped to root loses its capabilities at exec): the app sees only its own processes, so
//    /proc/<supervisor pid>/{environ,root,fd,cwd} do not exist for it. The network namespace is the host's (the
//    app's port is reached on 127.0.0.1 as before). Tracking is unchanged: the process runlog starts (unshare)
//    leads the process group that kill() and the reaper signal from the host's side; unshare
//    ignores SIGTERM while it waits and exits with proot's status, and --kill-child makes the namespace die
//    with it; when proot (the namespace's init) exits, the kernel kills whatever is left inside.
//
// One instance must not change another's filesystem, nor the base image every instance shares: the app runs as
// (real or namespaced) root, and the rootfs is one directory on the host. PRoot has no overlay, so the choice was
// between a per-instance copy (206 MB of minbase per spawn; a hardlink farm is no copy: a write through a
// hardlink changes the shared inode), running proot as an unprivileged uid over the root-owned rootfs (the
// workspace, /data and the user home would then need that uid's ownership, and a rootfs built by a non-root
// supervisor is its own to write), and a read-only view. The view is what runs: proot already gets a mount
// namespace of its own (--mount-proc), and in it the guard (rootfs-guard.ts) bind-mounts the rootfs, the
// toolchain, the node binary, the bashrc and resolv.conf read-only onto themselves and mounts a private tmpfs on
// /dev/shm, a few syscalls before proot starts, no copy. A write to /etc or /usr fails with EROFS; the writable
// places are the instance's own (/tmp, /var/tmp, /data, /dev/shm, /aura/my-tools) or shared on purpose (the
// workspace, the per-user home /root). The host's and other instances' views stay writable and untouched.
//
//   unshare --pid --fork --mount-proc --kill-child
//   perl <rootfs guard + seccomp shim> <rootfs, toolchain, node, bashrc, resolv.conf: read-only; /dev/shm: tmpfs>
//   proot --rootfs=<debian rootfs>
//         --bind=<workspace>:/workspace            every app (the seed binds the full monorepo)
//         --bind=<home>/instances/<id>/data:/data  per-instance data
//         --bind=/proc (the namespace's) --bind=/dev --bind=<home>/instances/<id>/tmp:/tmp --bind=/etc/resolv.conf
//         --bind=<home>/instances/<id>/var-tmp:/var/tmp
//         --bind=<home>/user-home:/root            per-user home shared by apps
//         --bind=<home>/bashrc.runlog.sh:/root/.bashrc
//         --bind=<home>/toolchain:/aura/all-tools  --bind=<home>/instances/<id>/tools:/aura/my-tools
//         --bind=<host node>:/usr/local/bin/node   the node runtime (the app-base image has it there too)
//         [--bind=/var/run/docker.sock]            only when tools[] has 'docker' or '*'
//         --cwd=/workspace/apps/<appId>  /bin/bash <entrypoint.sh | -c synthesized>
//
// proot is exec'd (after the guard) through a seccomp shim (seccomp-shim.ts) that makes statx/clone3/openat2/
// faccessat2 answer ENOSYS: PRoot 5.1 does not translate them, and without the shim Node cannot even load server.mjs.
//
// Lifetime: each proot is the leader of its own process group (detached: true); kill() signals the group
// (SIGTERM, then SIGKILL after the grace period); after proot exits, the group is SIGKILLed so no tracee
// outlives it. If the supervisor itself dies — even by SIGKILL — the ProcessGroupReaper watchdog kills every
// group (see reaper.ts): PRoot apps never outlive the supervisor and are never adopted.

import { spawn as spawnChild, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { lifecyclePath, runnerLabel, type AppManifest, type LifecycleHook } from '../../domain/manifest.ts';
import { waitHealthy } from '../health/wait-healthy.ts';
import { toolchainFor, ALL_TOOLS_MOUNT, MY_TOOLS_MOUNT, type Toolchain } from '../tools/toolchain.ts';
import { provisionToolsDir } from '../tools/provision.ts';
import { resolveEntrypoint } from './entrypoint.ts';
import { sandboxEnv } from './env.ts';
import { SandboxError } from './errors.ts';
import { ExitHub } from './exit-hub.ts';
import { ensureBashrc, homeLayout, type HomeLayout } from './layout.ts';
import { postHook } from './lifecycle-client.ts';
import { LogBuffer } from './log-buffer.ts';
import { checkSpawn, gateError } from './spawn-common.ts';
import { ProcessGroupReaper } from './reaper.ts';
import { guardArgs } from './rootfs-guard.ts';
import type {
  ExitCallback,
  ExitInfo,
  LogLine,
  OrphanRecord,
  AppSandboxRunner,
  SpawnOptions,
  SpawnResult,
} from './app-sandbox-runner.ts';

export interface ProotRunnerConfig {
  /** runlog home (see layout.ts). */
  home: string;
  /** The apps workspace, mounted at /workspace; an app lives in <workspaceDir>/apps/<appId>/. */
  workspaceDir: string;
  /** Debian rootfs (scripts/setup.sh builds /var/lib/runlog-setup/rootfs/debian-bookworm). */
  rootfs: string;
  /** Passed to the app as OS_API_BASE. */
  osApiBase: string;
  prootPath?: string;
  /** util-linux unshare, which gives proot its own PID namespace and /proc. */
  unsharePath?: string;
  /** Host perl, which runs the seccomp shim (seccomp-shim.ts) in front of proot. */
  perlPath?: string;
  /** Host node binary bound at /usr/local/bin/node. Default: the supervisor's own (process.execPath). */
  nodeBinary?: string;
  dockerSocket?: string;
  killGraceMs?: number;
  healthTimeoutMs?: number;
  healthIntervalMs?: number;
  hookTimeoutMs?: number;
  /** Where warnings go (legacy health identity, tools missing on this host). Default: stderr. */
  warn?: (message: string) => void;
}

interface Tracked {
  instanceId: string;
  appId: string;
  port: number;
  basePath: string;
  child: ChildProcess;
  pgid: number;
  expectingKill: boolean;
  /** spawn() resolved: exits are reported through onExit. */
  live: boolean;
  exited: Promise<ExitInfo>;
}

const LABEL = runnerLabel('proot');
const HOST = '127.0.0.1';

export class ProotRunner implements AppSandboxRunner {
  readonly kind = 'proot' as const;
  private readonly cfg: Required<Omit<ProotRunnerConfig, 'warn'>> & Pick<ProotRunnerConfig, 'warn'>;
  private readonly layout: HomeLayout;
  private readonly tracked = new Map<string, Tracked>();
  /** Aborted by close(): a spawn still waiting for health stops its child instead of outliving the runner. */
  private readonly closing = new AbortController();
  private readonly logBuffers = new Map<string, LogBuffer>();
  private readonly exits = new ExitHub();
  private readonly reaper = new ProcessGroupReaper();

  constructor(config: ProotRunnerConfig) {
    this.cfg = {
      prootPath: '/usr/bin/proot',
      unsharePath: '/usr/bin/unshare',
      perlPath: '/usr/bin/perl',
      nodeBinary: process.execPath,
      dockerSocket: '/var/run/docker.sock',
      killGraceMs: 5_000,
      healthTimeoutMs: 30_000,
      healthIntervalMs: 50,
      hookTimeoutMs: 10_000,
      ...config,
    };
    this.layout = homeLayout(config.home);
  }

  private warn(message: string): void {
    (this.cfg.warn ?? ((m: string) => process.stderr.write(`${m}\n`)))(message);
  }

  /** Builds the toolchain once per runner (idempotent on disk). */
  ensureToolchain(): Promise<Toolchain> {
    return toolchainFor({ dir: this.layout.toolchainDir, rootfs: this.cfg.rootfs }).catch((e: unknown) => {
      throw new SandboxError(
        'SETUP_MISSING',
        `${LABEL} cannot build the toolchain: ${(e as Error).message}`,
        {},
        { cause: e },
      );
    });
  }

  /** The proot argv for an instance (exported for diagnostics and the benchmark). */
  prootArgs(instanceId: string, appId: string, manifest: AppManifest, entrypoint: string[]): string[] {
    const L = this.layout;
    const wantsDocker = manifest.tools.includes('docker') || manifest.tools.includes('*');
    return [
      `--rootfs=${this.cfg.rootfs}`,
      `--bind=${this.cfg.workspaceDir}:/workspace`,
      `--bind=${L.instanceDataDir(instanceId)}:/data`,
      '--bind=/proc',
      '--bind=/dev',
      `--bind=${L.instanceTmpDir(instanceId)}:/tmp`,
      `--bind=${L.instanceVarTmpDir(instanceId)}:/var/tmp`,
      '--bind=/etc/resolv.conf',
      `--bind=${L.userHomeDir}:/root`,
      `--bind=${L.bashrcFile}:/root/.bashrc`,
      `--bind=${L.toolchainDir}:${ALL_TOOLS_MOUNT}`,
      `--bind=${L.instanceToolsDir(instanceId)}:${MY_TOOLS_MOUNT}`,
      `--bind=${this.cfg.nodeBinary}:/usr/local/bin/node`,
      ...(wantsDocker && existsSync(this.cfg.dockerSocket) ? [`--bind=${this.cfg.dockerSocket}`] : []),
      `--cwd=/workspace/apps/${appId}`,
      ...entrypoint,
    ];
  }

  /** Host paths every instance sees and none may change: read-only in each instance's mount namespace. */
  readOnlyPaths(): string[] {
    const L = this.layout;
    return [
      this.cfg.rootfs,
      L.toolchainDir,
      this.cfg.nodeBinary,
      L.bashrcFile,
      ...(existsSync('/etc/resolv.conf') ? ['/etc/resolv.conf'] : []),
    ];
  }

  /**
   * The program and argv that start an instance: unshare (own PID and mount namespace, own /proc), then the
   * rootfs guard and seccomp shim (perl), then proot. Exported for the benchmark, which must start exactly what
   * the runner starts.
   */
  command(
    instanceId: string,
    appId: string,
    manifest: AppManifest,
    entrypoint: string[],
  ): { file: string; args: string[] } {
    const root = typeof process.getuid === 'function' && process.getuid() === 0;
    const unshare = [...(root ? [] : ['--user', '--map-root-user']), '--pid', '--fork', '--mount-proc', '--kill-child'];
    const proot = guardArgs(
      this.readOnlyPaths(),
      this.cfg.prootPath,
      this.prootArgs(instanceId, appId, manifest, entrypoint),
    );
    return { file: this.cfg.unsharePath, args: [...unshare, this.cfg.perlPath, ...proot] };
  }

  async spawn(
    instanceId: string,
    appId: string,
    port: number,
    manifest: AppManifest,
    opts: SpawnOptions = {},
  ): Promise<SpawnResult> {
    checkSpawn(LABEL, instanceId, appId, port, manifest, this.tracked.has(instanceId));
    if (this.closing.signal.aborted)
      throw new SandboxError('SPAWN_FAILED', `${LABEL} the runner is closed: instance ${instanceId} was not started`, {
        instanceId,
      });
    if (!existsSync(this.cfg.prootPath))
      throw new SandboxError('SETUP_MISSING', `${LABEL} proot not found at ${this.cfg.prootPath}: run 'npm run setup'`);
    if (!existsSync(this.cfg.unsharePath))
      throw new SandboxError(
        'SETUP_MISSING',
        `${LABEL} unshare not found at ${this.cfg.unsharePath} (util-linux): it gives each app its own PID namespace`,
      );
    if (!existsSync(this.cfg.perlPath))
      throw new SandboxError(
        'SETUP_MISSING',
        `${LABEL} perl not found at ${this.cfg.perlPath} (it runs the seccomp shim in front of proot)`,
      );
    if (!existsSync(join(this.cfg.rootfs, 'usr/bin/bash')))
      throw new SandboxError('SETUP_MISSING', `${LABEL} no Debian rootfs at ${this.cfg.rootfs}: run 'npm run setup'`);
    const hostAppDir = join(this.cfg.workspaceDir, 'apps', appId);
    if (!existsSync(hostAppDir))
      throw new SandboxError('SPAWN_FAILED', `${LABEL} app directory ${hostAppDir} does not exist`, { appId });
    const entrypoint = resolveEntrypoint(hostAppDir, `/workspace/apps/${appId}`, manifest, 'proot');

    await this.ensureToolchain();
    const provisioned = provisionToolsDir(
      this.layout.instanceToolsDir(instanceId),
      this.layout.toolchainDir,
      manifest.tools,
    );
    if (provisioned.missing.length)
      this.warn(
        `${LABEL} ${appId} (${instanceId}): tools not available on this host: ${provisioned.missing.join(', ')}`,
      );
    mkdirSync(this.layout.instanceDataDir(instanceId), { recursive: true });
    mkdirSync(this.layout.instanceTmpDir(instanceId), { recursive: true, mode: 0o700 });
    mkdirSync(this.layout.instanceVarTmpDir(instanceId), { recursive: true, mode: 0o700 });
    mkdirSync(this.layout.userHomeDir, { recursive: true });
    ensureBashrc(this.layout);

    const env = sandboxEnv({ port, appId, instanceId, osApiBase: this.cfg.osApiBase, layerTag: '[proot]' });
    const logs = new LogBuffer();
    this.logBuffers.set(instanceId, logs);
    this.exits.reset(instanceId);

    const started = performance.now();
    const cmd = this.command(instanceId, appId, manifest, entrypoint);
    const child = spawnChild(cmd.file, cmd.args, {
      cwd: '/',
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', (e) =>
        reject(
          new SandboxError(
            'SPAWN_FAILED',
            `${LABEL} could not start proot: ${e.message}`,
            { instanceId },
            { cause: e },
          ),
        ),
      );
    });
    const pgid = child.pid!;
    this.reaper.watch(pgid);
    child.stdout!.on('data', (c: Buffer) => logs.write('stdout', c));
    child.stderr!.on('data', (c: Buffer) => logs.write('stderr', c));
    child.once('close', () => logs.end());

    let settle!: (i: ExitInfo) => void;
    const t: Tracked = {
      instanceId,
      appId,
      port,
      basePath: manifest.lifecycle.basePath,
      child,
      pgid,
      expectingKill: false,
      live: false,
      exited: new Promise<ExitInfo>((r) => (settle = r)),
    };
    this.tracked.set(instanceId, t);
    const exitedEarly = new AbortController();
    child.once('exit', (code, signal) => {
      killGroup(pgid, 'SIGKILL'); // tracees detached from a killed proot must not linger
      this.reaper.unwatch(pgid);
      // Scratch: gone with its process.
      for (const dir of [this.layout.instanceTmpDir(instanceId), this.layout.instanceVarTmpDir(instanceId)])
        rmSync(dir, { recursive: true, force: true });
      const info: ExitInfo = { code, signal, expected: t.expectingKill };
      if (this.tracked.get(instanceId) === t) this.tracked.delete(instanceId);
      exitedEarly.abort(`exited with ${signal ?? `code ${code}`}`);
      settle(info);
      if (t.live) this.exits.emit(instanceId, info);
    });

    const health = await waitHealthy({
      host: HOST,
      port,
      path: lifecyclePath(manifest.lifecycle.basePath, 'health'),
      appId,
      instanceId,
      timeoutMs: opts.healthTimeoutMs ?? this.cfg.healthTimeoutMs,
      intervalMs: opts.healthIntervalMs ?? this.cfg.healthIntervalMs,
      label: LABEL,
      signal: AbortSignal.any([exitedEarly.signal, this.closing.signal]),
    });
    if (health.kind === 'match' || health.kind === 'legacy') {
      if (health.kind === 'legacy') this.warn(health.message);
      t.live = true;
      return { pid: pgid, host: HOST, port, identity: health.kind, healthyAfterMs: performance.now() - started };
    }

    // Failed gate: stop everything this spawn started, then report why.
    t.expectingKill = true;
    killGroup(pgid, 'SIGKILL');
    const info = await t.exited;
    throw gateError(LABEL, health, { instanceId, appId, port }, info, logs.tail());
  }

  private target(instanceId: string): Tracked {
    const t = this.tracked.get(instanceId);
    if (!t || !t.live)
      throw new SandboxError('INSTANCE_UNKNOWN', `${LABEL} no running instance ${instanceId}`, { instanceId });
    return t;
  }

  async callLifecycle(instanceId: string, hook: LifecycleHook): Promise<void> {
    const t = this.target(instanceId);
    await postHook(LABEL, { ...t, host: HOST }, hook, {}, false, this.cfg.hookTimeoutMs);
  }

  callOptionalLifecycle(instanceId: string, hook: string, body: unknown): Promise<unknown | null> {
    const t = this.target(instanceId);
    return postHook(LABEL, { ...t, host: HOST }, hook, body, true, this.cfg.hookTimeoutMs);
  }

  async kill(instanceId: string): Promise<void> {
    const t = this.tracked.get(instanceId);
    if (!t) return; // already gone: stopping is idempotent
    t.expectingKill = true;
    killGroup(t.pgid, 'SIGTERM');
    const timer = setTimeout(() => killGroup(t.pgid, 'SIGKILL'), this.cfg.killGraceMs);
    await t.exited;
    clearTimeout(timer);
  }

  async forceKill(instanceId: string): Promise<void> {
    const t = this.tracked.get(instanceId);
    if (!t) return;
    t.expectingKill = true;
    killGroup(t.pgid, 'SIGKILL');
    await t.exited;
  }

  onExit(instanceId: string, cb: ExitCallback): () => void {
    return this.exits.on(instanceId, cb);
  }

  getHost(instanceId: string): string | null {
    return this.tracked.get(instanceId)?.live ? HOST : null;
  }

  getPort(instanceId: string): number | null {
    const t = this.tracked.get(instanceId);
    return t?.live ? t.port : null;
  }

  /** PRoot children never outlive the supervisor (reaper.ts), so there is never an orphan to adopt. */
  async listOrphanRecords(): Promise<OrphanRecord[]> {
    return [];
  }

  registerAdopted(rec: OrphanRecord): void {
    throw new SandboxError(
      'ADOPT_UNSUPPORTED',
      `${LABEL} cannot adopt ${rec.instanceId}: PRoot apps die with the supervisor; only sandbox: 'container' apps are adopted`,
    );
  }

  logs(instanceId: string, opts: { follow?: boolean } = {}): AsyncIterable<LogLine> {
    const buf = this.logBuffers.get(instanceId);
    if (!buf) throw new SandboxError('INSTANCE_UNKNOWN', `${LABEL} no logs for instance ${instanceId}`, { instanceId });
    return buf.read(opts.follow ?? false);
  }

  /** Nothing to let go of: its children are its own processes, watched without the Docker daemon. */
  async detach(): Promise<void> {}

  /** Stops every child (gracefully, in parallel) and the watchdog. */
  async close(): Promise<void> {
    this.closing.abort('runner closed');
    await Promise.all([...this.tracked.keys()].map((id) => this.kill(id)));
    this.reaper.close();
  }
}

function killGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
  }
}
