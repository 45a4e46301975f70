// The Docker Engine port: every Engine API operation runlog needs, in runlog's own types. Everything in runlog that
// talks to dockerd goes through a DockerEngine (the execution sandbox, the materializer, the container runner of app
// instances, the engine watch's event stream, the reconciler). No dockerode type appears here: the one
// implementation, dockerode-engine.ts, maps the daemon's answers and failures to these types and to the typed
// errors of errors.ts (DockerNotFoundError, DockerConflictError, DockerUnavailableError, DockerTimeoutError, …).
import type { Duplex, Readable } from 'node:stream';

export const DEFAULT_SOCKET_PATH = '/var/run/docker.sock';
/** Docker reports this for a container that was created and never started. */
export const ZERO_TIME = '0001-01-01T00:00:00Z';

/** OCI platform naming (as in an image index): os `linux`, architecture `amd64`/`arm64`/`arm`, variant `v8`/`v7`. */
export interface Platform {
  os: string;
  architecture: string;
  variant?: string;
}

export interface EngineVersion {
  version: string;
  apiVersion: string;
  os: string;
  arch: string;
  kernelVersion: string;
}

export interface ImageInfo {
  id: string;
  repoDigests: string[];
  repoTags: string[];
  sizeBytes: number;
  os: string;
  architecture: string;
  variant?: string;
}

export interface VolumeInfo {
  name: string;
  labels: Record<string, string>;
  createdAt: string | undefined;
}

export interface ContainerState {
  status: string; // created | running | paused | restarting | removing | exited | dead
  running: boolean;
  exitCode: number;
  oomKilled: boolean;
  error: string;
  startedAt: string | null; // null when never started
  finishedAt: string | null;
}

export interface ContainerInfo {
  id: string;
  name: string;
  image: string;
  imageId: string;
  labels: Record<string, string>;
  state: ContainerState;
  /** The main process's pid on the host (0 when not running). */
  pid: number;
  /** `KEY=value` entries of the container's configuration. */
  env: string[];
  /** The networks it is attached to, by name, with its address on each ('' when it has none). */
  networks: Record<string, { ipAddress: string }>;
}

export interface NetworkInfo {
  name: string;
  driver: string;
  labels: Record<string, string>;
  /** No route out of it (Docker's `--internal`). */
  internal: boolean;
}

/** How a bridge network is made: the defaults are Docker's own (a route out, the host reachable on its gateway). */
export interface NetworkOptions {
  /** No route out (Docker's `--internal`). */
  internal?: boolean;
  /**
   * The host's bridge gets no IPv4 address, so a container on it cannot reach the host's own services through the
   * gateway (an internal network alone still lets it: the host listens on the bridge's address).
   */
  noHostAddress?: boolean;
}

export interface ContainerSummary {
  id: string;
  names: string[];
  image: string;
  labels: Record<string, string>;
  state: string;
  status: string;
}

export interface PullProgress {
  status: string;
  layer?: string;
  current?: number;
  total?: number;
}

/** A Mount as the Engine API takes it (only the fields runlog sets). */
export interface MountSpec {
  Type: 'volume' | 'tmpfs';
  Source?: string;
  Target: string;
  ReadOnly?: boolean;
  VolumeOptions?: { NoCopy?: boolean; Labels?: Record<string, string> };
  TmpfsOptions?: { SizeBytes?: number; Mode?: number };
}

/** The body of POST /containers/create, limited to the fields runlog uses (Engine API 1.41 names). */
export interface ContainerCreateBody {
  Image: string;
  Hostname?: string;
  Entrypoint?: string[];
  Cmd?: string[];
  Env?: string[];
  User?: string;
  WorkingDir?: string;
  Labels?: Record<string, string>;
  AttachStdin?: boolean;
  AttachStdout?: boolean;
  AttachStderr?: boolean;
  OpenStdin?: boolean;
  StdinOnce?: boolean;
  Tty?: boolean;
  NetworkDisabled?: boolean;
  Healthcheck?: { Test: string[] };
  StopSignal?: string;
  HostConfig?: {
    Mounts?: MountSpec[];
    /** `host-path:container-path[:ro]` bind mounts (app instances). */
    Binds?: string[];
    Tmpfs?: Record<string, string>;
    ReadonlyRootfs?: boolean;
    CapDrop?: string[];
    CapAdd?: string[];
    SecurityOpt?: string[];
    NetworkMode?: string;
    Memory?: number;
    MemorySwap?: number;
    PidsLimit?: number;
    NanoCpus?: number;
    IpcMode?: string;
    Privileged?: boolean;
    AutoRemove?: boolean;
    RestartPolicy?: { Name: string };
    Init?: boolean;
    Ulimits?: { Name: string; Soft: number; Hard: number }[];
    LogConfig?: { Type: string; Config?: Record<string, string> };
    Runtime?: string;
    /** The resolvers written to the container's resolv.conf (Docker's embedded DNS forwards to them). */
    Dns?: string[];
    Sysctls?: Record<string, string>;
  };
  NetworkingConfig?: { EndpointsConfig: Record<string, { Aliases?: string[] }> };
}

/** What GET /containers/{id}/archive reports about the path (X-Docker-Container-Path-Stat). */
export interface PathStat {
  name: string;
  size: number;
  mode: number;
  linkTarget: string;
}

export interface WaitHandle {
  /** Settles with the exit status once the container exits after this call (condition next-exit). */
  exited: Promise<{ statusCode: number; error?: string }>;
  /** Stops waiting (closes the request). */
  cancel(): void;
}

export interface DockerEngine {
  readonly socketPath: string;
  /** Throws DockerUnavailableError when the Engine does not answer. */
  ping(): Promise<void>;
  version(): Promise<EngineVersion>;
  /** The daemon's platform in OCI naming, for exact matching against a runtime record's platforms. */
  platform(): Promise<Platform>;
  /** OCI runtimes the daemon knows (runc, runsc, …). */
  runtimes(): Promise<string[]>;

  inspectImage(ref: string): Promise<ImageInfo | null>;
  hasImage(ref: string): Promise<boolean>;
  /**
   * Makes a digest-pinned image present: inspects the local content store first (pulling by digest always
   * contacts the registry) and pulls only when absent. Returns whether a pull happened.
   */
  pullByDigest(ref: string, onProgress?: (p: PullProgress) => void): Promise<{ pulled: boolean; image: ImageInfo }>;
  removeImage(ref: string): Promise<void>;

  createVolume(name: string, labels: Record<string, string>): Promise<VolumeInfo>;
  inspectVolume(name: string): Promise<VolumeInfo | null>;
  /** Removes a volume; missing is fine. Throws when it is in use. */
  removeVolume(name: string): Promise<void>;
  listVolumes(labels: Record<string, string | true>): Promise<VolumeInfo[]>;
  /** The volumes among `names` that exist (exact names; one request whatever the count). */
  volumesNamed(names: readonly string[]): Promise<VolumeInfo[]>;

  /** Creates (never starts) a container; returns its id. */
  createContainer(body: ContainerCreateBody, name?: string): Promise<string>;
  inspectContainer(id: string): Promise<ContainerInfo | null>;
  listContainers(labels: Record<string, string | true>, opts?: { all?: boolean }): Promise<ContainerSummary[]>;
  /** Removes a container with its anonymous volumes; missing is fine. */
  removeContainer(id: string, opts?: { force?: boolean }): Promise<void>;
  start(id: string): Promise<void>;
  /** SIGTERM, then SIGKILL after `timeoutSec`; a container that is not running (or gone) is fine. */
  stop(id: string, opts?: { timeoutSec?: number }): Promise<void>;
  /** Sends a signal (default SIGKILL); a container that is not running is fine. */
  kill(id: string, signal?: string): Promise<void>;
  /**
   * The CPU the container's processes have used since it started, in ns: its cgroup's counter, read from the
   * cgroup filesystem when the daemon is on this host, else the Engine's one-shot stats (container-stats.ts);
   * null when the container is gone, 0 when it is not running.
   */
  cpuUsageNs(id: string): Promise<number | null>;
  /** Registers a wait (condition next-exit) and resolves once the Engine has acknowledged it. */
  waitNextExit(id: string): Promise<WaitHandle>;
  /**
   * Waits until the container is not running (returns at once for created/exited containers). `signal` ends the
   * wait (rejecting); DockerNotFoundError when the container is gone.
   */
  waitNotRunning(id: string, opts?: { signal?: AbortSignal }): Promise<{ statusCode: number }>;
  /** Hijacked attach to stdin+stdout+stderr (multiplexed output, raw stdin). Attach before start. */
  attach(id: string): Promise<Duplex>;
  /**
   * The container's stdout+stderr as recorded by its log driver (multiplexed: split it with StreamDemuxer), followed
   * until the container stops, from `sinceSec` (seconds since the epoch) when given; `signal` ends it.
   */
  logs(id: string, opts?: { sinceSec?: number; signal?: AbortSignal }): Promise<Readable>;

  inspectNetwork(name: string): Promise<NetworkInfo | null>;
  /** Creates a bridge network; DockerConflictError when one of that name exists already. */
  createNetwork(name: string, labels: Record<string, string>, options?: NetworkOptions): Promise<void>;
  /** Removes a network (nothing when it is gone already); its containers must have left it. */
  removeNetwork(name: string): Promise<void>;
  /** Attaches a container to a network; returns its address on it. */
  connectNetwork(network: string, containerId: string): Promise<{ ipAddress: string }>;
  /** Detaches a container from a network (forced: a stopped container too; nothing when it is not attached). */
  disconnectNetwork(network: string, containerId: string): Promise<void>;
  /** Networks with these labels. */
  listNetworks(labels: Record<string, string | true>): Promise<NetworkInfo[]>;

  /**
   * Subscribes to the Engine's event stream (GET /events) for objects with these labels; resolves once the Engine
   * has answered (DockerUnavailableError when it does not). The stream ends when the daemon stops or restarts.
   */
  subscribeEvents(opts: EngineEventOptions, onEvent: (e: EngineEvent) => void): Promise<EngineEventSubscription>;

  /**
   * Downloads `path` as a tar, kept as the chunks it arrived in (never assembled: a runtime export is ~100 MB);
   * stops reading and throws `tooLarge()` once more than maxBytes arrive.
   */
  getArchive(
    id: string,
    path: string,
    maxBytes: number,
    tooLarge: (max: number) => Error,
  ): Promise<{ chunks: Buffer[]; size: number; stat: PathStat | null }>;
  /**
   * The same download as a stream, read as it arrives (one request): resolves once the Engine has answered, with the
   * path's stat; `body` yields the tar's chunks and throws `tooLarge()` once more than maxBytes came. Read it to
   * its end or stop early (the request is then closed).
   */
  openArchive(
    id: string,
    path: string,
    maxBytes: number,
    tooLarge: (max: number) => Error,
  ): Promise<{ stat: PathStat | null; body: AsyncIterable<Buffer> }>;
  /** Extracts a tar (one buffer, or pieces streamed as they come) into `path` of the container's filesystem. */
  putArchive(id: string, path: string, tar: Buffer | AsyncIterable<Buffer>): Promise<void>;
}

export interface DockerEngineOptions {
  socketPath?: string;
  /** Per-request timeout for ordinary (non-streaming) calls, in ms. */
  timeoutMs?: number;
}

export interface EngineEvent {
  /** container | volume | network | image | … */
  type: string;
  /** create | start | die | stop | destroy | kill | oom | … */
  action: string;
  /** The object's id (a container's full id). */
  id: string;
  /** The object's labels (for containers, the container's labels) plus the attributes Docker adds. */
  attributes: Record<string, string>;
  /** For `die`: the exit status Docker reports. */
  exitCode: number | null;
  /** Seconds since the epoch (Docker's `time`). */
  time: number;
  timeNano: number;
}

export interface EngineEventSubscription {
  /** Settles when the stream is over: null after close(), the error when the daemon went away. */
  readonly ended: Promise<Error | null>;
  close(): void;
}

export interface EngineEventOptions {
  /** Only events of objects carrying these labels (`key=value`, or `key` for any value). */
  labels: Record<string, string | true>;
  types?: string[];
  /** Replay events since this time (seconds since the epoch) before going live. */
  sinceSec?: number;
}
