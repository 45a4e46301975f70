// Helpers for integration tests against the real Docker Engine and the local registry. They never skip:
// a missing part FAILS the test with a message saying how to bring it up.
import { existsSync, readFileSync } from 'node:fs';
import Docker from 'dockerode';

export const DOCKER_SOCKET = '/var/run/docker.sock';
export const SETUP_DIR = process.env.RUNLOG_SETUP_DIR ?? '/var/lib/runlog-setup';
export const REGISTRY_ADDR = process.env.RUNLOG_REGISTRY_ADDR ?? '127.0.0.1:5000';
/** Every container and volume a test creates carries this label, so cleanup finds exactly what tests made. */
export const TEST_LABELS: Readonly<Record<string, string>> = Object.freeze({ 'runlog.test': '1' });

const SETUP_HINT = 'run `npm run setup`';
export const docker = new Docker({ socketPath: DOCKER_SOCKET });

/** Fails unless the Engine answers on /var/run/docker.sock. */
export async function requireDocker(): Promise<void> {
  try {
    await docker.ping();
  } catch (err) {
    throw new Error(`Docker Engine not answering on ${DOCKER_SOCKET} — ${SETUP_HINT} (${(err as Error).message})`);
  }
}

/** Fails unless the registry answers on RUNLOG_REGISTRY_ADDR (127.0.0.1:5000). */
export async function requireRegistry(): Promise<void> {
  try {
    const res = await fetch(`http://${REGISTRY_ADDR}/v2/`, { signal: AbortSignal.timeout(5000) });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
  } catch (err) {
    throw new Error(
      `registry not answering on http://${REGISTRY_ADDR}/v2/ — ${SETUP_HINT} (${(err as Error).message})`,
    );
  }
}

/** The digest reference scripts/build-images.sh recorded for image <name>. */
export function imageRef(name: string): string {
  const file = `${SETUP_DIR}/images/${name}.ref`;
  if (!existsSync(file)) {
    throw new Error(
      `no image reference for ${name} at ${file} — ${SETUP_HINT} (it builds scripts/images/${name}.sh and records the pushed digest)`,
    );
  }
  const ref = readFileSync(file, 'utf8').trim();
  if (!/@sha256:[0-9a-f]{64}$/.test(ref))
    throw new Error(`${file} holds ${JSON.stringify(ref)}, not a digest reference — ${SETUP_HINT}`);
  return ref;
}

/** Whether the registry holds the manifest a digest reference names (HEAD /v2/<name>/manifests/<digest>). */
export async function registryHasManifest(ref: string): Promise<boolean> {
  const m = /^[^/]+\/(.+)@(sha256:[0-9a-f]{64})$/.exec(ref);
  if (!m) throw new Error(`not a registry digest reference: ${ref}`);
  const res = await fetch(`http://${REGISTRY_ADDR}/v2/${m[1]}/manifests/${m[2]}`, {
    method: 'HEAD',
    headers: {
      Accept: 'application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json',
    },
  });
  return res.ok;
}

const labelFilter = (labels: Record<string, string>) =>
  JSON.stringify({ label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) });

/** Removes every container labelled runlog.test=1 (or the given labels), running or not. Returns how many. */
export async function cleanupTestContainers(labels: Record<string, string> = { ...TEST_LABELS }): Promise<number> {
  const list = await docker.listContainers({ all: true, filters: labelFilter(labels) });
  await Promise.all(
    list.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch(() => undefined),
    ),
  );
  return list.length;
}

/** Removes every volume labelled runlog.test=1 (or the given labels). Run after cleanupTestContainers. */
export async function cleanupTestVolumes(labels: Record<string, string> = { ...TEST_LABELS }): Promise<number> {
  const { Volumes } = await docker.listVolumes({ filters: labelFilter(labels) });
  await Promise.all(
    (Volumes ?? []).map((v) =>
      docker
        .getVolume(v.Name)
        .remove()
        .catch(() => undefined),
    ),
  );
  return (Volumes ?? []).length;
}

/** A container lifecycle event (create, start, die, destroy, …) and the labels of its container. */
export interface ContainerEvent {
  action: string;
  id: string;
  labels: Record<string, string>;
}

/** Container events recorded from the moment a watch started. */
export interface ContainerEventWatch {
  /** The events so far whose container carries every one of these labels. */
  events(labels: Record<string, string>): ContainerEvent[];
  /** Resolves once every event the daemon emitted before this call has been recorded. */
  settled(): Promise<void>;
  /** Ends the watch (its HTTP stream); events() keeps what was recorded. */
  stop(): void;
}

/**
 * Records container events as the daemon emits them, until stop(). Why not ask for a time range afterwards: the
 * daemon keeps only its last 256 events, and on a daemon shared with the other int lane a test's own events are
 * overwritten within seconds. Resolves once the daemon has accepted the subscription, so nothing after it is missed.
 */
export async function watchContainerEvents(): Promise<ContainerEventWatch> {
  const stream = (await docker.getEvents({ filters: { type: ['container', 'volume'] } })) as NodeJS.ReadableStream & {
    destroy(): void;
  };
  const seen: ContainerEvent[] = [];
  const volumesGone = new Set<string>();
  const waiters: (() => void)[] = [];
  let partial = '';
  stream.on('data', (chunk: Buffer | string) => {
    const lines = (partial + chunk.toString()).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      if (line.trim() === '') continue;
      const e = JSON.parse(line) as {
        Type?: string;
        Action?: string;
        status?: string;
        id?: string;
        Actor?: { ID?: string; Attributes?: Record<string, string> };
      };
      const action = e.Action ?? e.status ?? '';
      if (e.Type === 'volume') {
        if (action === 'destroy' && e.Actor?.ID) volumesGone.add(e.Actor.ID);
      } else seen.push({ action, id: e.id ?? e.Actor?.ID ?? '', labels: e.Actor?.Attributes ?? {} });
    }
    for (const wake of waiters.splice(0)) wake();
  });
  stream.on('error', () => undefined);
  return {
    events: (labels) => seen.filter((e) => Object.entries(labels).every(([k, v]) => e.labels[k] === v)),
    // The daemon emits events in order: once a sentinel volume's removal has arrived, so has all before it.
    async settled() {
      const name = `runlog-test-sentinel-${process.pid}-${Math.random().toString(36).slice(2)}`;
      await docker.createVolume({ Name: name, Labels: { ...TEST_LABELS } });
      await docker.getVolume(name).remove();
      const deadline = Date.now() + 30_000;
      while (!volumesGone.has(name)) {
        if (Date.now() > deadline)
          throw new Error(`the daemon's events stream did not deliver the removal of volume ${name} within 30 s`);
        await new Promise<void>((wake) => {
          waiters.push(wake);
          setTimeout(wake, 500);
        });
      }
    },
    stop: () => stream.destroy(),
  };
}

/** Lists a volume's files (path, type, size, mode) via a throwaway, never-started container and getArchive. */
export async function volumeListing(
  volume: string,
  image: string,
): Promise<{ path: string; type: string; size: number; mode: number }[]> {
  const tar = (await import('tar-stream')).default;
  const c = await docker.createContainer({
    Image: image,
    Entrypoint: ['/never-started'],
    Labels: { ...TEST_LABELS },
    HostConfig: { NetworkMode: 'none', Mounts: [{ Type: 'volume', Source: volume, Target: '/v', ReadOnly: true }] },
  });
  try {
    const stream = (await c.getArchive({ path: '/v/.' })) as NodeJS.ReadableStream;
    const out: { path: string; type: string; size: number; mode: number }[] = [];
    const extract = tar.extract();
    const done = new Promise<void>((resolve, reject) => {
      extract.on('entry', (h, s, next) => {
        out.push({
          path: h.name.replace(/^\.\/?/, ''),
          type: h.type ?? 'file',
          size: h.size ?? 0,
          mode: (h.mode ?? 0) & 0o7777,
        });
        s.on('end', next);
        s.resume();
      });
      extract.on('finish', resolve);
      extract.on('error', reject);
    });
    stream.pipe(extract);
    await done;
    return out.filter((e) => e.path !== '');
  } finally {
    await c.remove({ force: true, v: true });
  }
}

/** Reads one file out of a volume (never-started container + getArchive). */
export async function volumeFile(volume: string, image: string, path: string): Promise<Buffer> {
  return containerFile(image, `/v/${path}`, [{ Type: 'volume', Source: volume, Target: '/v', ReadOnly: true }]);
}

/** Reads one file out of an image's filesystem (never-started container + getArchive). */
export async function imageFile(image: string, absPath: string): Promise<Buffer> {
  return containerFile(image, absPath, []);
}

async function containerFile(image: string, absPath: string, mounts: Docker.MountSettings[]): Promise<Buffer> {
  const tar = (await import('tar-stream')).default;
  const c = await docker.createContainer({
    Image: image,
    Entrypoint: ['/never-started'],
    Labels: { ...TEST_LABELS },
    HostConfig: { NetworkMode: 'none', Mounts: mounts },
  });
  try {
    const stream = (await c.getArchive({ path: absPath })) as NodeJS.ReadableStream;
    const extract = tar.extract();
    let data: Buffer | null = null;
    const done = new Promise<void>((resolve, reject) => {
      extract.on('entry', (_h, s, next) => {
        const chunks: Buffer[] = [];
        s.on('data', (c2: unknown) => {
          chunks.push(c2 as Buffer);
        });
        s.on('end', () => {
          data ??= Buffer.concat(chunks);
          next();
        });
      });
      extract.on('finish', resolve);
      extract.on('error', reject);
    });
    stream.pipe(extract);
    await done;
    if (data === null) throw new Error(`${absPath} not found in ${image}`);
    return data;
  } finally {
    await c.remove({ force: true, v: true });
  }
}
