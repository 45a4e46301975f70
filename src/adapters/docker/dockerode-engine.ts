// The DockerEngine port (docker-port.ts) over dockerode: the only file in runlog that opens a Docker client.
// Nothing dockerode returns leaves it (callers see plain objects and Node streams), and no dockerode error does
// either: #fail maps each failure to a typed error (errors.ts) — the socket refused or gone → DockerUnavailableError,
// a request past its timeout → DockerTimeoutError, 404 → DockerNotFoundError, 409 → DockerConflictError, any other
// answer → DockerApiError with the Engine's status and message.
// The longer exchanges live beside it and are handed the clients it opened and its #fail: the next-exit wait
// (container-exit-wait.ts), archive downloads (container-archive-download.ts), a pull's progress stream
// (image-pull-stream.ts), CPU readings (container-stats.ts) and streamed uploads (archive-upload.ts).
import Docker from 'dockerode';
import type { IncomingMessage } from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import { RunlogError } from '../../domain/errors.ts';
import { uploadArchiveStream, type UploadAnswer } from './archive-upload.ts';
import { readContainerArchive, streamContainerArchive } from './container-archive-download.ts';
import { nextExitWait } from './container-exit-wait.ts';
import { containerCpuUsageNs } from './container-stats.ts';
import {
  DEFAULT_SOCKET_PATH,
  type ContainerCreateBody,
  type ContainerInfo,
  type ContainerSummary,
  type DockerEngine,
  type DockerEngineOptions,
  type EngineEvent,
  type EngineEventOptions,
  type EngineEventSubscription,
  type EngineVersion,
  type ImageInfo,
  type NetworkInfo,
  type NetworkOptions,
  type PathStat,
  type Platform,
  type PullProgress,
  type VolumeInfo,
  type WaitHandle,
} from './docker-port.ts';
import {
  DockerApiError,
  DockerTimeoutError,
  DockerUnavailableError,
  ImagePullError,
  dockerAnswerError,
} from './errors.ts';
import {
  isConnectionError,
  labelFilters,
  messageOf,
  statusOf,
  tagTimeouts,
  timeOrNull,
  TIMED_OUT,
  type LabelFilter,
} from './dockerode-answers.ts';
import { engineEventsEnded } from './engine-events.ts';
import { pullStreamFailure } from './image-pull-stream.ts';
import { normalizePlatform } from './platform.ts';

export { normalizePlatform };

class DockerodeEngine implements DockerEngine {
  readonly socketPath: string;
  readonly #docker: Docker;
  /** A client without request timeout for long calls (wait, attach, pull, logs). */
  readonly #streaming: Docker;
  /** Per-request timeout of ordinary calls (an idle timeout for streamed uploads). */
  readonly #timeoutMs: number;

  constructor(opts: DockerEngineOptions) {
    this.socketPath = opts.socketPath ?? DEFAULT_SOCKET_PATH;
    this.#timeoutMs = opts.timeoutMs ?? 60_000;
    this.#docker = new Docker({ socketPath: this.socketPath, timeout: this.#timeoutMs });
    tagTimeouts(this.#docker, this.#timeoutMs);
    this.#streaming = new Docker({ socketPath: this.socketPath });
  }

  /** The typed error for a failed call (see the head of this file). */
  #fail(operation: string, err: unknown, details?: Record<string, unknown>): never {
    if (err instanceof RunlogError) throw err;
    if ((err as { [TIMED_OUT]?: boolean } | null)?.[TIMED_OUT])
      throw new DockerTimeoutError(operation, this.#timeoutMs, { cause: err });
    if (isConnectionError(err)) throw new DockerUnavailableError(this.socketPath, messageOf(err), { cause: err });
    throw dockerAnswerError(operation, messageOf(err), statusOf(err), { cause: err, ...(details ? { details } : {}) });
  }

  async ping(): Promise<void> {
    try {
      await this.#docker.ping();
    } catch (err) {
      throw new DockerUnavailableError(this.socketPath, messageOf(err), { cause: err });
    }
  }

  async version(): Promise<EngineVersion> {
    try {
      const v = await this.#docker.version();
      return { version: v.Version, apiVersion: v.ApiVersion, os: v.Os, arch: v.Arch, kernelVersion: v.KernelVersion };
    } catch (err) {
      this.#fail('version', err);
    }
  }

  async platform(): Promise<Platform> {
    try {
      const [v, info] = await Promise.all([
        this.#docker.version(),
        this.#docker.info() as Promise<{ Architecture?: string; OSType?: string }>,
      ]);
      return normalizePlatform(v.Os || info.OSType || 'linux', v.Arch || info.Architecture || '', info.Architecture);
    } catch (err) {
      this.#fail('platform', err);
    }
  }

  async runtimes(): Promise<string[]> {
    try {
      const info = (await this.#docker.info()) as { Runtimes?: Record<string, unknown> };
      return Object.keys(info.Runtimes ?? {}).sort();
    } catch (err) {
      this.#fail('info', err);
    }
  }

  async inspectImage(ref: string): Promise<ImageInfo | null> {
    try {
      const i = (await this.#docker.getImage(ref).inspect()) as Docker.ImageInspectInfo & { Variant?: string };
      return {
        id: i.Id,
        repoDigests: i.RepoDigests ?? [],
        repoTags: i.RepoTags ?? [],
        sizeBytes: i.Size,
        os: i.Os,
        architecture: i.Architecture,
        ...(i.Variant ? { variant: i.Variant } : {}),
      };
    } catch (err) {
      if (statusOf(err) === 404) return null;
      this.#fail(`inspect image ${ref}`, err);
    }
  }

  async hasImage(ref: string): Promise<boolean> {
    const info = await this.inspectImage(ref);
    // Inspecting `repo@sha256:…` also matches by a bare digest in some Engine versions: require the exact entry.
    return info !== null && (!ref.includes('@') || info.repoDigests.includes(ref));
  }

  async pullByDigest(
    ref: string,
    onProgress?: (p: PullProgress) => void,
  ): Promise<{ pulled: boolean; image: ImageInfo }> {
    const at = ref.lastIndexOf('@');
    if (at <= 0 || !/^sha256:[0-9a-f]{64}$/.test(ref.slice(at + 1))) {
      throw new ImagePullError(ref, 'not a repository@sha256:<digest> reference', false);
    }
    const present = await this.inspectImage(ref);
    if (present && present.repoDigests.includes(ref)) return { pulled: false, image: present };

    const repository = ref.slice(0, at);
    const digest = ref.slice(at + 1);
    let res: IncomingMessage;
    try {
      res = (await this.#streaming.createImage({ fromImage: repository, tag: digest })) as IncomingMessage;
    } catch (err) {
      if (isConnectionError(err)) this.#fail('pull', err);
      const status = statusOf(err);
      const msg = messageOf(err);
      throw new ImagePullError(ref, msg, status === 404 || /manifest unknown|not found/i.test(msg), {
        cause: err,
        ...(status !== undefined ? { status } : {}),
      });
    }
    // The Engine answers 200 and reports failures inside the NDJSON progress stream.
    const failure = await pullStreamFailure(res, onProgress).catch((err: unknown) => {
      throw new ImagePullError(ref, messageOf(err), false, { cause: err });
    });
    if (failure) throw new ImagePullError(ref, failure, /manifest unknown|not found|does not exist/i.test(failure));
    const image = await this.inspectImage(ref);
    if (!image || !image.repoDigests.includes(ref)) {
      throw new ImagePullError(ref, 'the pull finished but the daemon does not hold that digest', false);
    }
    return { pulled: true, image };
  }

  async removeImage(ref: string): Promise<void> {
    try {
      await this.#docker.getImage(ref).remove({ force: true });
    } catch (err) {
      if (statusOf(err) === 404) return;
      this.#fail(`remove image ${ref}`, err);
    }
  }

  async createVolume(name: string, labels: Record<string, string>): Promise<VolumeInfo> {
    try {
      await this.#docker.createVolume({ Name: name, Driver: 'local', Labels: labels });
    } catch (err) {
      this.#fail(`create volume ${name}`, err);
    }
    const info = await this.inspectVolume(name);
    if (!info) throw new DockerApiError(`create volume ${name}`, 'volume vanished right after creation', undefined);
    return info;
  }

  async inspectVolume(name: string): Promise<VolumeInfo | null> {
    try {
      const v = (await this.#docker.getVolume(name).inspect()) as {
        Name: string;
        Labels: Record<string, string> | null;
        CreatedAt?: string;
      };
      return { name: v.Name, labels: v.Labels ?? {}, createdAt: v.CreatedAt };
    } catch (err) {
      if (statusOf(err) === 404) return null;
      this.#fail(`inspect volume ${name}`, err);
    }
  }

  async removeVolume(name: string): Promise<void> {
    try {
      await this.#docker.getVolume(name).remove({});
    } catch (err) {
      if (statusOf(err) === 404) return;
      this.#fail(`remove volume ${name}`, err, { volume: name });
    }
  }

  async listVolumes(labels: LabelFilter): Promise<VolumeInfo[]> {
    try {
      const r = await this.#docker.listVolumes({ filters: JSON.stringify({ label: labelFilters(labels) }) });
      return (r.Volumes ?? []).map((v) => ({
        name: v.Name,
        labels: (v.Labels as Record<string, string> | null) ?? {},
        createdAt: (v as { CreatedAt?: string }).CreatedAt,
      }));
    } catch (err) {
      this.#fail('list volumes', err);
    }
  }

  async volumesNamed(names: readonly string[]): Promise<VolumeInfo[]> {
    if (names.length === 0) return [];
    try {
      // The Engine's name filter matches substrings (as a regular expression): keep the exact names only.
      const r = await this.#docker.listVolumes({ filters: JSON.stringify({ name: [...names] }) });
      const wanted = new Set(names);
      return (r.Volumes ?? [])
        .filter((v) => wanted.has(v.Name))
        .map((v) => ({
          name: v.Name,
          labels: (v.Labels as Record<string, string> | null) ?? {},
          createdAt: (v as { CreatedAt?: string }).CreatedAt,
        }));
    } catch (err) {
      this.#fail('list volumes', err);
    }
  }

  async createContainer(body: ContainerCreateBody, name?: string): Promise<string> {
    // Raw dial rather than docker.createContainer: dockerode would also copy the whole body (environment
    // values included) into the query string.
    try {
      const res = await new Promise<{ Id: string }>((resolve, reject) =>
        this.#docker.modem.dial(
          {
            path: '/containers/create?',
            method: 'POST',
            options: { _query: name ? { name } : {}, _body: body },
            statusCodes: {
              200: true,
              201: true,
              400: 'bad parameter',
              404: 'no such image',
              409: 'conflict',
              500: 'server error',
            },
          },
          (err, data) => (err ? reject(err) : resolve(data as { Id: string })),
        ),
      );
      return res.Id;
    } catch (err) {
      this.#fail(`create container from ${body.Image}`, err);
    }
  }

  async inspectContainer(id: string): Promise<ContainerInfo | null> {
    try {
      const c = await this.#docker.getContainer(id).inspect();
      return {
        id: c.Id,
        name: c.Name.replace(/^\//, ''),
        image: c.Config.Image,
        imageId: c.Image,
        labels: c.Config.Labels ?? {},
        pid: c.State.Pid ?? 0,
        env: c.Config.Env ?? [],
        networks: Object.fromEntries(
          Object.entries(c.NetworkSettings?.Networks ?? {}).map(([name, n]) => [
            name,
            { ipAddress: n?.IPAddress ?? '' },
          ]),
        ),
        state: {
          status: c.State.Status,
          running: c.State.Running,
          exitCode: c.State.ExitCode,
          oomKilled: c.State.OOMKilled,
          error: c.State.Error ?? '',
          startedAt: timeOrNull(c.State.StartedAt),
          finishedAt: timeOrNull(c.State.FinishedAt),
        },
      };
    } catch (err) {
      if (statusOf(err) === 404) return null;
      this.#fail(`inspect container ${id}`, err);
    }
  }

  async listContainers(labels: LabelFilter, opts?: { all?: boolean }): Promise<ContainerSummary[]> {
    try {
      const list = await this.#docker.listContainers({
        all: opts?.all ?? true,
        filters: JSON.stringify({ label: labelFilters(labels) }),
      });
      return list.map((c) => ({
        id: c.Id,
        names: c.Names.map((n) => n.replace(/^\//, '')),
        image: c.Image,
        labels: c.Labels ?? {},
        state: c.State,
        status: c.Status,
      }));
    } catch (err) {
      this.#fail('list containers', err);
    }
  }

  async removeContainer(id: string, opts?: { force?: boolean }): Promise<void> {
    try {
      await this.#docker.getContainer(id).remove({ force: opts?.force ?? true, v: true });
    } catch (err) {
      const status = statusOf(err);
      if (status === 404) return;
      if (status === 409 && /already in progress/i.test(messageOf(err))) return;
      this.#fail(`remove container ${id}`, err);
    }
  }

  async start(id: string): Promise<void> {
    try {
      await this.#docker.getContainer(id).start();
    } catch (err) {
      this.#fail(`start container ${id}`, err);
    }
  }

  async stop(id: string, opts?: { timeoutSec?: number }): Promise<void> {
    try {
      // The streaming client: a stop takes up to its grace period, which may be longer than the request timeout.
      await this.#streaming.getContainer(id).stop(opts?.timeoutSec !== undefined ? { t: opts.timeoutSec } : {});
    } catch (err) {
      const status = statusOf(err);
      if (status === 304 || status === 404) return; // not running, or gone
      this.#fail(`stop container ${id}`, err);
    }
  }

  async kill(id: string, signal = 'SIGKILL'): Promise<void> {
    try {
      await this.#docker.getContainer(id).kill({ signal });
    } catch (err) {
      const status = statusOf(err);
      if (status === 404 || status === 409) return; // gone, or not running
      this.#fail(`kill container ${id}`, err);
    }
  }

  cpuUsageNs(id: string): Promise<number | null> {
    return containerCpuUsageNs(this.#docker, id, (op, err) => this.#fail(op, err));
  }

  waitNextExit(id: string): Promise<WaitHandle> {
    return nextExitWait(this.#streaming, id, (op, err) => this.#fail(op, err));
  }

  async waitNotRunning(id: string, opts?: { signal?: AbortSignal }): Promise<{ statusCode: number }> {
    try {
      const r = (await this.#streaming
        .getContainer(id)
        .wait({ condition: 'not-running', ...(opts?.signal ? { abortSignal: opts.signal } : {}) })) as {
        StatusCode: number;
      };
      return { statusCode: r.StatusCode };
    } catch (err) {
      this.#fail(`wait container ${id}`, err);
    }
  }

  async attach(id: string): Promise<Duplex> {
    try {
      const stream = (await this.#streaming
        .getContainer(id)
        .attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as Duplex;
      return stream;
    } catch (err) {
      this.#fail(`attach container ${id}`, err);
    }
  }

  async logs(id: string, opts?: { sinceSec?: number; signal?: AbortSignal }): Promise<Readable> {
    try {
      const stream = await this.#streaming.getContainer(id).logs({
        follow: true,
        stdout: true,
        stderr: true,
        ...(opts?.sinceSec !== undefined ? { since: opts.sinceSec } : {}),
        ...(opts?.signal ? { abortSignal: opts.signal } : {}),
      });
      return stream as Readable; // why: a followed log is the HTTP response (a Readable); dockerode types it as NodeJS.ReadableStream
    } catch (err) {
      this.#fail(`logs of container ${id}`, err);
    }
  }

  openArchive(
    id: string,
    path: string,
    maxBytes: number,
    tooLarge: (max: number) => Error,
  ): Promise<{ stat: PathStat | null; body: AsyncIterable<Buffer> }> {
    return streamContainerArchive(this.#streaming, id, path, maxBytes, tooLarge, (op, err, details) =>
      this.#fail(op, err, details),
    );
  }

  getArchive(
    id: string,
    path: string,
    maxBytes: number,
    tooLarge: (max: number) => Error,
  ): Promise<{ chunks: Buffer[]; size: number; stat: PathStat | null }> {
    return readContainerArchive(this.#streaming, id, path, maxBytes, tooLarge, (op, err, details) =>
      this.#fail(op, err, details),
    );
  }

  async putArchive(id: string, path: string, tar: Buffer | AsyncIterable<Buffer>): Promise<void> {
    const operation = `upload into ${path} of container ${id}`;
    if (!Buffer.isBuffer(tar)) {
      // Streamed as it is produced (archive-upload.ts); a failure while producing it aborts the request.
      let answer: UploadAnswer;
      try {
        answer = await uploadArchiveStream(
          { socketPath: this.socketPath, idleTimeoutMs: this.#timeoutMs },
          id,
          path,
          tar,
        );
      } catch (err) {
        if (err instanceof RunlogError) throw err;
        this.#fail(operation, err, { path });
      }
      if (answer.status !== 200)
        throw dockerAnswerError(operation, messageOf({ json: Buffer.from(answer.body) }), answer.status, {
          details: { path },
        });
      return;
    }
    try {
      await this.#docker.getContainer(id).putArchive(tar, { path, noOverwriteDirNonDir: 'true' });
    } catch (err) {
      this.#fail(operation, err, { path });
    }
  }

  async inspectNetwork(name: string): Promise<NetworkInfo | null> {
    try {
      return networkInfo((await this.#docker.getNetwork(name).inspect()) as DockerNetwork, name);
    } catch (err) {
      if (statusOf(err) === 404) return null;
      this.#fail(`inspect network ${name}`, err);
    }
  }

  async createNetwork(name: string, labels: Record<string, string>, options: NetworkOptions = {}): Promise<void> {
    try {
      await this.#docker.createNetwork({
        Name: name,
        Driver: 'bridge',
        CheckDuplicate: true,
        Labels: labels,
        Internal: options.internal === true,
        EnableIPv6: false,
        ...(options.noHostAddress ? { Options: { 'com.docker.network.bridge.inhibit_ipv4': 'true' } } : {}),
      });
    } catch (err) {
      this.#fail(`create network ${name}`, err);
    }
  }

  async removeNetwork(name: string): Promise<void> {
    try {
      await this.#docker.getNetwork(name).remove({});
    } catch (err) {
      if (statusOf(err) === 404) return;
      this.#fail(`remove network ${name}`, err);
    }
  }

  async connectNetwork(network: string, containerId: string): Promise<{ ipAddress: string }> {
    try {
      await this.#docker.getNetwork(network).connect({ Container: containerId });
      const c = (await this.#docker.getContainer(containerId).inspect()) as {
        NetworkSettings?: { Networks?: Record<string, { IPAddress?: string }> };
      };
      return { ipAddress: c.NetworkSettings?.Networks?.[network]?.IPAddress ?? '' };
    } catch (err) {
      this.#fail(`connect ${containerId} to network ${network}`, err);
    }
  }

  async disconnectNetwork(network: string, containerId: string): Promise<void> {
    try {
      await this.#docker.getNetwork(network).disconnect({ Container: containerId, Force: true });
    } catch (err) {
      if (statusOf(err) === 404) return;
      this.#fail(`disconnect ${containerId} from network ${network}`, err);
    }
  }

  async listNetworks(labels: LabelFilter): Promise<NetworkInfo[]> {
    try {
      const list = (await this.#docker.listNetworks({
        filters: JSON.stringify({ label: labelFilters(labels) }),
      })) as DockerNetwork[];
      return list.map((n) => networkInfo(n, n.Name ?? ''));
    } catch (err) {
      this.#fail('list networks', err);
    }
  }

  async subscribeEvents(opts: EngineEventOptions, onEvent: (e: EngineEvent) => void): Promise<EngineEventSubscription> {
    const controller = new AbortController();
    let stream: Readable;
    try {
      // why: the events stream is the HTTP response (a Readable); dockerode types it as NodeJS.ReadableStream
      stream = (await this.#streaming.getEvents({
        filters: { type: opts.types ?? ['container'], label: labelFilters(opts.labels) },
        ...(opts.sinceSec !== undefined ? { since: Math.floor(opts.sinceSec) } : {}),
        abortSignal: controller.signal,
      } as Docker.GetEventsOptions)) as Readable;
    } catch (err) {
      // Whatever kept the Engine from answering, the subscriber's answer is the same: not connected, retry.
      throw new DockerUnavailableError(this.socketPath, messageOf(err), { cause: err });
    }
    let closed = false;
    const ended = engineEventsEnded(stream, onEvent, () => closed);
    return {
      ended,
      close() {
        closed = true;
        controller.abort();
        stream.destroy();
      },
    };
  }
}

/** The Engine behind runlog's own types. Nothing is contacted until a method is called. */
export function createDockerEngine(opts: DockerEngineOptions = {}): DockerEngine {
  return new DockerodeEngine(opts);
}

/** What Docker answers of a network, as far as runlog reads it. */
interface DockerNetwork {
  Name?: string;
  Driver?: string;
  Labels?: Record<string, string> | null;
  Internal?: boolean;
}

function networkInfo(n: DockerNetwork, name: string): NetworkInfo {
  return { name: n.Name ?? name, driver: n.Driver ?? '', labels: n.Labels ?? {}, internal: n.Internal === true };
}
