// Chaos: a supervisor in a child process spawns app instances in both sandboxes and runs executions against an
// in-process PDS, and SIGKILLs itself at a named fault point (RUNLOG_FAULT=<point>:<n>, n drawn at random). The
// test then opens a supervisor on the same home and checks, once everything has settled:
//   - every event the child acknowledged is still in the log, unchanged;
//   - every actor is in a state consistent with reality (running instances answer health with their identity,
//     in the container the log names; finished ones have nothing running);
//   - no container or volume runlog created is unaccounted for (only running instances' containers remain;
//     every volume is a sealed cache or a seal with its content);
//   - every execution finished with its real result, or failed with a typed reason.
// Each point is repeated RUNLOG_CHAOS_REPS times (default 3); the totals are printed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAULT_POINTS, type FaultPoint } from '../../src/supervisor/host/faults.ts';
import { RECONCILER_STREAM } from '../../src/supervisor/recovery/reconcile-run.ts';
import { createRunlog, type Runlog } from '../../src/supervisor/runlog.ts';
import { FAILURE_REASONS } from '../../src/machines/execution.machine.ts';
import { collect } from '../../src/store/port.ts';
import { alive, getJson, requireDockerAppBase, requireProot, until } from '../support/apps.ts';
import { helloApp, homeWithPolicy, startChild, type ChildSupervisor } from '../support/child-supervisor.ts';
import { docker, requireRegistry } from '../support/docker.ts';
import { publishCodeSource, publishNodeRuntime, startTestPds, type TestPds } from '../support/pds.ts';
import { expectSnapshotPlusTailEqualsFold } from '../support/snapshot-property.ts';
import { runlogInternals } from '../../src/supervisor/runlog-internals.ts';

const REPS = Number(process.env.RUNLOG_CHAOS_REPS ?? 3);
const LABELS = { 'runlog.test': '1' };
const PORTS = { min: 4800, max: 4899 };
const POLICY = JSON.stringify({ archive: { maxEntries: 19_989 } });
const RESTART = { policy: 'on-failure', maxRestarts: 5, backoffMs: 200, maxBackoffMs: 400 };
const CODE = `
export function greet(input, context) { context.log('greeting'); return { greeting: 'Hello, ' + input.name + '!' }; }
export async function slow(input, context) {
  context.log('started');
  await new Promise((r) => setTimeout(r, input.ms));
  return { done: true, n: input.n };
}
`;
/** The points a SQLite supervisor reaches (append-locked is the PostgreSQL store's: the cluster chaos test's). */
type SqlitePoint = Exclude<FaultPoint, 'append-locked'>;
/** How many times each point is reached in one workload, roughly: n is drawn from 1..this. */
const HITS: Record<SqlitePoint, number> = {
  'before-append': 30,
  'after-append': 30,
  'before-result': 20,
  'after-effect': 14,
  'mid-materialization': 1,
  'mid-invocation': 4,
  'mid-reconcile': 4,
};

let root: string;
let network: string;
let pds: TestPds;
let runtimeUri: string;
let round = 0;
const children: ChildSupervisor[] = [];

const totals = {
  rounds: 0,
  killedAtPoint: {} as Record<string, number>,
  killedAtEnd: 0,
  ackedEventsChecked: 0,
  instances: { running: 0, stopped: 0, lost: 0, down: 0, adopted: 0, restartedAfterCrash: 0 },
  executions: { succeeded: 0, failed: {} as Record<string, number>, collectedAfterKill: 0 },
  reconciled: { actorEvents: 0, straysRemoved: 0 },
  wallMs: 0,
  /** Per round: where the time went, and any execution that failed (with its code). */
  detail: [] as { round: string; killedAt: string; childMs: number; recoverMs: number; failures: string[] }[],
};

const newHome = (name: string): string => homeWithPolicy(root, name, POLICY);

const open = (home: string): Promise<Runlog> =>
  createRunlog({
    home,
    labels: LABELS,
    containerNetwork: network,
    portRange: PORTS,
    healthTimeoutMs: 20_000,
    killGraceMs: 2000,
    watchApps: false,
    atproto: { plcUrl: pds.plcUrl },
    log: () => undefined,
  });

function child(home: string, env: Record<string, string>): ChildSupervisor {
  const c = startChild(
    { home, labels: LABELS, network, portRange: PORTS, plcUrl: pds.plcUrl, healthTimeoutMs: 20_000, killGraceMs: 2000 },
    env,
  );
  children.push(c);
  return c;
}

const publishFreshCode = (tag: string): Promise<string> =>
  publishCodeSource(pds, `chaos${tag}-${process.pid}.test`, root, runtimeUri, `// round ${tag}\n${CODE}`);

/** The workload, all at once: a PRoot and a container instance, a quick and a slow execution. */
async function workload(c: ChildSupervisor, tag: string, uri: string): Promise<'killed' | 'done'> {
  const ops = [
    c.send('spawn', {
      appDir: helloApp(root, { appId: `com.example.chaos${tag}p`, sandbox: 'proot', restart: RESTART }),
    }),
    c.send('spawn', {
      appDir: helloApp(root, { appId: `com.example.chaos${tag}c`, sandbox: 'container', restart: RESTART }),
    }),
    c.send('execute', { uri, handler: 'greet', input: { name: `r${tag}` } }),
    c.send('execute', { uri, handler: 'slow', input: { ms: 700, n: Number(tag.replace(/\D/g, '')) } }),
  ];
  return Promise.race([c.exited.then(() => 'killed' as const), Promise.allSettled(ops).then(() => 'done' as const)]);
}

const killedPoint = (c: ChildSupervisor): string | null =>
  /fault injection: SIGKILL at ([a-z-]+)/.exec(c.stderr())?.[1] ?? null;

const TRANSITIONAL = new Set([
  'spawning',
  'healthy',
  'adopted',
  'stopping',
  'crashed.backoff',
  'resolving',
  'materializing',
  'starting',
  'running',
]);
async function settled(rl: Runlog): Promise<boolean> {
  return (await rl.list({ all: true })).every((a) =>
    a.kind === 'instance' ? a.state === 'running' || !TRANSITIONAL.has(a.state) : !TRANSITIONAL.has(a.state),
  );
}

/** Everything the task demands of the recovered home. */
async function checkInvariants(
  rl: Runlog,
  acked: ChildSupervisor['committed'][],
  label: string,
  failures: string[],
): Promise<void> {
  const home = rl.home;
  // 1. every acknowledged event is still there, unchanged
  for (const list of acked) {
    for (const a of list) {
      const [e] = await collect(runlogInternals(rl).store.readStream(a.stream, { from: a.version, to: a.version }));
      expect(e, `${label}: acknowledged ${a.stream}@${a.version} (${a.eventType}) is missing`).toBeDefined();
      expect(e!.type).toBe(a.eventType);
      expect(e!.seq).toBe(a.seq);
      totals.ackedEventsChecked += 1;
    }
  }
  // 2. actors consistent with reality
  const containers = await docker.listContainers({
    all: true,
    filters: JSON.stringify({ label: [`runlog.home=${home}`] }),
  });
  const accounted = new Set<string>();
  for (const a of await rl.list({ all: true })) {
    const view = await rl.inspect(a.id);
    const ctx = view.context as any;
    if (a.kind === 'instance') {
      const mine = containers.filter((c) => c.Labels['runlog.stream'] === a.stream);
      if (view.state === 'running') {
        totals.instances.running += 1;
        if (ctx.adopted) totals.instances.adopted += 1;
        if (ctx.restarts > 0) totals.instances.restartedAfterCrash += 1;
        if (ctx.spec.sandbox === 'container') {
          expect(
            mine.map((c) => [c.Id, c.State]),
            `${label}: ${a.id} runs in the container its log names`,
          ).toEqual([[ctx.containerId, 'running']]);
          accounted.add(ctx.containerId);
        } else {
          expect(alive(ctx.pid), `${label}: ${a.id}'s PRoot process ${ctx.pid} is alive`).toBe(true);
        }
        const health = await getJson(ctx.host, ctx.port, '/api/lifecycle/health');
        expect(health.body, `${label}: ${a.id} answers health with its identity`).toMatchObject({
          appId: ctx.spec.appId,
          instanceId: a.id,
        });
      } else {
        expect(['stopped', 'lost', 'crashed.down'], `${label}: ${a.id} is ${view.state}`).toContain(view.state);
        totals.instances[view.state === 'crashed.down' ? 'down' : (view.state as 'stopped' | 'lost')] += 1;
        expect(
          mine.filter((c) => c.State === 'running'),
          `${label}: ${a.id} is ${view.state} but has a running container`,
        ).toEqual([]);
      }
    } else {
      expect(['succeeded', 'failed'], `${label}: execution ${a.id} is ${view.state}`).toContain(view.state);
      const req = ctx.request;
      if (view.state === 'succeeded') {
        totals.executions.succeeded += 1;
        const expected =
          req.handler === 'greet' ? { greeting: `Hello, ${req.input.name}!` } : { done: true, n: req.input.n };
        expect(ctx.result.output, `${label}: ${a.id} returned its real result`).toEqual(expected);
        if (ctx.adopted) totals.executions.collectedAfterKill += 1;
      } else {
        expect(FAILURE_REASONS, `${label}: ${a.id} failed with a typed reason`).toContain(ctx.failure.reason);
        expect(ctx.failure.message.length, `${label}: ${a.id}'s failure says why`).toBeGreaterThan(0);
        totals.executions.failed[ctx.failure.reason] = (totals.executions.failed[ctx.failure.reason] ?? 0) + 1;
        const story = (await rl.events(a.id))
          .map((e) => `${e.type}${e.meta.source ? `(${String(e.meta.source)})` : ''}`)
          .join(' ');
        failures.push(
          `${req.handler}: ${ctx.failure.reason} ${ctx.failure.code} ${ctx.failure.message.slice(0, 160)} [${story}]`,
        );
      }
    }
  }
  // 3. nothing runlog created is unaccounted for (a sandbox the pool pre-started is accounted for by its facts)
  const pool = new Set<string>();
  for (const e of await collect(runlogInternals(rl).store.readStream('sandbox-pool'))) {
    const d = e.data as { sandbox?: string };
    if (e.type === 'pool.sandbox-prestarting' && d.sandbox) pool.add(d.sandbox);
    else if ((e.type === 'pool.sandbox-claimed' || e.type === 'pool.sandbox-removed') && d.sandbox)
      pool.delete(d.sandbox);
  }
  for (const c of containers)
    if (c.Labels['runlog.kind'] === 'prestart' && pool.has(c.Labels['runlog.prestart'] ?? '')) accounted.add(c.Id);
  const unaccounted = containers
    .filter((c) => !accounted.has(c.Id))
    .map((c) => `${c.Labels['runlog.kind']} ${c.Labels['runlog.stream']} ${c.State}`);
  expect(unaccounted, `${label}: containers no actor accounts for`).toEqual([]);
  const volumes =
    (await docker.listVolumes({ filters: JSON.stringify({ label: [`runlog.home=${home}`] }) })).Volumes ?? [];
  const exists = async (name: string) =>
    volumes.some((v) => v.Name === name) ||
    (await docker
      .getVolume(name)
      .inspect()
      .then(
        () => true,
        () => false,
      ));
  for (const v of volumes) {
    const sealFor = v.Labels?.['runlog.seal-for'];
    if (sealFor) expect(await exists(sealFor), `${label}: seal ${v.Name} has its content`).toBe(true);
    else expect(await exists(`${v.Name}-sealed`), `${label}: volume ${v.Name} is a sealed cache`).toBe(true);
  }
  const facts = await collect(runlogInternals(rl).store.readStream(RECONCILER_STREAM));
  totals.reconciled.straysRemoved += facts.filter((e) => e.type === 'reconciler.removed').length;
  totals.reconciled.actorEvents += (await collect(runlogInternals(rl).store.readAll())).filter(
    (e) => e.meta.source === 'reconciler' && e.stream !== RECONCILER_STREAM,
  ).length;
}

async function teardown(rl: Runlog | null, home: string): Promise<void> {
  await rl?.close().catch(() => undefined);
  const mine = await docker.listContainers({ all: true, filters: JSON.stringify({ label: [`runlog.home=${home}`] }) });
  await Promise.all(
    mine.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  );
}

async function chaosRound(point: SqlitePoint, rep: number): Promise<void> {
  const tag = String(++round);
  const label = `${point} #${rep + 1}`;
  const home = newHome(`round-${tag}`);
  const uri = await publishFreshCode(tag);
  const nth = 1 + Math.floor(Math.random() * HITS[point]);
  const acked: ChildSupervisor['committed'][] = [];
  const kills: string[] = [];
  const failures: string[] = [];
  const t0 = Date.now();

  if (point === 'mid-reconcile') {
    // First a plain crash mid-workload (a SIGKILL at a random moment), then a supervisor that dies while recovering it.
    const a = child(home, {});
    expect(await a.ready, `${label}: child A started\n${a.stderr()}`).toBe(true);
    const work = workload(a, tag, uri);
    await Promise.race([work, new Promise((r) => setTimeout(r, 1500 + Math.random() * 3000))]);
    await a.sigkill();
    acked.push(a.committed);
    const b = child(home, { RUNLOG_FAULT: `mid-reconcile:${nth}` });
    const ready = await b.ready;
    if (ready) await b.sigkill(); // fewer findings than n: it recovered; kill it anyway
    await b.exited;
    acked.push(b.committed);
    kills.push(killedPoint(b) ?? 'end');
  } else {
    const c = child(home, { RUNLOG_FAULT: `${point}:${nth}` });
    expect(await c.ready, `${label}: child started\n${c.stderr()}`).toBe(true);
    if ((await workload(c, tag, uri)) === 'done') await c.sigkill();
    await c.exited;
    acked.push(c.committed);
    kills.push(killedPoint(c) ?? 'end');
  }
  for (const k of kills) {
    if (k === 'end') totals.killedAtEnd += 1;
    else totals.killedAtPoint[k] = (totals.killedAtPoint[k] ?? 0) + 1;
  }

  const t1 = Date.now();
  let rl: Runlog | null = null;
  try {
    rl = await open(home);
    const r = rl;
    await until(`${label}: everything settles`, () => settled(r), 90_000, 200);
    await r.idle();
    await checkInvariants(r, acked, `${label} (n=${nth}, killed at ${kills.join(', ')})`, failures);
    // Snapshots are a cache: over this crash-ridden log, snapshot + tail folds to the full fold for every actor.
    await expectSnapshotPlusTailEqualsFold(runlogInternals(r).store);
    totals.rounds += 1;
  } finally {
    totals.detail.push({
      round: label,
      killedAt: kills.join(','),
      childMs: t1 - t0,
      recoverMs: Date.now() - t1,
      failures,
    });
    await teardown(rl, home);
  }
}

beforeAll(async () => {
  requireProot();
  await requireDockerAppBase();
  await requireRegistry();
  root = mkdtempSync(join(tmpdir(), 'runlog-chaos-'));
  network = `runlog-chaos-${process.pid}`;
  pds = await startTestPds();
  runtimeUri = await publishNodeRuntime(pds, `chaosrt-${process.pid}.test`);
  // Warm the runtime cache once (this suite's own volume), so each round materializes only its fresh code.
  const home = newHome('warm');
  const rl = await open(home);
  try {
    const out = await rl.execute({ uri: await publishFreshCode('warm'), handler: 'greet', input: { name: 'warm' } });
    expect(out.status, JSON.stringify(out.failure)).toBe('succeeded');
  } finally {
    await teardown(rl, home);
  }
}, 240_000);

afterAll(async () => {
  for (const c of children) await c.sigkill().catch(() => undefined);
  const mine = await docker.listContainers({ all: true, filters: JSON.stringify({ label: ['runlog.test=1'] }) });
  await Promise.all(
    mine
      .filter((c) => (c.Labels['runlog.home'] ?? '').startsWith(root ?? '\0'))
      .map((c) =>
        docker
          .getContainer(c.Id)
          .remove({ force: true, v: true })
          .catch(() => undefined),
      ),
  );
  const vols = (await docker.listVolumes({ filters: JSON.stringify({ label: ['runlog.test=1'] }) })).Volumes ?? [];
  await Promise.all(
    vols
      .filter((v) => (v.Labels?.['runlog.home'] ?? '').startsWith(root ?? '\0'))
      .map((v) =>
        docker
          .getVolume(v.Name)
          .remove()
          .catch(() => undefined),
      ),
  );
  await docker
    .getNetwork(network)
    .remove()
    .catch(() => undefined);
  await pds?.close();
  if (root) rmSync(root, { recursive: true, force: true });
  const { detail, ...sums } = totals;
  for (const d of detail)
    console.log(
      `[chaos] ${d.round}: killed at ${d.killedAt}; child ${d.childMs} ms, ` +
        `recovery ${d.recoverMs} ms${d.failures.length ? `; failed: ${d.failures.join(' | ')}` : ''}`,
    );
  console.log(`[chaos] totals ${JSON.stringify(sums, null, 1).replace(/\n\s*/g, ' ')}`);
}, 120_000);

describe('SIGKILL at every fault point, then recovery on the same home', () => {
  it.each(FAULT_POINTS.filter((p): p is SqlitePoint => p !== 'append-locked'))(
    '%s',
    async (point) => {
      const t0 = Date.now();
      for (let rep = 0; rep < REPS; rep++) await chaosRound(point, rep);
      totals.wallMs += Date.now() - t0;
    },
    REPS * 120_000,
  );
});
