// at-run executions, side by side with the raw primitive in the same run.
//
//   exec.warm  runlog: rl.execute() of the greet-node example, runtime and code volumes already materialized
//              (one untimed run first). Every run still resolves from the PDS in strict mode (record proofs and
//              signatures, runtime binding, blob fetch and CID check, archive validation) and re-checks the
//              volume cache: that is the product's contract, so it is in the measurement. DID documents come
//              from runlog's in-process cache with its default TTL (30 s), as in production (notes: did_cache).
//              raw: one hardened container round trip through dockerode (bench/exec-raw.ts) with the same
//              sandbox image, create body and envelope.
//   exec.cold  runlog: the first execution with nothing materialized (this run's runtime and code volumes and
//              their seals removed before each round); value = total ms, baseline = the raw round trip, notes =
//              the per-step breakdown from the execution's events (execution.step and event timestamps) and the
//              materializer's progress (pull, download, validate, upload). Beside it, in the same rounds,
//              exec.cold.extract: the same cold run against what the raw side must do first on Docker Engine
//              20.10, the runtime's export copied into a fresh volume through the archive API (exec-raw.ts).
// The PDS and PLC directory run in a child process (bench/pds-child.ts; RUNLOG_BENCH_PDS=inprocess puts them back in
// this one): a real PDS is another machine, and in this process its work shared the event loop with the supervisor
// under measurement. After each of runlog's calls (untimed) the supervisor is let finish its background work —
// the used container's removal (execute() answers on the outcome, before it) and the next sandbox's pre-start — so
// neither side's timing pays for the other's background work; `after_outcome_ms` reports how long that took.
// Isolation from concurrent test runs: the code published here carries a nonce file (its own code volume) and
// the operator policy's archive limit is one byte lower than the default (the runtime volume name is keyed by
// the limits, so it is this run's own): nobody else reuses or deletes them while we measure.
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Docker from 'dockerode';
import { publishCode, publishRuntime } from '../src/supervisor/executions/publishing.ts';
import { createRunlog, type Runlog, type RunlogOptions } from '../src/supervisor/runlog.ts';
import { DEFAULT_DID_CACHE_TTL_MS } from '../src/adapters/atproto/index.ts';
import { DEFAULT_OPERATOR_POLICY, type OperatorPolicy } from '../src/domain/at-run/operator-policy.ts';
import type { RecordedEvent } from '../src/domain/events.ts';
import type { LocalAccount, LocalNetwork } from '../src/adapters/atproto/index.ts';
import { startTestPds } from '../test/support/pds.ts';
import { startPdsProcess } from './pds-process.ts';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import {
  closeWithin,
  median,
  nowMs,
  quantile,
  round,
  sideBySide,
  sizes,
  type Bench,
  type BenchResult,
  type RunOptions,
} from './harness.ts';
import { rawExtractRoundTrip, rawRoundTrip as rawRoundTripOf, type RawSide } from './exec-raw.ts';

const REPO = resolve(import.meta.dirname, '..');
const SETUP_DIR = process.env.RUNLOG_SETUP_DIR ?? '/var/lib/runlog-setup';
const REGISTRY = process.env.RUNLOG_REGISTRY_ADDR ?? '127.0.0.1:5000';
const DOCKER_SOCKET = '/var/run/docker.sock';
const SETUP_HINT = 'run `npm run setup`';
export const BENCH_LABELS = { 'runlog.bench': '1' } as const;
/** Calls per side per round (interleaved); a round's figure is their median. */
const perRound = (opts: RunOptions): number => sizes(opts, { full: 3, smoke: 1 });

export function imageRef(name: string): string {
  const file = join(SETUP_DIR, 'images', `${name}.ref`);
  if (!existsSync(file)) throw new Error(`no image reference for ${name} at ${file}: ${SETUP_HINT}`);
  const ref = readFileSync(file, 'utf8').trim();
  if (!/@sha256:[0-9a-f]{64}$/.test(ref))
    throw new Error(`${file} holds ${JSON.stringify(ref)}, not a digest reference: ${SETUP_HINT}`);
  return ref;
}

async function requireParts(docker: Docker): Promise<void> {
  try {
    await docker.ping();
  } catch (e) {
    throw new Error(`Docker does not answer on ${DOCKER_SOCKET} (${(e as Error).message}): ${SETUP_HINT}`);
  }
  try {
    const res = await fetch(`http://${REGISTRY}/v2/`, { signal: AbortSignal.timeout(5000) });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
  } catch (e) {
    throw new Error(`the registry does not answer on http://${REGISTRY}/v2/ (${(e as Error).message}): ${SETUP_HINT}`);
  }
  imageRef('runtime-node');
  imageRef('at-run-sandbox');
}

export interface Fixture {
  docker: Docker;
  rl: Runlog;
  /** The PDS and PLC directory the records live on, and the account that published the code. */
  network: LocalNetwork;
  author: LocalAccount;
  home: string;
  uri: string;
  callerDid: string;
  /** Publishes n more greet codes (each its own blob, so its own code volume and sandbox key); their URIs. */
  moreCodes(n: number): Promise<string[]>;
  /** Closes the supervisor and opens a new one on the same home, with these options on top (untimed). */
  reopen(extra: Partial<RunlogOptions>): Promise<void>;
  close(): Promise<void>;
}

/** A PDS with a published node runtime and a greet code record, and a supervising runlog on a fresh home. */
export async function openFixture(
  log: (m: string) => void,
  opts: { prestart?: boolean; timeoutMs?: number } = {},
): Promise<Fixture> {
  const docker = new Docker({ socketPath: DOCKER_SOCKET });
  await requireParts(docker);
  const root = mkdtempSync(join(tmpdir(), 'runlog-bench-exec-'));
  let pds: LocalNetwork | null = null;
  let rl: Runlog | null = null;
  const close = async () => {
    await closeWithin(rl);
    await pds?.close().catch(() => undefined);
    await removeBenchContainers(docker, join(root, 'home'));
    await removeMaterialized(docker, join(root, 'home')).catch(() => 0);
    rmSync(root, { recursive: true, force: true });
  };
  try {
    const t0 = nowMs();
    pds = process.env.RUNLOG_BENCH_PDS === 'inprocess' ? await startTestPds() : await startPdsProcess();
    const publisher = await pds.createAccount('runtimes.test');
    const author = await pds.createAccount('bench.test');
    const runtime = await publishRuntime(publisher.publisher, {
      dir: join(REPO, 'runtimes/node'),
      image: imageRef('runtime-node'),
    });
    // The example asks for a 10 s deadline; with opts.timeoutMs its copies ask for that instead (the raw side has none).
    const copyGreet = (dir: string, nonce: string) => {
      cpSync(join(REPO, 'examples/greet-node'), dir, { recursive: true });
      writeFileSync(join(dir, 'bench-nonce.txt'), `${nonce}\n`);
      if (!opts.timeoutMs) return;
      const manifest = JSON.parse(readFileSync(join(dir, 'at-run.json'), 'utf8')) as {
        requested?: Record<string, number>;
      };
      writeFileSync(
        join(dir, 'at-run.json'),
        JSON.stringify({ ...manifest, requested: { ...manifest.requested, timeoutMs: opts.timeoutMs } }),
      );
    };
    const codeDir = join(root, 'greet');
    copyGreet(codeDir, `${process.pid}-${Date.now()}`);
    const atproto = { plcUrl: pds.plcUrl };
    const code = await publishCode(author.publisher, { dir: codeDir, runtime: runtime.uri, atproto });
    const policy: OperatorPolicy = {
      ...DEFAULT_OPERATOR_POLICY,
      archive: {
        ...DEFAULT_OPERATOR_POLICY.archive,
        maxArchiveBytes: DEFAULT_OPERATOR_POLICY.archive.maxArchiveBytes - 1,
      },
      // The operator trusts its own runtime publisher to pre-start (the default trusts none).
      prestart: {
        ...DEFAULT_OPERATOR_POLICY.prestart,
        publishers: [publisher.did],
        ...(opts.prestart === false ? { perCode: 0 } : {}),
      },
      ...(opts.timeoutMs ? { defaults: { ...DEFAULT_OPERATOR_POLICY.defaults, timeoutMs: opts.timeoutMs } } : {}),
    };
    const home = join(root, 'home');
    const base: RunlogOptions = { home, atproto, policy, labels: { ...BENCH_LABELS }, log: () => undefined };
    rl = await createRunlog(base);
    log(`exec: PDS up, runtime and code published in ${(nowMs() - t0).toFixed(0)} ms`);
    const fixture: Fixture = {
      docker,
      rl,
      network: pds,
      author,
      home,
      uri: code.uri,
      callerDid: author.did,
      close,
      async moreCodes(n) {
        const uris: string[] = [];
        for (let i = 0; i < n; i++) {
          const dir = join(root, `greet-${i}`);
          copyGreet(dir, `${process.pid}-${Date.now()}-${i}`);
          uris.push((await publishCode(author.publisher, { dir, runtime: runtime.uri, atproto })).uri);
        }
        return uris;
      },
      async reopen(extra) {
        await closeWithin(rl);
        rl = await createRunlog({ ...base, ...extra });
        fixture.rl = rl;
      },
    };
    return fixture;
  } catch (e) {
    await close();
    throw e;
  }
}

async function removeBenchContainers(docker: Docker, home: string): Promise<void> {
  const all = await docker.listContainers({ all: true, filters: { label: ['runlog.bench=1'] } }).catch(() => []);
  const list = all.filter((c) => c.Labels['runlog.home'] === home || c.Labels['runlog.bench.home'] === home);
  await Promise.all(
    list.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch(() => undefined),
    ),
  );
}

/** Removes the runtime/code volumes (and their seals) this home's executions materialized. */
/** Removes these volumes and their seals (`<name>-sealed`), whatever home they are labelled with; how many there were. */
async function removeVolumes(docker: Docker, names: string[]): Promise<number> {
  const all = names.flatMap((n) => [n, `${n}-sealed`]);
  const removed = await Promise.all(
    all.map((n) =>
      docker
        .getVolume(n)
        .remove()
        .then(
          () => 1,
          (err: { statusCode?: number }) => {
            if (err.statusCode === 404) return 0;
            throw err;
          },
        ),
    ),
  );
  return removed.reduce((a: number, b: number) => a + b, 0);
}

async function removeMaterialized(docker: Docker, home: string): Promise<number> {
  const { Volumes } = await docker.listVolumes({
    filters: JSON.stringify({ label: [`runlog.home=${home}`, 'runlog.cache-key'] }),
  });
  await Promise.all((Volumes ?? []).map((v) => docker.getVolume(v.Name).remove()));
  return (Volumes ?? []).length;
}

interface Outcome {
  ms: number;
  /** When execute() returned (nowMs()). */
  end: number;
  /** ms from the outcome event (bus) to the supervisor's background work done (removal, next pre-start); NaN unsettled. */
  settleMs: number;
  events: RecordedEvent[];
  progress: { name: string; ms: number | null }[];
  context: Record<string, any>;
}

/** One execution, timed to execute() returning; then (untimed, unless `settle` is false) rl.idle(). */
export async function runlogOnce(f: Fixture, uri = f.uri, timeoutMs?: number, settle = true): Promise<Outcome> {
  const progress: { name: string; ms: number | null }[] = [];
  let outcomeAt = Number.NaN;
  const off = f.rl.on('actor:transition', (t) => {
    if (t.kind === 'execution' && (t.to === 'succeeded' || t.to === 'failed') && Number.isNaN(outcomeAt))
      outcomeAt = nowMs();
  });
  const t0 = nowMs();
  const out = await f.rl.execute({
    uri,
    handler: 'greet',
    input: { name: 'Ada' },
    callerDid: f.callerDid,
    ...(timeoutMs ? { timeoutMs } : {}),
    onProgress: (s) => progress.push({ name: s.name, ms: typeof s.detail.ms === 'number' ? s.detail.ms : null }),
  });
  const end = nowMs();
  off();
  const ms = end - t0;
  if (out.status !== 'succeeded') throw new Error(`runlog execution failed: ${JSON.stringify(out.failure)}`);
  if ((out.output as { greeting?: string })?.greeting !== 'Hello, Ada!')
    throw new Error(`unexpected output ${JSON.stringify(out.output)}`);
  if (settle) await f.rl.idle();
  const settleMs = settle ? nowMs() - outcomeAt : Number.NaN;
  return {
    ms,
    end,
    settleMs,
    events: await f.rl.events(out.executionId),
    progress,
    context: out.view.context as Record<string, any>,
  };
}

/** The raw side of a fixture, and its round trip for an execution's context (exec-raw.ts). */
const rawSide = (f: Fixture): RawSide => ({
  docker: f.docker,
  home: f.home,
  callerDid: f.callerDid,
  sandboxImage: imageRef('at-run-sandbox'),
  labels: BENCH_LABELS,
});
const rawRoundTrip = (f: Fixture, context: Record<string, any>) => rawRoundTripOf(rawSide(f), context);

const runtimeDetail = (o: Outcome | undefined): { entries?: number; bytes?: number } =>
  (
    o?.events.find((e) => e.type === 'execution.step' && (e.data as { name?: string }).name === 'runtime-materialized')
      ?.data as { detail?: { entries?: number; bytes?: number } } | undefined
  )?.detail ?? {};

const atMs = (e: RecordedEvent | undefined): number => (e ? Date.parse(e.at) : Number.NaN);

/** Milliseconds between the execution's events (timestamps from the log) and the materializer's step times. */
function breakdown(o: Outcome): Record<string, number> {
  const ev = (type: string, step?: string) =>
    o.events.find((e) => e.type === type && (step === undefined || (e.data as { name?: string }).name === step));
  const requested = ev('execution.requested');
  const resolved = ev('execution.resolved');
  const runtimeDone = ev('execution.step', 'runtime-materialized');
  const blob = ev('execution.step', 'code-blob');
  const materialized = ev('execution.materialized');
  const started = ev('execution.started');
  const finished = ev('execution.succeeded') ?? ev('execution.failed');
  const sub = (name: string) => o.progress.filter((p) => p.name === name).reduce((s, p) => s + (p.ms ?? 0), 0);
  const timings = ((finished?.data as { timings?: Record<string, number> } | undefined)?.timings ?? {}) as Record<
    string,
    number
  >;
  return {
    resolve: atMs(resolved) - atMs(requested),
    runtime_materialize: atMs(runtimeDone) - atMs(resolved),
    'runtime.pull': sub('runtime:pull'),
    'runtime.download': sub('runtime:download'),
    'runtime.validate': sub('runtime:validate'),
    'runtime.upload': sub('runtime:upload'),
    // The volume's lock (materialize-lock.ts): taken before the volume is created, with the re-check under it.
    'runtime.lock': sub('runtime:lock'),
    'runtime.other':
      sub('runtime:cache') +
      sub('runtime:create-volume') +
      sub('runtime:create-container') +
      sub('runtime:remove-container') +
      sub('runtime:seal'),
    // The code's copy runs beside the runtime's stream: what it adds after the runtime volume is ready.
    code_blob: atMs(blob) - atMs(resolved),
    code_after_runtime: atMs(materialized) - atMs(runtimeDone),
    'code.upload': sub('code:upload'),
    create: atMs(started) - atMs(materialized),
    run: atMs(finished) - atMs(started),
    'run.attach': timings.attachMs ?? Number.NaN,
    'run.start': timings.startMs ?? Number.NaN,
    'run.first_frame': timings.firstFrameMs ?? Number.NaN,
    claim: Number((o.context.profile as { createMs?: number } | undefined)?.createMs ?? Number.NaN),
    log_total: atMs(finished) - atMs(requested),
    settle: o.settleMs,
  };
}

function medianBreakdown(list: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of Object.keys(list[0] ?? {})) out[`${k}_ms`] = round(median(list.map((b) => b[k]!)));
  return out;
}

const execWarm: Bench = {
  name: 'exec.warm',
  needs: 'Docker, the registry at 127.0.0.1:5000, the runtime-node and at-run-sandbox images, @atproto/dev-env',
  async run(opts): Promise<BenchResult> {
    const { rounds, log } = opts;
    const PER_ROUND = perRound(opts);
    const f = await openFixture(log);
    try {
      const first = await runlogOnce(f); // materializes the runtime and code volumes (untimed)
      if (first.context.materialized?.cached?.runtime !== false)
        log('exec.warm: the runtime volume was already cached before the first run');
      const raw = rawRoundTrip(f, first.context);
      await raw(); // untimed: the same first-use costs on the raw side
      const ours: number[] = [];
      const theirs: number[] = [];
      const allOurs: number[] = [];
      const allTheirs: number[] = [];
      let prestarted = 0;
      const theirsResult: number[] = [];
      const rawSteps: { createMs: number; startMs: number; removeMs: number }[] = [];
      const steps: Record<string, number>[] = [];
      for (let r = 0; r < rounds; r++) {
        const o: number[] = [];
        const t: number[] = [];
        const tr: number[] = [];
        for (let k = 0; k < PER_ROUND; k++) {
          const runOurs = async () => {
            const x = await runlogOnce(f);
            if (x.context.materialized?.cached?.runtime !== true || x.context.materialized?.cached?.code !== true)
              throw new Error('exec.warm: a volume was not cached on a warm run');
            o.push(x.ms);
            allOurs.push(x.ms);
            if (x.context.profile?.prestarted === true) prestarted += 1;
            steps.push(breakdown(x));
          };
          const runRaw = async () => {
            const x = await raw();
            t.push(x.ms);
            allTheirs.push(x.ms);
            tr.push(x.resultMs);
            rawSteps.push(x);
          };
          if ((r + k) % 2) {
            await runOurs();
            await runRaw();
          } else {
            await runRaw();
            await runOurs();
          }
        }
        ours.push(median(o));
        theirs.push(median(t));
        theirsResult.push(median(tr));
        log(`exec.warm round ${r + 1}: runlog ${ours.at(-1)!.toFixed(0)} ms, raw ${theirs.at(-1)!.toFixed(0)} ms`);
      }
      const v = median(ours);
      const b = median(theirs);
      const s = medianBreakdown(steps);
      const result: BenchResult = {
        name: 'exec.warm',
        value: round(v),
        unit: 'ms',
        baseline: round(b),
        ratio: round(v / b),
        also: [
          {
            name: 'exec.warm.p50',
            value: round(median(allOurs)),
            unit: 'ms',
            baseline: round(median(allTheirs)),
            ratio: round(median(allOurs) / median(allTheirs)),
            notes: { target: '≤ 0.35', samples: allOurs.length },
          },
          {
            name: 'exec.warm.p95',
            value: round(quantile(allOurs, 0.95)),
            unit: 'ms',
            baseline: round(quantile(allTheirs, 0.95)),
            ratio: round(quantile(allOurs, 0.95) / quantile(allTheirs, 0.95)),
            notes: { target: '≤ 0.6', samples: allOurs.length },
          },
        ],
        notes: {
          target: '≤ 0.35 (p50), p95 ≤ 0.6',
          prestarted: `${prestarted}/${allOurs.length} calls ran in a pre-started sandbox`,
          claim_ms: round(median(steps.map((x) => x.claim!))),
          'run.first_frame_ms': s['run.first_frame_ms']!,
          did_cache: `default TTL ${DEFAULT_DID_CACHE_TTL_MS} ms`,
          resolve_ms: s.resolve_ms!,
          materialize_cached_ms: round(s.runtime_materialize_ms! + s.code_after_runtime_ms!),
          create_ms: s.create_ms!,
          run_ms: s.run_ms!,
          'run.start_ms': s['run.start_ms']!,
          after_outcome_ms: round(median(steps.map((x) => x.settle!))),
          raw_create_ms: round(median(rawSteps.map((x) => x.createMs))),
          raw_start_ms: round(median(rawSteps.map((x) => x.startMs))),
          raw_to_result_frame_ms: round(median(theirsResult)),
          raw_remove_ms: round(median(rawSteps.map((x) => x.removeMs))),
          // The raw side's figure includes its container's removal; runlog answers before its own (see top).
          ratio_vs_raw_to_result_frame: round(v / median(theirsResult)),
          pds: process.env.RUNLOG_BENCH_PDS === 'inprocess' ? 'in process' : 'child process',
          rounds: `${rounds} × ${PER_ROUND} calls per side (round figure = median of its calls)`,
        },
      };
      log(`exec.warm notes: ${JSON.stringify(result.notes)}`);
      return result;
    } finally {
      await f.close();
    }
  },
};

const execCold: Bench = {
  name: 'exec.cold',
  needs: execWarm.needs!,
  async run({ rounds, log }): Promise<BenchResult> {
    // No sizes of its own (harness.ts): a smoke run is its one round.
    // A first execution: no sandbox can be waiting for it (and one waiting would hold the volumes removed below).
    const f = await openFixture(log, { prestart: false });
    const removeImage = process.env.RUNLOG_BENCH_COLD_PULL === '1';
    try {
      const first = await runlogOnce(f); // also gives the raw side its volumes
      const raw = rawRoundTrip(f, first.context);
      const extract = rawExtractRoundTrip(rawSide(f), first.context);
      await raw();
      await extract(); // untimed, like the round trip's first
      const ours: Outcome[] = [];
      const theirs: number[] = [];
      const extracts: Awaited<ReturnType<typeof extract>>[] = [];
      for (let r = 0; r < rounds; r++) {
        // The volumes this execution used, by name: one left by an earlier run (another home) with the same key is
        // this run's too (the name is the key), so it is removed as well, or the next run would find it cached.
        const used = first.context.materialized as { runtimeVolume: string; codeVolume: string };
        const removed = await removeVolumes(f.docker, [used.runtimeVolume, used.codeVolume]);
        if (removed < 4)
          throw new Error(`exec.cold: expected the runtime and code volumes and their seals, found ${removed}`);
        if (removeImage)
          await f.docker
            .getImage(imageRef('runtime-node'))
            .remove({ force: true })
            .catch(() => undefined);
        const o = await runlogOnce(f);
        if (o.context.materialized?.cached?.runtime !== false || o.context.materialized?.cached?.code !== false)
          throw new Error('exec.cold: a volume was cached on a cold run');
        ours.push(o);
        theirs.push((await raw()).ms);
        extracts.push(await extract());
        log(
          `exec.cold round ${r + 1}: runlog ${o.ms.toFixed(0)} ms, raw round trip ${theirs.at(-1)!.toFixed(0)} ms, ` +
            `raw extract + round trip ${extracts.at(-1)!.ms.toFixed(0)} ms`,
        );
      }
      const v = median(ours.map((o) => o.ms));
      const b = median(theirs);
      const e = median(extracts.map((x) => x.ms));
      const result: BenchResult = {
        name: 'exec.cold',
        value: round(v),
        unit: 'ms',
        baseline: round(b),
        ratio: round(v / b),
        also: [
          sideBySide('exec.cold.extract', 'ms', v, e, {
            target: '≤ 1.3',
            raw: 'runtime export → fresh volume (archive API GET + PUT), then the round trip',
            raw_extract_ms: round(median(extracts.map((x) => x.extractMs))),
            raw_round_trip_ms: round(median(extracts.map((x) => x.roundTrip.ms))),
            raw_tar_bytes: extracts[0]?.tarBytes ?? Number.NaN,
          }),
        ],
        notes: {
          cold: removeImage
            ? 'volumes and the runtime image removed before each round'
            : 'volumes removed before each round; the runtime image stays in the daemon (RUNLOG_BENCH_COLD_PULL=1 removes it too)',
          ...medianBreakdown(ours.map(breakdown)),
          runtime_entries: runtimeDetail(ours[0]).entries ?? Number.NaN,
          runtime_bytes: runtimeDetail(ours[0]).bytes ?? Number.NaN,
          rounds: String(rounds),
        },
      };
      log(`exec.cold notes: ${JSON.stringify(result.notes)}`);
      return result;
    } finally {
      await f.close();
    }
  },
};

/**
 * exec.burst: 50 executions of 5 different codes submitted at once (10 each), against 50 raw hardened round
 * trips (5 codes' volumes, 10 each) started at once. value/baseline = wall time of the whole burst; notes: p95 of
 * the calls in it, and how many ran in a pre-started sandbox. One untimed call per code first (volumes
 * materialized, a sandbox pre-started for each: what a runner that has served these codes before holds).
 */
const execBurst: Bench = {
  name: 'exec.burst',
  needs: execWarm.needs!,
  async run(opts): Promise<BenchResult> {
    const { rounds, log } = opts;
    const { BURST_CODES, BURST_CALLS } = sizes(opts, {
      full: { BURST_CODES: 5, BURST_CALLS: 50 },
      smoke: { BURST_CODES: 2, BURST_CALLS: 4 },
    });
    // The raw side has no deadline: give ours the policy's ceiling (50 containers at once on 2 shared cores).
    const f = await openFixture(log, { timeoutMs: DEFAULT_OPERATOR_POLICY.ceilings.timeoutMs });
    try {
      const uris = [f.uri, ...(await f.moreCodes(BURST_CODES - 1))];
      const raws: ReturnType<typeof rawRoundTrip>[] = [];
      for (const uri of uris) raws.push(rawRoundTrip(f, (await runlogOnce(f, uri)).context));
      for (const raw of raws) await raw();
      const ours: number[] = [];
      const theirs: number[] = [];
      const oursCalls: number[] = [];
      const theirsCalls: number[] = [];
      let prestarted = 0;
      const settles: number[] = [];
      const theirsToResult: number[] = [];
      const n = Math.max(1, Math.min(rounds, 3));
      for (let r = 0; r < n; r++) {
        const runOurs = async () => {
          const t0 = nowMs();
          // The ceiling's timeout: 50 resolutions at once on a shared machine are slow. Wall time: to the last answer.
          const outs = await Promise.all(
            Array.from({ length: BURST_CALLS }, (_, i) =>
              runlogOnce(f, uris[i % BURST_CODES]!, DEFAULT_OPERATOR_POLICY.ceilings.timeoutMs, false),
            ),
          );
          ours.push(Math.max(...outs.map((o) => o.end)) - t0);
          const tIdle = nowMs();
          await f.rl.idle(); // untimed: removals and the next pre-starts, before the raw side runs
          settles.push(nowMs() - tIdle);
          for (const o of outs) {
            oursCalls.push(o.ms);
            if (o.context.profile?.prestarted === true) prestarted += 1;
          }
        };
        const runRaw = async () => {
          const t0 = nowMs();
          const outs = await Promise.all(Array.from({ length: BURST_CALLS }, (_, i) => raws[i % BURST_CODES]!()));
          theirs.push(nowMs() - t0);
          theirsToResult.push(Math.max(...outs.map((o) => o.resultMs)));
          for (const o of outs) theirsCalls.push(o.ms);
        };
        // Alternating halves, runlog's first in round 1: the sandboxes its untimed calls pre-started wait at most
        // the policy's idleMs (60 s), about what a raw half takes at this load, so a raw half run first would
        // let them expire. Neither half leaves work behind for the other: the raw side's removals are in its
        // time, runlog's are settled (idle(), untimed) before the raw half starts.
        if (r % 2 === 0) {
          await runOurs();
          await runRaw();
        } else {
          await runRaw();
          await runOurs();
        }
        log(
          `exec.burst round ${r + 1}: runlog ${ours.at(-1)!.toFixed(0)} ms, raw ${theirs.at(-1)!.toFixed(0)} ms for ${BURST_CALLS} calls`,
        );
      }
      const v = median(ours);
      const b = median(theirs);
      const result: BenchResult = {
        name: 'exec.burst',
        value: round(v),
        unit: 'ms',
        baseline: round(b),
        ratio: round(v / b),
        also: [
          {
            name: 'exec.burst.p95',
            value: round(quantile(oursCalls, 0.95)),
            unit: 'ms',
            baseline: round(quantile(theirsCalls, 0.95)),
            ratio: round(quantile(oursCalls, 0.95) / quantile(theirsCalls, 0.95)),
            notes: { calls: oursCalls.length },
          },
        ],
        notes: {
          target: '≤ 1.0×',
          what: `${BURST_CALLS} calls of ${BURST_CODES} codes at once, wall time`,
          prestarted: `${prestarted}/${oursCalls.length}`,
          p50_call_ms: round(median(oursCalls)),
          raw_p50_call_ms: round(median(theirsCalls)),
          // The raw wall time includes the removal of its containers; runlog's ends at its last answer.
          raw_last_result_frame_ms: round(median(theirsToResult)),
          after_last_answer_ms: round(median(settles)),
          pds: process.env.RUNLOG_BENCH_PDS === 'inprocess' ? 'in process' : 'child process',
          rounds: String(n),
        },
      };
      log(`exec.burst notes: ${JSON.stringify(result.notes)}`);
      return result;
    } finally {
      await f.close();
    }
  },
};

/**
 * The cost of observing: exec.warm with metrics on and an OpenTelemetry SDK recording every span (value) against
 * the same supervisor with metrics off and no SDK (baseline), same home and caches, alternating per round.
 */
const obsExecWarm: Bench = {
  name: 'obs.exec.warm',
  needs: execWarm.needs!,
  async run(opts): Promise<BenchResult> {
    const { rounds, log } = opts;
    const PER_ROUND = perRound(opts);
    const f = await openFixture(log);
    const exporter = new InMemorySpanExporter();
    const observed: Partial<RunlogOptions> = {
      metrics: true,
      tracerProvider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
    };
    const bare: Partial<RunlogOptions> = { metrics: false };
    try {
      await runlogOnce(f); // materializes the runtime and code volumes (untimed)
      const withObs: number[] = [];
      const without: number[] = [];
      for (let r = 0; r < rounds; r++) {
        for (const [opts, into] of (r % 2
          ? [
              [bare, without],
              [observed, withObs],
            ]
          : [
              [observed, withObs],
              [bare, without],
            ]) as [Partial<RunlogOptions>, number[]][]) {
          await f.reopen(opts);
          await runlogOnce(f); // untimed: the first run of a fresh supervisor warms its DID cache
          const ms: number[] = [];
          for (let k = 0; k < PER_ROUND; k++) ms.push((await runlogOnce(f)).ms);
          into.push(median(ms));
        }
        log(
          `obs.exec.warm round ${r + 1}: observed ${withObs.at(-1)!.toFixed(0)} ms, bare ${without.at(-1)!.toFixed(0)} ms`,
        );
      }
      if (exporter.getFinishedSpans().length === 0)
        throw new Error('obs.exec.warm: the observed side recorded no span');
      const v = median(withObs);
      const b = median(without);
      return sideBySide('obs.exec.warm', 'ms', v, b, {
        target: '≤ 1.03×',
        spans: exporter.getFinishedSpans().length,
        rounds: `${rounds} × ${PER_ROUND} calls per side`,
      });
    } finally {
      await f.close();
    }
  },
};

export const execBenches: Bench[] = [execWarm, execCold, execBurst, obsExecWarm];
