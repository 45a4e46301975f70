// The raw primitive the exec benches measure runlog against, with dockerode only: one hardened container round
// trip over the worker protocol (exec.warm, exec.cold, exec.burst), with the same sandbox image, create body
// (executionContainerBody: mounts of the runtime/code volumes, limits, user, no network) and envelope as runlog's:
// create + attach + start + write the envelope + read frames to the result and the end of the stream + remove.
import { Writable, type Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { executionContainerBody } from '../src/adapters/docker/execution-sandbox.ts';
import { nowMs } from './harness.ts';

/** What the raw side runs with: the daemon, the bench's home (for labels), the caller, the sandbox image. */
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

/** The raw round trip for an execution runlog resolved and materialized (`context`: its view's context). */
export function rawRoundTrip(side: RawSide, context: Record<string, any>): () => Promise<RoundTrip> {
  const r = context.resolved as Record<string, any>;
  const m = context.materialized as Record<string, any>;
  let n = 0;
  return async (): Promise<RoundTrip> => {
    const id = `bench-raw-${process.pid}-${n++}`;
    const { body } = executionContainerBody({
      policy: {
        image: side.sandboxImage,
        memoryBytes: r.limits.memoryMb * 1024 * 1024,
        pidsLimit: r.limits.pids,
        nanoCpus: Math.round(r.limits.cpus * 1e9),
        workTmpfsBytes: 64 * 1024 * 1024,
      },
      runtimeVolume: m.runtimeVolume,
      codeVolume: m.codeVolume,
      additionVolumes: m.additionVolumes ?? [],
      launcher: r.launcher,
      entrypoint: r.entrypoint,
      env: r.env,
      labels: { ...side.labels, 'runlog.bench.home': side.home }, // not runlog.home: the reconciler removes what no actor owns
      invocationId: id,
    });
    const envelope = {
      version: 1,
      id,
      type: 'invoke',
      code: { uri: r.codeUri, cid: r.codeCid },
      handler: 'greet',
      input: { name: 'Ada' },
      context: { callerDid: side.callerDid, deadline: new Date(Date.now() + r.limits.timeoutMs).toISOString() },
    };
    const t0 = nowMs();
    const container = await side.docker.createContainer(body as unknown as Docker.ContainerCreateOptions);
    const createMs = nowMs() - t0;
    try {
      const stream = (await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as Duplex;
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
      if ((output as { greeting?: string } | undefined)?.greeting !== 'Hello, Ada!') throw new Error(`raw round trip: no result frame (got ${JSON.stringify(output)})`);
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
