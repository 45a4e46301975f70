// The raw primitives the exec benches measure runlog against, with dockerode only:
//
//   rawRoundTrip         one hardened container round trip over the worker protocol (exec.warm, exec.cold,
//                        exec.burst): the same sandbox image, create body (executionContainerBody: mounts of the
//                        runtime/code volumes, limits, user, no network) and envelope as runlog's; create + attach +
//                        start + write the envelope + read frames to the result and the end of the stream + remove.
//   rawExtractRoundTrip  what a first execution needs before that on Docker Engine 20.10 (exec.cold.extract), which
//                        has no image mounts: the runtime image's export directory copied into a fresh volume
//                        through the archive API (never-started containers of the runtime image, GET of the
//                        export piped into a PUT into the volume), then the same round trip on that volume. No validation:
//                        that is runlog's own work, part of what its cold run is measured on.
import { Writable, type Duplex, type Readable } from 'node:stream';
import type Docker from 'dockerode';
import { executionContainerBody } from '../src/adapters/docker/execution-container-body.ts';
import { MATERIALIZE_TARGET } from '../src/adapters/docker/layout.ts';
import { nowMs } from './harness.ts';

/** What both primitives run with: the daemon, the bench's home (for labels), the caller, the sandbox image. */
export interface RawSide {
  docker: Docker;
  home: string;
  callerDid: string;
  sandboxImage: string;
  labels: Readonly<Record<string, string>>;
}

export interface RoundTrip {
  ms: number;
  resultMs: number;
  createMs: number;
  startMs: number;
  removeMs: number;
}

/** What the raw round trip calls, and on which network (default: greet Ada, no network). */
export interface RawCall {
  handler: string;
  input: unknown;
  /** Whether the result frame's output is the expected one. */
  expect(output: unknown): boolean;
  /** A Docker network the container joins (a plain bridge: the raw side has no proxy). */
  network?: string;
}

const GREET: RawCall = {
  handler: 'greet',
  input: { name: 'Ada' },
  expect: (output) => (output as { greeting?: string } | undefined)?.greeting === 'Hello, Ada!',
};

/**
 * The raw round trip for an execution runlog resolved and materialized (`context`: its view's context); each call
 * may name another runtime volume (the extract primitive's fresh one).
 */
export function rawRoundTrip(
  side: RawSide,
  context: Record<string, any>,
  call: RawCall = GREET,
): (runtimeVolume?: string) => Promise<RoundTrip> {
  const r = context.resolved as Record<string, any>;
  const m = context.materialized as Record<string, any>;
  let n = 0;
  return async (runtimeVolume = m.runtimeVolume as string): Promise<RoundTrip> => {
    const id = `bench-raw-${process.pid}-${n++}`;
    const { body } = executionContainerBody({
      policy: {
        image: side.sandboxImage,
        memoryBytes: r.limits.memoryMb * 1024 * 1024,
        pidsLimit: r.limits.pids,
        nanoCpus: Math.round(r.limits.cpus * 1e9),
        workTmpfsBytes: 64 * 1024 * 1024,
      },
      runtimeVolume,
      codeVolume: m.codeVolume,
      additionVolumes: m.additionVolumes ?? [],
      launcher: r.launcher,
      entrypoint: r.entrypoint,
      env: r.env,
      labels: { ...side.labels, 'runlog.bench.home': side.home }, // not runlog.home: the reconciler removes what no actor owns
      invocationId: id,
    });
    if (call.network) {
      body.NetworkDisabled = false;
      body.HostConfig = { ...body.HostConfig, NetworkMode: call.network };
    }
    const envelope = {
      version: 1,
      id,
      type: 'invoke',
      code: { uri: r.codeUri, cid: r.codeCid },
      handler: call.handler,
      input: call.input,
      context: { callerDid: side.callerDid, deadline: new Date(Date.now() + r.limits.timeoutMs).toISOString() },
    };
    const t0 = nowMs();
    const container = await side.docker.createContainer(body as unknown as Docker.ContainerCreateOptions);
    const createMs = nowMs() - t0;
    try {
      const stream = (await container.attach({
        stream: true,
        stdin: true,
        stdout: true,
        stderr: true,
        hijack: true,
      })) as Duplex;
      let line = '';
      let output: unknown;
      let resultAt = Number.NaN;
      const stdout = new Writable({
        write(chunk: Buffer, _enc, cb) {
          line += chunk.toString('utf8');
          let nl: number;
          while ((nl = line.indexOf('\n')) >= 0) {
            const frame = JSON.parse(line.slice(0, nl)) as { type?: string; id?: string; output?: unknown };
            line = line.slice(nl + 1);
            if (frame.type === 'result' && frame.id === id) {
              output = frame.output;
              resultAt = nowMs();
            }
          }
          cb();
        },
      });
      const stderr = new Writable({ write: (_c, _e, cb) => cb() });
      const ended = new Promise<void>((done) => {
        stream.on('end', done);
        stream.on('close', done);
        stream.on('error', () => done());
      });
      side.docker.modem.demuxStream(stream, stdout, stderr);
      const tStart = nowMs();
      await container.start();
      const startMs = nowMs() - tStart;
      stream.write(`${JSON.stringify(envelope)}\n`);
      stream.end();
      await ended;
      if (!call.expect(output)) throw new Error(`raw round trip: no result frame (got ${JSON.stringify(output)})`);
      const tRemove = nowMs();
      await container.remove({ force: true, v: true });
      const end = nowMs();
      return { ms: end - t0, resultMs: resultAt - t0, createMs, startMs, removeMs: end - tRemove };
    } catch (e) {
      await container.remove({ force: true, v: true }).catch(() => undefined);
      throw e;
    }
  };
}

export interface ExtractRoundTrip {
  /** Both, end to end. */
  ms: number;
  /** Volume, container, GET, PUT, container removed. */
  extractMs: number;
  /** The export's tar as the Engine sent it. */
  tarBytes: number;
  roundTrip: RoundTrip;
}

/**
 * The extract primitive, then the round trip on its volume (the code volume is runlog's: a few KB, not what this
 * measures). Two never-started containers of the runtime image, hardened as runlog's materializer makes them: the
 * source, whose export is read (GET of `<export>/.`, the directory's contents, no top-level directory to strip), and
 * the carrier, with the fresh volume mounted (NoCopy) where the GET's body is piped (PUT). Two, because through one
 * container a PUT waits for the GET to end (the Engine holds the container for it); piping them overlaps the two,
 * which is faster than a GET and then one PUT of the buffered tar. The volume is removed afterwards, untimed.
 */
export function rawExtractRoundTrip(side: RawSide, context: Record<string, any>): () => Promise<ExtractRoundTrip> {
  const r = context.resolved as Record<string, any>;
  const roundTrip = rawRoundTrip(side, context);
  let n = 0;
  return async () => {
    const volume = `runlog-bench-extract-${process.pid}-${n++}`;
    const labels = { ...side.labels, 'runlog.bench.home': side.home };
    const t0 = nowMs();
    try {
      const body = (mount: boolean) => ({
        Image: r.image,
        Entrypoint: ['/runlog-never-started'],
        Cmd: [],
        Env: [],
        User: '65534:65534',
        Labels: labels,
        NetworkDisabled: true,
        HostConfig: {
          ...(mount
            ? {
                Mounts: [
                  {
                    Type: 'volume',
                    Source: volume,
                    Target: MATERIALIZE_TARGET,
                    ReadOnly: false,
                    VolumeOptions: { NoCopy: true },
                  },
                ],
              }
            : {}),
          NetworkMode: 'none',
          ReadonlyRootfs: true,
          CapDrop: ['ALL'],
          SecurityOpt: ['no-new-privileges:true'],
          RestartPolicy: { Name: 'no' },
          LogConfig: { Type: 'none', Config: {} },
        },
      });
      // The Engine takes partial volume options; dockerode's type wants every field.
      const create = (mount: boolean) =>
        side.docker.createContainer(body(mount) as unknown as Docker.ContainerCreateOptions);
      const [source, carrier] = await Promise.allSettled([
        create(false),
        side.docker.createVolume({ Name: volume, Labels: labels }).then(() => create(true)),
      ]);
      const created = [source, carrier].flatMap((c) => (c.status === 'fulfilled' ? [c.value] : []));
      let tarBytes = 0;
      try {
        if (source.status === 'rejected') throw source.reason;
        if (carrier.status === 'rejected') throw carrier.reason;
        const download = (await source.value.getArchive({ path: `${r.exportPath}/.` })) as unknown as Readable;
        download.on('data', (chunk: Buffer) => (tarBytes += chunk.length));
        await carrier.value.putArchive(download, { path: MATERIALIZE_TARGET, noOverwriteDirNonDir: 'true' });
      } finally {
        await Promise.all(created.map((c) => c.remove({ force: true })));
      }
      const extractMs = nowMs() - t0;
      const trip = await roundTrip(volume);
      return { ms: nowMs() - t0, extractMs, tarBytes, roundTrip: trip };
    } finally {
      await side.docker
        .getVolume(volume)
        .remove()
        .catch(() => undefined);
    }
  };
}
