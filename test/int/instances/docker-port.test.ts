// The Docker port's one implementation (dockerode-engine.ts) against the real Engine: every failure comes back as a
// typed error with a code from the table (DockerNotFoundError, DockerConflictError, DockerUnavailableError,
// DockerTimeoutError), never as a dockerode error; and the calls the app container runner and the engine watch
// moved onto the port (networks, stop, logs since, waits with a signal, the event stream) behave as the daemon does.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DockerEngine, EngineEvent } from '../../../src/adapters/docker/docker-port.ts';
import { createDockerEngine } from '../../../src/adapters/docker/dockerode-engine.ts';
import {
  DockerConflictError,
  DockerNotFoundError,
  DockerTimeoutError,
  DockerUnavailableError,
  engineTrouble,
} from '../../../src/adapters/docker/errors.ts';
import { RunlogError } from '../../../src/domain/errors.ts';
import {
  cleanupTestContainers,
  docker,
  imageRef,
  requireDocker,
  requireRegistry,
  TEST_LABELS,
} from '../../support/docker.ts';

const RUN = `port-${process.pid}-${Date.now()}`;
const LABELS = { ...TEST_LABELS, 'runlog.test-run': RUN };
const NETWORK = `runlog-test-${RUN}`;

let engine: DockerEngine;
let image: string;
let dir: string;

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  image = imageRef('app-base');
  engine = createDockerEngine();
  await engine.pullByDigest(image);
  dir = mkdtempSync(join(tmpdir(), 'runlog-docker-port-'));
}, 120_000);

afterAll(async () => {
  await cleanupTestContainers(LABELS);
  await docker
    .getNetwork(NETWORK)
    .remove()
    .catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
});

const created = (name?: string) =>
  engine.createContainer(
    { Image: image, Cmd: ['/bin/true'], Labels: LABELS, HostConfig: { NetworkMode: 'none' } },
    name,
  );

describe('typed errors from the real Engine', () => {
  it('404: DockerNotFoundError (DOCKER_NOT_FOUND) for a container that does not exist; inspect answers null', async () => {
    const missing = `runlog-no-such-container-${RUN}`;
    expect(await engine.inspectContainer(missing)).toBeNull();
    for (const call of [
      () => engine.start(missing),
      () => engine.waitNotRunning(missing),
      () => engine.logs(missing),
    ]) {
      const err = await call().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(DockerNotFoundError);
      expect(err).toMatchObject({ code: 'DOCKER_NOT_FOUND', status: 404 });
      expect(engineTrouble(err)).toBeNull(); // the caller's mistake, not the daemon's trouble
    }
    // Already gone is fine where the port says so.
    await expect(engine.removeContainer(missing)).resolves.toBeUndefined();
    await expect(engine.kill(missing)).resolves.toBeUndefined();
    await expect(engine.stop(missing)).resolves.toBeUndefined();
  });

  it('409: DockerConflictError (DOCKER_CONFLICT) for a taken container name and an existing network', async () => {
    const name = `runlog-test-${RUN}-dup`;
    await created(name);
    const dup = await created(name).then(
      () => null,
      (e: unknown) => e,
    );
    expect(dup).toBeInstanceOf(DockerConflictError);
    expect(dup).toMatchObject({ code: 'DOCKER_CONFLICT', status: 409 });

    expect(await engine.inspectNetwork(NETWORK)).toBeNull();
    await engine.createNetwork(NETWORK, LABELS);
    expect(await engine.inspectNetwork(NETWORK)).toEqual({
      name: NETWORK,
      driver: 'bridge',
      labels: LABELS,
      internal: false,
    });
    const again = await engine.createNetwork(NETWORK, LABELS).then(
      () => null,
      (e: unknown) => e,
    );
    expect(again).toBeInstanceOf(DockerConflictError);
  });

  it('an internal network without a host address: made, listed by label, removed (and removed again: nothing)', async () => {
    const name = `${NETWORK}-internal`;
    await engine.createNetwork(name, LABELS, { internal: true, noHostAddress: true });
    expect(await engine.inspectNetwork(name)).toMatchObject({ name, internal: true });
    expect((await engine.listNetworks({ 'runlog.test-run': RUN })).map((n) => n.name)).toContain(name);
    await engine.removeNetwork(name);
    await engine.removeNetwork(name);
    expect(await engine.inspectNetwork(name)).toBeNull();
  });

  it('no daemon on the socket: DockerUnavailableError (DOCKER_UNAVAILABLE), which engineTrouble calls down', async () => {
    const nowhere = createDockerEngine({ socketPath: join(dir, 'absent.sock') });
    for (const call of [
      () => nowhere.inspectContainer('x'),
      () => nowhere.listContainers({ 'runlog.test': '1' }),
      () => nowhere.subscribeEvents({ labels: LABELS }, () => undefined),
    ]) {
      const err = await call().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(DockerUnavailableError);
      expect(engineTrouble(new RunlogError('SPAWN_FAILED', 'wrapped', undefined, { cause: err }))).toBe('down');
    }
  });

  it('a daemon that accepts and never answers: DockerTimeoutError (DOCKER_TIMEOUT) after the request timeout', async () => {
    const path = join(dir, 'hung.sock');
    const sockets = new Set<Socket>();
    const hung: Server = createServer((s) => sockets.add(s)); // reads the request, never writes a byte
    await new Promise<void>((r) => hung.listen(path, r));
    try {
      const slow = createDockerEngine({ socketPath: path, timeoutMs: 300 });
      const err = await slow.inspectContainer('x').then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(DockerTimeoutError);
      expect(err).toMatchObject({ code: 'DOCKER_TIMEOUT', details: { timeoutMs: 300 } });
      expect(engineTrouble(err)).toBe('error');
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => hung.close(() => r()));
    }
  });
});

describe('the calls the runner and the engine watch moved onto the port', () => {
  it('events: a subscription filtered by label sees a container created with that label, and ends on close()', async () => {
    const seen: EngineEvent[] = [];
    const sub = await engine.subscribeEvents({ labels: { 'runlog.test-run': RUN } }, (e) => seen.push(e));
    const id = await created();
    for (let i = 0; i < 100 && !seen.some((e) => e.id === id && e.action === 'create'); i++)
      await new Promise((r) => setTimeout(r, 50));
    expect(seen.find((e) => e.id === id && e.action === 'create')).toMatchObject({
      type: 'container',
      attributes: { 'runlog.test-run': RUN },
    });
    sub.close();
    expect(await sub.ended).toBeNull();
  });

  it(
    'inspect reports pid, env and network addresses; a wait ends at exit; ' +
      'logs since a time; stop of a stopped container is fine',
    async () => {
      const id = await engine.createContainer({
        Image: image,
        Cmd: ['/bin/sh', '-c', 'echo out; echo err >&2'],
        Env: ['A=1'],
        Labels: LABELS,
        HostConfig: { NetworkMode: 'none' },
      });
      const before = await engine.inspectContainer(id);
      expect(before).toMatchObject({ id, pid: 0, state: { running: false, startedAt: null } });
      expect(before?.env).toContain('A=1');
      expect(Object.keys(before?.networks ?? {})).toEqual(['none']);
      await engine.start(id);
      expect(await engine.waitNotRunning(id)).toEqual({ statusCode: 0 });
      const out = await engine.logs(id, { sinceSec: 0 });
      const chunks: Buffer[] = [];
      for await (const c of out) chunks.push(c as Buffer);
      const text = Buffer.concat(chunks).toString('latin1'); // multiplexed frames: 8-byte headers around each line
      expect(text).toContain('out\n');
      expect(text).toContain('err\n');
      await expect(engine.stop(id, { timeoutSec: 1 })).resolves.toBeUndefined();
    },
  );

  it('a wait ended by its signal rejects, and the container is left as it was', async () => {
    const id = await engine.createContainer({
      Image: image,
      Cmd: ['/bin/sleep', '30'],
      Labels: LABELS,
      HostConfig: { NetworkMode: 'none' },
    });
    await engine.start(id);
    const controller = new AbortController();
    const waiting = engine.waitNotRunning(id, { signal: controller.signal });
    controller.abort();
    await expect(waiting).rejects.toBeInstanceOf(RunlogError);
    expect((await engine.inspectContainer(id))?.state.running).toBe(true);
    await engine.stop(id, { timeoutSec: 1 });
    expect((await engine.inspectContainer(id))?.state.running).toBe(false);
  });
});
