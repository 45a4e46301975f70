// ContainerRunner — the strong sandbox: one Docker container per instance (own PID/net/mount namespaces),
// started from the app-base image (Debian rootfs + node, scripts/images/app-base.sh) pulled by digest.
//
//   name = hostname = runlog-<sanitized instanceId>      on the user-defined bridge network `runlog-net`
//   binds  <workspace>/apps/<appId> → /workspace/apps/<appId>      (sliced: the container sees only its app)
//          <workspace>/packages     → /workspace/packages:ro       (shared, when it exists)
//          <workspace>/node_modules → /workspace/node_modules:ro   (hoisted, when it exists)
//          <home>/app-data/<appId>  → /data                        (per-app data, survives respawns)
//          <home>/bashrc.runlog.sh  → /root/.bashrc:ro
//          <home>/toolchain → /aura/all-tools:ro, <home>/instances/<id>/tools → /aura/my-tools:ro
//          /var/run/docker.sock     only when tools[] has 'docker' or '*'
//   labels runlog.stream=instance-<id>, runlog.kind=instance, runlog.home=<home>, runlog.app=<appId>,
//          runlog.base-path=<lifecycle basePath> (+ config.extraLabels, e.g. runlog.test=1)
//   strict defaults: all capabilities dropped, no-new-privileges, read-only root (tmpfs /tmp and /root),
//          pids and memory limits, docker-init as PID 1.
//
// Reaching the app: the supervisor runs on the host, so it talks to the container's IP on runlog-net at
// APP_PORT (Linux routes the host to its bridges). Nothing is published on the host: no host port is taken,
// no docker-proxy hop, and other containers on runlog-net reach the app by its hostname. The port from the
// TcpPortAllocator is still passed as APP_PORT so both sandboxes look alike to the app.
//
// Exit: a wait on each container watches it; the exit is reported to onExit (expected: true when the
// runner stopped it), then the container is removed. Containers outlive the supervisor: a new runner finds
// them with listOrphanRecords() (by labels, never by name) and re-attaches with registerAdopted().
//
// Docker is reached only through the DockerEngine port (adapters/docker/docker-port.ts): its errors are typed
// (DockerNotFoundError, DockerConflictError, DockerUnavailableError, …), so nothing here reads status codes.
//
// Beside it: the name and labels, and the orphan records read back from them (container-identity.ts), the create
// body with its binds (instance-container-body.ts), and the image and network checks (container-setup.ts).

import { constants as osConstants } from 'node:os';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { DockerEngine } from '../docker/docker-port.ts';
import { createDockerEngine } from '../docker/dockerode-engine.ts';
import { DockerNotFoundError } from '../docker/errors.ts';
import { StreamDemuxer } from '../docker/frames.ts';
import { mapConcurrent } from '../../domain/concurrency.ts';
import { lifecyclePath, runnerLabel, type AppManifest, type LifecycleHook } from '../../domain/manifest.ts';
import { waitHealthy } from '../health/wait-healthy.ts';
import { toolchainFor, type Toolchain } from '../tools/toolchain.ts';
import { provisionToolsDir } from '../tools/provision.ts';
import { resolveEntrypoint } from './entrypoint.ts';
import { sandboxEnv } from './env.ts';
import { containerName, instanceIdOf, instanceLabels, orphanRecordOf } from './container-identity.ts';
import { ensureDockerReady } from './container-setup.ts';
import { SandboxError } from './errors.ts';
import { ExitHub } from './exit-hub.ts';
import { instanceContainerBody } from './instance-container-body.ts';
import { ensureBashrc, homeLayout, type HomeLayout } from './layout.ts';
import { postHook } from './lifecycle-client.ts';
import { LogBuffer } from './log-buffer.ts';
import { checkSpawn, gateError } from './spawn-common.ts';
import type {
  ExitCallback,
  ExitInfo,
  LogLine,
  OrphanRecord,
  AppSandboxRunner,
  SpawnOptions,
  SpawnResult,
} from './app-sandbox-runner.ts';

export interface ContainerRunnerConfig {
  home: string;
  /** The apps workspace; an app lives in <workspaceDir>/apps/<appId>/. */
  workspaceDir: string;
  /** The Debian rootfs the image was built from (the toolchain is checked against it). */
  rootfs: string;
  /** `localhost:5000/app-base@sha256:…` (scripts/build-images.sh records it in …/images/app-base.ref). */
  image: string;
  /** Passed as OS_API_BASE; must be reachable from the runlog network. */
  osApiBase: string;
  network?: string;
  dockerSocketPath?: string;
  /** The Engine port to use (default: one on dockerSocketPath). */
  engine?: DockerEngine;
  /** Labels added to every container (and a network the runner creates), e.g. { 'runlog.test': '1' }. */
  extraLabels?: Record<string, string>;
  killGraceMs?: number;
  healthTimeoutMs?: number;
  healthIntervalMs?: number;
  hookTimeoutMs?: number;
  memoryBytes?: number;
  pidsLimit?: number;
  warn?: (message: string) => void;
  /**
   * The cluster node this runner belongs to: its containers are named `runlog-<node>--<id>`, so supervisors of
   * one cluster that share a Docker daemon (one machine) never clash on a name when one restarts an instance
   * another node's container of still exists (that node paused or dead).
   */
  node?: string;
}

interface Tracked {
  instanceId: string;
  appId: string;
  port: number;
  basePath: string;
  containerId: string;
  host: string;
  pid: number;
  expectingKill: boolean;
  live: boolean;
  detach: AbortController;
  exited: Promise<ExitInfo>;
}

const LABEL = runnerLabel('container');
export const DEFAULT_NETWORK = 'runlog-net';

const signalName = (code: number | null): string | null => {
  if (code === null || code <= 128 || code > 128 + 64) return null;
  const entry = Object.entries(osConstants.signals).find(([, n]) => n === code - 128);
  return entry ? entry[0] : null;
};

/** How long close() waits for exits being reported (a container removal the daemon does not answer). */
const REPORT_WAIT_MS = 10_000;

/** Docker inspects in flight at once while listing containers to adopt (the daemon serves them in parallel). */
const INSPECT_CONCURRENCY = 16;

export class ContainerRunner implements AppSandboxRunner {
  readonly kind = 'container' as const;
  private readonly cfg: Required<Omit<ContainerRunnerConfig, 'warn' | 'extraLabels' | 'engine' | 'node'>> &
    Pick<ContainerRunnerConfig, 'warn' | 'node'> & { extraLabels: Record<string, string> };
  private readonly engine: DockerEngine;
  private readonly layout: HomeLayout;
  private readonly tracked = new Map<string, Tracked>();
  private readonly logBuffers = new Map<string, LogBuffer>();
  private readonly exits = new ExitHub();
  /** Exits known to a watcher and being reported (container removed, onExit told): close() lets them finish. */
  private readonly reporting = new Set<Promise<void>>();
  private ready: Promise<void> | null = null;
  /** Aborted by close(): a spawn still in flight then lets go of its container instead of watching it forever. */
  private readonly closing = new AbortController();

  constructor(config: ContainerRunnerConfig) {
    this.cfg = {
      network: DEFAULT_NETWORK,
      dockerSocketPath: '/var/run/docker.sock',
      killGraceMs: 5_000,
      healthTimeoutMs: 30_000,
      healthIntervalMs: 50,
      hookTimeoutMs: 10_000,
      memoryBytes: 1024 ** 3,
      pidsLimit: 1024,
      ...config,
      extraLabels: config.extraLabels ?? {},
    };
    this.engine = config.engine ?? createDockerEngine({ socketPath: this.cfg.dockerSocketPath });
    this.layout = homeLayout(config.home);
  }

  private warn(message: string): void {
    (this.cfg.warn ?? ((m: string) => process.stderr.write(`${m}\n`)))(message);
  }

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

  /** Docker answers, the image is present (pulled by digest when not), the network exists. Once per runner. */
  ensureReady(): Promise<void> {
    this.ready ??= ensureDockerReady(
      this.engine,
      this.cfg.dockerSocketPath,
      this.cfg.image,
      this.cfg.network,
      this.cfg.extraLabels,
    ).catch((e: unknown) => {
      this.ready = null;
      throw e;
    });
    return this.ready;
  }

  async spawn(
    instanceId: string,
    appId: string,
    port: number,
    manifest: AppManifest,
    opts: SpawnOptions = {},
  ): Promise<SpawnResult> {
    checkSpawn(LABEL, instanceId, appId, port, manifest, this.tracked.has(instanceId));
    this.refuseWhenClosed(instanceId);
    const hostAppDir = join(this.cfg.workspaceDir, 'apps', appId);
    if (!existsSync(hostAppDir))
      throw new SandboxError('SPAWN_FAILED', `${LABEL} app directory ${hostAppDir} does not exist`, { appId });
    const sandboxAppDir = `/workspace/apps/${appId}`;
    const cmd = resolveEntrypoint(hostAppDir, sandboxAppDir, manifest, 'container');

    await Promise.all([this.ensureReady(), this.ensureToolchain()]);
    const L = this.layout;
    const provisioned = provisionToolsDir(L.instanceToolsDir(instanceId), L.toolchainDir, manifest.tools);
    if (provisioned.missing.length)
      this.warn(
        `${LABEL} ${appId} (${instanceId}): tools not available on this host: ${provisioned.missing.join(', ')}`,
      );
    mkdirSync(L.appDataDir(appId), { recursive: true });
    const bashrc = ensureBashrc(L);

    const name = containerName(instanceId, this.cfg.node);
    await this.clearStaleContainer(name, instanceId);

    const env = sandboxEnv({ port, appId, instanceId, osApiBase: this.cfg.osApiBase, layerTag: '[ctnr]' });
    const body = instanceContainerBody({
      name,
      image: this.cfg.image,
      cmd,
      env,
      labels: instanceLabels(this.cfg.extraLabels, this.cfg.home, instanceId, appId, manifest.lifecycle.basePath),
      instanceId,
      appId,
      hostAppDir,
      sandboxAppDir,
      workspaceDir: this.cfg.workspaceDir,
      layout: L,
      bashrc,
      tools: manifest.tools,
      dockerSocketPath: this.engine.socketPath,
      network: this.cfg.network,
      pidsLimit: this.cfg.pidsLimit,
      memoryBytes: this.cfg.memoryBytes,
    });

    const logs = new LogBuffer();
    this.logBuffers.set(instanceId, logs);
    this.exits.reset(instanceId);
    const started = performance.now();
    let containerId: string;
    try {
      containerId = await this.engine.createContainer(body, name);
      await this.engine.start(containerId);
    } catch (e) {
      await this.engine.removeContainer(name, { force: true }).catch(() => {});
      throw new SandboxError(
        'SPAWN_FAILED',
        `${LABEL} could not start ${name}: ${(e as Error).message}`,
        { instanceId, appId },
        { cause: e },
      );
    }

    const info = await this.engine.inspectContainer(containerId);
    if (!info)
      throw new SandboxError('SPAWN_FAILED', `${LABEL} ${name} was removed right after its start`, {
        instanceId,
        appId,
      });
    const host = info.networks[this.cfg.network]?.ipAddress ?? '';
    const t = this.track(
      { instanceId, appId, port, basePath: manifest.lifecycle.basePath, containerId: info.id, host, pid: info.pid },
      logs,
      false,
    );

    const exitedEarly = new AbortController();
    void t.exited.then((x) => exitedEarly.abort(`exited with ${x.signal ?? `code ${x.code}`}`));
    const gate = AbortSignal.any([exitedEarly.signal, this.closing.signal]);
    const health = host
      ? await waitHealthy({
          host,
          port,
          path: lifecyclePath(manifest.lifecycle.basePath, 'health'),
          appId,
          instanceId,
          timeoutMs: opts.healthTimeoutMs ?? this.cfg.healthTimeoutMs,
          intervalMs: opts.healthIntervalMs ?? this.cfg.healthIntervalMs,
          label: LABEL,
          signal: gate,
        })
      : info.state.running
        ? ({
            kind: 'timeout',
            message: `${LABEL} ${name} has no IP address on network ${this.cfg.network}`,
            lastError: 'no IP',
            attempts: 0,
            elapsedMs: 0,
          } as const)
        : ({
            kind: 'aborted',
            message: `${LABEL} ${name} stopped right after its start`,
            attempts: 0,
            elapsedMs: 0,
          } as const);
    if (health.kind === 'match' || health.kind === 'legacy') {
      if (health.kind === 'legacy') this.warn(health.message);
      t.live = true;
      return {
        pid: t.pid,
        containerId: t.containerId,
        host,
        port,
        identity: health.kind,
        healthyAfterMs: performance.now() - started,
      };
    }
    // Closed meanwhile: like every container at close(), this one stays for the next supervisor to reconcile.
    this.refuseWhenClosed(instanceId);

    t.expectingKill = true;
    await this.engine.kill(containerId).catch(() => {});
    const exit = await t.exited;
    throw gateError(LABEL, health, { instanceId, appId, port }, exit, logs.tail());
  }

  /** Refuses work once close() began: nothing started now would be watched. */
  private refuseWhenClosed(instanceId: string): void {
    if (this.closing.signal.aborted)
      throw new SandboxError(
        'SPAWN_FAILED',
        `${LABEL} the runner is closed: instance ${instanceId} is left to the next supervisor`,
        { instanceId },
      );
  }

  /** A container left under this instance's name: removed when it is ours and stopped; otherwise refuse. */
  private async clearStaleContainer(name: string, instanceId: string): Promise<void> {
    const info = await this.engine.inspectContainer(name);
    if (!info) return;
    const l = info.labels;
    if (l['runlog.home'] !== this.cfg.home || l['runlog.stream'] !== `instance-${instanceId}`) {
      throw new SandboxError(
        'SPAWN_FAILED',
        `${LABEL} a container named ${name} exists and does not belong to instance ${instanceId} of this runlog home`,
        { name },
      );
    }
    if (info.state.running) {
      throw new SandboxError(
        'INSTANCE_BUSY',
        `${LABEL} instance ${instanceId} is still running in ${name} (adopt it: listOrphanRecords/registerAdopted)`,
        { instanceId },
      );
    }
    await this.engine.removeContainer(info.id, { force: true });
  }

  /** Starts the log stream and the exit watcher of a container and records it. */
  private track(
    rec: Omit<Tracked, 'expectingKill' | 'live' | 'detach' | 'exited'>,
    logs: LogBuffer,
    live: boolean,
    logsSince?: number,
  ): Tracked {
    const detach = new AbortController();
    // Tracked after close() (a spawn or adoption that was in flight): detached at once, so no stream outlives close.
    if (this.closing.signal.aborted) detach.abort('runner closed');
    const id = rec.containerId;
    // why: the exit watcher below reads `t` itself; `exited` is set right after, before anything else reads it
    const t: Tracked = { ...rec, expectingKill: false, live, detach, exited: null as unknown as Promise<ExitInfo> };
    this.tracked.set(rec.instanceId, t);

    let logsClosed!: () => void;
    const logsDone = new Promise<void>((resolve) => (logsClosed = resolve));
    const endLogs = (): void => {
      logs.end();
      logsClosed();
    };
    void this.engine
      .logs(id, { ...(logsSince !== undefined ? { sinceSec: logsSince } : {}), signal: detach.signal })
      .then((stream) => {
        const demux = new StreamDemuxer(
          (c) => logs.write('stdout', c),
          (c) => logs.write('stderr', c),
        );
        stream.on('data', (c: Buffer) => demux.push(c));
        stream.on('end', endLogs);
        stream.on('error', endLogs);
        stream.on('close', endLogs);
      })
      .catch(endLogs);

    t.exited = (async (): Promise<ExitInfo> => {
      // A followed log stream ends when its container stops, so the exit is asked for only then: one connection
      // per container instead of two (recovery re-attaches hundreds at once). wait() stays the authority: a stream
      // that ended for another reason (an error, a daemon hiccup, no readable log driver) just waits sooner.
      await logsDone;
      let code: number | null = null;
      for (let attempt = 0; ; attempt++) {
        try {
          code = (await this.engine.waitNotRunning(id, { signal: detach.signal })).statusCode;
          break;
        } catch (e) {
          if (detach.signal.aborted) return new Promise<ExitInfo>(() => {}); // detached: never settles
          if (e instanceof DockerNotFoundError) break; // removed behind our back: exit code unknown
          if (attempt >= 15) break; // the daemon stayed unreachable for over a minute: report it gone (code null)
          await new Promise((r) => setTimeout(r, Math.min(5_000, 250 * 2 ** attempt))); // daemon hiccup: watch again
        }
      }
      // Detached (close()) before this watcher knew the exit: the container stays, exited, for whoever watches
      // next (the reconciler finds it and records the exit). Known first: the report below runs to its end even if
      // close() comes meanwhile (close() waits for it), so an exit is never dropped between the two — removed by
      // this watcher, then told to nobody, the reconciler would see no container at all and call the instance lost.
      if (detach.signal.aborted) return new Promise<ExitInfo>(() => {});
      const info: ExitInfo = { code, signal: signalName(code), expected: t.expectingKill };
      if (this.tracked.get(rec.instanceId) === t) this.tracked.delete(rec.instanceId);
      const report = (async () => {
        await this.engine.removeContainer(id, { force: true }).catch(() => {});
        if (t.live) this.exits.emit(rec.instanceId, info);
      })();
      this.reporting.add(report);
      await report;
      this.reporting.delete(report);
      return info;
    })();
    return t;
  }

  private target(instanceId: string): Tracked {
    const t = this.tracked.get(instanceId);
    if (!t || !t.live)
      throw new SandboxError('INSTANCE_UNKNOWN', `${LABEL} no running instance ${instanceId}`, { instanceId });
    return t;
  }

  async callLifecycle(instanceId: string, hook: LifecycleHook): Promise<void> {
    await postHook(LABEL, this.target(instanceId), hook, {}, false, this.cfg.hookTimeoutMs);
  }

  callOptionalLifecycle(instanceId: string, hook: string, body: unknown): Promise<unknown | null> {
    return postHook(LABEL, this.target(instanceId), hook, body, true, this.cfg.hookTimeoutMs);
  }

  async kill(instanceId: string): Promise<void> {
    const t = this.tracked.get(instanceId);
    if (!t) return;
    t.expectingKill = true;
    // Already stopped or gone is fine (the port's stop says so): the watcher reports the exit.
    await this.engine.stop(t.containerId, { timeoutSec: Math.max(1, Math.ceil(this.cfg.killGraceMs / 1000)) });
    await t.exited;
  }

  async forceKill(instanceId: string): Promise<void> {
    const t = this.tracked.get(instanceId);
    if (!t) return;
    t.expectingKill = true;
    await this.engine.kill(t.containerId); // not running or gone is fine
    await t.exited;
  }

  onExit(instanceId: string, cb: ExitCallback): () => void {
    return this.exits.on(instanceId, cb);
  }

  getHost(instanceId: string): string | null {
    const t = this.tracked.get(instanceId);
    return t?.live ? t.host : null;
  }

  getPort(instanceId: string): number | null {
    const t = this.tracked.get(instanceId);
    return t?.live ? t.port : null;
  }

  async listOrphanRecords(listed?: readonly { id: string; labels: Record<string, string> }[]): Promise<OrphanRecord[]> {
    const list =
      listed?.filter((c) => c.labels['runlog.kind'] === 'instance' && c.labels['runlog.home'] === this.cfg.home) ??
      (
        await this.engine.listContainers({ 'runlog.kind': 'instance', 'runlog.home': this.cfg.home }, { all: true })
      ).map((c) => ({ id: c.id, labels: c.labels }));
    const untracked = list.filter((c) => {
      const id = instanceIdOf(c.labels);
      return id !== '' && !this.tracked.has(id);
    });
    // Inspected in parallel (bounded): after a restart this is the supervisor's view of every container it adopts.
    const records = await mapConcurrent(untracked, INSPECT_CONCURRENCY, async (c): Promise<OrphanRecord | null> => {
      const info = await this.engine.inspectContainer(c.id);
      if (!info) return null; // removed meanwhile
      return orphanRecordOf(c.labels, info, this.cfg.network);
    });
    return records.filter((r): r is OrphanRecord => r !== null);
  }

  registerAdopted(rec: OrphanRecord): void {
    if (this.tracked.has(rec.instanceId))
      throw new SandboxError('INSTANCE_BUSY', `${LABEL} instance ${rec.instanceId} is already tracked`, {
        instanceId: rec.instanceId,
      });
    const logs = new LogBuffer();
    this.logBuffers.set(rec.instanceId, logs);
    this.exits.reset(rec.instanceId);
    // Live from the start: an adopted instance's exit is news (a crash while we were away, or later).
    this.track(
      {
        instanceId: rec.instanceId,
        appId: rec.appId,
        port: rec.port,
        basePath: rec.basePath,
        containerId: rec.containerId,
        host: rec.host ?? '',
        pid: rec.pid ?? 0,
      },
      logs,
      true,
      Math.floor(Date.now() / 1000) - 60, // recent output only, not the whole history
    );
  }

  logs(instanceId: string, opts: { follow?: boolean } = {}): AsyncIterable<LogLine> {
    const buf = this.logBuffers.get(instanceId);
    if (!buf) throw new SandboxError('INSTANCE_UNKNOWN', `${LABEL} no logs for instance ${instanceId}`, { instanceId });
    return buf.read(opts.follow ?? false);
  }

  /**
   * Stops watching (log streams, exit watchers) and goes on working: after the Docker daemon came back, watchers may
   * hang on connections that died with it, and reconciliation re-attaches what still runs. Containers keep running.
   * An exit a watcher already knows is reported first (bounded: a daemon that stops answering does not hold it up).
   */
  async detach(): Promise<void> {
    for (const t of this.tracked.values()) t.detach.abort('runner detached');
    this.tracked.clear();
    if (this.reporting.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(this.reporting), new Promise((r) => (timer = setTimeout(r, REPORT_WAIT_MS)))]);
    clearTimeout(timer);
  }

  /** Detaches for good: containers keep running for a later runner to adopt, and no spawn starts any more. */
  async close(): Promise<void> {
    this.closing.abort('runner closed');
    await this.detach();
  }
}
