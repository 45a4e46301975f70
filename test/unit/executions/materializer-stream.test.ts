// The runtime materializer streams the export from the stopped container into its volume while it is validated:
// against a fake Engine (the real one is in test/int/executions/docker-materializer.test.ts) this checks what the real one cannot
// be made to serve: an export that fails validation only at its end, after part of it was uploaded. Such a volume
// must be removed and never sealed; a valid export is uploaded exactly as the batch path would have written it.
import { describe, expect, it } from 'vitest';
import { DEFAULT_ARCHIVE_LIMITS, validateArchive, writeArchive } from '../../../src/adapters/archive/index.ts';
import type { DockerEngine, VolumeInfo } from '../../../src/adapters/docker/docker-port.ts';
import { DockerConflictError } from '../../../src/adapters/docker/errors.ts';
import { holderLabels, processIdentity } from '../../../src/adapters/docker/materialize-lock.ts';
import { createMaterializer } from '../../../src/adapters/docker/materializer.ts';

const IMAGE = `localhost:5000/runtime-fake@sha256:${'a'.repeat(64)}`;

function octal(n: number, width: number): string {
  return `${n.toString(8).padStart(width - 1, '0')}\0`;
}
function header(name: string, type: string, size = 0, linkname = ''): Buffer {
  const b = Buffer.alloc(512);
  b.write(name, 0, 100);
  b.write(octal(type === '5' ? 0o755 : 0o644, 8), 100, 'latin1');
  b.write(octal(0, 8), 108, 'latin1');
  b.write(octal(0, 8), 116, 'latin1');
  b.write(octal(size, 12), 124, 'latin1');
  b.write(octal(0, 12), 136, 'latin1');
  b.write(type, 156, 'latin1');
  if (linkname) b.write(linkname, 157, 100);
  b.write('ustar\u000000', 257, 'latin1');
  b.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of b) sum += byte;
  b.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return b;
}
function file(name: string, size: number, fill: number): Buffer {
  return Buffer.concat([header(name, '0', size), Buffer.alloc(Math.ceil(size / 512) * 512, 0), Buffer.alloc(0)]).fill(
    fill,
    512,
    512 + size,
  );
}
/** What Docker's GET /archive of /at-run/runtime looks like: everything under `runtime/`. */
function exportTar(...entries: Buffer[]): Buffer {
  return Buffer.concat([header('runtime/', '5'), ...entries, Buffer.alloc(1024)]);
}

/** A fake Engine with just what the materializer calls; it records volumes, uploads and container removals. */
function fakeEngine(exported: Buffer) {
  const volumes = new Map<string, VolumeInfo>();
  const uploads: { bytes: number; completed: boolean; body: Buffer }[] = [];
  const removedContainers: string[] = [];
  const created: { id: string; mounts: number }[] = [];
  const calls: string[] = [];
  let downloads = 0;
  const locks = new Map<string, { name: string; labels: Record<string, string> }>();
  let lockCount = 0;
  const closed: string[] = [];
  const engine = {
    socketPath: '/nonexistent',
    volumesNamed: async (names: readonly string[]) => names.flatMap((n) => (volumes.has(n) ? [volumes.get(n)!] : [])),
    pullByDigest: async () => ({
      pulled: false,
      image: {
        id: 'sha256:x',
        repoDigests: [IMAGE],
        repoTags: [],
        sizeBytes: 1000,
        os: 'linux',
        architecture: 'amd64',
      },
    }),
    createVolume: async (name: string, labels: Record<string, string>) => {
      const v = { name, labels, createdAt: undefined };
      volumes.set(name, v);
      return v;
    },
    removeVolume: async (name: string) => void volumes.delete(name),
    listContainers: async () => [],
    // Named containers are the volumes' locks (materialize-lock.ts): a name is taken once, as by the Engine.
    createContainer: async (
      body: { HostConfig?: { Mounts?: unknown[] }; Labels?: Record<string, string> },
      name?: string,
    ) => {
      if (name !== undefined) {
        if ([...locks.values()].some((l) => l.name === name))
          throw new DockerConflictError('create container', `the name ${name} is in use`);
        const id = `lock${++lockCount}`;
        locks.set(id, { name, labels: body.Labels ?? {} });
        return id;
      }
      const id = `c${created.length + 1}`;
      created.push({ id, mounts: body.HostConfig?.Mounts?.length ?? 0 });
      return id;
    },
    removeContainer: async (id: string) => void (id.startsWith('lock') ? locks.delete(id) : removedContainers.push(id)),
    inspectContainer: async (nameOrId: string) => {
      const found = [...locks.entries()].find(([id, l]) => id === nameOrId || l.name === nameOrId);
      return found ? { id: found[0], labels: found[1].labels } : null;
    },
    openArchive: async (id: string) => {
      calls.push(`download from ${id}`);
      downloads++;
      async function* body(): AsyncGenerator<Buffer> {
        // Arrives in 4 KiB pieces, letting the event loop turn (the upload runs meanwhile).
        try {
          for (let off = 0; off < exported.length; off += 4096) {
            yield exported.subarray(off, off + 4096);
            await new Promise((r) => setImmediate(r));
          }
        } finally {
          closed.push(id);
        }
      }
      return { stat: { name: 'runtime', size: 4096, mode: 0x80000000 | 0o755, linkTarget: '' }, body: body() };
    },
    putArchive: async (id: string, _path: string, tar: Buffer | AsyncIterable<Buffer>) => {
      calls.push(`upload into ${id}`);
      const upload = { bytes: 0, completed: false, body: Buffer.alloc(0) };
      uploads.push(upload);
      const parts: Buffer[] = [];
      for await (const piece of tar as AsyncIterable<Buffer>) {
        upload.bytes += piece.length;
        parts.push(piece);
      }
      upload.completed = true;
      upload.body = Buffer.concat(parts);
    },
  };
  return {
    engine: engine as unknown as DockerEngine,
    volumes,
    uploads,
    removedContainers,
    created,
    calls,
    closed,
    locks,
    downloads: () => downloads,
  };
}

describe('runtime materialization streams the export while validating it', () => {
  it('uploads a valid export as it arrives, exactly the canonical archive of its entries, and seals the volume', async () => {
    const exported = exportTar(
      header('runtime/bin/', '5'),
      file('runtime/bin/node', 300_000, 7),
      file('runtime/adapter.mjs', 1000, 65),
      header('runtime/current', '2', 0, 'bin/node'),
    );
    const fake = fakeEngine(exported);
    const m = createMaterializer(fake.engine);
    const result = await m.materializeRuntime({ image: IMAGE, exportPath: '/at-run/runtime' });
    expect(result).toMatchObject({ cached: false, entries: 4, bytes: 301_000 });
    expect(fake.downloads()).toBe(1);
    expect(fake.uploads).toHaveLength(1);
    expect(fake.uploads[0]!.completed).toBe(true);
    const expected = await validateArchive(exported, DEFAULT_ARCHIVE_LIMITS, {
      kind: 'runtime',
      stripPrefix: 'runtime',
    });
    expect(fake.uploads[0]!.body.equals(await writeArchive(expected.entries))).toBe(true);
    expect([...fake.volumes.keys()].sort()).toEqual([result.volume, `${result.volume}-sealed`]);
    // Downloaded from a container without the volume, uploaded into the one that mounts it (the Engine locks a
    // container while an archive download from it is open), both removed.
    // The source is created first (its download is opened while the volume and the carrier are created).
    expect(fake.created).toEqual([
      { id: 'c1', mounts: 0 },
      { id: 'c2', mounts: 1 },
    ]);
    expect(fake.calls.sort()).toEqual(['download from c1', 'upload into c2']);
    expect(fake.removedContainers.sort()).toEqual(['c1', 'c2']);
    expect(fake.locks.size).toBe(0); // the volume's lock, taken before the volume was created, is released
  });

  it(
    'an export that fails only at its end (an escaping symlink) leaves no volume and no seal, ' +
      'though part of it was uploaded',
    async () => {
      const exported = exportTar(
        file('runtime/a', 200_000, 1),
        header('runtime/up', '2', 0, '../../../etc'),
        file('runtime/b', 200_000, 2),
      );
      const fake = fakeEngine(exported);
      const m = createMaterializer(fake.engine);
      const err = await m.materializeRuntime({ image: IMAGE, exportPath: '/at-run/runtime' }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'ARCHIVE_REJECTED' });
      expect((err as { violations: { code: string }[] }).violations.map((v) => v.code)).toEqual(['SYMLINK_ESCAPE']);
      // The upload had begun (the overlap) and never got its end-of-archive marker.
      expect(fake.uploads).toHaveLength(1);
      expect(fake.uploads[0]!.bytes).toBeGreaterThan(200_000);
      expect(fake.uploads[0]!.completed).toBe(false);
      expect([...fake.volumes.keys()]).toEqual([]);
      expect(fake.removedContainers.sort()).toEqual(['c1', 'c2']);
      expect(fake.locks.size).toBe(0);
    },
  );

  it('an export that fails mid-way (a traversal) stops the upload there and reports every violation of the whole export', async () => {
    const exported = exportTar(
      file('runtime/a', 100_000, 1),
      file('runtime/../../x', 10, 2),
      file('runtime/b', 300_000, 3),
      header('runtime/dev', '3'),
    );
    const fake = fakeEngine(exported);
    const err = await createMaterializer(fake.engine)
      .materializeRuntime({ image: IMAGE, exportPath: '/at-run/runtime' })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ARCHIVE_REJECTED' });
    const codes = (err as { violations: { code: string }[] }).violations.map((v) => v.code);
    expect(codes).toContain('PATH_TRAVERSAL');
    expect(codes).toContain('DEVICE_ENTRY'); // found after the upload was cut off: the download was read to its end
    expect(fake.uploads[0]!.completed).toBe(false);
    expect(fake.uploads[0]!.bytes).toBeLessThan(200_000); // runtime/b was not sent
    expect([...fake.volumes.keys()]).toEqual([]);
  });

  it(
    'a volume that cannot be created: ' +
      'the source created meanwhile is removed and its opened download closed, nothing uploaded',
    async () => {
      const exported = exportTar(file('runtime/a', 100_000, 1));
      const fake = fakeEngine(exported);
      const engine = {
        ...(fake.engine as object),
        createVolume: async () => Promise.reject(new Error('no space left')),
      } as unknown as DockerEngine;
      const err = await createMaterializer(engine)
        .materializeRuntime({ image: IMAGE, exportPath: '/at-run/runtime' })
        .catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'MATERIALIZATION_FAILED' });
      expect(fake.created).toEqual([{ id: 'c1', mounts: 0 }]); // the carrier comes after the volume: never created
      expect(fake.calls).toEqual(['download from c1']);
      expect(fake.closed).toEqual(['c1']);
      expect(fake.removedContainers).toEqual(['c1']);
      expect(fake.uploads).toEqual([]);
      expect(fake.locks.size).toBe(0);
    },
  );
});

describe('one materialization of a volume at a time across processes (the lock in the daemon)', () => {
  const exported = () => exportTar(file('runtime/a', 100_000, 1), file('runtime/b', 1000, 2));

  it(
    'two materializers (as two processes on one daemon) copying the same volume at once: one copies, ' +
      'the other waits and reuses its sealed volume',
    async () => {
      const fake = fakeEngine(exported());
      const [a, b] = [createMaterializer(fake.engine), createMaterializer(fake.engine)];
      const [ra, rb] = await Promise.all([
        a.materializeRuntime({ image: IMAGE, exportPath: '/at-run/runtime' }),
        b.materializeRuntime({ image: IMAGE, exportPath: '/at-run/runtime' }),
      ]);
      expect(ra.volume).toBe(rb.volume);
      expect([ra.cached, rb.cached].sort()).toEqual([false, true]);
      expect(rb.entries).toBe(ra.entries);
      expect(fake.uploads).toHaveLength(1);
      expect(fake.created.filter((c) => c.mounts === 1)).toHaveLength(1); // one carrier: the volume was filled once
      expect([...fake.volumes.keys()].sort()).toEqual([ra.volume, `${ra.volume}-sealed`]);
      expect(fake.locks.size).toBe(0);
    },
  );

  it('a lock whose holder is gone (its pid now runs another process) is taken over and the unsealed volume it left is redone', async () => {
    const fake = fakeEngine(exported());
    const m = createMaterializer(fake.engine);
    const volume = (
      await createMaterializer(fakeEngine(exported()).engine).materializeRuntime({
        image: IMAGE,
        exportPath: '/at-run/runtime',
      })
    ).volume;
    const self = await processIdentity();
    fake.locks.set('lock-dead', {
      name: `${volume}-lock`,
      labels: holderLabels({ ...self, pidStart: 'not-this-one' }, 'the-dead-one', Date.now()),
    });
    fake.volumes.set(volume, { name: volume, labels: {}, createdAt: undefined }); // half-written, never sealed
    const result = await m.materializeRuntime({ image: IMAGE, exportPath: '/at-run/runtime' });
    expect(result).toMatchObject({ volume, cached: false, entries: 2 });
    expect(fake.uploads).toHaveLength(1);
    expect(fake.locks.size).toBe(0);
    expect([...fake.volumes.keys()].sort()).toEqual([volume, `${volume}-sealed`]);
  });

  it('a live holder that later gives up without sealing: the waiter then copies it itself', async () => {
    const fake = fakeEngine(exported());
    const volume = (
      await createMaterializer(fakeEngine(exported()).engine).materializeRuntime({
        image: IMAGE,
        exportPath: '/at-run/runtime',
      })
    ).volume;
    const self = await processIdentity();
    fake.locks.set('lock-live', {
      name: `${volume}-lock`,
      labels: holderLabels(self, 'another-materializer', Date.now()),
    });
    const m = createMaterializer(fake.engine);
    let settled = false;
    const p = m.materializeRuntime({ image: IMAGE, exportPath: '/at-run/runtime' }).finally(() => (settled = true));
    for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 20));
    expect(settled).toBe(false); // waiting for the holder, which runs (this very process)
    expect(fake.uploads).toHaveLength(0);
    fake.locks.delete('lock-live'); // the holder failed and removed what it made, then its lock
    expect(await p).toMatchObject({ volume, cached: false });
    expect(fake.uploads).toHaveLength(1);
  });

  it('a holder this process cannot see (another machine or pid namespace) is waited for up to staleAfterMs, then taken over', async () => {
    const fake = fakeEngine(exported());
    const volume = (
      await createMaterializer(fakeEngine(exported()).engine).materializeRuntime({
        image: IMAGE,
        exportPath: '/at-run/runtime',
      })
    ).volume;
    const self = await processIdentity();
    fake.locks.set('lock-far', {
      name: `${volume}-lock`,
      labels: holderLabels({ ...self, bootId: 'another-kernel' }, 'far', Date.now()),
    });
    const result = await createMaterializer(fake.engine, { lock: { staleAfterMs: 50 } }).materializeRuntime({
      image: IMAGE,
      exportPath: '/at-run/runtime',
    });
    expect(result).toMatchObject({ volume, cached: false });
    expect(fake.locks.has('lock-far')).toBe(false);
  });
});

describe('materializer options', () => {
  it('refuses limits that are not positive integers, and a bad image cap, naming each, before touching the engine', () => {
    const engine = fakeEngine(Buffer.alloc(0));
    let err: unknown;
    try {
      createMaterializer(engine.engine, {
        limits: { ...DEFAULT_ARCHIVE_LIMITS, maxEntries: -1, maxFileBytes: 1.5 },
        maxImageBytes: 0,
      });
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'OPTIONS_INVALID' });
    expect((err as { issues: string[] }).issues).toEqual([
      'limits.maxEntries must be a positive integer (got -1)',
      'limits.maxFileBytes must be a positive integer (got 1.5)',
      'maxImageBytes must be a positive integer (got 0)',
    ]);
    expect(engine.calls).toEqual([]);
    expect(() => createMaterializer(engine.engine, { limits: DEFAULT_ARCHIVE_LIMITS })).not.toThrow();
  });
});
