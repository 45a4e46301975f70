// App instances under the supervisor: the instance machine's effects carried out by the sandbox
// runners (PRoot, Docker), the port allocator, the tools allowlist and the app registry. Everything a
// runner reports comes back as an event on the instance's stream.
import { join, resolve } from 'node:path';
import { installApp } from '../../adapters/apps/install-app.ts';
import { ensureDirectory, pathExists } from '../../adapters/files/local-files.ts';
import { loadManifest } from '../../adapters/apps/load-manifest.ts';
import { AppRegistry, type AppRegistryEvent, type WatchFactory } from '../../adapters/apps/app-registry.ts';
import { TcpPortAllocator } from '../../adapters/net/tcp-port-allocator.ts';
import type { DockerEngine } from '../../adapters/docker/docker-port.ts';
import { engineTrouble } from '../../adapters/docker/errors.ts';
import { ContainerRunner } from '../../adapters/sandbox/container-runner.ts';
import { homeLayout, type HomeLayout } from '../../adapters/sandbox/layout.ts';
import { ProotRunner } from '../../adapters/sandbox/proot-runner.ts';
import type { OrphanRecord, AppSandboxRunner } from '../../adapters/sandbox/app-sandbox-runner.ts';
import { provisionToolsDir } from '../../adapters/tools/provision.ts';
import { FencedError, type RunlogError } from '../../domain/errors.ts';
import { MANIFEST_FILE, type AppManifest } from '../../domain/manifest.ts';
import {
  type CrashReason,
  type InstanceContext,
  type InstanceEffects,
  type InstanceSpec,
  type SandboxKind,
} from '../../machines/instance.machine.ts';
import type { ActorHost, EffectContext as AnyEffectContext, EffectHandlers, LiveActor } from '../host/actor-host.ts';
import { systemClock } from '../host/system-clock.ts';
import { stateName } from '../../machines/runtime.ts';
import type { Clock } from '../../domain/clock.ts';
import { effectiveTools, type ToolOverrides } from './app-grants.ts';
import { prepareInstance } from './instance-preparation.ts';
import { requireImage, requireRootfs, type Parts } from '../../config/parts.ts';

export interface InstanceOptions {
  home: string;
  /** The apps workspace (mounted at /workspace in PRoot); apps live in <workspace>/apps/<appId>. */
  workspace?: string;
  parts: Parts;
  portRange?: { min: number; max: number };
  /** Passed to apps as OS_API_BASE. */
  osApiBase?: string;
  /** Extra labels on every container (tests mark theirs). */
  containerLabels?: Record<string, string>;
  containerNetwork?: string;
  healthTimeoutMs?: number;
  killGraceMs?: number;
  /** How long a container spawn waits for an unreachable Docker Engine before it fails (default 120 s). */
  engineWaitMs?: number;
  /** Times and waits for the spawn's retries while the Docker Engine is unreachable (default: the wall clock). */
  clock?: Clock;
  /** The Docker Engine port the container runner uses, asked for when the runner is built (default: the runner's own). */
  engine?: () => DockerEngine;
  /** Injected runners (tests of the wiring); default: the real ProotRunner and ContainerRunner, built lazily. */
  runners?: Partial<Record<SandboxKind, AppSandboxRunner>>;
  log?: (msg: string) => void;
  /** The app's `cap` grants and revocations (from the log), applied over its manifest's tools at every spawn. */
  toolOverrides?: (appId: string) => Promise<ToolOverrides>;
}

type EffectContext = AnyEffectContext<'instance'>;

/** A spawn in flight: `relinquished` once this node let go of the instance meanwhile; `done` when it ends. */
interface SpawnFlight {
  relinquished: boolean;
  done: Promise<void>;
}

/** Where a self-fenced instance's sandbox was stopped (or being created), so that its stop is recorded as a crash. */
const FENCEABLE_STATES: ReadonlySet<string> = new Set(['spawning', 'healthy', 'running', 'paused']);

const SPAWN_FAILURES: Record<string, CrashReason> = {
  HEALTH_MISMATCH: 'identity-mismatch',
  HEALTH_TIMEOUT: 'health-timeout',
  EXITED_BEFORE_HEALTHY: 'exit',
};

export class InstanceSupervisor {
  readonly workspace: string;
  readonly appsDir: string;
  readonly layout: HomeLayout;
  readonly ports: TcpPortAllocator;
  private readonly runners: Partial<Record<SandboxKind, AppSandboxRunner>>;
  private readonly exitSubscriptions = new Map<string, () => void>();
  /** Spawns in flight, by instance: `relinquished` once this node let go of the instance meanwhile. */
  private readonly spawning = new Map<string, SpawnFlight>();
  /**
   * Instances whose sandbox this node let go of (relinquish) since their last spawn. A hook or a health answer
   * that fails because of it is this node's doing, not the app's: it is not recorded as the app's crash.
   */
  private readonly letGo = new Set<string>();
  /** Of those, the ones the self-fence stopped: recorded once renewals are answered again (recordSelfFenced). */
  private readonly fencedOff = new Set<string>();
  private registry: AppRegistry | null = null;

  constructor(
    private readonly opts: InstanceOptions,
    private readonly host: () => ActorHost,
  ) {
    this.workspace = resolve(opts.workspace ?? join(opts.home, 'workspace'));
    this.appsDir = join(this.workspace, 'apps');
    this.layout = homeLayout(opts.home);
    this.ports = new TcpPortAllocator(opts.portRange ?? { min: 4100, max: 4999 });
    this.runners = { ...opts.runners };
  }

  runner(kind: SandboxKind): AppSandboxRunner {
    const existing = this.runners[kind];
    if (existing) return existing;
    const common = {
      home: this.opts.home,
      workspaceDir: this.workspace,
      osApiBase: this.opts.osApiBase ?? 'http://127.0.0.1:0',
      ...(this.opts.healthTimeoutMs ? { healthTimeoutMs: this.opts.healthTimeoutMs } : {}),
      ...(this.opts.killGraceMs ? { killGraceMs: this.opts.killGraceMs } : {}),
      warn: (m: string) => this.opts.log?.(m),
    };
    const made: AppSandboxRunner =
      kind === 'proot'
        ? new ProotRunner({ ...common, rootfs: requireRootfs(this.opts.parts) })
        : new ContainerRunner({
            ...common,
            rootfs: requireRootfs(this.opts.parts),
            image: requireImage(this.opts.parts, 'app-base'),
            dockerSocketPath: this.opts.parts.dockerSocket,
            ...(this.opts.engine ? { engine: this.opts.engine() } : {}),
            ...(this.opts.containerNetwork ? { network: this.opts.containerNetwork } : {}),
            extraLabels: { 'runlog.home': this.opts.home, ...this.opts.containerLabels },
            ...(this.opts.containerLabels?.['runlog.node'] ? { node: this.opts.containerLabels['runlog.node'] } : {}),
          });
    this.runners[kind] = made;
    return made;
  }

  /**
   * Watches the workspace so a manifest edit (e.g. a new tool) reaches running instances; when the kernel refuses
   * the watch (inotify used up), it polls instead and says so (app-registry.ts).
   */
  async startRegistry(watch?: WatchFactory): Promise<void> {
    ensureDirectory(this.appsDir);
    const log = (m: string) => this.opts.log?.(m);
    this.registry = new AppRegistry({
      appsDir: this.appsDir,
      debounceMs: 50,
      ...(watch ? { watch } : {}),
      onPolling: (m) => log(`apps: ${m}`),
    });
    this.registry.on((e) => this.onRegistryEvent(e));
    await this.registry.start();
  }

  /** How app manifests are followed: 'watching', 'polling' (a watch was refused), or 'off' (not started). */
  appWatchMode(): 'watching' | 'polling' | 'off' {
    return this.registry?.mode ?? 'off';
  }

  // --- requests ------------------------------------------------------------------------------

  /** Validates the app (nothing is spawned on a bad manifest), installs it into the workspace, returns the spec. */
  async prepare(appDir: string, sandbox: string | undefined, instanceId?: string): Promise<InstanceSpec> {
    return prepareInstance({
      appDir,
      sandbox,
      instanceId,
      appsDir: this.appsDir,
      allowlist: (a, t) => this.allowlist(a, t),
    });
  }

  /**
   * The runners run an app from this node's workspace. An instance another cluster node spawned (restarted here
   * after its node was lost) names that node's copy: installed here from it when this host can read it (one
   * machine, shared storage); on hosts that cannot, the app must be installed on every node (`runlog spawn`
   * there once, or the same workspace path).
   */
  private installFromSpec(spec: InstanceSpec): void {
    const target = join(this.appsDir, spec.appId);
    if (pathExists(target) || resolve(spec.appDir) === target || !pathExists(join(spec.appDir, MANIFEST_FILE))) return;
    installApp(spec.appDir, target);
  }

  /** The app's manifest tools as installed in the workspace, or null when the app was never installed. */
  installedTools(appId: string): string[] | null {
    try {
      return loadManifest(join(this.appsDir, appId)).tools;
    } catch {
      return null;
    }
  }

  private onRegistryEvent(e: AppRegistryEvent): void {
    if (e.type !== 'changed') return;
    const log = (msg: string) => this.opts.log?.(msg);
    void this.allowlist(e.manifest.appId, e.manifest.tools).then(
      (tools) => {
        // The instances' tools as they are once the allowlist is read (a grant may have landed meanwhile).
        for (const actor of this.host().live()) {
          if (actor.kind !== 'instance') continue;
          const spec = (actor.snapshot.context as InstanceContext).spec;
          if (!spec || spec.appId !== e.appId) continue;
          void this.syncTools(actor.id, spec.tools, tools).catch((err: unknown) =>
            log(`tools sync for ${actor.id}: ${String(err)}`),
          );
        }
      },
      (err: unknown) => log(`tools sync for ${e.appId}: ${String(err)}`),
    );
  }

  /** The app's allowlist: the manifest's tools with the app's `cap` grants and revocations applied. */
  async allowlist(appId: string, manifestTools: readonly string[]): Promise<string[]> {
    return this.opts.toolOverrides
      ? effectiveTools(manifestTools, await this.opts.toolOverrides(appId))
      : [...manifestTools];
  }

  /** The allowlist is the truth: differences become grant/revoke events (no-ops when already equal). */
  private async syncTools(id: string, current: string[], tools: string[]): Promise<void> {
    for (const t of tools.filter((x) => !current.includes(x))) {
      await this.host().dispatch('instance', id, { type: 'instance.tool-granted', data: { tool: t, via: 'manifest' } });
    }
    for (const t of current.filter((x) => !tools.includes(x))) {
      await this.host().dispatch('instance', id, { type: 'instance.tool-revoked', data: { tool: t, via: 'manifest' } });
    }
  }

  // --- effects -----------------------------------------------------------------------------------

  /** The instance machine's effects but the restart timers' and `announce` (wired in runlog.ts). */
  handlers(): Omit<EffectHandlers<'instance'>, 'scheduleRestart' | 'cancelRestart' | 'armRestart' | 'announce'> {
    return {
      spawn: (p, ctx) => this.spawn(p.spec, ctx),
      callLifecycle: (p, ctx) => this.callLifecycle(p, ctx),
      stopSandbox: (_p, ctx) => this.stop(ctx),
      forceKill: (_p, ctx) => this.forceKill(ctx.actor),
      releasePort: (p) => {
        if (typeof p.port === 'number') this.ports.release(p.port);
      },
      provisionTools: (p, ctx) => {
        const spec = (ctx.actor.snapshot.context as InstanceContext).spec;
        provisionToolsDir(
          this.layout.instanceToolsDir(ctx.actor.id),
          this.layout.toolchainDir,
          p.tools ?? spec?.tools ?? [],
        );
      },
      reattach: (_p, ctx) => this.reattach(ctx),
    };
  }

  private sandboxOf(actor: LiveActor): SandboxKind {
    return (actor.snapshot.context as InstanceContext).spec?.sandbox ?? 'proot';
  }

  private async spawn(spec: InstanceSpec, ctx: EffectContext): Promise<void> {
    const runner = this.runner(spec.sandbox);
    let manifest: AppManifest;
    try {
      this.installFromSpec(spec);
      manifest = { ...loadManifest(spec.appDir), sandbox: spec.sandbox, tools: spec.tools };
    } catch (err) {
      await ctx.dispatch({
        type: 'instance.spawn-failed',
        data: {
          reason: 'spawn-error',
          code: (err as RunlogError).code ?? 'MANIFEST_INVALID',
          message: (err as Error).message,
        },
      });
      return;
    }
    const port = this.ports.allocate(spec.instanceId);
    let ended: () => void = () => undefined;
    const flight: SpawnFlight = { relinquished: false, done: new Promise<void>((r) => (ended = r)) };
    this.spawning.set(spec.instanceId, flight);
    // A new incarnation: what this node let go of before is behind it.
    this.letGo.delete(spec.instanceId);
    this.fencedOff.delete(spec.instanceId);
    try {
      await this.spawnIn(runner, spec, manifest, port, flight, ctx);
    } finally {
      if (this.spawning.get(spec.instanceId) === flight) this.spawning.delete(spec.instanceId);
      ended();
    }
  }

  private async spawnIn(
    runner: AppSandboxRunner,
    spec: InstanceSpec,
    manifest: AppManifest,
    port: number,
    flight: SpawnFlight,
    ctx: EffectContext,
  ): Promise<void> {
    let result;
    const clock = this.opts.clock ?? systemClock;
    const started = clock.nowMs();
    const engineWaitMs = this.opts.engineWaitMs ?? 120_000;
    for (let attempt = 0; ; attempt++) {
      try {
        result = await runner.spawn(spec.instanceId, spec.appId, port, manifest);
        break;
      } catch (err) {
        // The Docker daemon restarting (refusing connections, or answering 5xx while it shuts down) is not the
        // app's fault: wait for it rather than give up for good.
        const trouble = spec.sandbox === 'container' ? engineTrouble(err) : null;
        const budget = trouble === 'down' ? engineWaitMs : trouble === 'error' ? Math.min(engineWaitMs, 30_000) : 0;
        const engineDown = trouble !== null;
        if (engineDown && !flight.relinquished && clock.nowMs() - started < budget) {
          if (attempt === 0)
            this.opts.log?.(`spawn of ${spec.instanceId} waits for the Docker Engine: ${(err as Error).message}`);
          await new Promise<void>((r) => clock.after(Math.min(2000, 250 * 2 ** attempt), r));
          continue;
        }
        this.ports.release(port);
        // Let go of meanwhile (relinquish killed what was starting): nothing of it is this node's to record.
        if (flight.relinquished) return;
        const code = engineDown ? 'DOCKER_UNAVAILABLE' : ((err as RunlogError).code ?? 'SPAWN_FAILED');
        const reason: CrashReason = engineDown ? 'effect-failed' : (SPAWN_FAILURES[code] ?? 'spawn-error');
        await ctx.dispatch({
          type: 'instance.spawn-failed',
          data: { reason, code, message: (err as Error).message, port },
        });
        return;
      }
    }
    if (flight.relinquished) {
      // This node let go of the instance while its sandbox was being created: it must not run beside the copy of
      // the node that holds the instance now.
      await runner.forceKill(spec.instanceId).catch(() => undefined);
      this.ports.release(port);
      return;
    }
    let spawned;
    try {
      spawned = await ctx.dispatch({
        type: 'instance.spawned',
        data: {
          pid: result.pid,
          containerId: result.containerId ?? null,
          host: result.host,
          port: result.port,
          healthyAfterMs: result.healthyAfterMs,
        },
      });
    } catch (err) {
      // Refused (this node lost the lease during the spawn: another node may run the instance already): what was
      // started here is removed, not left running behind the log's back until this node restarts.
      if (err instanceof FencedError) {
        await runner.forceKill(spec.instanceId).catch(() => undefined);
        this.ports.release(port);
      }
      throw err;
    }
    if (!spawned.accepted) {
      // A stop or kill arrived while it was starting: it must not stay running behind the log's back.
      await runner.forceKill(spec.instanceId).catch(() => undefined);
      return;
    }
    // Let go of while `instance.spawned` was being appended (relinquish killed the sandbox): it is not healthy.
    if (flight.relinquished) return;
    this.watchExit(ctx.actor, runner);
    await ctx.dispatch({
      type: 'instance.healthy',
      data: {
        identity: result.identity,
        ...(result.identity === 'legacy'
          ? { warning: 'health answer carries no identity (legacy app): accepted' }
          : {}),
      },
    });
  }

  private watchExit(actor: LiveActor, runner: AppSandboxRunner): void {
    this.exitSubscriptions.get(actor.id)?.();
    const off = runner.onExit(actor.id, (info) => {
      this.exitSubscriptions.delete(actor.id);
      const data = { exitCode: info.code, signal: info.signal };
      void this.host()
        .dispatchObserved(
          'instance',
          actor.id,
          info.expected
            ? { type: 'instance.exited', data }
            : {
                type: 'instance.crashed',
                data: {
                  ...data,
                  reason: 'exit',
                  message: `exited unexpectedly (code ${info.code}, signal ${info.signal})`,
                },
              },
        )
        .catch(() => undefined);
    });
    this.exitSubscriptions.set(actor.id, off);
  }

  private async callLifecycle(p: InstanceEffects['callLifecycle'], ctx: EffectContext): Promise<void> {
    const runner = this.runner(this.sandboxOf(ctx.actor));
    const hooks = p.hooks ?? [];
    const legacy = (ctx.actor.snapshot.context as InstanceContext).identity === 'legacy';
    for (const hook of hooks) {
      try {
        // Apps with the SDK answer every hook; legacy apps (no identity) may not implement them.
        if (p.optional || legacy) await runner.callOptionalLifecycle(ctx.actor.id, hook, {});
        else await runner.callLifecycle(ctx.actor.id, hook as never);
      } catch (err) {
        // The hook failed because this node killed the sandbox under it (relinquish): not the app's failure.
        if (this.letGo.has(ctx.actor.id)) {
          this.opts.log?.(`the ${hook} hook of ${ctx.actor.id} was cut short: this node let go of its sandbox`);
          return;
        }
        await ctx.dispatch({
          type: 'instance.lifecycle-failed',
          data: {
            reason: 'lifecycle-failed',
            hook,
            code: (err as RunlogError).code ?? 'LIFECYCLE_FAILED',
            message: (err as Error).message,
          },
        });
        return;
      }
    }
    if (hooks.includes('onStart')) await ctx.dispatch({ type: 'instance.running', data: { hooks } });
  }

  private async stop(ctx: EffectContext): Promise<void> {
    const runner = this.runner(this.sandboxOf(ctx.actor));
    if (runner.getPort(ctx.actor.id) === null) {
      // Nothing of ours is running (it never started, or it already died): stopping is immediate.
      await ctx.dispatch({ type: 'instance.exited', data: { exitCode: null, signal: null, note: 'was not running' } });
      return;
    }
    await runner.callOptionalLifecycle(ctx.actor.id, 'onStop', {}).catch(() => null);
    await runner.kill(ctx.actor.id);
  }

  private async forceKill(actor: LiveActor): Promise<void> {
    const runner = this.runner(this.sandboxOf(actor));
    if (runner.getPort(actor.id) === null) return;
    await runner.forceKill(actor.id);
  }

  /**
   * This node lost the instance's lease (it was paused or cut off and another node took it over, recorded it
   * lost and maybe restarted it there), or it cannot renew it (self-fence.ts): its sandbox here must not run on
   * beside that. Killed without a word in the log (this node may not append for it any more); its exit is not
   * reported. A sandbox still being created is killed too: now if the runner has it already (waiting for its
   * health), else by its spawn as soon as the runner hands it over. `cause` 'self-fence': the node still holds
   * the lease, so the stop is recorded once it can append again (recordSelfFenced).
   */
  async relinquish(instanceId: string, cause: 'lease-lost' | 'self-fence' = 'lease-lost'): Promise<void> {
    const flight = this.spawning.get(instanceId);
    if (flight) flight.relinquished = true;
    this.letGo.add(instanceId);
    if (cause === 'self-fence') this.fencedOff.add(instanceId);
    else this.fencedOff.delete(instanceId);
    this.exitSubscriptions.get(instanceId)?.();
    this.exitSubscriptions.delete(instanceId);
    for (const runner of Object.values(this.runners)) {
      if (runner && (flight || runner.getPort(instanceId) !== null))
        await runner.forceKill(instanceId).catch(() => undefined);
    }
  }

  /**
   * Renewals are answered again after a self-fence: each instance whose sandbox it stopped, and whose lease this
   * node still holds, is recorded crashed (reason `self-fenced`), so its restart policy brings it back. Spawns
   * still handing over what they started (then killed) finish first, so the restart does not race them. A lease
   * taken meanwhile refuses the append (FENCED): that instance is another node's now, nothing to record here.
   */
  async recordSelfFenced(fenceMs: number): Promise<void> {
    const ids = [...this.fencedOff];
    this.fencedOff.clear();
    await Promise.all(ids.map((id) => this.spawning.get(id)?.done));
    for (const id of ids) {
      const actor = this.host().get('instance', id);
      if (!actor || !FENCEABLE_STATES.has(stateName(actor.snapshot))) continue;
      const message =
        `its node fenced itself: no lease renewal was answered for ${fenceMs} ms, ` +
        'so it stopped the sandbox before its lease could expire';
      await this.host()
        .dispatch('instance', id, {
          type: 'instance.crashed',
          data: {
            reason: 'self-fenced',
            exitCode: null,
            message,
            evidence: { fenceMs, state: stateName(actor.snapshot) },
          },
        })
        .catch((err: unknown) => {
          if (!(err instanceof FencedError))
            this.opts.log?.(`recording the self-fenced stop of ${id}: ${(err as Error).message}`);
        });
    }
  }

  /**
   * An instance taken over from `node`: its containers that node left on this host's Docker daemon (one daemon
   * shared by several nodes) are removed before this node runs the instance, so the copy of a node that is dead or
   * frozen does not run beside this one. On another host there are none here. Returns how many were removed, and
   * how many of them were running.
   */
  async removeNodesContainers(instanceId: string, node: string): Promise<{ removed: number; running: number }> {
    const engine = this.opts.engine?.();
    if (!engine) return { removed: 0, running: 0 };
    const stale = await engine.listContainers(
      { 'runlog.kind': 'instance', 'runlog.stream': `instance-${instanceId}`, 'runlog.node': node },
      { all: true },
    );
    await Promise.all(stale.map((c) => engine.removeContainer(c.id, { force: true })));
    return { removed: stale.length, running: stale.filter((c) => c.state === 'running').length };
  }

  /** Instances with a sandbox on this node: running, or being created. */
  sandboxed(): string[] {
    const ids = new Set(this.spawning.keys());
    for (const a of this.host().live()) if (a.kind === 'instance' && this.tracks(a.id)) ids.add(a.id);
    return [...ids];
  }

  /** After a restart, an adopted container gets its exit watcher and log stream back; no hooks run. */
  private async reattach(ctx: EffectContext): Promise<void> {
    const runner = this.runner('container');
    const c = ctx.actor.snapshot.context as InstanceContext;
    const rec = this.adoptable.get(ctx.actor.id);
    if (rec) {
      runner.registerAdopted(rec);
      this.adoptable.delete(ctx.actor.id);
    }
    if (c.port) {
      try {
        this.ports.reserve(c.port, ctx.actor.id);
      } catch {
        /* another owner in this process: the allocator will skip it anyway because it listens */
      }
    }
    this.watchExit(ctx.actor, runner);
    await ctx.dispatch({ type: 'instance.running', data: { adopted: true } });
  }

  /** Orphan records the reconciler found, handed to reattach. */
  readonly adoptable = new Map<string, OrphanRecord>();

  /** Whether a runner of this process watches this instance (it is live here: recovery leaves it alone). */
  tracks(instanceId: string): boolean {
    return Object.values(this.runners).some((r) => r !== undefined && r.getPort(instanceId) !== null);
  }

  /**
   * After the Docker daemon came back: exit watchers (container.wait) and log streams may be stuck on connections
   * that died with it, and would never report. Drop them all — containers keep running — so reconciliation
   * re-attaches what still runs and records what exited or vanished meanwhile.
   */
  async detachContainers(): Promise<void> {
    const runner = this.runners.container;
    if (!runner) return;
    await runner.detach();
    for (const actor of this.host().live()) {
      if (actor.kind !== 'instance' || this.sandboxOf(actor) !== 'container') continue;
      this.exitSubscriptions.get(actor.id)?.();
      this.exitSubscriptions.delete(actor.id);
    }
  }

  /**
   * A container found running for an instance the log says was stopping: watch it again (exit watcher, log
   * stream; no hooks) so the resumed stop effect can finish the job and its exit lands in the log.
   */
  adoptForStop(actor: LiveActor, rec: OrphanRecord): void {
    const runner = this.runner('container');
    runner.registerAdopted(rec);
    this.watchExit(actor, runner);
  }

  logs(actor: LiveActor, follow: boolean) {
    return this.runner(this.sandboxOf(actor)).logs(actor.id, { follow });
  }

  async close(): Promise<void> {
    this.registry?.close();
    for (const off of this.exitSubscriptions.values()) off();
    this.exitSubscriptions.clear();
    await Promise.all(Object.values(this.runners).map((r) => r?.close().catch(() => undefined)));
  }
}
