// Materialization: copying a runtime's (or addition's) fixed export directory, or a validated code archive, into
// a named Docker volume WITHOUT running anything from the image. Engine API only, per the at-run seed:
//
//   1. require a canonical repository@sha256:<digest> reference;
//   2. reuse the image from the daemon's content store, or pull exactly that digest;
//   3. create a named volume and a STOPPED container from the image (inert entrypoint, never started; the
//      image's ENTRYPOINT/CMD/health check/env are overridden or irrelevant; no network);
//   4. mount the volume writable at /at-run-output of that container (NoCopy: the image cannot seed it);
//   5. download the export path as a tar (bounded by maxArchiveBytes), read as it arrives (one request);
//   6. validate it on the way (src/adapters/archive/stream.ts, the same rules as validateArchive) with the
//      top-level directory stripped;
//   7. upload a FRESHLY WRITTEN tar of exactly the entries validated so far into /at-run-output, while the rest
//      is still downloading (one request: headers written anew, file contents passed on as they arrive, never
//      copied or assembled); the upload's end-of-archive marker is sent only after the whole export passed, and
//      the upload is cut off at the first violation;
//   8. remove the container; on any failure (a violation found at any point, the last one included) remove the
//      volume too.
//
// What does not depend on another step runs beside it: the download's source container (it mounts nothing) is
// created, and its download opened, while the volume and then the carrier are created; after the verdict the
// containers are removed while the seal is created.
//
// Volumes are content-addressed (image digest + export path + limits, or the code archive's sha256) so they are
// reused across executions. A volume is complete only once its seal volume (`<name>-sealed`, labels carry the
// entry count and bytes) exists, and the seal is created only after the verdict: a volume whose export failed
// validation is removed and never sealed, and a crash mid-copy leaves an unsealed volume, which the next call
// replaces (nothing mounts an unsealed volume).
//
// Several processes may share one Docker daemon (the nodes of a cluster on one machine): only the holder of the
// volume's lock (materialize-lock.ts, a named container in the daemon) removes a stale volume, creates, fills and
// seals it. A process that finds the lock held by a live holder waits and then takes the holder's sealed volume
// (cached); a holder that died (kill -9 mid-copy) is seen as gone, its lock taken over and its unsealed volume redone.
//
// The parts: the step runner and the progress it reports (materialize-steps.ts), the never-started containers
// (materializer-containers.ts), an image export's download and validated copy (image-export-copy.ts), the volume
// lock (materialize-lock.ts) and the labels that mark a volume sealed (materialized-volume-labels.ts).
import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import tar from 'tar-stream';
import { ValidationError } from '../../domain/errors.ts';
import { archiveLimitsIssues } from '../../domain/at-run/archive-limits.ts';
import { parseDigestReference } from '../../domain/at-run/oci-reference.ts';
import { DEFAULT_ARCHIVE_LIMITS, type ArchiveLimits } from '../archive/index.ts';
import type { ContainerCreateBody, DockerEngine, VolumeInfo } from './docker-port.ts';
import { MaterializationError } from './errors.ts';
import { copyValidatedExport, discard, openExport, type Opened } from './image-export-copy.ts';
import { absolutePathProblems, ADDITION_EXPORT_PATH, MATERIALIZE_TARGET } from './layout.ts';
import { DEFAULT_LOCK_LIMITS, VolumeLocks, type HeldLock, type LockLimits } from './materialize-lock.ts';
import {
  createStepRunner,
  type MaterializeKind,
  type MaterializeStep,
  type ProgressHandler,
  type StepRunner,
} from './materialize-steps.ts';
import {
  LABEL_CACHE_KEY,
  LABEL_MATERIALIZING,
  LABEL_SEAL_FOR,
  LABEL_VOLUME_KIND,
  SEAL_SUFFIX,
} from './materialized-volume-labels.ts';
import { carrierBody, sourceBody } from './materializer-containers.ts';

export interface Materialized {
  kind: MaterializeKind;
  volume: string;
  /** Human-readable identity of the content (`runtime sha256:…:/at-run/runtime`, `code sha256:…`). */
  cacheKey: string;
  /** The image manifest digest (runtime, addition) or the sha256 of the code archive (code). */
  digest: string;
  /** The image the bytes came from (runtime, addition) or the carrier image (code). */
  image: string;
  entries: number;
  /** Expanded bytes of the regular files in the volume. */
  bytes: number;
  cached: boolean;
  pulled: boolean;
  timings: Partial<Record<MaterializeStep, number>> & { totalMs: number };
}

export interface MaterializerOptions {
  limits?: ArchiveLimits;
  /** Refuse images whose uncompressed size the daemon reports above this. Default 2 GiB. */
  maxImageBytes?: number;
  /** Labels added to every volume and container the materializer creates (e.g. runlog.home, runlog.test). */
  labels?: Readonly<Record<string, string>>;
  /** How long another process's lock on a volume is waited for before it is taken over (materialize-lock.ts). */
  lock?: Partial<LockLimits>;
}

interface CommonRequest {
  labels?: Readonly<Record<string, string>>;
  onProgress?: ProgressHandler;
}

export interface RuntimeRequest extends CommonRequest {
  image: string;
  exportPath: string;
}

export interface AdditionRequest extends CommonRequest {
  image: string;
}

export interface CodeRequest extends CommonRequest {
  /** A code archive that was already validated and rewritten: entries relative to the code root. */
  archive: Buffer;
  /** The already-selected, digest-pinned runtime image, used as a never-started carrier. */
  carrierImage: string;
  /** Recorded as a label (the PDS blob CID the archive came from). */
  codeCid?: string;
  /**
   * When not cached, the copy waits for this before it pulls or creates anything (the caller's order of copies);
   * its rejection is the copy's.
   */
  after?: Promise<void>;
}

export interface Materializer {
  materializeRuntime(req: RuntimeRequest): Promise<Materialized>;
  materializeAddition(req: AdditionRequest): Promise<Materialized>;
  materializeCode(req: CodeRequest): Promise<Materialized>;
  /** Removes a materialized volume and its seal (fails while a container uses it). */
  removeMaterialized(volume: string): Promise<void>;
}

const sha256 = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');
const now = (): number => performance.now();

function limitsFingerprint(l: ArchiveLimits): string {
  return `${l.maxArchiveBytes}/${l.maxEntries}/${l.maxExpandedBytes}/${l.maxFileBytes}`;
}

interface SourceSpec {
  kind: MaterializeKind;
  image: string;
  cacheKey: string;
  volume: string;
  digest: string;
  labels: Record<string, string>;
  onProgress: ProgressHandler | undefined;
  /**
   * Whether the bytes come from the image (runtime, addition): then a second stopped container, without the
   * volume, is the download's source. Why two: the Engine holds a container's lock from an archive download's
   * start until it has been read to its end, and an upload into the same container waits for that lock, so the
   * upload could not overlap the download through one container.
   */
  fromImage: boolean;
  /** Awaited after the cache check, before the pull (CodeRequest.after). */
  after?: Promise<void>;
  /**
   * Opens the download from the source container (fromImage only). It runs as soon as the source exists, while
   * the volume and the carrier are still being created: the Engine's first answer overlaps those round trips.
   */
  open?: (sourceId: string, step: StepRunner) => Promise<Opened>;
  /** Fills the stopped carrier's /at-run-output (from the opened download when fromImage); returns what went in. */
  fill: (
    carrierId: string,
    opened: Opened | undefined,
    step: StepRunner,
  ) => Promise<{ entries: number; bytes: number }>;
}

/** Entries and regular-file bytes of a tar (the code archive was validated upstream; this only counts). */
async function countTar(bytes: Buffer): Promise<{ entries: number; bytes: number }> {
  const extract = tar.extract();
  let entries = 0;
  let total = 0;
  const done = new Promise<void>((resolve, reject) => {
    extract.on('entry', (header, stream, next) => {
      entries += 1;
      if (header.type === 'file' || header.type === 'contiguous-file') total += header.size ?? 0;
      stream.on('end', next);
      stream.resume();
    });
    extract.on('finish', resolve);
    extract.on('error', reject);
  });
  extract.end(bytes);
  await done;
  return { entries, bytes: total };
}

/** What a materialization answers, whether it filled the volume or found it sealed. */
function materialized(
  spec: SourceSpec,
  counts: { entries: number; bytes: number },
  cached: boolean,
  pulled: boolean,
  timings: Materialized['timings'],
): Materialized {
  return {
    kind: spec.kind,
    volume: spec.volume,
    cacheKey: spec.cacheKey,
    digest: spec.digest,
    image: spec.image,
    entries: counts.entries,
    bytes: counts.bytes,
    cached,
    pulled,
    timings,
  };
}

class DockerMaterializer implements Materializer {
  readonly #engine: DockerEngine;
  readonly #limits: ArchiveLimits;
  readonly #maxImageBytes: number;
  readonly #labels: Readonly<Record<string, string>>;
  readonly #inFlight = new Map<string, Promise<Materialized>>();
  readonly #locks: VolumeLocks;

  constructor(engine: DockerEngine, opts: MaterializerOptions) {
    // Bad limits are refused here: a negative or fractional one would stall the validating stream mid-export.
    const issues = [
      ...(opts.limits === undefined ? [] : archiveLimitsIssues(opts.limits, 'limits')),
      ...(opts.maxImageBytes === undefined || (Number.isSafeInteger(opts.maxImageBytes) && opts.maxImageBytes > 0)
        ? []
        : [`maxImageBytes must be a positive integer (got ${JSON.stringify(opts.maxImageBytes)})`]),
    ];
    if (issues.length > 0) throw new ValidationError('OPTIONS_INVALID', 'invalid materializer options', issues);
    this.#engine = engine;
    this.#locks = new VolumeLocks(engine, { ...DEFAULT_LOCK_LIMITS, ...opts.lock });
    this.#limits = opts.limits ?? DEFAULT_ARCHIVE_LIMITS;
    this.#maxImageBytes = opts.maxImageBytes ?? 2 * 1024 * 1024 * 1024;
    this.#labels = opts.labels ?? {};
  }

  async materializeRuntime(req: RuntimeRequest): Promise<Materialized> {
    return this.#fromImage('runtime', req.image, req.exportPath, req);
  }

  async materializeAddition(req: AdditionRequest): Promise<Materialized> {
    return this.#fromImage('addition', req.image, ADDITION_EXPORT_PATH, req);
  }

  async materializeCode(req: CodeRequest): Promise<Materialized> {
    if (!Buffer.isBuffer(req.archive) || req.archive.length === 0) {
      throw new ValidationError('CODE_ARCHIVE_INVALID', 'materializeCode needs the validated code archive bytes');
    }
    if (req.archive.length > this.#limits.maxArchiveBytes) {
      throw new ValidationError(
        'CODE_ARCHIVE_INVALID',
        `the code archive is ${req.archive.length} bytes; the limit is ${this.#limits.maxArchiveBytes}`,
      );
    }
    const carrier = parseDigestReference(req.carrierImage).reference;
    const archive = Buffer.from(req.archive); // a private copy: the bytes cannot change under us
    const hex = sha256(archive);
    const volume = `runlog-code-${hex.slice(0, 40)}`;
    return this.#run({
      kind: 'code',
      image: carrier,
      cacheKey: `code sha256:${hex}`,
      volume,
      digest: `sha256:${hex}`,
      labels: { ...this.#labels, ...req.labels, ...(req.codeCid ? { 'runlog.code-cid': req.codeCid } : {}) },
      onProgress: req.onProgress,
      ...(req.after ? { after: req.after } : {}),
      fromImage: false,
      fill: async (containerId, _opened, step) => {
        const counted = await countTar(archive);
        await step('upload', () => this.#engine.putArchive(containerId, MATERIALIZE_TARGET, archive));
        return counted;
      },
    });
  }

  #fromImage(
    kind: 'runtime' | 'addition',
    image: string,
    exportPath: string,
    req: CommonRequest,
  ): Promise<Materialized> {
    const ref = parseDigestReference(image); // throws RUNTIME_IMAGE_NOT_DIGEST
    const problems = absolutePathProblems('export path', exportPath);
    if (problems.length > 0) throw new ValidationError('RUNTIME_EXPORT_PATH_INVALID', 'invalid export path', problems);
    const key = `${kind} ${ref.digest}:${exportPath}`;
    const volume = `runlog-${kind}-${sha256(`${key}\n${limitsFingerprint(this.#limits)}`).slice(0, 40)}`;
    const stripPrefix = posix.basename(exportPath);
    return this.#run({
      kind,
      image: ref.reference,
      cacheKey: key,
      volume,
      digest: ref.digest,
      labels: { ...this.#labels, ...req.labels, 'runlog.export-path': exportPath },
      onProgress: req.onProgress,
      fromImage: true,
      open: (sourceId, step) =>
        openExport(this.#engine, sourceId, ref.reference, exportPath, this.#limits.maxArchiveBytes, step),
      fill: (containerId, opened, step) =>
        copyValidatedExport(this.#engine, containerId, opened!, this.#limits, stripPrefix, step),
    });
  }

  #run(spec: SourceSpec): Promise<Materialized> {
    const existing = this.#inFlight.get(spec.volume);
    if (existing) return existing;
    const p = this.#materialize(spec).finally(() => this.#inFlight.delete(spec.volume));
    this.#inFlight.set(spec.volume, p);
    return p;
  }

  async #materialize(spec: SourceSpec): Promise<Materialized> {
    const t0 = now();
    const timings: Materialized['timings'] = { totalMs: 0 };
    const engine = this.#engine;
    const sealName = `${spec.volume}${SEAL_SUFFIX}`;
    let containerId: string | undefined;
    const step = createStepRunner(spec, timings, () => containerId);
    const done = (counts: { entries: number; bytes: number }, cached: boolean, pulled: boolean): Materialized => {
      timings.totalMs = now() - t0;
      return materialized(spec, counts, cached, pulled, timings);
    };
    const reuse = (seal: VolumeInfo, pulled: boolean): Materialized =>
      done(
        { entries: Number(seal.labels['runlog.entries'] ?? -1), bytes: Number(seal.labels['runlog.bytes'] ?? -1) },
        true,
        pulled,
      );

    // Warm path: a sealed volume with this content already exists. Anything else (nothing, an unsealed volume, a
    // lone seal) is decided under the lock: an unsealed volume may be another process's copy in progress.
    const cached = await step('cache', async () => (await this.#look(spec)).sealed);
    if (cached) return reuse(cached, false);

    if (spec.after) await spec.after;
    const pulled = await this.#pull(spec, step);
    // The lock container is created from the image just pulled; a live holder's copy is waited for.
    const got = await step('lock', () => this.#lockOrSealed(spec));
    if ('sealed' in got) return reuse(got.sealed, pulled);
    const lock = got.lock;

    const volumeLabels = {
      ...spec.labels,
      [LABEL_VOLUME_KIND]: spec.kind,
      [LABEL_CACHE_KEY]: spec.cacheKey,
      'runlog.source-image': spec.image,
    };
    let volumeCreated = false;
    /** Every container created here, removed on the way out whatever happens. */
    const created: string[] = [];
    const createOne = async (body: ContainerCreateBody): Promise<string> => {
      const id = await engine.createContainer(body);
      created.push(id);
      return id;
    };
    // The download's source mounts nothing: it is created, and its download opened, while the volume and the
    // carrier (which mounts the volume, so comes after it) are created.
    const sourceCreated = spec.fromImage ? createOne(sourceBody(spec)) : null;
    const opened = sourceCreated && spec.open ? sourceCreated.then((id) => spec.open!(id, step)) : null;
    opened?.catch(() => undefined); // awaited below, or settled on the way out
    let removing: Promise<unknown> | null = null;
    let handedOver = false;
    let lockLost = false;
    try {
      await step('create-volume', async () => {
        await engine.createVolume(spec.volume, volumeLabels);
        volumeCreated = true;
      });
      const carrierId = await step('create-container', async () => {
        const [carrier, source] = await Promise.allSettled([createOne(carrierBody(spec)), sourceCreated]);
        if (carrier.status === 'rejected') throw carrier.reason;
        if (source.status === 'rejected') throw source.reason;
        return carrier.value;
      });
      containerId = carrierId;
      const download = opened ? await opened : undefined;
      handedOver = true; // fill reads the download to its end or closes it
      const filled = await spec.fill(carrierId, download, step);
      // The verdict is in: the containers are removed while the seal is created.
      const containers = created.splice(0);
      containerId = undefined;
      removing = step('remove-container', () =>
        Promise.all(containers.map((id) => engine.removeContainer(id, { force: true }))),
      );
      removing.catch(() => created.push(...containers)); // removed again on the way out
      await Promise.all([
        removing,
        step('seal', async () => {
          // Only a holder seals: one whose lock was taken over as stale (it held it past maxHoldMs) is not the
          // owner of this volume any more.
          if (!(await lock.stillHeld())) {
            lockLost = true;
            throw new MaterializationError(
              'MATERIALIZATION_FAILED',
              'seal',
              `materializing ${spec.cacheKey}: the lock on ${spec.volume} was taken over by another process (held too long)`,
              { volume: spec.volume },
            );
          }
          await engine.createVolume(sealName, {
            ...spec.labels,
            [LABEL_SEAL_FOR]: spec.volume,
            [LABEL_CACHE_KEY]: spec.cacheKey,
            'runlog.entries': String(filled.entries),
            'runlog.bytes': String(filled.bytes),
          });
        }),
      ]);
      // Sealed and its containers gone: a waiter now finds the volume complete (released only once nothing here can
      // fail any more, since a failure removes the volume).
      await this.#release(lock);
      return done(filled, false, pulled);
    } catch (err) {
      // What is still in flight lands first, so that everything it created is removed here.
      const [, open] = await Promise.allSettled([sourceCreated, opened, removing]);
      if (!handedOver && open?.status === 'fulfilled' && open.value) await discard(open.value.body); // never read: close it
      await Promise.all(created.map((id) => engine.removeContainer(id, { force: true }).catch(() => undefined)));
      if (volumeCreated && !lockLost) {
        await engine.removeVolume(sealName).catch(() => undefined); // a seal made beside a removal that failed
        await engine.removeVolume(spec.volume).catch(() => undefined);
      }
      if (!lockLost) await this.#release(lock);
      throw err;
    }
  }

  /** Makes the image present (pulled only when absent) and refuses one over maxImageBytes; whether it was pulled. */
  async #pull(spec: SourceSpec, step: StepRunner): Promise<boolean> {
    const { pulled, image } = await step('pull', () =>
      this.#engine.pullByDigest(
        spec.image,
        spec.onProgress
          ? (p) =>
              void spec.onProgress?.({ kind: spec.kind, step: 'pull', phase: 'started', volume: spec.volume, pull: p })
          : undefined,
      ),
    );
    if (image.sizeBytes > this.#maxImageBytes) {
      throw new MaterializationError(
        'IMAGE_TOO_LARGE',
        'pull',
        `image ${spec.image} is ${image.sizeBytes} bytes; the limit is ${this.#maxImageBytes}`,
        { image: spec.image },
      );
    }
    return pulled;
  }

  /** The volume and its seal as they are now (one request); `sealed` when both exist. */
  async #look(spec: SourceSpec): Promise<{ sealed: VolumeInfo | null; seal: boolean; content: boolean }> {
    const sealName = `${spec.volume}${SEAL_SUFFIX}`;
    const found = await this.#engine.volumesNamed([spec.volume, sealName]);
    const seal = found.find((v) => v.name === sealName) ?? null;
    const content = found.some((v) => v.name === spec.volume);
    return { sealed: seal && content ? seal : null, seal: seal !== null, content };
  }

  /**
   * Takes the volume's lock, or the volume another process sealed meanwhile. Under the lock, what an earlier
   * attempt left (an unsealed volume and its containers, a seal without content) is removed: its holder is gone.
   */
  async #lockOrSealed(spec: SourceSpec): Promise<{ lock: HeldLock } | { sealed: VolumeInfo }> {
    let delayMs = 20;
    for (;;) {
      const attempt = await this.#locks.tryLock(spec.volume, spec.image, spec.labels);
      const lock = attempt.held;
      if (lock) {
        try {
          // The previous holder may have sealed it between the cache check and now.
          const now = await this.#look(spec);
          if (now.sealed) {
            await this.#release(lock);
            return { sealed: now.sealed };
          }
          if (now.seal) await this.#engine.removeVolume(`${spec.volume}${SEAL_SUFFIX}`); // a seal without content means nothing
          if (now.content) await this.#removeStale(spec.volume); // unsealed: a crashed or failed earlier attempt
          return { lock };
        } catch (err) {
          await this.#release(lock);
          throw err;
        }
      }
      // A live holder is copying: wait a little, then look for its seal. A gone holder's lock was removed (or the
      // lock vanished): try again at once.
      if (attempt.verdict?.holder === 'alive') {
        await new Promise((resolve) => setTimeout(resolve, delayMs));
        delayMs = Math.min(delayMs * 2, 500);
      }
      const now = await this.#look(spec);
      if (now.sealed) return { sealed: now.sealed };
    }
  }

  /** Removes a lock this process holds; a failure is not the copy's (the lock is taken over once judged stale). */
  async #release(lock: HeldLock): Promise<void> {
    await lock.release().catch(() => lock.release().catch(() => undefined));
  }

  async #removeStale(volume: string): Promise<void> {
    // Containers of a crashed earlier attempt still hold the volume.
    for (const c of await this.#engine.listContainers({ [LABEL_MATERIALIZING]: volume }, { all: true })) {
      await this.#engine.removeContainer(c.id, { force: true });
    }
    await this.#engine.removeVolume(volume);
  }

  async removeMaterialized(volume: string): Promise<void> {
    await this.#engine.removeVolume(volume);
    await this.#engine.removeVolume(`${volume}${SEAL_SUFFIX}`);
  }
}

export function createMaterializer(engine: DockerEngine, opts: MaterializerOptions = {}): Materializer {
  return new DockerMaterializer(engine, opts);
}
