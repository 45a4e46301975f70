// One materialization of a volume at a time across processes sharing one Docker daemon (the nodes of a cluster on
// one machine): real child processes (test/support/materialize-child.ts), each with its own materializer, against
// the real Engine and the registry. The lock is a named container in the daemon (materialize-lock.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { writeArchive } from '../../../src/adapters/archive/index.ts';
import type { DockerEngine } from '../../../src/adapters/docker/docker-port.ts';
import { createDockerEngine } from '../../../src/adapters/docker/dockerode-engine.ts';
import type { Materialized } from '../../../src/adapters/docker/materializer.ts';
import { DEFAULT_ARCHIVE_LIMITS } from '../../../src/domain/at-run/archive-limits.ts';
import {
  cleanupTestContainers,
  cleanupTestVolumes,
  imageFile,
  imageRef,
  requireDocker,
  requireRegistry,
  TEST_LABELS,
  volumeFile,
  watchContainerEvents,
  type ContainerEventWatch,
} from '../../support/docker.ts';
import { freshDirs } from '../../support/tmp.ts';

const RUN = `matx-${process.pid}-${Date.now()}`;
const LABELS = { ...TEST_LABELS, 'runlog.test-run': RUN };
const CHILD = join(import.meta.dirname, '../../support/materialize-child.ts');
const dirs = freshDirs('runlog-matx-');

let engine: DockerEngine;
let runtime: string;

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  runtime = imageRef('runtime-node');
  engine = createDockerEngine();
});

afterAll(async () => {
  if (!engine) return;
  await cleanupTestContainers(LABELS);
  await cleanupTestVolumes(LABELS);
});

type Outcome =
  | { ok: true; result: Materialized; steps: string[] }
  | { ok: false; code: string | null; message: string; steps: string[] };

interface Child {
  proc: ChildProcess;
  /** Resolves when the child has said this line on stderr (now or earlier). */
  said(line: string): Promise<void>;
  /** Sends a line to its stdin: `go`, then `continue` past a hold. */
  send(line: string): void;
  outcome: Promise<Outcome>;
  exited: Promise<number | null>;
  done(): boolean;
}

const children: Child[] = [];
afterEach(() => {
  for (const c of children.splice(0))
    if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
});

/** A limit of its own gives each test a runtime volume no other run shares (the limits are part of its name). */
const ownMaxEntries = () => DEFAULT_ARCHIVE_LIMITS.maxEntries - 100 - Math.floor(Math.random() * 9_000);

function start(req: Record<string, unknown>): Child {
  const proc = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      CHILD,
      JSON.stringify({ labels: LABELS, maxEntries: DEFAULT_ARCHIVE_LIMITS.maxEntries, ...req }),
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let err = '';
  let out = '';
  const waiters: { line: string; resolve: () => void }[] = [];
  proc.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
    for (const w of waiters.splice(0)) {
      if (err.split('\n').includes(w.line)) w.resolve();
      else waiters.push(w);
    }
  });
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  const outcome = exited.then((code) => {
    const line = out.trim().split('\n').pop() ?? '';
    if (!line) throw new Error(`the child exited ${code} without a result; stderr:\n${err}`);
    return JSON.parse(line) as Outcome;
  });
  outcome.catch(() => undefined);
  let finished = false;
  void exited.then(() => (finished = true));
  const child: Child = {
    proc,
    said: (line) =>
      new Promise<void>((resolve, reject) => {
        if (err.split('\n').includes(line)) return resolve();
        waiters.push({ line, resolve });
        void exited.then(() =>
          err.split('\n').includes(line)
            ? resolve()
            : reject(new Error(`the child exited before saying "${line}"; stderr:\n${err}`)),
        );
      }),
    send: (line) => proc.stdin!.write(`${line}\n`),
    outcome,
    exited,
    done: () => finished,
  };
  children.push(child);
  return child;
}

async function codeFile(): Promise<string> {
  const text = `export const id = '${randomBytes(8).toString('hex')}';\n`;
  const archive = await writeArchive([
    { path: 'main.mjs', type: 'file', mode: 0o644, size: Buffer.byteLength(text), data: Buffer.from(text) },
  ]);
  const file = join(dirs(), 'code.tar');
  writeFileSync(file, archive);
  return file;
}

const ok = (o: Outcome): Materialized => {
  if (!o.ok) throw new Error(`materialization failed: ${o.code} ${o.message}`);
  return o.result;
};
/** Carriers (the containers that mount the volume being filled) created for a volume since the watch began. */
const carriersCreated = async (watch: ContainerEventWatch, volume: string) => {
  await watch.settled();
  return watch
    .events({ 'runlog.test-run': RUN, 'runlog.materializing': volume })
    .filter((e) => e.action === 'create')
    .map((e) => e.id);
};
const sourcesCreated = async (watch: ContainerEventWatch, volume: string) => {
  await watch.settled();
  return watch
    .events({ 'runlog.test-run': RUN, 'runlog.materializing': volume, 'runlog.materializer-role': 'source' })
    .filter((e) => e.action === 'create')
    .map((e) => e.id);
};
const watches: ContainerEventWatch[] = [];
/** A container event watch that ends with the file. */
const watch = async (): Promise<ContainerEventWatch> => {
  const w = await watchContainerEvents();
  watches.push(w);
  return w;
};
afterAll(() => {
  for (const w of watches) w.stop();
});

describe('materializing one volume from several processes on one daemon', () => {
  it('two processes materializing the same runtime at the same moment both succeed; the volume is filled once', async () => {
    const since = await watch();
    const req = { kind: 'runtime', image: runtime, exportPath: '/at-run/runtime', maxEntries: ownMaxEntries() };
    const [a, b] = [start(req), start(req)];
    await Promise.all([a.said('ready'), b.said('ready')]);
    a.send('go');
    b.send('go');
    const [ra, rb] = (await Promise.all([a.outcome, b.outcome])).map(ok) as [Materialized, Materialized];
    expect(ra.volume).toBe(rb.volume);
    expect([ra.cached, rb.cached].sort()).toEqual([false, true]);
    const [filler, waiter] = ra.cached ? [rb, ra] : [ra, rb];
    expect(waiter.entries).toBe(filler.entries);
    // The one that did not fill found no seal at first (it raced) and took the filler's sealed volume.
    const waiterSteps = (ra.cached ? await a.outcome : await b.outcome).steps;
    expect(waiterSteps).toContain('lock:done');
    expect(waiterSteps).not.toContain('create-volume:started');
    const carriers = await carriersCreated(since, ra.volume);
    const sources = await sourcesCreated(since, ra.volume);
    expect(carriers.length - sources.length).toBe(1); // one carrier; the rest are the download's source
    expect(sources).toHaveLength(1);
    expect(
      (await volumeFile(ra.volume, runtime, 'adapter/worker.mjs')).equals(
        await imageFile(runtime, '/at-run/runtime/adapter/worker.mjs'),
      ),
    ).toBe(true);
    expect(await engine.inspectVolume(`${ra.volume}-sealed`)).not.toBeNull();
    expect(await engine.listContainers({ 'runlog.lock-for': ra.volume }, { all: true })).toEqual([]);
  });

  it("a process that finds another's copy under way leaves its unsealed volume alone, waits for the seal and reuses it", async () => {
    const since = await watch();
    const req = { kind: 'code', image: runtime, codeFile: await codeFile() };
    const a = start({ ...req, holdAt: 'upload:done' });
    await a.said('ready');
    a.send('go');
    await a.said('at upload:done'); // a's copy is in the volume, not sealed, its lock held
    const b = start(req);
    await b.said('ready');
    b.send('go');
    await b.said('step lock:started'); // b found no seal and asks for the lock
    const [lock] = await engine.listContainers(
      { 'runlog.test-run': RUN, 'runlog.kind': 'materializer-lock' },
      { all: true },
    );
    expect(lock?.labels['runlog.lock-pid']).toBe(String(a.proc.pid));
    const volume = lock!.labels['runlog.lock-for']!;
    expect(await engine.inspectVolume(volume)).not.toBeNull();
    expect(await engine.inspectVolume(`${volume}-sealed`)).toBeNull();
    expect(b.done()).toBe(false); // b waits for a (a cannot go on before it is told to)
    a.send('continue');
    const [ra, rb] = [ok(await a.outcome), ok(await b.outcome)];
    expect(ra).toMatchObject({ volume, cached: false, entries: 1 });
    expect(rb).toMatchObject({ volume, cached: true, entries: 1 });
    expect(await carriersCreated(since, volume)).toHaveLength(1);
    expect((await volumeFile(volume, runtime, 'main.mjs')).toString()).toMatch(/^export const id = '[0-9a-f]{16}';\n$/);
    expect(await engine.listContainers({ 'runlog.lock-for': volume }, { all: true })).toEqual([]);
  });

  it(
    'a process killed with SIGKILL mid-copy does not wedge the others: ' +
      'its lock is taken over and its unsealed volume redone',
    async () => {
      const since = await watch();
      const req = { kind: 'code', image: runtime, codeFile: await codeFile() };
      const a = start({ ...req, holdAt: 'upload:done' });
      await a.said('ready');
      a.send('go');
      await a.said('at upload:done');
      a.proc.kill('SIGKILL');
      await a.exited;
      // What it left: its lock, its carrier, a filled volume without a seal.
      const [lock] = await engine.listContainers(
        { 'runlog.test-run': RUN, 'runlog.kind': 'materializer-lock' },
        { all: true },
      );
      const volume = lock!.labels['runlog.lock-for']!;
      const [leftCarrier] = await carriersCreated(since, volume);
      expect(await engine.inspectContainer(leftCarrier!)).not.toBeNull();
      expect(await engine.inspectVolume(volume)).not.toBeNull();
      expect(await engine.inspectVolume(`${volume}-sealed`)).toBeNull();

      const b = start(req);
      await b.said('ready');
      b.send('go');
      const out = await b.outcome;
      expect(ok(out)).toMatchObject({ volume, cached: false, entries: 1 });
      expect(out.steps).toContain('create-volume:done'); // redone, not taken as it was
      expect(await engine.inspectContainer(leftCarrier!)).toBeNull();
      expect(await engine.inspectContainer(lock!.id)).toBeNull();
      expect(await carriersCreated(since, volume)).toHaveLength(2);
      expect(await engine.inspectVolume(`${volume}-sealed`)).not.toBeNull();
      expect((await volumeFile(volume, runtime, 'main.mjs')).toString()).toMatch(
        /^export const id = '[0-9a-f]{16}';\n$/,
      );
      expect(await engine.listContainers({ 'runlog.lock-for': volume }, { all: true })).toEqual([]);
    },
  );
});
