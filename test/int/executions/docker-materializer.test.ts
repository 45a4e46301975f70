// The Docker engine port and the materializer against the real Engine and the real registry at 127.0.0.1:5000:
// images built by scripts/images/*.sh are in the registry and pull by digest; runtime, addition and code bytes
// land in volumes through containers that are created and never started.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DockerEngine } from '../../../src/adapters/docker/docker-port.ts';
import { createDockerEngine } from '../../../src/adapters/docker/dockerode-engine.ts';
import { createMaterializer, type Materializer } from '../../../src/adapters/docker/materializer.ts';
import type { MaterializeProgress } from '../../../src/adapters/docker/materialize-steps.ts';
import { packArchive, writeArchive, type ArchiveEntry } from '../../../src/adapters/archive/index.ts';
import { DEFAULT_ARCHIVE_LIMITS } from '../../../src/domain/at-run/archive-limits.ts';
import {
  cleanupTestContainers,
  cleanupTestVolumes,
  watchContainerEvents,
  docker,
  imageFile,
  imageRef,
  registryHasManifest,
  requireDocker,
  requireRegistry,
  TEST_LABELS,
  volumeFile,
  volumeListing,
} from '../../support/docker.ts';

const IMAGES = ['at-run-sandbox', 'runtime-node', 'runtime-python', 'at-run-addition-test'] as const;
// A per-run label so this file's cleanup and event queries see only what this run made.
const RUN = `mat-${process.pid}-${Date.now()}`;
const LABELS = { ...TEST_LABELS, 'runlog.test-run': RUN };

let engine: DockerEngine;
let materializer: Materializer;

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  for (const name of IMAGES) imageRef(name); // fails with the setup hint when an image was never built
  engine = createDockerEngine();
  // Limits of its own give this test its own cache volumes: caches made by other runs on this daemon (the demo,
  // the benchmarks) must not make "cold" materializations look cached.
  materializer = createMaterializer(engine, {
    labels: LABELS,
    limits: { ...DEFAULT_ARCHIVE_LIMITS, maxEntries: DEFAULT_ARCHIVE_LIMITS.maxEntries - 7 },
  });
  await cleanupTestVolumes({ 'runlog.test': '1' }).catch(() => undefined);
});

afterAll(async () => {
  if (!engine) return;
  await cleanupTestContainers(LABELS);
  await cleanupTestVolumes(LABELS);
});

describe('engine', () => {
  it('answers ping and reports its platform in OCI naming', async () => {
    await engine.ping();
    const platform = await engine.platform();
    expect(platform).toEqual({ os: 'linux', architecture: 'amd64' });
    expect(await engine.runtimes()).toEqual(expect.arrayContaining(['runc', 'runsc']));
  });

  it('fails with DOCKER_UNAVAILABLE on a socket where no Engine answers', async () => {
    const nowhere = createDockerEngine({ socketPath: '/nonexistent/docker.sock' });
    await expect(nowhere.ping()).rejects.toMatchObject({ code: 'DOCKER_UNAVAILABLE' });
    await expect(
      nowhere.putArchive(
        'x',
        '/x',
        packArchive([{ path: 'f', type: 'file', mode: 0o644, size: 1, data: Buffer.from('x') }]),
      ),
    ).rejects.toMatchObject({ code: 'DOCKER_UNAVAILABLE' });
  });

  it('a streamed archive upload the Engine refuses ends with its answer, typed (DOCKER_NOT_FOUND and the status)', async () => {
    const many = Array.from({ length: 100 }, (_, i): ArchiveEntry => ({
      path: `f${i}`,
      type: 'file',
      mode: 0o644,
      size: 100_000,
      content: [Buffer.alloc(100_000, i)],
    }));
    await expect(engine.putArchive(`runlog-no-such-container-${RUN}`, '/x', packArchive(many))).rejects.toMatchObject({
      code: 'DOCKER_NOT_FOUND',
      status: 404,
    });
  });

  it('finds every runlog image in the registry by digest', async () => {
    for (const name of IMAGES) {
      const ref = imageRef(name);
      expect(ref).toMatch(new RegExp(`^localhost:5000/${name}@sha256:[0-9a-f]{64}$`));
      expect(await registryHasManifest(ref), `${ref} in the registry`).toBe(true);
    }
  });

  it('pulls a digest-pinned image that is not present, and reuses it without a pull afterwards', async () => {
    const ref = imageRef('at-run-addition-test');
    const present = await engine.inspectImage(ref);
    if (present) await docker.getImage(present.id).remove({ force: true });
    expect(await engine.hasImage(ref)).toBe(false);

    const progress: string[] = [];
    const first = await engine.pullByDigest(ref, (p) => progress.push(p.status));
    expect(first.pulled).toBe(true);
    expect(first.image.repoDigests).toContain(ref);
    expect(progress.length).toBeGreaterThan(0);
    expect(await engine.hasImage(ref)).toBe(true);

    const second = await engine.pullByDigest(ref);
    expect(second.pulled).toBe(false);
    expect(second.image.id).toBe(first.image.id);
  });

  it('refuses a wrong digest with IMAGE_NOT_FOUND naming the reference', async () => {
    const wrong = `localhost:5000/runtime-node@sha256:${'0'.repeat(64)}`;
    const err = await engine.pullByDigest(wrong).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'IMAGE_NOT_FOUND' });
    expect((err as Error).message).toContain(wrong);
    expect(await engine.hasImage(wrong)).toBe(false);
  });

  it('refuses a tag reference before contacting anything', async () => {
    await expect(engine.pullByDigest('localhost:5000/runtime-node:latest')).rejects.toMatchObject({
      code: 'IMAGE_PULL_FAILED',
    });
  });
});

describe('materializer', () => {
  it('copies the node runtime export into a volume from a container that is never started', async () => {
    const image = imageRef('runtime-node');
    const watch = await watchContainerEvents();
    const seen: MaterializeProgress[] = [];
    let inspected: { status: string; startedAt: string } | null = null;
    const result = await materializer.materializeRuntime({
      image,
      exportPath: '/at-run/runtime',
      onProgress: async (p) => {
        seen.push(p);
        // The copy is complete and the container not yet removed: look at it.
        if (p.step === 'upload' && p.phase === 'done' && p.containerId) {
          const c = await docker.getContainer(p.containerId).inspect();
          inspected = { status: c.State.Status, startedAt: c.State.StartedAt };
        }
      },
    });
    expect(inspected).toEqual({ status: 'created', startedAt: '0001-01-01T00:00:00Z' });
    expect(result).toMatchObject({ kind: 'runtime', cached: false, digest: image.split('@')[1], image });
    expect(result.entries).toBeGreaterThanOrEqual(3);
    expect(result.bytes).toBeGreaterThan(50 * 1024 * 1024);
    expect(seen.map((s) => `${s.step}:${s.phase}`)).toEqual(
      expect.arrayContaining([
        'create-volume:done',
        'create-container:done',
        'download:done',
        'validate:done',
        'upload:done',
        'remove-container:done',
        'seal:done',
      ]),
    );

    // The Engine's own event log: the materializer container was created and destroyed, never started.
    await watch.settled();
    watch.stop();
    const events = watch.events({ 'runlog.test-run': RUN, 'runlog.kind': 'materializer' });
    const actions = events.map((e) => e.action);
    expect(actions).toContain('create');
    expect(actions).toContain('destroy');
    expect(actions.filter((a) => a === 'start' || a.startsWith('exec_'))).toEqual([]);
    expect(await engine.listContainers({ 'runlog.materializing': result.volume })).toEqual([]);

    // The volume holds the export's contents at its root, relocatable, root-owned, executables 0755.
    const listing = await volumeListing(result.volume, image);
    const node = listing.find((e) => e.path === 'bin/node');
    expect(node).toMatchObject({ type: 'file', mode: 0o755 });
    expect(node!.size).toBeGreaterThan(50 * 1024 * 1024);
    expect(listing.map((e) => e.path)).toContain('adapter/worker.mjs');
    expect(listing.some((e) => e.path.startsWith('runtime/'))).toBe(false);
    // Byte for byte what the image ships (the ~95 MB binary went from the download to the upload in chunks).
    const digest = (b: Buffer) => createHash('sha256').update(b).digest('hex');
    expect(digest(await volumeFile(result.volume, image, 'bin/node'))).toBe(
      digest(await imageFile(image, '/at-run/runtime/bin/node')),
    );
    expect(
      (await volumeFile(result.volume, image, 'adapter/worker.mjs')).equals(
        await imageFile(image, '/at-run/runtime/adapter/worker.mjs'),
      ),
    ).toBe(true);
    const volume = await engine.inspectVolume(result.volume);
    expect(volume!.labels).toMatchObject({ 'runlog.volume-kind': 'runtime', 'runlog.test-run': RUN });
    console.info(`[materialize node runtime cold] ${JSON.stringify(result.timings)}`);

    // Warm: the sealed volume is reused without pulling, creating or copying anything.
    const warm = await materializer.materializeRuntime({ image, exportPath: '/at-run/runtime' });
    expect(warm).toMatchObject({ volume: result.volume, cached: true, entries: result.entries, bytes: result.bytes });
    console.info(`[materialize node runtime warm] ${JSON.stringify(warm.timings)}`);
  });

  it('materializes the python runtime and the test addition', async () => {
    const py = await materializer.materializeRuntime({
      image: imageRef('runtime-python'),
      exportPath: '/at-run/runtime',
    });
    expect(py.cached).toBe(false);
    const listing = await volumeListing(py.volume, imageRef('runtime-python'));
    const paths = new Set(listing.map((e) => e.path));
    for (const p of ['bin/python3', 'lib/python3.11/os.py', 'lib/python3.11/json/__init__.py', 'adapter/worker.py'])
      expect(paths.has(p), p).toBe(true);
    expect([...paths].some((p) => p.startsWith('lib/python3.11/test/'))).toBe(false);
    console.info(`[materialize python runtime cold] ${JSON.stringify(py.timings)}`);

    const add = await materializer.materializeAddition({ image: imageRef('at-run-addition-test') });
    expect(add).toMatchObject({ kind: 'addition', entries: 1 });
    expect((await volumeFile(add.volume, imageRef('at-run-addition-test'), 'hello.txt')).toString()).toBe(
      'hello from an addition\n',
    );
  });

  it('copies a validated code archive through the stopped runtime image as carrier', async () => {
    const file = (path: string, text: string): ArchiveEntry => ({
      path,
      type: 'file',
      mode: 0o644,
      size: Buffer.byteLength(text),
      data: Buffer.from(text),
    });
    const archive = await writeArchive([
      file('main.mjs', 'export const greet = (i) => `hi ${i.name}`;\n'),
      { path: 'lib', type: 'directory', mode: 0o755, size: 0 },
      file('lib/util.mjs', 'export const x = 1;\n'),
    ]);
    const code = await materializer.materializeCode({
      archive,
      carrierImage: imageRef('runtime-node'),
      codeCid: 'bafkreitest',
    });
    expect(code).toMatchObject({ kind: 'code', cached: false, entries: 3 });
    expect(code.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const main = await volumeFile(code.volume, imageRef('runtime-node'), 'main.mjs');
    expect(main.toString()).toContain('export const greet');
    expect((await engine.inspectVolume(code.volume))!.labels['runlog.code-cid']).toBe('bafkreitest');
    const again = await materializer.materializeCode({ archive, carrierImage: imageRef('runtime-node') });
    expect(again).toMatchObject({ volume: code.volume, cached: true });
  });

  it('refuses references that are not digest-pinned before touching Docker', async () => {
    await expect(
      materializer.materializeRuntime({ image: 'localhost:5000/runtime-node:latest', exportPath: '/at-run/runtime' }),
    ).rejects.toMatchObject({
      code: 'RUNTIME_IMAGE_NOT_DIGEST',
    });
    await expect(
      materializer.materializeRuntime({ image: imageRef('runtime-node'), exportPath: 'at-run/../etc' }),
    ).rejects.toMatchObject({
      code: 'RUNTIME_EXPORT_PATH_INVALID',
    });
  });

  it('fails a wrong digest with IMAGE_NOT_FOUND and leaves no volume behind', async () => {
    const before = (await engine.listVolumes({ 'runlog.test-run': RUN })).length;
    const wrong = `localhost:5000/runtime-python@sha256:${'1'.repeat(64)}`;
    await expect(
      materializer.materializeRuntime({ image: wrong, exportPath: '/at-run/runtime' }),
    ).rejects.toMatchObject({ code: 'IMAGE_NOT_FOUND' });
    expect((await engine.listVolumes({ 'runlog.test-run': RUN })).length).toBe(before);
  });

  it('removes the volume and the container when the export path is missing', async () => {
    const before = (await engine.listVolumes({ 'runlog.test-run': RUN })).length;
    const err = await materializer
      .materializeRuntime({ image: imageRef('runtime-node'), exportPath: '/at-run/nothing-here' })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'EXPORT_PATH_NOT_FOUND' });
    expect((await engine.listVolumes({ 'runlog.test-run': RUN })).length).toBe(before);
    expect(await engine.listContainers({ 'runlog.test-run': RUN, 'runlog.kind': 'materializer' })).toEqual([]);
  });

  it('removes the volume when the export breaks the operator limits', async () => {
    const strict = createMaterializer(engine, {
      labels: LABELS,
      limits: { ...DEFAULT_ARCHIVE_LIMITS, maxFileBytes: 1024 * 1024 },
    });
    const before = (await engine.listVolumes({ 'runlog.test-run': RUN })).length;
    const err = await strict
      .materializeRuntime({ image: imageRef('runtime-node'), exportPath: '/at-run/runtime' })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ARCHIVE_REJECTED' });
    expect((await engine.listVolumes({ 'runlog.test-run': RUN })).length).toBe(before);
    expect(await engine.listContainers({ 'runlog.test-run': RUN, 'runlog.kind': 'materializer' })).toEqual([]);

    const tiny = createMaterializer(engine, {
      labels: LABELS,
      limits: { ...DEFAULT_ARCHIVE_LIMITS, maxArchiveBytes: 4 * 1024 * 1024 },
    });
    await expect(
      tiny.materializeRuntime({ image: imageRef('runtime-node'), exportPath: '/at-run/runtime' }),
    ).rejects.toMatchObject({ code: 'EXPORT_TOO_LARGE' });
    expect((await engine.listVolumes({ 'runlog.test-run': RUN })).length).toBe(before);
  });

  it('replaces an unsealed volume left by an interrupted attempt', async () => {
    const first = await materializer.materializeAddition({ image: imageRef('at-run-addition-test') });
    // Simulate a crash after the copy but before the seal: drop the seal, leave the content.
    await engine.removeVolume(`${first.volume}-sealed`);
    const redo = await materializer.materializeAddition({ image: imageRef('at-run-addition-test') });
    expect(redo).toMatchObject({ volume: first.volume, cached: false, entries: 1 });
    expect(await engine.inspectVolume(`${first.volume}-sealed`)).not.toBeNull();
  });
});
