// The hardened execution container and worker protocol v1, end to end against the real Engine: runtimes and code
// materialized into volumes, the runner-owned at-run-sandbox image started with them, one envelope in, frames
// out. Hostile handlers (deadline, fork bomb, memory bomb, rootfs writes, network, stdout floods, oversized and
// malformed frames) each end in their typed outcome while this process stays healthy.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeArchive } from '../../../src/adapters/archive/index.ts';
import type { ArchiveEntry } from '../../../src/adapters/archive/index.ts';
import type { DockerEngine } from '../../../src/adapters/docker/docker-port.ts';
import { createDockerEngine } from '../../../src/adapters/docker/dockerode-engine.ts';
import { createMaterializer } from '../../../src/adapters/docker/materializer.ts';
import {
  createExecutionSandbox,
  type InvocationEnvelope,
  type InvokeOptions,
  type ExecutionSandbox,
} from '../../../src/adapters/docker/execution-sandbox.ts';
import {
  type ExecutionContainerSpec,
  type SandboxPolicy,
} from '../../../src/adapters/docker/execution-container-body.ts';
import { type InvocationResult } from '../../../src/adapters/docker/invocation-result.ts';
import {
  cleanupTestContainers,
  cleanupTestVolumes,
  docker,
  imageRef,
  requireDocker,
  requireRegistry,
  TEST_LABELS,
} from '../../support/docker.ts';

const RUN = `sbx-${process.pid}-${Date.now()}`;
const LABELS = { ...TEST_LABELS, 'runlog.test-run': RUN, 'runlog.kind': 'execution', 'runlog.home': 'test' };
const MiB = 1024 * 1024;

const NODE_CODE = String.raw`
import fs from 'node:fs';
import net from 'node:net';

export function greet(input, ctx) {
  console.log('console.log goes to stderr:', input.name);
  process.stdout.write('process.stdout.write goes to stderr too\n');
  ctx.log('about to greet');
  ctx.progress(0.5);
  return { greeting: 'Hello, ' + input.name + '!', callerDid: ctx.callerDid, deadline: ctx.deadline };
}

export async function whoami() {
  fs.writeFileSync('/opt/at-run/work/scratch.txt', 'work is writable');
  fs.writeFileSync('/tmp/via-tmp.txt', 'tmp links to work');
  return {
    uid: process.getuid(), gid: process.getgid(), cwd: process.cwd(), argv: process.argv, env: process.env,
    work: fs.readFileSync('/opt/at-run/work/scratch.txt', 'utf8'),
    addition: fs.existsSync('/opt/at-run/additions/0/hello.txt') ? fs.readFileSync('/opt/at-run/additions/0/hello.txt', 'utf8') : null,
  };
}

export const sleep = () => new Promise((resolve) => setTimeout(resolve, 600000));

export function writeFile(input) {
  fs.writeFileSync(input.path, 'should not be written');
  return 'written';
}

export async function connect(input) {
  await new Promise((resolve, reject) => {
    const s = net.connect({ host: input.host, port: input.port });
    s.setTimeout(3000, () => s.destroy(Object.assign(new Error('connect timed out'), { code: 'ETIMEDOUT' })));
    s.on('connect', () => { s.destroy(); resolve(); });
    s.on('error', reject);
  });
  return 'connected to ' + input.host;
}

// Straight to file descriptor 1, past the adapter's redirection; the pipe is non-blocking, so wait on EAGAIN.
function writeAll(buf) {
  for (let off = 0; off < buf.length; ) {
    try {
      off += fs.writeSync(1, buf, off);
    } catch (err) {
      if (err.code !== 'EAGAIN') throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
    }
  }
}

export function floodFrames(input, ctx) {
  const line = JSON.stringify({ type: 'log', id: ctx.id, message: 'x'.repeat(1000) }) + '\n';
  const chunk = Buffer.from(line.repeat(Math.ceil(MiB / line.length)));
  for (let written = 0; written < input.mb * MiB; written += chunk.length) writeAll(chunk);
  return 'flooded';
}

export function floodRaw(input) {
  const chunk = Buffer.alloc(MiB, 0x78);
  for (let i = 0; i < input.mb; i++) writeAll(chunk);
  return 'flooded';
}

export const bigResult = (input) => 'y'.repeat(input.mb * MiB);

export function garbage() {
  writeAll(Buffer.from('this is not a protocol frame\n'));
  return 'ok';
}

export function foreignFrame() {
  writeAll(Buffer.from(JSON.stringify({ type: 'result', id: 'exec_somebody_else', output: 'forged' }) + '\n'));
  return 'ok';
}

export function fail() {
  throw Object.assign(new Error('no such widget'), { code: 'E_WIDGET' });
}

export const exitQuietly = () => process.exit(0);
export const exitThree = () => process.exit(3);

const MiB = 1024 * 1024;
`;

const PY_CODE = String.raw`
import os
import time


def greet(input, ctx):
    print("print goes to stderr:", input["name"])
    ctx.log("about to greet")
    return {"greeting": f"Hello, {input['name']}!", "callerDid": ctx.callerDid, "deadline": ctx.deadline}


def whoami(input, ctx):
    return {"uid": os.getuid(), "gid": os.getgid(), "env": dict(os.environ)}


def fork_bomb(input, ctx):
    children = 0
    try:
        while True:
            if os.fork() == 0:
                time.sleep(120)
                os._exit(0)
            children += 1
    except OSError as err:
        raise OSError(err.errno, f"fork failed after {children} children: {err.strerror}") from None


def memory_bomb(input, ctx):
    hoard = []
    while True:
        hoard.append(bytearray(b"\x01" * (16 * 1024 * 1024)))


def write_file(input, ctx):
    with open(input["path"], "w") as f:
        f.write("should not be written")
    return "written"
`;

function codeArchive(file: string, source: string): Promise<Buffer> {
  const data = Buffer.from(source);
  const entries: ArchiveEntry[] = [{ path: file, type: 'file', mode: 0o644, size: data.length, data }];
  return writeArchive(entries);
}

let engine: DockerEngine;
let sandbox: ExecutionSandbox;
let policy: SandboxPolicy;
const volumes: Record<'nodeRuntime' | 'pyRuntime' | 'nodeCode' | 'pyCode' | 'addition', string> = {} as never;

const NODE_LAUNCHER = { path: 'bin/node', args: ['/opt/at-run/runtime/adapter/worker.mjs', '{entrypoint}'] };
const PY_LAUNCHER = {
  path: 'bin/python3',
  args: ['-I', '-B', '/opt/at-run/runtime/adapter/worker.py', '{entrypoint}'],
};
const RECORD_ENV = [
  { name: 'HOME', value: '/opt/at-run/work' },
  { name: 'NODE_ENV', value: 'production' },
];

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  engine = createDockerEngine();
  sandbox = createExecutionSandbox(engine);
  policy = {
    image: imageRef('at-run-sandbox'),
    memoryBytes: 256 * MiB,
    pidsLimit: 64,
    nanoCpus: 1_000_000_000,
    workTmpfsBytes: 16 * MiB,
  };
  const m = createMaterializer(engine, { labels: LABELS });
  await engine.pullByDigest(policy.image);
  const [nodeRuntime, pyRuntime, addition] = await Promise.all([
    m.materializeRuntime({ image: imageRef('runtime-node'), exportPath: '/at-run/runtime' }),
    m.materializeRuntime({ image: imageRef('runtime-python'), exportPath: '/at-run/runtime' }),
    m.materializeAddition({ image: imageRef('at-run-addition-test') }),
  ]);
  const [nodeCode, pyCode] = await Promise.all([
    m.materializeCode({ archive: await codeArchive('main.mjs', NODE_CODE), carrierImage: imageRef('runtime-node') }),
    m.materializeCode({ archive: await codeArchive('main.py', PY_CODE), carrierImage: imageRef('runtime-python') }),
  ]);
  Object.assign(volumes, {
    nodeRuntime: nodeRuntime.volume,
    pyRuntime: pyRuntime.volume,
    nodeCode: nodeCode.volume,
    pyCode: pyCode.volume,
    addition: addition.volume,
  });
});

afterAll(async () => {
  if (!engine) return;
  await cleanupTestContainers(LABELS);
  await cleanupTestVolumes(LABELS);
});

let seq = 0;
type Lang = 'node' | 'python';

function spec(
  lang: Lang,
  invocationId: string,
  over: Partial<SandboxPolicy> = {},
  extra: Partial<ExecutionContainerSpec> = {},
): ExecutionContainerSpec {
  return {
    policy: { ...policy, ...over },
    runtimeVolume: lang === 'node' ? volumes.nodeRuntime : volumes.pyRuntime,
    codeVolume: lang === 'node' ? volumes.nodeCode : volumes.pyCode,
    launcher: lang === 'node' ? NODE_LAUNCHER : PY_LAUNCHER,
    entrypoint: lang === 'node' ? 'main.mjs' : 'main.py',
    env: lang === 'node' ? RECORD_ENV : RECORD_ENV.slice(0, 1),
    labels: { ...LABELS, 'runlog.stream': `execution-${invocationId}` },
    invocationId,
    ...extra,
  };
}

function envelope(id: string, handler: string, input: unknown): InvocationEnvelope {
  return {
    version: 1,
    id,
    type: 'invoke',
    code: { uri: 'at://did:plc:alice/dev.mainasara.at-run.beta.v2.code/3abc', cid: 'bafycode' },
    handler,
    input,
    context: { callerDid: 'did:plc:bob', deadline: '2030-01-01T00:00:00.000Z' },
  };
}

async function run(
  lang: Lang,
  handler: string,
  input: unknown = {},
  opts: {
    policy?: Partial<SandboxPolicy>;
    invoke?: Partial<InvokeOptions>;
    extra?: Partial<ExecutionContainerSpec>;
    keep?: boolean;
  } = {},
): Promise<InvocationResult & { containerId: string }> {
  const id = `exec_${RUN}_${++seq}`;
  const { containerId } = await sandbox.createExecutionContainer(spec(lang, id, opts.policy, opts.extra));
  try {
    const result = await sandbox.invoke(containerId, envelope(id, handler, input), {
      deadlineMs: 20_000,
      ...opts.invoke,
    });
    return { ...result, containerId };
  } finally {
    if (!opts.keep) await sandbox.removeContainer(containerId);
  }
}

const timing = (label: string, r: InvocationResult) => console.info(`[${label}] ${JSON.stringify(r.timings)}`);

describe.each(['node', 'python'] as const)('%s greet', (lang) => {
  it('runs end to end: result frame, log frames, console output on stderr', async () => {
    const r = await run(lang, 'greet', { name: 'Ada' });
    timing(`greet ${lang} runc`, r);
    expect(r).toMatchObject({
      outcome: 'succeeded',
      output: { greeting: 'Hello, Ada!', callerDid: 'did:plc:bob', deadline: '2030-01-01T00:00:00.000Z' },
      exitCode: 0,
      oomKilled: false,
    });
    expect(r.frames[0]).toMatchObject({ type: 'log', message: 'about to greet' });
    expect(r.stderr).toContain(lang === 'node' ? 'console.log goes to stderr: Ada' : 'print goes to stderr: Ada');
    if (lang === 'node') {
      expect(r.stderr).toContain('process.stdout.write goes to stderr too');
      expect(r.frames[1]).toMatchObject({ type: 'progress', progress: 0.5 });
    }
  });
});

describe('the container', () => {
  it('is created stopped with the hardened host config and only the runtime record environment', async () => {
    const id = `exec_${RUN}_inspect`;
    const { containerId, command } = await sandbox.createExecutionContainer(
      spec('node', id, {}, { additionVolumes: [volumes.addition] }),
    );
    try {
      expect(command).toEqual([
        '/opt/at-run/runtime/bin/node',
        '/opt/at-run/runtime/adapter/worker.mjs',
        '/opt/at-run/app/main.mjs',
      ]);
      const c = await docker.getContainer(containerId).inspect();
      expect(c.State.Status).toBe('created');
      expect(c.Config.User).toBe('65532:65532');
      expect(c.Config.Env.sort()).toEqual(['HOME=/opt/at-run/work', 'NODE_ENV=production']);
      expect(c.Config.Healthcheck).toEqual({ Test: ['NONE'] });
      expect(c.Config.Labels).toMatchObject({ ...LABELS, 'runlog.invocation': id });
      expect(c.Config).toMatchObject({ OpenStdin: true, StdinOnce: true, Tty: false });
      const h = c.HostConfig as Record<string, unknown>;
      expect(h).toMatchObject({
        ReadonlyRootfs: true,
        CapDrop: ['ALL'],
        SecurityOpt: ['no-new-privileges:true'],
        NetworkMode: 'none',
        Memory: 256 * MiB,
        MemorySwap: 256 * MiB,
        PidsLimit: 64,
        NanoCpus: 1_000_000_000,
        AutoRemove: false,
        Privileged: false,
      });
      expect(JSON.stringify(h.SecurityOpt)).not.toContain('unconfined');
      const mounts = Object.fromEntries(c.Mounts.map((m) => [m.Destination, { name: m.Name, rw: m.RW }]));
      expect(mounts).toEqual({
        '/opt/at-run/runtime': { name: volumes.nodeRuntime, rw: false },
        '/opt/at-run/app': { name: volumes.nodeCode, rw: false },
        '/opt/at-run/additions/0': { name: volumes.addition, rw: false },
      });
      expect(Object.keys(h.Tmpfs as object)).toEqual(['/opt/at-run/work']);
    } finally {
      await sandbox.removeContainer(containerId);
    }
  });

  it('runs as the unprivileged user with no inherited environment, a writable work dir and the addition mounted', async () => {
    const r = await run('node', 'whoami', {}, { extra: { additionVolumes: [volumes.addition] } });
    expect(r.outcome).toBe('succeeded');
    const out = (r as Extract<InvocationResult, { outcome: 'succeeded' }>).output as Record<string, any>;
    expect(out).toMatchObject({
      uid: 65532,
      gid: 65532,
      cwd: '/opt/at-run/work',
      work: 'work is writable',
      addition: 'hello from an addition\n',
    });
    // Docker adds PATH and HOSTNAME; nothing of this (supervisor) process's environment gets in.
    expect(Object.keys(out.env).sort()).toEqual(['HOME', 'HOSTNAME', 'NODE_ENV', 'PATH']);
    expect(process.env.PATH ? Object.values(out.env) : []).not.toContain(process.env.NODE_EXTRA_CA_CERTS ?? '\0never');

    const py = await run('python', 'whoami');
    expect(py).toMatchObject({ outcome: 'succeeded', output: { uid: 65532, gid: 65532 } });
    expect(Object.keys((py as any).output.env).sort()).toEqual(['HOME', 'HOSTNAME', 'PATH']);
  });

  it('refuses a spec that loosens the operator policy or breaks the launcher rules, listing every problem', async () => {
    const err = await sandbox
      .createExecutionContainer(
        spec(
          'node',
          'exec_bad',
          { user: '0:0', image: 'localhost:5000/at-run-sandbox:latest' },
          { launcher: { path: '../bin/sh', args: ['-c', 'echo $HOME'] }, entrypoint: '/etc/passwd' },
        ),
      )
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'SANDBOX_SPEC_INVALID' });
    const issues = (err as { issues: string[] }).issues.join('\n');
    for (const needle of ['root', 'policy.image', 'launcher.path', '{entrypoint}', 'shell syntax', 'entrypoint'])
      expect(issues).toContain(needle);
    expect(await engine.listContainers({ 'runlog.stream': 'execution-exec_bad' })).toEqual([]);
  });

  it('refuses volumes that do not exist instead of letting Docker create empty ones', async () => {
    const missing = `runlog-code-missing-${RUN}`;
    await expect(
      sandbox.createExecutionContainer({ ...spec('node', `exec_${RUN}_missing`), codeVolume: missing }),
    ).rejects.toMatchObject({
      code: 'SANDBOX_VOLUME_MISSING',
    });
    expect(await engine.inspectVolume(missing)).toBeNull();
  });

  it('matches volume names exactly (one listing serves every check) and refuses an unsealed materialized volume', async () => {
    // The Engine's name filter matches substrings and patterns: neither may stand in for the volume asked for.
    const asked = `runlog-code-near.${RUN}`;
    await engine.createVolume(`${asked}-longer`, { ...LABELS });
    await engine.createVolume(asked.replace('.', 'X'), { ...LABELS });
    const err = await sandbox
      .createExecutionContainer({ ...spec('node', `exec_${RUN}_near`), codeVolume: asked })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'SANDBOX_VOLUME_MISSING', issues: [`volume ${asked} does not exist`] });
    expect(await engine.inspectVolume(asked)).toBeNull();
    // A materialized volume (it carries the volume-kind label) whose seal was never written.
    const unsealed = `runlog-code-unsealed-${RUN}`;
    await engine.createVolume(unsealed, { ...LABELS, 'runlog.volume-kind': 'code' });
    const err2 = await sandbox
      .createExecutionContainer({ ...spec('node', `exec_${RUN}_unsealed`), codeVolume: unsealed })
      .catch((e: unknown) => e);
    expect(err2).toMatchObject({
      code: 'SANDBOX_VOLUME_MISSING',
      issues: [`volume ${unsealed} was never completely materialized (no seal)`],
    });
    expect(await engine.listContainers({ 'runlog.stream': `execution-exec_${RUN}_unsealed` })).toEqual([]);
  });
});

describe('contained failures', () => {
  it('kills a handler that outlives its deadline: timeout', async () => {
    const r = await run('node', 'sleep', {}, { invoke: { deadlineMs: 1500 } });
    expect(r).toMatchObject({ outcome: 'failed', reason: 'timeout', error: { code: 'DEADLINE_EXCEEDED' } });
    expect(r.exitCode).toBe(137);
    expect(r.timings.totalMs).toBeLessThan(10_000);
  });

  it('a fork bomb hits the PIDs limit and the handler sees EAGAIN', async () => {
    const r = await run('python', 'fork_bomb', {}, { policy: { pidsLimit: 32 } });
    expect(r).toMatchObject({ outcome: 'failed', reason: 'handler-error', error: { code: 'EAGAIN' } });
    const children = Number(/after (\d+) children/.exec((r as any).error.message)?.[1]);
    expect(children).toBeGreaterThan(0);
    expect(children).toBeLessThan(32);
  });

  it('a memory bomb is OOM-killed: oom', async () => {
    const r = await run('python', 'memory_bomb', {}, { policy: { memoryBytes: 64 * MiB } });
    expect(r).toMatchObject({ outcome: 'failed', reason: 'oom', oomKilled: true });
  });

  it.each([
    ['node', 'writeFile', '/etc/owned'],
    ['node', 'writeFile', '/opt/at-run/runtime/bin/owned'],
    ['node', 'writeFile', '/opt/at-run/app/owned'],
    ['python', 'write_file', '/usr/lib/owned'],
  ] as const)('%s: writing %s to %s fails with EROFS', async (lang, handler, path) => {
    const r = await run(lang, handler, { path });
    expect(r).toMatchObject({ outcome: 'failed', reason: 'handler-error', error: { code: 'EROFS' } });
  });

  it.each([
    ['an outside address', '1.1.1.1', 80, ['ENETUNREACH']],
    ["the host's registry", '172.17.0.1', 5000, ['ENETUNREACH']],
    ['loopback (the container has its own)', '127.0.0.1', 5000, ['ECONNREFUSED']],
  ] as const)('network: connecting to %s fails', async (_what, host, port, codes) => {
    const r = await run('node', 'connect', { host, port });
    expect(r.outcome).toBe('failed');
    expect((r as any).reason).toBe('handler-error');
    expect(codes).toContain((r as any).error.code);
  });

  it('100 MB of well-formed frames on stdout: output-limit', async () => {
    const r = await run('node', 'floodFrames', { mb: 100 }, { invoke: { maxStdoutBytes: 8 * MiB } });
    expect(r).toMatchObject({ outcome: 'failed', reason: 'output-limit', error: { code: 'OUTPUT_LIMIT' } });
    expect(r.stdoutBytes).toBeGreaterThan(8 * MiB);
    expect(r.stdoutBytes).toBeLessThan(100 * MiB);
    expect(r.frames.length).toBeLessThanOrEqual(1000);
  });

  it('100 MB on stdout without a newline: output-limit', async () => {
    const r = await run('node', 'floodRaw', { mb: 100 }, { invoke: { maxStdoutBytes: 8 * MiB } });
    expect(r).toMatchObject({ outcome: 'failed', reason: 'output-limit' });
    expect(r.stdoutBytes).toBeLessThan(100 * MiB);
  });

  it('a single 10 MB frame: frame-too-large', async () => {
    const r = await run(
      'node',
      'bigResult',
      { mb: 10 },
      { invoke: { maxFrameBytes: 1 * MiB, maxStdoutBytes: 32 * MiB } },
    );
    expect(r).toMatchObject({ outcome: 'failed', reason: 'frame-too-large', error: { code: 'FRAME_TOO_LARGE' } });
  });

  it.each([
    ['a line that is not JSON', 'garbage', /not JSON/],
    ['a frame for another invocation', 'foreignFrame', /exec_somebody_else/],
  ])('malformed output (%s): malformed-frame', async (_what, handler, message) => {
    const r = await run('node', handler);
    expect(r).toMatchObject({ outcome: 'failed', reason: 'malformed-frame', error: { code: 'MALFORMED_FRAME' } });
    expect((r as any).error.message).toMatch(message);
  });

  it('handler errors, silent exits and non-zero exits are told apart', async () => {
    expect(await run('node', 'fail')).toMatchObject({
      outcome: 'failed',
      reason: 'handler-error',
      error: { code: 'E_WIDGET', message: 'no such widget' },
    });
    expect(await run('node', 'exitQuietly')).toMatchObject({ outcome: 'failed', reason: 'no-result', exitCode: 0 });
    expect(await run('node', 'exitThree')).toMatchObject({ outcome: 'failed', reason: 'exit-nonzero', exitCode: 3 });
    expect(await run('node', 'noSuchHandler')).toMatchObject({
      outcome: 'failed',
      reason: 'handler-error',
      error: { code: 'HANDLER_NOT_FOUND' },
    });
  });

  it('the test process stayed healthy', async () => {
    expect(process.memoryUsage().rss).toBeLessThan(1024 * MiB);
    await engine.ping();
  });
});

describe('collecting results', () => {
  it('reads the verdict of an exited container from its logs', async () => {
    const r = await run('python', 'greet', { name: 'Grace' }, { keep: true });
    try {
      const again = await sandbox.collectResult(r.containerId);
      expect(again).toMatchObject({
        outcome: 'succeeded',
        output: { greeting: 'Hello, Grace!' },
        invocationId: r.invocationId,
      });
      expect(again.frames).toEqual(r.frames);
    } finally {
      await sandbox.removeContainer(r.containerId);
    }
  });

  it('collects an invocation whose supervisor went away after writing the envelope', async () => {
    const id = `exec_${RUN}_orphan`;
    const { containerId } = await sandbox.createExecutionContainer(spec('node', id));
    try {
      // Another supervisor: attach, start, write the envelope, then vanish without reading anything.
      const c = docker.getContainer(containerId);
      const stream = (await c.attach({
        stream: true,
        stdin: true,
        stdout: true,
        stderr: true,
        hijack: true,
      })) as NodeJS.ReadWriteStream & { destroy(): void };
      await c.start();
      stream.write(JSON.stringify(envelope(id, 'greet', { name: 'Orphan' })) + '\n');
      stream.end();
      stream.destroy();
      const r = await sandbox.collectResult(containerId, { deadlineAt: Date.now() + 15_000 });
      expect(r).toMatchObject({ outcome: 'succeeded', output: { greeting: 'Hello, Orphan!' } });
    } finally {
      await sandbox.removeContainer(containerId);
    }
  });

  it('refuses to collect from a container that never started', async () => {
    const { containerId } = await sandbox.createExecutionContainer(spec('node', `exec_${RUN}_unstarted`));
    try {
      await expect(sandbox.collectResult(containerId)).rejects.toMatchObject({ code: 'CONTAINER_NOT_STARTED' });
    } finally {
      await sandbox.removeContainer(containerId);
    }
  });

  it('refuses to invoke a container twice', async () => {
    const r = await run('node', 'greet', { name: 'Twice' }, { keep: true });
    try {
      await expect(
        sandbox.invoke(r.containerId, envelope(r.invocationId, 'greet', {}), { deadlineMs: 5000 }),
      ).rejects.toMatchObject({ code: 'CONTAINER_ALREADY_STARTED' });
    } finally {
      await sandbox.removeContainer(r.containerId);
    }
  });
});

describe.each(['node', 'python'] as const)('%s greet under gVisor (runsc)', (lang) => {
  it('runs end to end with the same hardening', async () => {
    const r = await run(lang, 'greet', { name: 'Ada' }, { policy: { runtime: 'runsc' } });
    timing(`greet ${lang} runsc`, r);
    expect(r).toMatchObject({ outcome: 'succeeded', output: { greeting: 'Hello, Ada!' }, exitCode: 0 });
  });
});
