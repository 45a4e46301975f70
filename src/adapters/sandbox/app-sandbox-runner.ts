// The port both sandboxes implement (the seed's SandboxRunner; AppSandboxRunner here, beside the at-run
// ExecutionSandbox), in runlog's own types: no dockerode or child_process type crosses it. The actor host picks a
// runner per spawn from manifest.sandbox.

import type { AppManifest, LifecycleHook } from '../../domain/manifest.ts';

export interface SpawnOptions {
  /** Give up waiting for a healthy, identity-verified answer after this long (default: the runner's). */
  healthTimeoutMs?: number;
  healthIntervalMs?: number;
}

export interface SpawnResult {
  /** ProotRunner: the proot process (leader of the instance's process group). ContainerRunner: the container's init pid on the host. */
  pid: number;
  containerId?: string;
  /** Where the supervisor reaches the app: 127.0.0.1 (proot) or the container's IP on the runlog network. */
  host: string;
  port: number;
  /** 'legacy' = the app answered health without identity (accepted, warned). */
  identity: 'match' | 'legacy';
  /** From the start of the child to the verified health answer. */
  healthyAfterMs: number;
}

export interface ExitInfo {
  /** Exit status (container: the engine's status, 128+n for a signal death). null when killed by a signal (proot). */
  code: number | null;
  signal: string | null;
  /** true when the runner itself stopped it (kill/forceKill/close): not a crash. */
  expected: boolean;
}
export type ExitCallback = (info: ExitInfo) => void;

import type { LogLine } from '../../domain/log-line.ts';
export type { LogLine };

/** A runlog container found by its labels that this runner is not tracking (e.g. after a supervisor restart). */
export interface OrphanRecord {
  instanceId: string;
  appId: string;
  containerId: string;
  port: number;
  /** The container's IP on the runlog network (null when it is not running). */
  host: string | null;
  /** Engine state: 'running', 'exited', 'created', 'paused', 'restarting', 'dead', … */
  state: string;
  pid: number | null;
  startedAt: string | null;
  finishedAt: string | null;
  exitCode: number | null;
  basePath: string;
}

export interface AppSandboxRunner {
  readonly kind: 'proot' | 'container';
  /**
   * Provisions tools, starts the app, waits for a health answer whose identity matches.
   * Rejects (and leaves nothing running) on a bad manifest/entrypoint, a failed start, an identity mismatch,
   * a health timeout, or an exit before health. `appId` must equal manifest.appId.
   */
  spawn(
    instanceId: string,
    appId: string,
    port: number,
    manifest: AppManifest,
    opts?: SpawnOptions,
  ): Promise<SpawnResult>;
  /** POST <basePath>/api/lifecycle/<hook>; rejects unless the app answers 2xx. */
  callLifecycle(instanceId: string, hook: LifecycleHook): Promise<void>;
  /** Like callLifecycle with a JSON body; null when the app does not implement it (404/405/501). */
  callOptionalLifecycle(instanceId: string, hook: string, body: unknown): Promise<unknown | null>;
  /** Graceful stop: SIGTERM, SIGKILL after the grace period. Resolves once the exit was observed; onExit gets expected: true. */
  kill(instanceId: string): Promise<void>;
  /** Immediate SIGKILL; onExit gets expected: true. Resolves once the exit was observed. */
  forceKill(instanceId: string): Promise<void>;
  /**
   * Registers an exit callback (once per exit; callbacks are dropped after they fire). An exit that happened
   * before any callback was registered is delivered on registration. Returns an unsubscribe function.
   */
  onExit(instanceId: string, cb: ExitCallback): () => void;
  getHost(instanceId: string): string | null;
  getPort(instanceId: string): number | null;
  /**
   * Containers of this runlog home (by labels) not tracked by this runner. ProotRunner: always [] (its children
   * die with the supervisor). `listed`: the home's containers as the caller just listed them (id and labels),
   * so they are only inspected, not listed again.
   */
  listOrphanRecords(listed?: readonly { id: string; labels: Record<string, string> }[]): Promise<OrphanRecord[]>;
  /** Tracks an orphan again: exit watcher + log stream, no lifecycle hooks. ProotRunner: throws ADOPT_UNSUPPORTED. */
  registerAdopted(rec: OrphanRecord): void;
  /** Buffered output (last lines) and, with follow, live lines until the instance exits. */
  logs(instanceId: string, opts?: { follow?: boolean }): AsyncIterable<LogLine>;
  /**
   * Stops watching what runs and goes on working (the Docker daemon came back: its watchers may hang on dead
   * connections; reconciliation re-attaches). ProotRunner: nothing to do.
   */
  detach(): Promise<void>;
  /**
   * Detaches from everything for good. ProotRunner stops its children (they cannot outlive it); ContainerRunner
   * leaves containers running.
   */
  close(): Promise<void>;
}
