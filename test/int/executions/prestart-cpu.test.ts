// The CPU a pre-started sandbox uses before its envelope arrives, against the real parts (Docker, the registry, a
// PDS from @atproto/dev-env) (issue 26, item 7). A runtime whose launcher loads a file of the code
// (`--import=<file>`) that burns CPU before the worker reads stdin gets its pre-started sandbox removed as
// `idle-cpu`; the fact and the Prometheus metrics say so, and the key is not pre-started again. A well-behaved
// runtime's claimed sandbox records the little CPU its boot used. Everything this file creates carries its own
// label (runlog.test.prestart-cpu=<run>): it cleans up by it.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishCode, publishRuntime } from '../../../src/supervisor/executions/publishing.ts';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import { POOL_STREAM } from '../../../src/supervisor/executions/pool/sandbox-pool.ts';
import { containerCpuUsageNs } from '../../../src/adapters/docker/container-stats.ts';
import { createDockerEngine } from '../../../src/adapters/docker/dockerode-engine.ts';
import { collect } from '../../../src/store/port.ts';
import { until } from '../../support/apps.ts';
import {
  cleanupTestContainers,
  cleanupTestVolumes,
  docker,
  imageRef,
  requireDocker,
  requireRegistry,
  TEST_LABELS,
} from '../../support/docker.ts';
import { startTestPds, type TestAccount, type TestPds } from '../../support/pds.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const REPO = resolve(import.meta.dirname, '../../..');
const RUN = `${process.pid}-${Date.now()}`;
const LABELS = { ...TEST_LABELS, 'runlog.test.prestart-cpu': RUN };
// The default bound: the operator trusts the publisher and writes nothing about CPU.
const BOUND_MS = 1000;

// Loaded by the hostile launcher before the worker: spins in slices (the worker still answers its one call) for
// at most 20 s, so a container nothing removes stops burning on its own.
const BURN = `
const end = Date.now() + 20_000;
const spin = () => { const t = Date.now() + 50; while (Date.now() < t); if (Date.now() < end) setTimeout(spin, 0); };
spin();
`;
const CODE = 'export const ok = () => ({ ok: true });\n';

let pds: TestPds;
let root: string;
let publisher: TestAccount;
let author: TestAccount;
let wellBehaved: { uri: string; cid: string };
let burning: { uri: string; cid: string };
const opened: Runlog[] = [];
const engine = createDockerEngine();

const policy = () => ({ archive: { maxEntries: 19_977 }, prestart: { publishers: [publisher.did] } });

async function open(): Promise<Runlog> {
  const home = mkdtempSync(join(root, 'home-'));
  writeFileSync(join(home, 'operator-policy.json'), JSON.stringify(policy()));
  const rl = await createRunlog({
    home,
    atproto: { plcUrl: pds.plcUrl },
    labels: LABELS,
    log: () => undefined,
    watchApps: false,
    engineWatch: false,
  });
  opened.push(rl);
  return rl;
}

async function publishFiles(name: string, files: Record<string, string>, rt: { uri: string }) {
  const dir = mkdtempSync(join(root, `code-${name}-`));
  for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text);
  return publishCode(author.publisher, {
    dir,
    runtime: rt.uri,
    entrypoint: 'index.mjs',
    atproto: { plcUrl: pds.plcUrl },
  });
}

/** runtimes/node's record with the launcher loading /opt/at-run/app/burn.mjs (a file of the code) first. */
async function publishBurningRuntime() {
  const dir = join(root, 'runtime-burn');
  mkdirSync(dir);
  const record = JSON.parse(readFileSync(join(REPO, 'runtimes/node/runtime-record.json'), 'utf8')) as {
    platforms: { launcher: { args: string[] } }[];
  };
  for (const p of record.platforms) p.launcher.args = ['--import=/opt/at-run/app/burn.mjs', ...p.launcher.args];
  writeFileSync(join(dir, 'runtime-record.json'), JSON.stringify(record));
  return publishRuntime(publisher.publisher, { dir, image: imageRef('runtime-node') });
}

const facts = async (rl: Runlog, type: string) =>
  (await collect(runlogInternals(rl).store.readStream(POOL_STREAM)))
    .filter((e) => e.type === type)
    .map((e) => e.data as Record<string, unknown>);
const prestartContainers = async (rl: Runlog) =>
  docker.listContainers({
    all: true,
    filters: JSON.stringify({
      label: [`runlog.home=${rl.home}`, 'runlog.kind=prestart', `runlog.test.prestart-cpu=${RUN}`],
    }),
  });
const metric = (text: string, name: string) =>
  Number(new RegExp(`^${name.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  root = mkdtempSync(join(tmpdir(), 'runlog-prestart-cpu-'));
  pds = await startTestPds();
  publisher = await pds.createAccount('runtimes.test');
  author = await pds.createAccount('author.test');
  wellBehaved = await publishRuntime(publisher.publisher, {
    dir: join(REPO, 'runtimes/node'),
    image: imageRef('runtime-node'),
  });
  burning = await publishBurningRuntime();
}, 240_000);

afterAll(async () => {
  for (const rl of opened) await rl.close().catch(() => undefined);
  await pds?.close();
  await cleanupTestContainers(LABELS);
  await cleanupTestVolumes(LABELS);
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('the CPU of pre-started sandboxes', () => {
  it(
    'a runtime that burns CPU before reading stdin has its pre-started sandbox removed as idle-cpu, ' +
      'once, and its key is not pre-started again',
    async () => {
      const rl = await open();
      const code = await publishFiles('burn', { 'index.mjs': CODE, 'burn.mjs': BURN }, burning);
      const first = await rl.execute({ uri: code.uri, handler: 'ok', input: {} });
      expect(first.failure).toBeUndefined();
      expect(first.output).toEqual({ ok: true });
      await until(
        'the pre-started sandbox removed as idle-cpu',
        async () => (await facts(rl, 'pool.sandbox-removed')).some((d) => d.reason === 'idle-cpu'),
        60_000,
      );
      const removed = await facts(rl, 'pool.sandbox-removed');
      expect(removed).toEqual([
        {
          sandbox: expect.any(String),
          containerId: expect.any(String),
          reason: 'idle-cpu',
          idleCpuMs: expect.any(Number),
          idleCpuBoundMs: BOUND_MS,
        },
      ]);
      expect(removed[0]!.idleCpuMs as number).toBeGreaterThan(BOUND_MS);
      expect(
        await docker
          .getContainer(removed[0]!.containerId as string)
          .inspect()
          .catch(() => null),
      ).toBeNull();
      expect(await facts(rl, 'pool.prestart-stopped')).toEqual([
        {
          key: expect.any(String),
          uri: code.uri,
          reason: 'idle-cpu',
          idleCpuMs: expect.any(Number),
          idleCpuBoundMs: BOUND_MS,
        },
      ]);

      const text = await runlogInternals(rl).metrics!.text();
      expect(metric(text, 'runlog_prestart_idle_cpu_seconds_total')).toBeGreaterThan(BOUND_MS / 1000);
      expect(metric(text, 'runlog_prestart_sandboxes_removed_total{reason="idle-cpu"}')).toBe(1);
      expect(metric(text, 'runlog_prestart_stopped_keys')).toBe(1);

      // The next call runs in a sandbox of its own, and none is pre-started after it.
      const second = await rl.execute({ uri: code.uri, handler: 'ok', input: {} });
      expect(second.output).toEqual({ ok: true });
      expect((second.view.context as { profile?: { prestarted?: boolean } }).profile).toMatchObject({
        prestarted: false,
      });
      await rl.idle();
      expect(await facts(rl, 'pool.sandbox-prestarting')).toHaveLength(1);
      expect(await prestartContainers(rl)).toEqual([]);
    },
  );

  it("a well-behaved runtime's claimed sandbox records the little CPU it used waiting, read from the Engine's stats", async () => {
    const rl = await open();
    const code = await publishFiles('quiet', { 'index.mjs': CODE }, wellBehaved);
    expect(await rl.execute({ uri: code.uri, handler: 'ok', input: {} })).toMatchObject({ status: 'succeeded' });
    let waiting = '';
    await until(
      'a pre-started sandbox running',
      async () => {
        waiting = (await prestartContainers(rl)).find((c) => c.State === 'running')?.Id ?? '';
        return waiting !== '';
      },
      60_000,
    );
    // The port reads a running container's CPU so far (ns): what the Engine's own stats say, give or take the
    // little an idle worker uses between the two readings.
    const stats = (await docker.getContainer(waiting).stats({ stream: false, 'one-shot': true })) as {
      cpu_stats: { cpu_usage: { total_usage: number } };
    };
    const used = await engine.cpuUsageNs(waiting);
    expect(used).toBeGreaterThan(0);
    expect(Math.abs(used! - stats.cpu_stats.cpu_usage.total_usage)).toBeLessThan(100_000_000);
    // Where this host has no cgroup of it (a daemon elsewhere), the Engine's stats endpoint answers instead.
    const fail = (op: string, err: unknown): never => {
      throw new Error(`${op}: ${String(err)}`);
    };
    const viaEndpoint = await containerCpuUsageNs(docker, waiting, fail, join(root, 'no-cgroup-here'));
    expect(Math.abs(viaEndpoint! - used!)).toBeLessThan(100_000_000);
    expect(await containerCpuUsageNs(docker, '0'.repeat(64), fail, join(root, 'no-cgroup-here'))).toBeNull();
    const out = await rl.execute({ uri: code.uri, handler: 'ok', input: {} });
    expect((out.view.context as { containerId: string }).containerId).toBe(waiting);
    const claimed = await facts(rl, 'pool.sandbox-claimed');
    expect(claimed).toEqual([
      {
        sandbox: expect.any(String),
        containerId: waiting,
        executionId: out.executionId,
        idleCpuMs: expect.any(Number),
      },
    ]);
    expect(claimed[0]!.idleCpuMs as number).toBeGreaterThan(0);
    expect(claimed[0]!.idleCpuMs as number).toBeLessThan(BOUND_MS);
    expect((await facts(rl, 'pool.sandbox-removed')).filter((d) => d.reason === 'idle-cpu')).toEqual([]);
    expect(await facts(rl, 'pool.prestart-stopped')).toEqual([]);
    await rl.idle();
    // Once the used container is removed, the port says it is gone.
    expect(await engine.cpuUsageNs(waiting)).toBeNull();
  });
});
